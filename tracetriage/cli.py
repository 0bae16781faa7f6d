"""Command line: a thin layer over the library. Errors become one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracetriage import __version__
from tracetriage.analyzers.catalog import AXES, SEVERITIES
from tracetriage.errors import (
    EXIT_FAIL_ON,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REGRESSED,
    EXIT_USAGE,
    TraceTriageError,
)
from tracetriage.options import check_symptom
from tracetriage.reports import FORMATS


def _cache_options(parser) -> None:
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where parsed models and metrics of large captures are kept (default: $TRACETRIAGE_CACHE_DIR, "
                             "else ~/.cache/tracetriage); never beside the input")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the analysis cache")
    parser.add_argument("--nsys", metavar="PATH", help="the nsys executable that exports .nsys-rep reports "
                                                       "(default: $NSYS, else nsys on PATH)")


def _runtime(args):
    """The Runtime of one command: --cache-dir / --no-cache, --nsys, and batch's --jobs / --dask."""
    from tracetriage.runtime import Runtime

    return Runtime.create(args.cache_dir, use_cache=not args.no_cache, nsys=args.nsys,
                          jobs=getattr(args, "jobs", None), dask_address=getattr(args, "dask", None))


def _options(args):
    """--symptom, --step-range and --slo, checked in that order."""
    from tracetriage.runtime import Options

    return Options.checked(getattr(args, "symptom", None), args.slo, args.step_range)


def _verdict_options(parser) -> None:
    parser.add_argument("--symptom", metavar="{" + ",".join(AXES) + "}",
                        help="the symptom the user suffers: its findings rank first (default: the top finding of each axis)")
    parser.add_argument("--slo", metavar="BUDGETS",
                        help="latency budgets the findings are checked against, e.g. "
                             "ttft_p95_ms=800,tpot_p95_ms=50,itl_p99_ms=100")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, documented exit code
        sys.stderr.write(f"tracetriage: error: {message}\n")
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tracetriage",
        description="Post-mortem triage of a slow or unstable LLM inference server.",
        epilog="exit codes: 0 analyzed; 2 usage error; 3 unreadable or unsupported input; 4 nothing to analyze; "
               "5 --fail-on matched; 6 batch: some case failed; 7 cannot write the report; 8 regressed and "
               "9 inconclusive (compare/trend --gate); 70 internal error; 130 interrupted (Ctrl-C or SIGTERM)",
    )
    p.add_argument("--version", action="version", version=f"tracetriage {__version__}")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)
    a = sub.add_parser("analyze", help="analyze a trace, bundle directory or artifacts and print/write the verdict",
                       description="Analyze the given files and directories as one case.")
    a.add_argument("paths", nargs="+", metavar="PATH", help="trace files, side artifacts, or a bundle directory")
    a.add_argument("--format", "-f", choices=FORMATS + ("perfetto",),
                   help="output format (default: text, or from -o's extension); perfetto: the capture and the verdict as "
                        "a Perfetto trace (binary: needs -o FILE.pftrace)")
    a.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of standard output")
    a.add_argument("--perfetto", metavar="FILE", help="also export the capture and the verdict as a Perfetto trace to FILE "
                                                      "(the report names it)")
    a.add_argument("--perfetto-window", metavar="MODE",
                   help="what the Perfetto export holds: steady (default: the analysis window, warm-up excluded), all, "
                        "or worst-steps N (the N slowest steps and the step before and after each; N defaults to 3)")
    a.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    a.add_argument("--fail-on", choices=SEVERITIES, help="exit with code 5 when a finding at or above this severity is present")
    _verdict_options(a)
    _cache_options(a)

    b = sub.add_parser("batch", help="analyze every case under directories, globs or archives; write index.html and "
                                     "summary.parquet",
                       description="One case per trace file, or per directory bundling a trace with its side artifacts.")
    b.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="directories, glob patterns, trace files, .tar.gz/.tgz/.zip archives")
    b.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="where reports, index.html and the parquet tables go")
    b.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: number of cores)")
    b.add_argument("--on-error", choices=["skip", "fail"], default="skip",
                   help="skip (default): record a failed case and go on; fail: stop at the first")
    b.add_argument("--force", action="store_true", help="re-analyze cases whose files and tool version did not change")
    b.add_argument("--dask", metavar="ADDRESS", help="run the cases on an existing Dask distributed scheduler")
    b.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    b.add_argument("--fail-on", choices=SEVERITIES, help="exit with code 5 when a case has a finding at or above this severity")
    b.add_argument("--exit-zero", action="store_true", help="exit 0 even when some cases failed (they are still listed)")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.add_argument("--case-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="a case running longer is recorded as failed and the batch goes on (default 600; on Dask too)")
    b.add_argument("--case-memory", type=float, default=None, metavar="MB",
                   help="a case whose worker grows by more than MB of resident memory is stopped and recorded as failed "
                        "(default: no ceiling; a worker that dies is a failed case either way)")
    b.add_argument("--reports", choices=["all", "failed", "none"], default="all",
                   help="which cases get a report.html: all (default), failed (those with a finding other than healthy), "
                        "none (tables, analysis.json and index.html only: the cheapest)")
    b.add_argument("--perfetto", action="store_true",
                   help="also export each case's timeline with its verdict as cases/<id>/timeline.pftrace (Perfetto)")
    b.add_argument("--perfetto-window", metavar="MODE",
                   help="what each timeline holds: steady (default), all, or worst-steps N")
    _verdict_options(b)
    _cache_options(b)

    t = sub.add_parser("trend", help="an archive over time: series per workload, regressions with their first bad capture",
                       description="Order the cases of a batch output folder (or of captures, analyzed by batch first) by "
                                   "capture time, group comparable cases, find level shifts and one-off outliers in each "
                                   "series, and name the last good and first bad capture with the findings and kernels "
                                   "that moved there (a group of captures without steps: its kernels' time per call, "
                                   "not busy %). --gate: exit 8 when the latest capture of a group is in a regressed "
                                   "segment of a budget series.")
    t.add_argument("inputs", nargs="+", metavar="INPUT", help="a batch output folder (with summary.parquet), or captures, "
                                                             "folders and archives to run batch on first; exit 3 when an "
                                                             "input is missing or unreadable, 4 when no case could be analyzed")
    t.add_argument("--format", "-f", choices=FORMATS + ("parquet",),
                   help="output format (default: text, or from -o's extension); parquet: the series table")
    t.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    t.add_argument("--batch-dir", metavar="OUTDIR", help="where batch writes when INPUT is captures "
                                                          "(default: a folder in the analysis cache, never beside the captures)")
    t.add_argument("--order-by", choices=["time", "name"], default="time",
                   help="time (default): the capture's start from its metadata, else the name; name: natural name order")
    t.add_argument("--group-by", metavar="KEY", help="an extra group key: a path component counted from the case as "
                                                     "trend names it (-2: the folder holding the case, e.g. main for "
                                                     "main/nightly-01; -3: the folder above that; 0, 1, ...: from the "
                                                     "root; -1, the case itself, is no group key) or tag:FILE (the text "
                                                     "of FILE in the case's folder)")
    t.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                   help="the practical minimum of a change, in %% of the step for ms-per-step series, else of the "
                        "series' level (counts, serving figures, the kernels' time per call of captures without "
                        "steps); default 5")
    t.add_argument("--baseline", metavar="NAME", help="with --gate: the reference capture the latest one is judged "
                                                      "against (a case name as shown), instead of the series' own shifts")
    t.add_argument("--gate", action="store_true", help="exit 8 when the latest capture of a group is in a regressed segment")
    t.add_argument("--jobs", "-j", type=int, default=None, help="batch worker processes (default: number of cores)")
    t.add_argument("--dask", metavar="ADDRESS", help="run batch's cases on an existing Dask distributed scheduler")
    t.add_argument("--force", action="store_true", help="re-analyze cases whose files and tool version did not change")
    t.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    _cache_options(t)

    c = sub.add_parser("compare", help="what changed between two captures (before/after a fix or release)",
                       description="Compare two cases (traces, bundles, or saved analysis JSON files): step time per rank "
                                   "with its noise (captures without steps: their common kernels' time per call, never "
                                   "busy %), what moved per step, each finding of BEFORE checked on AFTER (fixed, "
                                   "falsified, better, worse, persists, new), and a verdict. Exit codes with --gate: 0 "
                                   "improved/unchanged/mixed within budgets, 8 regressed, 9 inconclusive; with "
                                   "--across-devices 0, or 9 when the pair is refused.")
    c.add_argument("before", metavar="BEFORE", help="the capture before the change: a trace, a bundle folder, or a saved "
                                                    "analysis.json (analyze --format json, or batch's cases/<id>/analysis.json)")
    c.add_argument("after", metavar="AFTER", help="the capture after the change (the same kinds)")
    c.add_argument("--format", "-f", choices=FORMATS, help="output format (default: text, or from -o's extension)")
    c.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    c.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    c.add_argument("--gate", action="store_true",
                   help="exit 8 when the after capture regressed, 9 when the pair cannot be judged (inconclusive), "
                        "0 when improved, unchanged or mixed (a mixed result fails when the step p50 regressed or a "
                        "--slo budget met before is broken after)")
    c.add_argument("--gate-threshold", type=float, default=5.0, metavar="PCT",
                   help="the smallest step-time change, in %% of the before step, that counts (default 5); "
                        "a change must also be beyond the noise of the steps (captures without steps: the smallest "
                        "change of kernel time per call, beyond the noise of the calls)")
    c.add_argument("--across-devices", action="store_true",
                   help="the same program on two GPUs: each op class and top op held against its own device's peaks "
                        "(time per step, or per call, achieved rate, %% of peak, the ratio the peaks predict); exit 0, "
                        "9 when the pair is refused (another program, no common op class)")
    _verdict_options(c)
    _cache_options(c)

    m = sub.add_parser("mcp", help="serve the library as tools of a coding assistant (Model Context Protocol, stdio)",
                       description="Start an MCP server on standard input and output with the tools analyze, compare, "
                                   "trend, batch, explain and capture_advice. It reads only under the client's MCP roots "
                                   "and the --root folders (the working directory when neither names one) and writes "
                                   "reports only there, never beside an input. Needs the mcp extra: "
                                   "pip install 'tracetriage[mcp]'.")
    m.add_argument("--root", action="append", default=[], metavar="DIR",
                   help="a folder the server may read and write under (repeatable)")
    m.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="the time bound of one call: its worker process is ended after it (default 600)")
    _cache_options(m)
    return p


OUTPUT_EXTENSIONS = {".html": "html", ".htm": "html", ".json": "json", ".md": "md", ".txt": "text", ".text": "text"}
PERFETTO_EXTENSIONS = (".pftrace", ".perfetto-trace", ".perfetto")
PERFETTO_BROWSER_BYTES = 1 << 30  # above this, say how to open the trace (the browser UI tops out near 2 GB)


def _format_for(args) -> str:
    """The output format: --format, else -o's extension (an unknown one is a usage error, never silent text)."""
    from tracetriage.errors import UsageError

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


def _check_output(args) -> None:
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


def _emit(args, text: str, summary: str) -> None:
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
        _to_stdout(text)


def _to_stdout(text: str) -> None:
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


def _progress_bar(paths, fmt: str):
    """On a terminal, a progress bar on stderr once an analysis runs past PROGRESS_AFTER_S (its stages:
    tracetriage/progress.py); never with JSON output nor on a pipe or in CI."""
    from tracetriage.progress import ProgressBar

    if fmt == "json" or not sys.stderr.isatty():
        return None
    return ProgressBar(", ".join(map(str, paths))[:200], PROGRESS_AFTER_S, sys.stderr)


def _check_one_run(case) -> None:
    """Several paths are one case only when their traces are one run (tracetriage/runs.py: the
    rule batch groups files by), plus side artifacts."""
    from tracetriage.runs import check_one_run

    check_one_run(case)


def _matched(findings, fail_on: str | None) -> list[str]:
    """--fail-on: the findings (other than healthy) at or above that severity, as ``SEVERITY id``."""
    if not fail_on:
        return []
    limit = SEVERITIES.index(fail_on)
    return [f"{finding['severity']} {finding['id']}" for finding in findings
            if SEVERITIES.index(finding["severity"]) >= limit and finding["id"] != "healthy"]


def _fail_on_note(fail_on: str, matched: list[str], case: str | None = None) -> None:
    """The line that says why --fail-on gave exit 5: what matched (and in which case, for batch)."""
    where = f"{case}: " if case else ""
    print(one_line(f"tracetriage: --fail-on {fail_on} matched: {where}{', '.join(matched)}"), file=sys.stderr)


def _distinct_paths(paths: list[str]) -> list[str]:
    """The paths in the order given, each file or folder once: one given twice (``x x``,
    ``./x x``, a link and its target), or a file given beside the folder that holds it (the
    folder reads it), is read once, never taken for a second run of itself."""
    keys = []
    for p in paths:
        try:
            keys.append(str(Path(p).resolve()))
        except (OSError, RuntimeError):  # a link loop: left for open_case to refuse
            keys.append(p)
    folders = {k for k, p in zip(keys, paths) if Path(p).is_dir()}
    seen, out = set(), []
    for p, key in zip(paths, keys):
        if key not in seen and not (str(Path(key).parent) in folders and key not in folders):
            seen.add(key)
            out.append(p)
    return out


def cmd_analyze(args) -> int:
    import warnings
    from dataclasses import replace

    from tracetriage import analyze, open_case
    from tracetriage.reports import render

    options = _options(args)
    _check_output(args)
    export_to, window = _perfetto_request(args)
    fmt = "perfetto" if export_to and export_to == args.output else _format_for(args)
    paths = _distinct_paths(args.paths)
    progress = _progress_bar(paths, fmt)
    runtime = replace(_runtime(args), progress=progress)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            case = open_case(paths, runtime=runtime)
            if len(case.traces) > 1:  # several files, or a folder of them
                _check_one_run(case)
            analysis = analyze(case, options, runtime)
        seen = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
        if seen:
            analysis.data.setdefault("warnings", []).extend(one_line(m) for m in seen)
        if export_to:
            if progress:
                progress("writing the Perfetto trace")
            _perfetto_export(case, analysis, export_to, window)
        if fmt != "perfetto":
            if progress:
                progress("writing the report")
            text = render(analysis, fmt, runtime.cache)
    finally:
        if progress:
            progress.close()
    if fmt != "perfetto":
        _emit(args, text, analysis.headline)
    matched = _matched(analysis.findings, args.fail_on)
    if matched:
        _fail_on_note(args.fail_on, matched)
        return EXIT_FAIL_ON
    return EXIT_OK


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


def _perfetto_request(args) -> tuple[str | None, tuple[str, int]]:
    """Where the Perfetto export goes (``--format perfetto -o FILE``, a ``.pftrace`` -o, or
    ``--perfetto FILE``) and its window; refused before any analysis when it cannot be written.
    The trace is binary: it never goes to standard output."""
    from tracetriage.errors import OutputError, UsageError
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
    if args.perfetto == "-":  # (-o - is standard output, made None by _check_output before this)
        raise UsageError(None, "the Perfetto export is a binary trace, never written to standard output: give a file name")
    path = args.output if as_format else args.perfetto
    if path:
        out = Path(path)
        if out.is_dir():
            raise OutputError(out, "cannot write the Perfetto trace: it is a directory")
        if not out.parent.is_dir():
            raise OutputError(out, f"cannot write the Perfetto trace: folder {out.parent} does not exist")
        if args.output and not as_format and out.resolve() == Path(args.output).resolve():
            raise UsageError(None, "--perfetto FILE and -o FILE name the same file")
    return path, window


def _perfetto_export(case, analysis, path: str, window: tuple[str, int]) -> None:
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


def cmd_batch(args) -> int:
    from tracetriage import batch
    from tracetriage.api import check_jobs
    from tracetriage.batch_store import in_outdir
    from tracetriage.batches import BatchInterrupted
    from tracetriage.errors import EXIT_BATCH_FAILED, UsageError
    from tracetriage.runtime import check_step_range

    check_step_range(args.step_range)
    check_jobs(args.jobs)
    if args.perfetto_window is not None and not args.perfetto:
        raise UsageError(None, "--perfetto-window chooses what each case's Perfetto timeline holds: add --perfetto")
    try:
        result = batch(args.inputs, args.output, _options(args), runtime=_runtime(args), on_error=args.on_error,
                       force=args.force, progress=not args.no_progress, case_timeout=args.case_timeout,
                       perfetto_window=parse_perfetto_window(args.perfetto_window) if args.perfetto else None,
                       case_memory=args.case_memory, reports=args.reports)
    except BatchInterrupted:
        print(f"tracetriage: interrupted: wrote {in_outdir(args.output, 'index.html')} and the tables of the cases that ended; "
              "the same command again resumes from them", file=sys.stderr)
        return EXIT_INTERRUPTED
    _batch_note(result, args.output)
    if (result.failed or result.not_run) and not args.exit_zero:
        return EXIT_BATCH_FAILED
    failing = [(record["path"], _matched(record.get("findings") or [], args.fail_on)) for record in result.records]
    failing = [(case, matched) for case, matched in failing if matched]
    for case, matched in failing:
        _fail_on_note(args.fail_on, matched, case)
    return EXIT_FAIL_ON if failing else EXIT_OK


def _batch_note(result, outdir: str) -> None:
    """What batch did, on stderr: the counts, then one line per case that failed or did not run."""
    from tracetriage.batch_store import in_outdir

    print(f"tracetriage: {len(result.records)} cases: {result.analyzed} analyzed, {result.reused} unchanged, "
          f"{result.failed} failed{f', {result.not_run} not run' if result.not_run else ''}; "
          f"wrote {in_outdir(outdir, 'index.html')} and summary.parquet ({result.seconds} s)", file=sys.stderr)
    for record in result.records:
        if record["status"] != "ok":
            print(f"tracetriage: {record['status']}: {one_line(str(record['error']))}", file=sys.stderr)
    for path in result.skipped:
        print(f"tracetriage: skipped: {one_line(path)}: no capture batch reads (trace, bundle or archive) in it",
              file=sys.stderr)


def cmd_compare(args) -> int:
    from tracetriage import compare

    options = _options(args)
    _check_output(args)
    fmt = _format_for(args)
    runtime = _runtime(args)
    result = compare(args.before, args.after, options, threshold_pct=args.gate_threshold, runtime=runtime,
                     across_devices=args.across_devices)
    _emit(args, result.render(fmt, runtime.cache), result.summary + (f"; {result.gate_line}" if args.gate else ""))
    if args.gate and not args.output:  # the gate's result in CI logs, as trend --gate's (with -o: in the note)
        print(f"tracetriage: {result.gate_line}", file=sys.stderr)
    return result.gate_exit() if args.gate or args.across_devices else EXIT_OK


def cmd_mcp(args) -> int:
    import importlib.util

    from tracetriage.errors import UsageError

    if importlib.util.find_spec("mcp") is None:
        raise UsageError(None, "tracetriage mcp needs the MCP SDK: pip install 'tracetriage[mcp]'")
    from tracetriage.mcp_server import serve

    serve(args.root, args.timeout, _runtime(args).settings())
    return EXIT_OK


def cmd_trend(args) -> int:
    import os

    from tracetriage import trend
    from tracetriage.runtime import check_step_range

    check_step_range(args.step_range)
    fmt = _trend_format(args)
    runtime = _runtime(args)
    result = trend(args.inputs, order_by=args.order_by, group_by=args.group_by, threshold_pct=args.threshold,
                   baseline=args.baseline, gate=args.gate, batch_dir=args.batch_dir, force=args.force,
                   step_range=args.step_range, runtime=runtime)
    if not any(Path(item).resolve() == Path(result.batch_dir).resolve() for item in args.inputs):
        # captures were given: say where batch wrote its tables and case reports (trial item 23)
        print(f"tracetriage: batch analyzed the captures into {result.batch_dir} (index.html lists each case)",
              file=sys.stderr)
    if fmt == "parquet":
        _write_table(args.output, result)
    else:
        from tracetriage.batch_store import is_uri

        links = os.path.relpath(result.batch_dir, Path(args.output).resolve().parent) if args.output else None
        if is_uri(result.batch_dir):  # tables on object storage: the links name the store
            links = result.batch_dir
        _emit(args, result.render(fmt, links, runtime.cache), result.summary)
    return EXIT_REGRESSED if args.gate and result.regressed else EXIT_OK


def _trend_format(args) -> str:
    """trend's output format: a report's (see :func:`_format_for`), or parquet (--format parquet, or
    -o FILE.parquet), which is a binary table and needs -o."""
    from tracetriage.errors import UsageError

    if args.output == "-":
        args.output = None  # standard output (a binary table is refused below)
    named_table = (args.output or "").endswith(".parquet")
    if args.format != "parquet" and not named_table:
        _check_output(args)
    fmt = "parquet" if args.format == "parquet" or (not args.format and named_table) else _format_for(args)
    if fmt == "parquet" and not args.output:
        raise UsageError(None, "--format parquet writes a binary table: give -o FILE.parquet")
    return fmt


def _write_table(path: str, result) -> None:
    """trend --format parquet: the series table to ``path``, with the one-line note on stderr."""
    from tracetriage.errors import OutputError

    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        result.series_frame().to_parquet(path, engine="pyarrow", index=False)
    except OSError as exc:
        raise OutputError(path, f"cannot write the table: {exc.strerror or exc}") from None
    print(f"tracetriage: wrote {path}: {one_line(result.summary)}", file=sys.stderr)


def one_line(text: str) -> str:
    """A message as one printable line: newlines, escapes and other control characters from
    file, folder or table names are shown escaped, never sent raw to the terminal."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def _joined_window(argv: list[str]) -> list[str]:
    """``--perfetto-window worst-steps N`` as one value (argparse takes one word per option)."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--perfetto-window" and i + 2 < len(argv) + 1 and argv[i + 1:i + 2] == ["worst-steps"] \
                and i + 2 < len(argv) and argv[i + 2].isdigit():
            out += [argv[i], f"worst-steps={argv[i + 2]}"]
            i += 3
            continue
        out.append(argv[i])
        i += 1
    return out


EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, as a shell reports a process ended by SIGINT


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C: temporary directories are removed
    raise KeyboardInterrupt


def main(argv=None) -> int:
    import signal
    import warnings

    from tracetriage.memory import tune_allocator

    tune_allocator()
    warnings.simplefilter("ignore")  # library warnings never reach stderr raw; analyze records them in the output
    try:
        signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread (embedded use)
        pass
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and not argv[0].startswith("-") and argv[0] not in ("analyze", "batch", "compare", "trend", "mcp"):
        import os

        if os.path.exists(argv[0]):
            print(f"tracetriage: error: no command given: did you mean tracetriage analyze {one_line(argv[0])}"
                  f"{' ...' if len(argv) > 1 else ''}? (commands: analyze, batch, compare, trend, mcp)", file=sys.stderr)
            return EXIT_USAGE
    args = parser.parse_args(_joined_window(argv))
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        check_symptom(getattr(args, "symptom", None))
        return {"analyze": cmd_analyze, "batch": cmd_batch, "compare": cmd_compare, "trend": cmd_trend,
                "mcp": cmd_mcp}[args.command](args)
    except TraceTriageError as exc:
        print(f"tracetriage: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - last resort: still one line, distinct code
        print(f"tracetriage: internal error: {type(exc).__name__}: {one_line(str(exc))} (please report this)", file=sys.stderr)
        return EXIT_INTERNAL


def run() -> None:
    """The ``tracetriage`` command: :func:`main`, then a quick exit.

    Shutting the interpreter down with pandas, pyarrow and numpy loaded takes ~60 ms, a sixth
    of a small capture's whole analysis; by the time ``main`` returns every report is written
    and closed and every temporary folder removed, so only the standard streams need flushing.
    ``batch`` exits the normal way: its worker pools and Dask clients have exit hooks.
    """
    import os

    code = main()
    if sys.argv[1:2] == ["batch"]:
        raise SystemExit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):  # the reader went away: nothing left to tell it
        pass
    os._exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    run()
