from tracetriage.cli import run

run()
