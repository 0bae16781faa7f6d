"""analyze's Perfetto export (``--perfetto FILE``, ``--format perfetto``, a ``.pftrace`` -o):
where it goes and what it holds (``--perfetto-window``), refused before any analysis when it
cannot be written, and the note that says what was written."""

from __future__ import annotations

import sys
from pathlib import Path

from tracetriage.cli_output import OUTPUT_EXTENSIONS
from tracetriage.errors import one_line

PERFETTO_EXTENSIONS = (".pftrace", ".perfetto-trace", ".perfetto")
PERFETTO_BROWSER_BYTES = 1 << 30  # above this, say how to open the trace (the browser UI tops out near 2 GB)


def parse_perfetto_window(text: str | None) -> tuple[str, int]:
    """``--perfetto-window``: ``steady`` (the analysis window, the default), ``all``, or
    ``worst-steps N`` (also written ``worst-steps=N``; N defaults to 3)."""
    import re

    from tracetriage.errors import UsageError

    text = (text or "steady").strip()
    m = re.fullmatch(r"worst-steps(?:[=: ](\d+))?", text)
    if m:
        n = int(m.group(1) or 3)
        if n < 1:
            raise UsageError(None, "--perfetto-window worst-steps N: N must be at least 1")
        return "worst-steps", n
    if text in ("all", "steady"):
        return text, 0
    raise UsageError(None, f"--perfetto-window: {text!r} is not one of all, steady, worst-steps N")


def perfetto_request(args) -> tuple[str | None, tuple[str, int]]:
    """Where the Perfetto export goes (``--format perfetto -o FILE``, a ``.pftrace`` -o, or
    ``--perfetto FILE``) and its window; refused before any analysis when it cannot be written.
    The trace is binary: it never goes to standard output."""
    from tracetriage.errors import UsageError

    window = parse_perfetto_window(args.perfetto_window)
    perfetto_named = bool(args.output) and Path(args.output).suffix.lower() in PERFETTO_EXTENSIONS
    as_format = args.format == "perfetto" or (not args.format and perfetto_named)
    if as_format and args.output and Path(args.output).suffix.lower() in OUTPUT_EXTENSIONS:  # and never the reverse
        raise UsageError(None, f"--format perfetto writes a binary trace, not the report {args.output} names: "
                               f"give -o FILE.pftrace")
    if perfetto_named and not as_format:  # never an HTML or JSON report in a file named as a Perfetto trace
        raise UsageError(None, f"-o {args.output} names a Perfetto trace but --format {args.format} writes a report: "
                               f"give -o FILE.{args.format} (and --perfetto {args.output} for the trace too)")
    if args.perfetto_window is not None and not (as_format or args.perfetto):
        raise UsageError(None, "--perfetto-window chooses what a Perfetto export holds: add --perfetto FILE "
                               "(or -o FILE.pftrace)")
    if as_format and args.perfetto:  # worded for what was given: --format perfetto, or only a .pftrace -o
        given = "--format perfetto" if args.format == "perfetto" else f"-o {args.output} (a Perfetto file name)"
        raise UsageError(None, f"{given} already writes the Perfetto trace; --perfetto FILE adds one beside a report: "
                               f"give one of them (for both, a report -o FILE.html|.md|.json|.txt and --perfetto FILE)")
    if as_format and not args.output:
        raise UsageError(None, "--format perfetto writes a binary trace: give -o FILE (e.g. -o case.pftrace)")
    if args.perfetto == "-":  # (-o - is standard output, made None by check_output before this)
        raise UsageError(None, "the Perfetto export is a binary trace, never written to standard output: give a file name")
    path = args.output if as_format else args.perfetto
    if path:
        _check_writable(Path(path), args.output if not as_format else None)
    return path, window


def _check_writable(out: Path, report: str | None) -> None:
    """The Perfetto trace's path ``out`` refused when it cannot be written, or when it is the
    report's own ``-o`` (``report``: that path, None when the trace is the only output)."""
    from tracetriage.errors import OutputError, UsageError

    if out.is_dir():
        raise OutputError(out, "cannot write the Perfetto trace: it is a directory")
    if not out.parent.is_dir():
        raise OutputError(out, f"cannot write the Perfetto trace: folder {out.parent} does not exist")
    if report and out.resolve() == Path(report).resolve():
        raise UsageError(None, "--perfetto FILE and -o FILE name the same file")


def perfetto_export(case, analysis, path: str, window: tuple[str, int]) -> None:
    """Write the export (a partial file is removed on failure) and say what it holds."""
    import os

    from tracetriage.analyzers.tracks import build_tracks
    from tracetriage.errors import OutputError
    from tracetriage.reports.perfetto import export
    from tracetriage.reports.perfetto_view import left_out_text

    try:
        summary = export(build_tracks(case, analysis, mode=window[0], worst_steps=window[1]), analysis, path)
    except OSError as exc:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise OutputError(path, f"cannot write the Perfetto trace: {exc.strerror or exc}") from None
    except BaseException:
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    analysis.series["perfetto_export"] = {"path": str(path), **summary, "left_out_text": left_out_text(summary)}
    print(one_line(f"tracetriage: wrote {path} (Perfetto trace, open in ui.perfetto.dev; {summary['mode']}: "
                   f"{left_out_text(summary)})"), file=sys.stderr)
    size = os.path.getsize(path)
    if size > PERFETTO_BROWSER_BYTES:
        print(f"tracetriage: note: {path} is {size / 2**30:.1f} GiB: ui.perfetto.dev loads traces of up to about 2 GB in "
              "the browser; open it through trace_processor --httpd, or export less with --perfetto-window worst-steps N",
              file=sys.stderr)
