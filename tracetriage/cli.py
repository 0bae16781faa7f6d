"""Command line: a thin layer over the library (tracetriage/api.py). Each ``cmd_*`` parses its
options, calls the API, writes the output and returns the exit code; errors become one line and
an exit code here. The parser is tracetriage/cli_parser.py, where the output goes
tracetriage/cli_output.py, analyze's Perfetto export tracetriage/cli_perfetto.py."""

from __future__ import annotations

import sys
from pathlib import Path

from tracetriage.cli_output import (
    batch_note,
    check_output,
    emit,
    fail_on_matches,
    fail_on_note,
    format_for,
    progress_bar,
    report_links,
    trend_format,
    write_table,
)
from tracetriage.cli_parser import build_parser, joined_window
from tracetriage.cli_perfetto import parse_perfetto_window, perfetto_export, perfetto_request
from tracetriage.errors import (
    EXIT_FAIL_ON,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    MemoryNeededError,
    TraceTriageError,
    one_line,
)
from tracetriage.options import check_symptom


def _runtime(args):
    """The Runtime of one command: --cache-dir / --no-cache, --nsys, and batch's --jobs / --dask."""
    from tracetriage.runtime import Runtime

    return Runtime.create(args.cache_dir, use_cache=not args.no_cache, nsys=args.nsys,
                          jobs=getattr(args, "jobs", None), dask_address=getattr(args, "dask", None))


def _options(args):
    """--symptom, --step-range and --slo, checked in that order."""
    from tracetriage.runtime import Options

    return Options.checked(getattr(args, "symptom", None), args.slo, args.step_range)


def _distinct_paths(paths: list[str]) -> list[str]:
    """The paths in the order given, each file or folder once: one given twice (``x x``,
    ``./x x``, a link and its target), or a file given beside the folder that holds it (the
    folder reads it), is read once, never taken for a second run of itself."""
    keys = []
    for path in paths:
        try:
            keys.append(str(Path(path).resolve()))
        except (OSError, RuntimeError):  # a link loop: left for open_case to refuse
            keys.append(path)
    folders = {key for key, path in zip(keys, paths) if Path(path).is_dir()}
    seen, out = set(), []
    for path, key in zip(paths, keys):
        if key not in seen and not (str(Path(key).parent) in folders and key not in folders):
            seen.add(key)
            out.append(path)
    return out


def cmd_analyze(args) -> int:
    from dataclasses import replace

    from tracetriage.api import analyze_paths
    from tracetriage.reports import render

    options = _options(args)
    check_output(args)
    export_to, window = perfetto_request(args)
    fmt = "perfetto" if export_to and export_to == args.output else format_for(args)
    paths = _distinct_paths(args.paths)
    progress = progress_bar(paths, fmt)
    runtime = replace(_runtime(args), progress=progress)
    try:
        case, analysis = analyze_paths(paths, options, runtime, case_needed=bool(export_to))
    except MemoryNeededError as exc:  # too large for the whole-table model: streamed, where that is exact
        if export_to or args.fail_on:
            raise
        from tracetriage.cli_streamed import streamed_report

        try:
            if progress:
                progress("analyzing it streamed: too large for the whole-table model")
            text, summary = streamed_report(exc, paths, options.step_range, fmt)
        finally:
            if progress:
                progress.close()
        emit(args, text, summary)
        return EXIT_OK
    except BaseException:
        if progress:
            progress.close()
        raise
    try:
        if export_to:
            if progress:
                progress("writing the Perfetto trace")
            perfetto_export(case, analysis, export_to, window)
        if fmt != "perfetto":
            if progress:
                progress("writing the report")
            text = render(analysis, fmt, runtime.cache)
    finally:
        if progress:
            progress.close()
    if fmt != "perfetto":
        emit(args, text, analysis.headline)
    _unmatched_step_range_note(analysis, options.step_range)
    matched = fail_on_matches(analysis.findings, args.fail_on)
    if matched:
        fail_on_note(args.fail_on, matched)
        return EXIT_FAIL_ON
    return EXIT_OK


def _unmatched_step_range_note(analysis, step_range: str | None) -> None:
    """A note on stderr, beside the report, where --step-range named no range of a process: the window and
    the verdict then change without steps (the report says so only under NOT MEASURED)."""
    from tracetriage.analyzers.findings import unmatched_step_range

    scopes = [scope for scope, _ in unmatched_step_range(analysis.data.get("abstentions"))]
    if step_range and scopes:
        print(f"tracetriage: note: --step-range {step_range!r} matched no annotation range of "
              f"{', '.join(scopes[:4])}{' ...' if len(scopes) > 4 else ''}: the window is the GPU "
              "activity's and per-step metrics are not measured", file=sys.stderr)


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
        again = ("the same command without --force resumes from them (with --force every case runs again)" if args.force
                 else "the same command again resumes from them")
        print(f"tracetriage: interrupted: wrote {in_outdir(args.output, 'index.html')} and the tables of the cases that ended; "
              f"{again}", file=sys.stderr)
        return EXIT_INTERRUPTED
    batch_note(result, args.output)
    if (result.failed or result.not_run) and not args.exit_zero:
        return EXIT_BATCH_FAILED
    failing = [(record["path"], fail_on_matches(record.get("findings") or [], args.fail_on)) for record in result.records]
    failing = [(case, matched) for case, matched in failing if matched]
    for case, matched in failing:
        fail_on_note(args.fail_on, matched, case)
    return EXIT_FAIL_ON if failing else EXIT_OK


def cmd_compare(args) -> int:
    from dataclasses import replace

    from tracetriage import compare

    options = _options(args)
    check_output(args)
    fmt = format_for(args)
    progress = progress_bar([args.before, args.after], fmt)  # two captures to analyze can take minutes
    runtime = replace(_runtime(args), progress=progress)
    try:
        result = compare(args.before, args.after, options, threshold_pct=args.gate_threshold, runtime=runtime,
                         across_devices=args.across_devices)
        if progress:
            progress("writing the report")
        text = result.render(fmt, runtime.cache)
    finally:
        if progress:
            progress.close()
    def say():
        emit(args, text, result.summary + (f"; {result.gate_line}" if args.gate else ""))
        if args.gate and not args.output:  # the gate's result in CI logs, as trend --gate's (with -o: in the note)
            print(f"tracetriage: {result.gate_line}", file=sys.stderr)

    return _answer(result.gate_exit() if args.gate or args.across_devices else EXIT_OK, say)


def _answer(code: int, say) -> int:
    """``say()`` (the report) and then ``code``: a reader that goes away before the end (``| head -1``)
    does not turn a gate's 8 or 9 into 0 (new-user trial 49 item 4: `compare --gate ... | head -1`
    exited 8 or 0 by the pipe's timing)."""
    try:
        say()
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more reaches the reader
    return code


def cmd_mcp(args) -> int:
    import importlib.util

    from tracetriage.errors import UsageError

    if importlib.util.find_spec("mcp") is None:
        raise UsageError(None, "tracetriage mcp needs the MCP SDK: pip install 'tracetriage[mcp]'")
    from tracetriage.mcp_server import serve

    serve(args.root, args.timeout, _runtime(args).settings())
    return EXIT_OK


def cmd_trend(args) -> int:
    from tracetriage import trend
    from tracetriage.runtime import check_step_range

    check_step_range(args.step_range)
    fmt = trend_format(args)
    runtime = _runtime(args)
    result = trend(args.inputs, order_by=args.order_by, group_by=args.group_by, threshold_pct=args.threshold,
                   baseline=args.baseline, gate=args.gate, batch_dir=args.batch_dir, force=args.force,
                   step_range=args.step_range, runtime=runtime)
    if not any(Path(item).resolve() == Path(result.batch_dir).resolve() for item in args.inputs):
        # captures were given: say where batch wrote its tables and case reports (trial item 23)
        print(f"tracetriage: batch analyzed the captures into {result.batch_dir} (index.html lists each case)",
              file=sys.stderr)
    if fmt == "parquet":
        write_table(args.output, result)
    else:
        links = report_links(result.batch_dir, args.output)

        def say():
            emit(args, result.render(fmt, links, runtime.cache), result.summary)
            if args.gate and not args.output:  # the report alone on stdout (-f json | jq); the gate as compare's
                print(f"tracetriage: {result.gate_line}", file=sys.stderr)

        return _answer(result.gate_exit() if args.gate else EXIT_OK, say)
    return result.gate_exit() if args.gate else EXIT_OK


EXIT_INTERRUPTED = 130  # Ctrl-C or SIGTERM, as a shell reports a process ended by SIGINT


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C: temporary directories are removed
    raise KeyboardInterrupt


def main(argv=None) -> int:
    import signal
    import warnings

    from tracetriage.memory import one_blas_thread, tune_allocator

    one_blas_thread()
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
    args = parser.parse_args(joined_window(argv))
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
    except MemoryError:  # an allocation the machine could not give: the input's size, not a bug
        from tracetriage.errors import EXIT_MEMORY

        named = [str(p) for key in ("paths", "before", "after", "inputs") for p in _listed(getattr(args, key, None))]
        print(one_line(f"tracetriage: error: {', '.join(named) or 'the input'}: out of memory while analyzing it: analyze "
                       "it on a machine with more memory free, or capture a shorter window"), file=sys.stderr)
        return EXIT_MEMORY
    except Exception as exc:  # noqa: BLE001 - last resort: still one line, distinct code
        print(f"tracetriage: internal error: {type(exc).__name__}: {one_line(str(exc))} (please report this)", file=sys.stderr)
        return EXIT_INTERNAL


def _listed(value) -> list:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def run() -> None:
    """The ``tracetriage`` command: :func:`main`, then a quick exit.

    Shutting the interpreter down with pandas, pyarrow and numpy loaded takes ~60 ms, a sixth
    of a small capture's whole analysis; by the time ``main`` returns every report is written
    and closed and every temporary folder removed, so only the standard streams need flushing.
    ``batch`` exits the normal way: its worker pools and Dask clients have exit hooks.
    """
    import os

    from tracetriage.memory import defer_collection
    from tracetriage.reports.figures import lean_import

    lean_import()  # the process is this command's: matplotlib, if a report draws, without set()'s docs
    if sys.argv[1:2] in (["analyze"], ["compare"], ["trend"]):  # short commands: batch and mcp keep the collector
        defer_collection()  # on while they import; the command turns it back on where it reads its data
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
