"""The command line's arguments: the parser of ``tracetriage`` and its subcommands (their help is
the documentation of every option), and the one rewrite argparse needs."""

from __future__ import annotations

import argparse
import sys

from tracetriage import __version__
from tracetriage.analyzers.catalog import AXES, SEVERITIES
from tracetriage.errors import EXIT_USAGE
from tracetriage.reports import FORMATS


def _cache_options(parser) -> None:
    parser.add_argument("--cache-dir", metavar="DIR",
                        help="where parsed models and metrics of large captures are kept (default: $TRACETRIAGE_CACHE_DIR, "
                             "else ~/.cache/tracetriage); never beside the input")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the analysis cache")
    parser.add_argument("--nsys", metavar="PATH", help="the nsys executable that exports .nsys-rep reports "
                                                       "(default: $NSYS, else nsys on PATH)")


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


# batch's exit codes (tracetriage/errors.py), as cmd_batch and the errors it lets through give them
BATCH_EXIT_CODES = (
    "exit codes: 0 every case analyzed or unchanged (with --exit-zero also when some failed); 2 usage error (a bad "
    "option, a malformed or unreachable --dask scheduler); 3 an input that does not exist or a pattern that matches "
    "no file; 4 the inputs hold no capture; 5 --fail-on matched in a case; 6 some case failed or was not run (a "
    "corrupt or unreadable capture is a failed case); 7 OUTDIR cannot be written; 70 internal error; 130 "
    "interrupted (Ctrl-C or SIGTERM: the tables of the cases that ended are written)")
ANALYZE_EXIT_CODES = (
    "exit codes: 0 analyzed (whatever the verdict); 2 usage error; 3 an input that does not exist, cannot be read, "
    "is damaged or is not a supported format; 4 the inputs hold nothing to analyze; 5 --fail-on matched; 7 the "
    "report cannot be written where -o says; 10 the input needs more memory than the machine has free; 70 internal "
    "error; 130 interrupted")
COMPARE_EXIT_CODES = (
    "exit codes: 0 compared (whatever the verdict; with --gate or --across-devices: improved, unchanged, within noise "
    "or mixed within budgets); 2 usage "
    "error; 3 an input that does not exist, cannot be read or is not a capture or saved analysis; 4 a side holds nothing "
    "to analyze; 7 the report cannot be written where -o says; 8 --gate: regressed; 9 --gate: inconclusive; 10 not "
    "enough memory free for an input; 70 internal error; 130 interrupted")
TREND_EXIT_CODES = (
    "exit codes: 0 followed (with --gate: no group's latest capture regressed); 2 usage error; 3 no case could be "
    "analyzed, or a damaged batch table; 4 nothing to follow (no capture found); 7 the report cannot be written where -o "
    "says; 8 --gate: a group's latest capture is in a regressed segment, or alone worse than the captures before it "
    "beyond their noise; 9 --gate: no group had a series to judge, a case failed, or a latest capture is worse than the "
    "captures before it beyond their spread but not their noise; 70 internal error; 130 interrupted")
MCP_EXIT_CODES = (
    "exit codes: 0 the client closed the connection; 2 usage error (the MCP SDK missing, a bad option); 70 internal "
    "error; 130 interrupted. Each tool call answers its own exit code (those of the command it runs; 124 past --timeout)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tracetriage",
        description="Post-mortem triage of a slow or unstable LLM inference server.",
        epilog="exit codes: 0 analyzed; 2 usage error; 3 unreadable or unsupported input; 4 nothing to analyze; "
               "5 --fail-on matched; 6 batch: some case failed; 7 cannot write the report; 8 regressed (compare/trend "
               "--gate); 9 inconclusive (compare/trend --gate); 10 not enough memory free for the input; 70 internal error; "
               "124 an MCP tool call past mcp --timeout; "
               "130 interrupted (Ctrl-C or SIGTERM)",
    )
    parser.add_argument("--version", action="version", version=f"tracetriage {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    analyze = sub.add_parser("analyze", help="analyze a trace, bundle directory or artifacts and print/write the verdict",
                             description="Analyze the given files and directories as one case.",
                             epilog=ANALYZE_EXIT_CODES)
    analyze.add_argument("paths", nargs="+", metavar="PATH", help="trace files, side artifacts, or a bundle directory")
    analyze.add_argument("--format", "-f", choices=FORMATS + ("perfetto",),
                         help="output format (default: text, or from -o's extension); perfetto: the capture and the verdict as "
                              "a Perfetto trace (binary: needs -o FILE.pftrace)")
    analyze.add_argument("-o", "--output", metavar="FILE", help="write the report to FILE instead of standard output")
    analyze.add_argument("--perfetto", metavar="FILE", help="also export the capture and the verdict as a Perfetto trace to FILE "
                                                            "(the report names it)")
    analyze.add_argument("--perfetto-window", metavar="MODE",
                         help="what the Perfetto export holds: steady (default: the analysis window, warm-up excluded), all, "
                              "or worst-steps N (the N slowest steps and the step before and after each; N defaults to 3)")
    analyze.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    analyze.add_argument("--fail-on", choices=SEVERITIES,
                         help=("exit with code 5 when a finding at or above this severity is present (the INFO "
                               "'healthy' verdict is no problem found and never counts)"))
    _verdict_options(analyze)
    _cache_options(analyze)

    batch = sub.add_parser("batch", help="analyze every case under directories, globs or archives; write index.html and "
                                         "summary.parquet",
                           description="One case per trace file, or per directory bundling a trace with its side artifacts.",
                           epilog=BATCH_EXIT_CODES)
    batch.add_argument("inputs", nargs="+", metavar="INPUT",
                       help="directories, glob patterns, trace files, .tar.gz/.tgz/.zip archives")
    batch.add_argument("-o", "--output", required=True, metavar="OUTDIR",
                       help="where reports, index.html and the parquet tables go")
    batch.add_argument("--jobs", "-j", type=int, default=None, help="worker processes (default: number of cores)")
    batch.add_argument("--on-error", choices=["skip", "fail"], default="skip",
                       help="skip (default): record a failed case and go on; fail: stop at the first")
    batch.add_argument("--force", action="store_true", help="re-analyze cases whose files and tool version did not change")
    batch.add_argument("--dask", metavar="ADDRESS", help="run the cases on an existing Dask distributed scheduler")
    batch.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    batch.add_argument("--fail-on", choices=SEVERITIES,
                       help=("exit with code 5 when a case has a finding at or above this severity (the INFO "
                             "'healthy' verdict never counts)"))
    batch.add_argument("--exit-zero", action="store_true", help="exit 0 even when some cases failed (they are still listed)")
    batch.add_argument("--no-progress", action="store_true", help="no progress bar")
    batch.add_argument("--case-timeout", type=float, default=600.0, metavar="SECONDS",
                       help="a case running longer is recorded as failed and the batch goes on (default 600; on Dask too)")
    batch.add_argument("--case-memory", type=float, default=None, metavar="MB",
                       help="a case whose worker grows by more than MB of resident memory is stopped and recorded as failed "
                            "(default: no ceiling; a worker that dies is a failed case either way)")
    batch.add_argument("--reports", choices=["all", "failed", "none"], default="all",
                       help="which cases get a report.html: all (default), failed (the cases that fail the check: a finding "
                            "other than healthy; a case that could not be analyzed has no report, its error is in "
                            "index.html), none (tables, analysis.json and index.html only: the cheapest)")
    batch.add_argument("--perfetto", action="store_true",
                       help="also export each case's timeline with its verdict as cases/<id>/timeline.pftrace (Perfetto)")
    batch.add_argument("--perfetto-window", metavar="MODE",
                       help="what each timeline holds: steady (default), all, or worst-steps N")
    _verdict_options(batch)
    _cache_options(batch)

    trend = sub.add_parser("trend", help="an archive over time: series per workload, regressions with their first bad capture",
                           epilog=TREND_EXIT_CODES,
                           description="Order the cases of a batch output folder (or of captures, analyzed by batch first) by "
                                       "capture time, group comparable cases, find level shifts and one-off outliers in each "
                                       "series, and name the last good and first bad capture with the findings and kernels "
                                       "that moved there (a group of captures without steps: its kernels' time per call, "
                                       "not busy %). --gate: exit 8 when the latest capture of a group is in a regressed "
                                       "segment of a budget series, or alone worse than the captures before it beyond "
                                       "their noise (a one-sided prediction test: nothing after it tells a one-off from a "
                                       "new level); 9 when no group had a series to judge, a case failed (a failed case "
                                       "has no place in the series: it may be the latest capture), or the latest capture "
                                       "is worse beyond their spread but not beyond their noise.")
    trend.add_argument("inputs", nargs="+", metavar="INPUT",
                       help="a batch output folder (with summary.parquet), or captures, "
                            "folders and archives to run batch on first; exit 3 when an "
                            "input is missing or unreadable (every case failed: no case could be analyzed), "
                            "4 when the inputs hold no capture")
    trend.add_argument("--format", "-f", choices=FORMATS + ("parquet",),
                       help="output format (default: text, or from -o's extension); parquet: the series table")
    trend.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    trend.add_argument("--batch-dir", metavar="OUTDIR",
                       help="where batch writes when INPUT is captures "
                            "(default: a folder in the analysis cache, never beside the captures)")
    trend.add_argument("--order-by", choices=["time", "name"], default="time",
                       help="time (default): the capture's start from its metadata, else the name; name: natural name order")
    trend.add_argument("--group-by", metavar="KEY", help="an extra group key: a path component counted from the case as "
                                                         "trend names it (-2: the folder holding the case, e.g. main for "
                                                         "main/nightly-01; -3: the folder above that; 0, 1, ...: from the "
                                                         "root; -1, the case itself, is no group key) or tag:FILE (the text "
                                                         "of FILE in the case's folder)")
    trend.add_argument("--threshold", type=float, default=5.0, metavar="PCT",
                       help="the practical minimum of a change, in %% of the step for ms-per-step series, else of the "
                            "series' level (counts, serving figures, the kernels' time per call of captures without "
                            "steps); default 5")
    trend.add_argument("--baseline", metavar="NAME", help="with --gate: the reference capture the latest one is judged "
                                                          "against (a case name as shown), instead of the series' own shifts")
    trend.add_argument("--gate", action="store_true", help="exit 8 when the latest capture of a group is in a regressed "
                                                            "segment or alone worse than the captures before it beyond their "
                                                            "noise; 9 (inconclusive) when the gate could not judge")
    trend.add_argument("--jobs", "-j", type=int, default=None, help="batch worker processes (default: number of cores)")
    trend.add_argument("--dask", metavar="ADDRESS", help="run batch's cases on an existing Dask distributed scheduler")
    trend.add_argument("--force", action="store_true", help="re-analyze cases whose files and tool version did not change")
    trend.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    _cache_options(trend)

    compare = sub.add_parser("compare", help="what changed between two captures (before/after a fix or release)",
                             epilog=COMPARE_EXIT_CODES,
                             description="Compare two cases (traces, bundles, or saved analysis JSON files): step time per rank "
                                         "with its noise (captures without steps: their common kernels' time per call, never "
                                         "busy %), what moved per step, each finding of BEFORE checked on AFTER (fixed, "
                                         "falsified, better, worse, persists, new), and a verdict. Exit codes with --gate: 0 "
                                         "improved/unchanged/within noise/mixed within budgets, 8 regressed, 9 inconclusive; "
                                         "with "
                                         "--across-devices 0, or 9 when the pair is refused.")
    compare.add_argument("before", metavar="BEFORE",
                         help="the capture before the change: a trace, a bundle folder, or a saved "
                              "analysis.json (analyze --format json, or batch's cases/<id>/analysis.json)")
    compare.add_argument("after", metavar="AFTER", help="the capture after the change (the same kinds)")
    compare.add_argument("--format", "-f", choices=FORMATS, help="output format (default: text, or from -o's extension)")
    compare.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of standard output")
    compare.add_argument("--step-range", metavar="REGEX", help="NVTX/roctx range name that marks one step")
    compare.add_argument("--gate", action="store_true",
                         help="exit 8 when the after capture regressed (its step p50, or its long steps' rate: Fisher "
                              "exact test), or a finding reads worse; 9 when the pair cannot be judged (inconclusive); "
                              "0 when improved, unchanged, within noise (not significant) or mixed "
                              "(a mixed result fails when the step p50 or the long steps regressed or a "
                              "--slo budget met before is broken after)")
    compare.add_argument("--gate-threshold", type=float, default=5.0, metavar="PCT",
                         help="the smallest step-time change, in %% of the before step, that counts (default 5); "
                              "a change must also be beyond the noise of the steps (captures without steps: the smallest "
                              "change of kernel time per call, beyond the noise of the calls)")
    compare.add_argument("--across-devices", action="store_true",
                         help="the same program on two GPUs: each op class and top op held against its own device's peaks "
                              "(time per step, or per call, achieved rate, %% of peak, the ratio the peaks predict); exit 0, "
                              "9 when the pair is refused (another program, no common op class)")
    _verdict_options(compare)
    _cache_options(compare)

    mcp = sub.add_parser("mcp", help="serve the library as tools of a coding assistant (Model Context Protocol, stdio)",
                         epilog=MCP_EXIT_CODES,
                         description="Start an MCP server on standard input and output with the tools analyze, compare, "
                                     "trend, batch, explain and capture_advice. It reads only under the client's MCP roots "
                                     "and the --root folders (the working directory when neither names one) and writes "
                                     "reports only there, never beside an input. Needs the mcp extra: "
                                     "pip install 'tracetriage[mcp]'.")
    mcp.add_argument("--root", action="append", default=[], metavar="DIR",
                     help="a folder the server may read and write under (repeatable)")
    mcp.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                     help="the time bound of one call: its worker process is ended after it (default 600)")
    _cache_options(mcp)
    return parser


def joined_window(argv: list[str]) -> list[str]:
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
