"""Where a command's output goes: the report to -o FILE or standard output (its format from
--format or the file's extension), the one-line notes on standard error (what was written, what
--fail-on matched, what batch did), and the progress bar of a long analysis."""

from __future__ import annotations

import sys
from pathlib import Path

from tracetriage.analyzers.catalog import SEVERITIES
from tracetriage.errors import one_line
from tracetriage.wording import counted

OUTPUT_EXTENSIONS = {".html": "html", ".htm": "html", ".json": "json", ".md": "md", ".txt": "text", ".text": "text"}


FORMAT_EXTENSIONS = {"html": ".html", "md": ".md", "json": ".json", "text": ".txt", "parquet": ".parquet"}


def check_agree(fmt: str | None, output: str | None, named: str | None) -> None:
    """--format and the format -o's extension names (``named``, None: the extension names none) must agree, in
    analyze, compare and trend alike (as the MCP tools' ``format`` and ``output``, and --format perfetto with a
    report's name): an md report in x.html is a file its name misdescribes (new-user trial 53 item 4)."""
    from tracetriage.errors import UsageError

    if fmt and output and named and fmt != named:
        raise UsageError(None, f"--format {fmt} and -o {output} disagree (the name says {named}): "
                               f"name the file {FORMAT_EXTENSIONS.get(fmt, '.' + fmt)} or give --format {named}")


def format_for(args) -> str:
    """The output format: --format, else -o's extension (an unknown one is a usage error, never silent text);
    a --format that the extension contradicts is a usage error (:func:`check_agree`)."""
    from tracetriage.errors import UsageError

    if args.output:
        check_agree(args.format, args.output, OUTPUT_EXTENSIONS.get(Path(args.output).suffix.lower()))
    if args.format:
        return args.format
    if args.output:
        ext = Path(args.output).suffix.lower()
        if not ext:  # a plain name: the default format, as on standard output
            return "text"
        if ext not in OUTPUT_EXTENSIONS:
            raise UsageError(None, f"-o {args.output}: unknown report extension {ext or '(none)'!r}; use .html, .md, .json "
                                   "or .txt, or give --format html|md|json|text")
        return OUTPUT_EXTENSIONS[ext]
    return "text"


def check_output(args) -> None:
    """Refuse an output path that cannot be written before spending time on the analysis."""
    from tracetriage.errors import OutputError

    if args.output == "-":  # the usual name for standard output, never a file called "-"
        args.output = None
    if not args.output:
        return
    out = Path(args.output)
    if out.is_dir():
        raise OutputError(out, "cannot write the report: it is a directory")
    blocking = next((folder for folder in reversed(out.parents) if folder.exists() and not folder.is_dir()), None)
    if blocking is not None:
        raise OutputError(out, f"cannot write the report: {blocking} is a file, not a folder")
    try:  # a missing folder is made, as batch -o makes its own
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(out, f"cannot write the report: cannot make folder {out.parent}: {exc.strerror or exc}") from None


def emit(args, text: str, summary: str) -> None:
    """The report to -o FILE (with a one-line note on stderr) or to standard output."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates from a capture become '?'
    if args.output:
        from tracetriage.errors import OutputError

        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise OutputError(args.output, f"cannot write the report: {exc.strerror or exc}") from None
        note = f"tracetriage: wrote {args.output}: {one_line(summary)}"
        print(note.encode("utf-8", "replace").decode("utf-8"), file=sys.stderr)
    else:
        to_stdout(text)


def to_stdout(text: str) -> None:
    """The report on standard output, flushed here so that a full disk or a closed device is
    the report's error (exit 7), never an internal one or a silent exit 0 at shutdown."""
    from tracetriage.errors import OutputError

    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise OutputError("standard output", f"cannot write the report: {exc.strerror or exc}") from None


PROGRESS_AFTER_S = 2.0


def progress_bar(paths, fmt: str):
    """On a terminal, a progress bar on stderr once an analysis runs past PROGRESS_AFTER_S (its stages:
    tracetriage/progress.py); never with JSON output nor on a pipe or in CI."""
    from tracetriage.progress import ProgressBar

    if fmt == "json" or not sys.stderr.isatty():
        return None
    return ProgressBar(", ".join(map(str, paths))[:200], PROGRESS_AFTER_S, sys.stderr)


def fail_on_matches(findings, fail_on: str | None) -> list[str]:
    """--fail-on: the findings (other than healthy) at or above that severity, as ``SEVERITY id``."""
    if not fail_on:
        return []
    limit = SEVERITIES.index(fail_on)
    return [f"{finding['severity']} {finding['id']}" for finding in findings
            if SEVERITIES.index(finding["severity"]) >= limit and finding["id"] != "healthy"]


def fail_on_note(fail_on: str, matched: list[str], case: str | None = None) -> None:
    """The line that says why --fail-on gave exit 5: what matched (and in which case, for batch)."""
    where = f"{case}: " if case else ""
    print(one_line(f"tracetriage: --fail-on {fail_on} matched: {where}{', '.join(matched)}"), file=sys.stderr)


def batch_note(result, outdir: str) -> None:
    """What batch did, on stderr: the counts, then one line per case that failed or did not run."""
    from tracetriage.batch_store import in_outdir

    cases = len(result.records)
    print(f"tracetriage: {counted(cases, 'case')}: {result.analyzed} analyzed, {result.reused} unchanged, "
          f"{result.failed} failed{f', {result.not_run} not run' if result.not_run else ''}; "
          f"wrote {in_outdir(outdir, 'index.html')} and summary.parquet ({result.seconds} s)", file=sys.stderr)
    for record in result.records:
        if record["status"] != "ok":
            print(f"tracetriage: {record['status'].replace('_', ' ')}: {one_line(str(record['error']))}", file=sys.stderr)
    from tracetriage.batch_records import SKIPPED_WHY

    for path in result.skipped:
        print(f"tracetriage: skipped: {one_line(path)}: {SKIPPED_WHY}", file=sys.stderr)


def trend_format(args) -> str:
    """trend's output format: a report's (see :func:`format_for`), or parquet (--format parquet, or
    -o FILE.parquet), which is a binary table and needs -o."""
    from tracetriage.errors import UsageError

    if args.output == "-":
        args.output = None  # standard output (a binary table is refused below)
    ext = Path(args.output or "").suffix.lower()
    named_table = ext == ".parquet"
    check_agree(args.format, args.output, "parquet" if named_table else OUTPUT_EXTENSIONS.get(ext))
    if args.format != "parquet" and not named_table:
        check_output(args)
    fmt = "parquet" if args.format == "parquet" or (not args.format and named_table) else format_for(args)
    if fmt == "parquet" and not args.output:
        raise UsageError(None, "--format parquet writes a binary table: give -o FILE.parquet")
    return fmt


def write_table(path: str, result) -> None:
    """trend --format parquet: the series table to ``path``, with the one-line note on stderr."""
    from tracetriage.errors import OutputError

    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        result.series_frame().to_parquet(path, engine="pyarrow", index=False)
    except OSError as exc:
        raise OutputError(path, f"cannot write the table: {exc.strerror or exc}") from None
    print(f"tracetriage: wrote {path}: {one_line(result.summary)}", file=sys.stderr)


def report_links(batch_dir: str, output: str | None) -> str:
    """The batch folder as trend's md and html reports link the case reports in it: relative to the folder
    -o writes into (the links hold when both move together), absolute where no relative path reaches it
    (another drive) or the report goes to standard output (read from wherever it is saved; new-user trial 53
    item 3: the page linked nothing then), the URI of tables on object storage."""
    import os

    from tracetriage.batch_store import is_uri

    if is_uri(batch_dir):  # tables on object storage: the links name the store
        return batch_dir
    where = Path(batch_dir).resolve()
    if not output:
        return where.as_posix()
    try:
        return Path(os.path.relpath(where, Path(output).resolve().parent)).as_posix()
    except ValueError:  # no relative path from there (another drive)
        return where.as_posix()
