"""Command line: a thin layer over the library. Errors become one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracetriage import __version__
from tracetriage.errors import (
    EXIT_FAIL_ON,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    TraceTriageError,
)

SEVERITY_ORDER = ["info", "low", "medium", "high"]


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, documented exit code
        sys.stderr.write(f"tracetriage: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tracetriage", description="Post-mortem triage of a slow or unstable LLM inference server.")
    p.add_argument("--version", action="version", version=f"tracetriage {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    a = sub.add_parser("analyze", help="analyze a trace, bundle directory or artifacts and print/write the verdict",
                       description="Analyze the given files and directories as one case.")
    a.add_argument("paths", nargs="+", metavar="PATH", help="trace files, side artifacts, or a bundle directory")
    a.add_argument("--format", "-f", choices=["text", "json", "md", "html"], help="output format (default: text, or from -o's extension)")
    a.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of standard output")
    a.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    a.add_argument("--fail-on", choices=SEVERITY_ORDER, help="exit with code 5 when a finding at or above this severity is present")
    return p


def _format_for(args) -> str:
    if args.format:
        return args.format
    if args.output:
        ext = Path(args.output).suffix.lower()
        return {".html": "html", ".htm": "html", ".json": "json", ".md": "md"}.get(ext, "text")
    return "text"


def cmd_analyze(args) -> int:
    import re

    from tracetriage import analyze, open_case
    from tracetriage.errors import UsageError
    from tracetriage.reports import render

    if args.step_range:
        try:
            re.compile(args.step_range)
        except re.error as exc:
            raise UsageError(None, f"--step-range is not a valid regular expression: {exc}") from None
    case = open_case(args.paths)
    analysis = analyze(case, step_range=args.step_range)
    text = render(analysis, _format_for(args))
    if args.output:
        Path(args.output).write_text(text, encoding="utf-8")
        print(f"tracetriage: wrote {args.output}: {analysis.headline}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.fail_on:
        limit = SEVERITY_ORDER.index(args.fail_on)
        if any(SEVERITY_ORDER.index(f["severity"]) >= limit and f["id"] != "healthy" for f in analysis.findings):
            return EXIT_FAIL_ON
    return EXIT_OK


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return {"analyze": cmd_analyze}[args.command](args)
    except TraceTriageError as exc:
        print(f"tracetriage: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - last resort: still one line, distinct code
        print(f"tracetriage: internal error: {type(exc).__name__}: {exc} (please report this)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
