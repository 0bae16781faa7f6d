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
from tracetriage.reports import FORMATS

from tracetriage.options import check_slo, check_symptom  # noqa: E402 - one validation with the API


def parse_slo(text: str | None) -> dict:
    """``ttft_p95_ms=800,tpot_p95_ms=50`` -> {"ttft_p95_ms": 800.0, ...}; unknown keys are a usage error."""
    return check_slo(text or None)


def _cache_options(parser) -> None:
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where parsed models and metrics of large captures are kept (default: $TRACETRIAGE_CACHE_DIR, "
                             "else ~/.cache/tracetriage); never beside the input")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the analysis cache")
    parser.add_argument("--nsys", metavar="PATH", help="the nsys executable that exports .nsys-rep reports "
                                                       "(default: $NSYS, else nsys on PATH)")


def _configure_cache(args):
    import os

    from tracetriage import cache
    from tracetriage.parsers import reports

    if args.nsys:
        reports.set_nsys(args.nsys)
        os.environ["NSYS"] = args.nsys  # batch workers are other processes
    return cache.configure(args.cache_dir, enabled=not args.no_cache)


def _verdict_options(parser) -> None:
    parser.add_argument("--symptom", metavar="{" + ",".join(AXES) + "}",
                        help="the symptom the user suffers: its findings rank first (default: the top finding of each axis)")
    parser.add_argument("--slo", metavar="BUDGETS",
                        help="latency budgets the findings are checked against, e.g. ttft_p95_ms=800,tpot_p95_ms=50,itl_p99_ms=100")


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
               "9 inconclusive (compare/trend --gate); 70 internal error",
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

    b = sub.add_parser("batch", help="analyze every case under directories, globs or archives; write index.html and summary.parquet",
                       description="One case per trace file, or per directory bundling a trace with its side artifacts.")
    b.add_argument("inputs", nargs="+", metavar="INPUT", help="directories, glob patterns, trace files, .tar.gz/.tgz/.zip archives")
    b.add_argument("-o", "--output", required=True, metavar="OUTDIR", help="where reports, index.html and the parquet tables go")
    b.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: number of cores)")
    b.add_argument("--on-error", choices=["skip", "fail"], default="skip", help="skip (default): record a failed case and go on; fail: stop at the first")
    b.add_argument("--force", action="store_true", help="re-analyze cases whose files and tool version did not change")
    b.add_argument("--dask", metavar="ADDRESS", help="run the cases on an existing Dask distributed scheduler")
    b.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    b.add_argument("--fail-on", choices=SEVERITIES, help="exit with code 5 when a case has a finding at or above this severity")
    b.add_argument("--exit-zero", action="store_true", help="exit 0 even when some cases failed (they are still listed)")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.add_argument("--case-timeout", type=float, default=600.0, metavar="SECONDS",
                   help="a case running longer is recorded as failed and the batch goes on (default 600)")
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
                                   "that moved there. --gate: exit 8 when the latest capture of a group is in a regressed "
                                   "segment.")
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
                   help="the practical minimum of a change, in %% of the step (default 5)")
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
                                   "with its noise, each finding of BEFORE checked on AFTER (fixed, falsified, better, "
                                   "worse, persists, new), and a verdict. Exit codes with --gate: 0 improved/unchanged/"
                                   "mixed within budgets, 8 regressed, 9 inconclusive.")
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
                        "a change must also be beyond the noise of the steps")
    _verdict_options(c)
    _cache_options(c)
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
    try:  # a missing folder is made, as batch -o makes its own
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(out, f"cannot write the report: cannot make folder {out.parent}: {exc.strerror or exc}") from None


def _validate_regex(pattern):
    import re

    from tracetriage.errors import UsageError

    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(None, f"--step-range is not a valid regular expression: {exc}") from None


def _emit(args, text: str, summary: str) -> None:
    """The report to -o FILE (with a one-line note on stderr) or to standard output."""
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates from a capture become '?'
    if args.output:
        from tracetriage.errors import OutputError

        try:
            Path(args.output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise OutputError(args.output, f"cannot write the report: {exc.strerror or exc}") from None
        print(f"tracetriage: wrote {args.output}: {one_line(summary)}".encode("utf-8", "replace").decode("utf-8"), file=sys.stderr)
    else:
        sys.stdout.write(text)


PROGRESS_AFTER_S = 2.0


def _progress_note(paths, fmt: str):
    """On a terminal, a note on stderr when an analysis runs past 2 s (never in JSON or piped output)."""
    import threading

    if fmt == "json" or not sys.stderr.isatty():
        return None
    timer = threading.Timer(PROGRESS_AFTER_S, lambda: print(f"tracetriage: reading and analyzing {', '.join(map(str, paths))[:200]} ... "
                                               "(large captures are cached: the next run is fast)", file=sys.stderr))
    timer.daemon = True
    timer.start()
    return timer


def _check_one_run(case) -> None:
    """Several paths are one case only when their traces are one run (tracetriage/runs.py: the
    rule batch groups files by), plus side artifacts."""
    from tracetriage.runs import check_one_run

    check_one_run(case)


def _fails(findings, fail_on: str | None) -> bool:
    """--fail-on: a finding (other than healthy) at or above that severity."""
    if not fail_on:
        return False
    limit = SEVERITIES.index(fail_on)
    return any(SEVERITIES.index(f["severity"]) >= limit and f["id"] != "healthy" for f in findings)


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
    from tracetriage import analyze
    from tracetriage.reports import render

    _validate_regex(args.step_range)
    slo = parse_slo(args.slo)
    _check_output(args)
    export_to, window = _perfetto_request(args)
    fmt = "perfetto" if export_to and export_to == args.output else _format_for(args)
    _configure_cache(args)
    import warnings

    from tracetriage import open_case

    paths = _distinct_paths(args.paths)
    progress = _progress_note(paths, fmt)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            case = open_case(paths)
            if len(case.traces) > 1:  # several files, or a folder of them
                _check_one_run(case)
            analysis = analyze(case, step_range=args.step_range, symptom=args.symptom, slo=slo)
    finally:
        if progress:
            progress.cancel()
    seen = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    if seen:
        analysis.data.setdefault("warnings", []).extend(one_line(m) for m in seen)
    if export_to:
        _perfetto_export(case, analysis, export_to, window)
    if fmt != "perfetto":
        _emit(args, render(analysis, fmt), analysis.headline)
    return EXIT_FAIL_ON if _fails(analysis.findings, args.fail_on) else EXIT_OK


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
    from tracetriage.batch import run_batch
    from tracetriage.errors import EXIT_BATCH_FAILED, UsageError

    _validate_regex(args.step_range)
    if args.jobs is not None and args.jobs < 1:
        raise UsageError(None, "--jobs must be at least 1")
    if args.perfetto_window is not None and not args.perfetto:
        raise UsageError(None, "--perfetto-window chooses what each case's Perfetto timeline holds: add --perfetto")
    slo = parse_slo(args.slo)
    result = run_batch(args.inputs, args.output, jobs=args.jobs, on_error=args.on_error, force=args.force,
                       dask_address=args.dask, step_range=args.step_range, progress=not args.no_progress,
                       symptom=args.symptom, slo=slo, case_timeout=args.case_timeout,
                       perfetto_window=parse_perfetto_window(args.perfetto_window) if args.perfetto else None,
                       cache_dir=None if args.no_cache else str(_configure_cache(args).dir))
    print(f"tracetriage: {len(result.records)} cases: {result.analyzed} analyzed, {result.reused} unchanged, "
          f"{result.failed} failed{f', {result.not_run} not run' if result.not_run else ''}; "
          f"wrote {Path(args.output) / 'index.html'} and summary.parquet ({result.seconds} s)", file=sys.stderr)
    for r in result.records:
        if r["status"] != "ok":
            print(f"tracetriage: {r['status']}: {one_line(str(r['error']))}", file=sys.stderr)
    if (result.failed or result.not_run) and not args.exit_zero:
        return EXIT_BATCH_FAILED
    if any(_fails(r.get("findings") or [], args.fail_on) for r in result.records):
        return EXIT_FAIL_ON
    return EXIT_OK


def _load_analysis(path: str, step_range, symptom=None, slo=None):
    import json

    from tracetriage import analyze, open_case

    from tracetriage.errors import TraceFormatError

    p = Path(path)
    if p.is_file() and p.suffix == ".json":
        try:
            with p.open("rb") as fh:
                head = fh.read(1 << 16)
        except OSError:
            head = b""
        data = None
        if b'"schema": "tracetriage.' in head or b'"schema":"tracetriage.' in head:  # one of ours: read it whole
            try:
                data = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TraceFormatError(str(path), f"a tracetriage result that is not valid JSON (truncated?): {exc}") from None
            schema = data.get("schema") if isinstance(data, dict) else None
            if schema != "tracetriage.analysis/1":
                raise TraceFormatError(str(path), f"a {schema} result, not an analysis (tracetriage.analysis/1): compare "
                                                  "takes captures or saved analysis.json files")
        if isinstance(data, dict) and data.get("schema") == "tracetriage.analysis/1":
            from tracetriage.analyzers.compare import check_saved

            problem = check_saved(data)
            if problem:
                raise TraceFormatError(str(path), f"a saved analysis, but {problem}")
            return data
    return analyze(open_case([path]), step_range=step_range, symptom=symptom, slo=slo).data


def cmd_compare(args) -> int:
    from tracetriage.analyzers.compare import compare, gate_exit
    from tracetriage.reports.compare import render_compare

    _validate_regex(args.step_range)
    slo = parse_slo(args.slo)
    _check_output(args)
    fmt = _format_for(args)
    if not 0 < args.gate_threshold < 100:  # before minutes of parsing, not after
        from tracetriage.errors import UsageError

        raise UsageError(None, f"--gate-threshold {args.gate_threshold:g}: give a percentage above 0 and below 100")
    _configure_cache(args)
    before = _load_analysis(args.before, args.step_range, args.symptom, slo)
    after = _load_analysis(args.after, args.step_range, args.symptom, slo)
    result = compare(before, after, args.before, args.after, threshold_pct=args.gate_threshold, slo=slo)
    _emit(args, render_compare(result, fmt), result["summary"])
    return gate_exit(result) if args.gate else EXIT_OK


NO_TAG = "(no tag)"


def _group_by(key: str | None, case_path: dict[str, str] | None = None):
    """``--group-by``: a path component of the case, indexed as Python indexes its parts (-1 the
    case itself, refused: a case's own name groups nothing; -2 the folder holding it; 0 the
    root), the case being what trend names (``case_path``: batch's path -> the case, its folder
    for ``.../nightly-01/trace.sqlite``); or ``tag:FILE`` (FILE's first line in the case's folder)."""
    if not key:
        return None
    from tracetriage.errors import UsageError

    if key.startswith("tag:") and key[4:]:
        name = key[4:]

        def tag(path: str) -> str:
            folder = Path(path) if Path(path).is_dir() else Path(path).parent
            try:
                return (folder / name).read_text(encoding="utf-8", errors="replace").strip().splitlines()[0][:200]
            except (OSError, IndexError):
                return NO_TAG
        return tag
    try:
        index = int(key)
    except ValueError:
        raise UsageError(None, f"--group-by {key!r}: give a path component index (e.g. -2) or tag:FILE") from None
    if index == -1:
        raise UsageError(None, f"--group-by -1 is the case itself, and a case's own name is no group key (every case "
                               f"would be alone): {GROUP_BY_HINT}")

    def component(path: str) -> str:
        parts = Path((case_path or {}).get(str(path), path)).parts
        return parts[index] if -len(parts) <= index < len(parts) else "(none)"
    return component


GROUP_BY_HINT = "-2 is the folder holding the case, -3 the folder above that"


def _trend_tables(summary, findings, kernels):
    """The batch tables with every column trend reads coerced to its type (the folder is input
    like any other: a column of the wrong type becomes missing values, never a crash)."""
    import pandas as pd

    from tracetriage.analyzers.trend import BASE_SERIES

    def numbers(df, cols):
        for c in cols:
            df[c] = pd.to_numeric(df[c], errors="coerce").astype("float64") if c in df else float("nan")

    def texts(df, cols):
        for c in cols:
            df[c] = df[c].astype("string").fillna("") if c in df else ""

    summary = summary.copy()
    numbers(summary, list(BASE_SERIES))
    for c in ("capture_start_ns", "device_count", "world_size"):
        v = pd.to_numeric(summary[c], errors="coerce") if c in summary else pd.Series(float("nan"), index=summary.index)
        summary[c] = v.where(v.abs() < 2**62).round().astype("Int64")
    texts(summary, ["case_id", "path", "status", "error", "device_model", "program", "report_json", "report_html"])
    findings = findings.copy()
    numbers(findings, ["ms_per_step"])
    texts(findings, ["case_id", "id"])
    if kernels is not None:
        kernels = kernels.copy()
        numbers(kernels, ["ms_per_step"])
        texts(kernels, ["case_id", "name"])
    return summary, findings, kernels


def cmd_trend(args) -> int:
    import json

    import pandas as pd

    from tracetriage.analyzers.compare import compare
    from tracetriage.analyzers.trend import trend
    from tracetriage.errors import TraceFormatError, UsageError
    from tracetriage.reports.trend import render_trend

    _validate_regex(args.step_range)
    if args.output == "-":
        args.output = None  # standard output (a binary table is refused below)
    _check_output(args) if (args.format or "") != "parquet" and not (args.output or "").endswith(".parquet") else None
    fmt = "parquet" if args.format == "parquet" or (not args.format and (args.output or "").endswith(".parquet")) else _format_for(args)
    if fmt == "parquet" and not args.output:
        raise UsageError(None, "--format parquet writes a binary table: give -o FILE.parquet")
    if not 0 < args.threshold < 100:
        raise UsageError(None, f"--threshold {args.threshold:g}: give a percentage above 0 and below 100")
    if args.baseline is not None and not args.gate:
        raise UsageError(None, f"--baseline {args.baseline} is the reference of --gate: add --gate (without it trend "
                               "reports the changes each series shows, against no one capture)")
    _group_by(args.group_by)  # a bad key is refused before batch runs
    folder = Path(args.inputs[0])
    tables = [p for p in args.inputs if Path(p).is_dir() and (Path(p) / "summary.parquet").is_file()]
    if tables and len(args.inputs) > 1:
        raise UsageError(None, f"give one batch output folder ({', '.join(tables)} hold batch tables), or captures to analyze")
    for p in args.inputs:
        if not any(ch in p for ch in "*?[") and not Path(p).exists():
            raise TraceFormatError(p, "no such file or directory")
    if tables:
        outdir = folder
    else:
        import hashlib

        from tracetriage.batch import run_batch

        cache = _configure_cache(args)
        if args.batch_dir:
            outdir = Path(args.batch_dir)
        else:  # never beside the user's captures: under the analysis cache, one folder per set of inputs
            from tracetriage.cache import default_dir

            key = hashlib.sha256("\0".join(str(Path(p).resolve()) for p in args.inputs).encode()).hexdigest()[:16]
            outdir = (Path(cache.dir) if cache is not None else default_dir()) / "trend-batch" / key
        run_batch(args.inputs, str(outdir), jobs=args.jobs, force=args.force, dask_address=args.dask,
                  step_range=args.step_range, progress=False)
    try:
        summary = pd.read_parquet(outdir / "summary.parquet")
        findings = pd.read_parquet(outdir / "findings.parquet")
        kernels = pd.read_parquet(outdir / "kernels.parquet") if (outdir / "kernels.parquet").is_file() else None
    except Exception as exc:  # noqa: BLE001 - a damaged table is the input's problem, said in one line
        raise TraceFormatError(str(outdir), f"cannot read the batch tables: {exc}") from None
    missing = [c for c in ("capture_start_ns", "device_model", "step_p50_ms") if c not in summary]
    if missing:
        raise TraceFormatError(str(outdir), f"the batch tables lack {', '.join(missing)} (written by an older tracetriage): "
                                            "re-run tracetriage batch with --force into this folder")

    summary, findings, kernels = _trend_tables(summary, findings, kernels)
    if not (summary["status"] == "ok").any():
        from tracetriage.errors import MissingDataError

        failed = summary[summary["status"] != "ok"]
        if len(failed):  # every case unreadable: the input's problem, as analyze and compare say it (exit 3)
            raise TraceFormatError(str(args.inputs[0]), f"no case could be analyzed: {len(failed)} failed, the first: "
                                                        f"{failed['error'].iloc[0]} (all: {outdir / 'index.html'})")
        if all(Path(p).is_file() for p in args.inputs):  # named files none of which is a capture: unreadable input
            raise TraceFormatError(str(args.inputs[0]), "not a capture tracetriage reads (nor a batch output folder)")
        raise MissingDataError(str(args.inputs[0]), "nothing to follow over time: no capture found")
    from tracetriage.analyzers.trend import case_names, case_paths, group_keys, matches_baseline

    names = case_names(summary)
    if args.baseline is not None:
        if not any(matches_baseline(n, args.baseline) for n in names.values()):
            raise UsageError(None, f"--baseline {args.baseline!r}: no case of that name (e.g. {next(iter(names.values()))!r})")
    cases = case_paths(summary)
    group_by = _group_by(args.group_by, cases)
    if group_by is not None and args.group_by.lstrip("-").isdigit():
        index = int(args.group_by)
        if not any(-len(Path(p).parts) <= index < len(Path(p).parts) for p in cases.values()):
            raise UsageError(None, f"--group-by {args.group_by}: no case path has a component at that index "
                                   f"({GROUP_BY_HINT})")
    elif group_by is not None and all(group_by(str(p)) == NO_TAG for p in summary["path"]):
        raise UsageError(None, f"--group-by {args.group_by}: no case folder holds a file {args.group_by[4:]!r} "
                               "(tag:FILE reads the first line of FILE beside each capture)")
    ok = summary[summary["status"] == "ok"]
    keys = group_keys(ok, group_by) if group_by is not None else []
    if len(keys) > 1 and len(set(keys)) == len(keys) and len(set(group_keys(ok))) < len(keys):
        # the grouping alone leaves no series where the signature would have some: never "0 group(s)" in silence
        path, cid = str(ok["path"].iloc[0]), ok["case_id"].iloc[0]
        how = (f"the component at {args.group_by} of {cases.get(path, path)}: {GROUP_BY_HINT}"
               if args.group_by.lstrip("-").isdigit() else f"its {args.group_by[4:]}: every case's differs")
        raise UsageError(None, f"--group-by {args.group_by} leaves every case alone in its group, so there is no series: "
                               f"for {names.get(cid, path)} it picked {group_by(path)!r} ({how})")

    loaded: dict[str, dict | None] = {}

    def saved(row) -> dict | None:
        """A case's analysis.json, read and checked once however many changes it borders."""
        from tracetriage.analyzers.compare import check_saved

        key = str(row["report_json"])
        if key not in loaded:
            try:
                data = json.loads((outdir / key).read_text(encoding="utf-8"))
            except (OSError, TypeError, ValueError):
                data = None
            loaded[key] = data if isinstance(data, dict) and not check_saved(data) else None
        return loaded[key]

    def compare_pair(before_row, after_row):
        b, a = saved(before_row), saved(after_row)
        if b is None or a is None:
            return None  # a damaged case file: the change is still reported, without its causes
        return compare(b, a, str(before_row["path"]), str(after_row["path"]), threshold_pct=args.threshold)

    result = trend(summary, findings, kernels, order_by=args.order_by, group_by=group_by, threshold_pct=args.threshold,
                   baseline=args.baseline, compare_pair=compare_pair)
    result["batch_dir"] = str(outdir)
    if args.baseline is not None and not any(matches_baseline(c["name"], args.baseline)
                                             for g in result["groups"] for c in g["cases"]):
        raise UsageError(None, f"--baseline {args.baseline}: that case is in no series (failed, or alone in its group), "
                               "so the gate would judge nothing: name a capture of a series")
    links = None
    if args.output:
        import os

        links = os.path.relpath(outdir, Path(args.output).resolve().parent if Path(args.output).parent else ".")
    summary_line = "; ".join(g["verdict"] for g in result["groups"]) or "no group of comparable captures"
    if args.gate:  # the note on stderr says the gate's result too, not only the report in the file
        from tracetriage.reports.trend import gate_line

        summary_line += f"; {gate_line(result, True)}"
    if fmt == "parquet":
        from tracetriage.errors import OutputError
        from tracetriage.reports.trend import series_frame

        try:
            Path(args.output).parent.mkdir(parents=True, exist_ok=True)
            series_frame(result).to_parquet(args.output, engine="pyarrow", index=False)
        except OSError as exc:
            raise OutputError(args.output, f"cannot write the table: {exc.strerror or exc}") from None
        print(f"tracetriage: wrote {args.output}: {one_line(summary_line)}", file=sys.stderr)
    else:
        _emit(args, render_trend(result, fmt, links, gate=args.gate), summary_line)
    return EXIT_REGRESSED if args.gate and result["gate"]["regressed"] else EXIT_OK


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
    if argv and not argv[0].startswith("-") and argv[0] not in ("analyze", "batch", "compare", "trend"):
        import os

        if os.path.exists(argv[0]):
            print(f"tracetriage: error: no command given: did you mean tracetriage analyze {one_line(argv[0])}"
                  f"{' ...' if len(argv) > 1 else ''}? (commands: analyze, batch, compare, trend)", file=sys.stderr)
            return EXIT_USAGE
    args = parser.parse_args(_joined_window(argv))
    if not args.command:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        check_symptom(getattr(args, "symptom", None))
        return {"analyze": cmd_analyze, "batch": cmd_batch, "compare": cmd_compare, "trend": cmd_trend}[args.command](args)
    except TraceTriageError as exc:
        print(f"tracetriage: error: {one_line(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
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
