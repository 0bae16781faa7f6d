from tracetriage.cli import main

raise SystemExit(main())
