"""The Python API: ``analyze``, ``compare``, ``trend`` and ``batch``, and the results a notebook works with.

    import tracetriage
    a = tracetriage.analyze(["bundle/"], symptom="tail")
    a.headline              # the verdict, one line
    a.findings              # list of finding dicts (the JSON contract)
    a.findings_frame()      # pandas: one row per finding
    a.devices_frame()       # pandas: one row per device (busy %, idle by cause, collectives)
    a.to_json()             # the JSON contract as text
    a.to_html("report.html")
    a                       # in Jupyter: the verdict card (_repr_html_)

    c = tracetriage.compare("before/", "after/")          # a Comparison: c.verdict, c.summary, c.gate_exit()
    r = tracetriage.batch(["runs/"], "out/")              # a BatchResult: r.records, r.failed
    t = tracetriage.trend("out/")                         # a Trend: t.groups, t.changes, t.series_frame()

Each call takes the analysis options as keywords (``symptom``, ``slo``, ``step_range``, checked
as the CLI checks them) or as one :class:`~tracetriage.runtime.Options`, and a
:class:`~tracetriage.runtime.Runtime` (``runtime=``: the cache, nsys, the batch executor; by
default no cache, nsys from $NSYS or PATH, one worker process per core). Errors are the CLI's:
a :class:`~tracetriage.errors.TraceTriageError` whose text is the CLI's one-line message.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from tracetriage.analyzers.result import Analysis as _Analysis
from tracetriage.runtime import Options, Runtime, check_step_range


class Analysis(_Analysis):
    """One case's analysis: the JSON contract in ``data``, with views for programs and notebooks."""

    def __repr__(self) -> str:
        n = len(self.findings)
        return f"<tracetriage Analysis: {n} finding{'s' if n != 1 else ''}; {self.headline[:120]}>"

    def to_json(self) -> str:
        from tracetriage.reports import render

        return render(self, "json")

    def to_markdown(self) -> str:
        from tracetriage.reports import render

        return render(self, "md")

    def to_html(self, path: str | Path | None = None, store=None) -> str | Path:
        """The self-contained HTML report as text; with ``path``, written there and the path
        returned (a notebook cell then shows the path, not 400 KB of HTML). ``store``: the
        analysis cache (a Runtime's ``cache``) its charts are kept in and drawn from."""
        from tracetriage.reports import render

        text = render(self, "html", store)
        if path is None:
            return text
        Path(path).write_text(text, encoding="utf-8")
        return Path(path)

    def findings_frame(self):
        import pandas as pd

        return pd.DataFrame([{"id": f["id"], "axis": f["axis"], "severity": f["severity"], "impact_pct": f["impact_pct"],
                              "impact_denominator": f["impact_denominator"], "title": f["title"]} for f in self.findings],
                            columns=["id", "axis", "severity", "impact_pct", "impact_denominator", "title"])

    def devices_frame(self):
        import pandas as pd

        rows = []
        for d in self.data.get("devices") or []:
            row = {"id": d["id"], "name": d["name"], "pid": d["pid"], "busy_pct": d["busy_pct"], "window_ns": d["window_ns"],
                   "collective_share_pct": d["collective_share_pct"], "gaps": d["gaps"]["count"]}
            row.update({f"idle_{c}_pct": round(100.0 * v / d["window_ns"], 3) if d["window_ns"] else None
                        for c, v in d["gaps"]["by_cause"].items()})
            row.update({f"claim_{k}_pct": v for k, v in (d.get("accounting") or {}).get("claims_pct", {}).items()})
            rows.append(row)
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        """The verdict card: headline, then each finding's title, axis, severity and impact (escaped)."""
        from tracetriage.reports.html import render_card

        return render_card(self)


def _options(options: Options | None, values: dict) -> Options:
    """The options given as one :class:`Options`, else checked from keywords (symptom, slo, step_range)."""
    if options is not None and values:
        raise TypeError(f"give options= or the keywords {', '.join(values)}, not both")
    return options if options is not None else Options.checked(**values)


def check_arguments(booleans: dict | None = None, numbers: dict | None = None) -> None:
    """The library's keyword values checked as the CLI's parser checks its flags: a flag is True or
    False (never "yes" or 1), a number is a number; a wrong one is the usage error naming it."""
    from tracetriage.errors import UsageError

    for name, value in (booleans or {}).items():
        if not isinstance(value, bool):
            raise UsageError(None, f"{name} must be True or False (got {value!r})")
    for name, value in (numbers or {}).items():
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise UsageError(None, f"{name} must be a number (got {value!r})")


def _runtime(runtime: Runtime | None) -> Runtime:
    return runtime if runtime is not None else Runtime.create(use_cache=False)


def analyze(case_or_paths, options: Options | None = None, runtime: Runtime | None = None, **values) -> Analysis:
    """Analyze a case (from ``open_case``) or paths (files, bundle directories, archives).

    Options: ``symptom`` (an axis name), ``slo`` (budgets in ms, ``{"tpot_p95_ms": 50}`` or the
    CLI's ``"tpot_p95_ms=50"``), ``step_range`` (a regex naming the step ranges), or all three
    as ``options=Options(...)``. They are checked as the CLI checks them: an unknown name is a
    :class:`tracetriage.errors.UsageError` (a ``ValueError``) with the CLI's message. Each trace's
    model and metrics come from ``runtime``'s cache when it holds them."""
    from tracetriage.analyzers.analysis import analyze as _analyze
    from tracetriage.case import Case, open_case

    options = _options(options, values)
    runtime = _runtime(runtime)
    case = case_or_paths if isinstance(case_or_paths, Case) else open_case(
        [case_or_paths] if isinstance(case_or_paths, (str, Path)) else list(case_or_paths), runtime=runtime)
    analysis = _analyze(case, step_range=options.step_range, symptom=options.symptom, slo=dict(options.slo),
                        metrics=runtime.trace_metrics)
    return Analysis(data=analysis.data, series=analysis.series)


def analyze_paths(paths: list[str], options: Options | None = None, runtime: Runtime | None = None,
                  case_needed: bool = False):
    """``paths`` opened as one case and analyzed, as ``tracetriage analyze`` and the MCP analyze
    tool take them: several traces are one case only when they are one run (tracetriage/runs.py,
    the rule batch groups files by), and the library's warnings are recorded in the contract's
    ``warnings`` (each one line), never printed. Returns the case (the Perfetto export reads its
    timeline; None when the analysis came from the cache, which holds a case of plain files analyzed
    before with these options by this code, unless ``case_needed``) and its :class:`Analysis`."""
    import warnings

    from tracetriage.case import open_case
    from tracetriage.errors import one_line
    from tracetriage.runs import check_one_run

    runtime = _runtime(runtime)
    key = runtime.analysis_key(paths, _options(options, {}))
    kept = runtime.cache.get_analysis(key) if key and not case_needed else None
    if kept is not None:  # analyzed before: the case is not opened (no model, no pandas)
        return None, Analysis(data=kept[0], series=kept[1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        case = open_case(paths, runtime=runtime)
        if len(case.traces) > 1:  # several files, or a folder of them
            check_one_run(case)
        analysis = analyze(case, options, runtime)
    seen = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    if seen:
        analysis.data.setdefault("warnings", []).extend(one_line(message) for message in seen)
    if key:
        runtime.cache.put_analysis(key, analysis.data, analysis.series)
    return case, analysis


@dataclass(frozen=True)
class Comparison:
    """What changed between two captures: ``data`` is the compare contract (schema
    ``tracetriage.compare/2``: comparability, step time per rank with its noise, each finding of
    before checked on after, the verdict); keys starting with ``_`` hold the step samples the
    HTML chart draws and are not part of the contract."""

    data: dict

    @property
    def verdict(self) -> str:
        """improved, regressed, unchanged, within noise (nothing moved and a budget could not be told),
        mixed or inconclusive; across_devices with ``across_devices``."""
        return self.data["verdict"]

    @property
    def summary(self) -> str:
        """The verdict in one line."""
        return self.data["summary"]

    def gate_exit(self) -> int:
        """``compare --gate``'s exit code: 0 improved/unchanged/mixed within budgets (or compared across
        devices), 8 regressed, 9 inconclusive."""
        from tracetriage.analyzers.compare_gate import gate_exit

        return gate_exit(self.data)

    @property
    def gate_line(self) -> str:
        """``compare --gate``'s result in one line (passed, failed and why, or inconclusive), as trend's."""
        from tracetriage.analyzers.compare_gate import gate_text

        return gate_text(self.data)

    def render(self, fmt: str = "text", store=None) -> str:
        """The comparison as text, json, md or html (``store``: the analysis cache for compiled templates)."""
        from tracetriage.reports.compare import render_compare

        return render_compare(self.data, fmt, store)

    def to_json(self) -> str:
        return self.render("json")

    def _repr_html_(self) -> str:
        return self.render("html")


@dataclass(frozen=True)
class Trend:
    """An archive over time: ``data`` is the trend contract (schema ``tracetriage.trend/1``: the
    groups of comparable captures with their series, the changes with their last good and first
    bad capture, the gate); ``gate`` says whether the latest capture of each group was judged."""

    data: dict
    gate: bool = False

    @property
    def groups(self) -> list[dict]:
        return self.data["groups"]

    @property
    def changes(self) -> list[dict]:
        return self.data["changes"]

    @property
    def batch_dir(self) -> str:
        """The batch output folder whose tables the trend read."""
        return self.data["batch_dir"]

    @property
    def regressed(self) -> bool:
        """The gate's result: the latest capture of some group is in a regressed segment (or worse than the baseline)."""
        return bool(self.data["gate"]["regressed"])

    def gate_exit(self) -> int:
        """What trend --gate exits with: 8 regressed, 9 inconclusive (no group had a series to judge: none, or
        each too short without a baseline; or a case failed, which may be the latest capture: a failed case has no
        place in the series), else 0."""
        from tracetriage.records.trend import read

        return read(self.data).gate_exit()

    @property
    def summary(self) -> str:
        """Each group's verdict, and with ``gate`` the gate's result, in one line."""
        line = "; ".join(group["verdict"] for group in self.groups) or "no group of comparable captures"
        if self.gate:
            line += f"; {self.gate_line}"  # the views only when a gate asks
        return line

    def series_frame(self):
        """pandas: one row per group, case and series (the table ``trend --format parquet`` writes)."""
        from tracetriage.reports.trend import series_frame

        return series_frame(self.data)

    @property
    def gate_line(self) -> str:
        """The gate's result in one line (``gate: failed (exit 8): ...``, passed or inconclusive), as ``trend --gate``
        writes it to stderr (or in the -o note): never part of the report itself, as compare's."""
        from tracetriage.reports.trend_view import gate_line

        return gate_line(self.data, True)

    def render(self, fmt: str = "text", links: str | None = None, store=None) -> str:
        """The trend as text, json, md or html; ``links``: the batch folder as the output's links
        reach it (None: no links to the case reports); ``store``: the analysis cache for compiled templates.
        The document is the same with and without ``gate`` (its result: :attr:`gate_line`)."""
        from tracetriage.reports.trend import render_trend

        return render_trend(self.data, fmt, links, store=store)

    def to_json(self) -> str:
        return self.render("json")


def load_analysis(source, options: Options, runtime: Runtime) -> dict:
    """The analysis contract of one side of a comparison: an :class:`Analysis`, a saved analysis
    JSON file (``analyze --format json``, batch's ``cases/<id>/analysis.json``: read and checked,
    never re-analyzed), or a capture (a trace, bundle folder or archive: analyzed)."""
    import json

    from tracetriage.errors import TraceFormatError

    if isinstance(source, _Analysis):
        return source.data
    path = Path(source)
    if path.is_file():  # one of ours by its content, whatever its name (an analysis.json renamed is still one)
        try:
            with path.open("rb") as fh:
                head = fh.read(1 << 16)
        except OSError:
            head = b""
        data = None
        if b'"schema": "tracetriage.' in head or b'"schema":"tracetriage.' in head:  # one of ours: read it whole
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise TraceFormatError(str(source), f"a tracetriage result that is not valid JSON (truncated?): {exc}") from None
            schema = data.get("schema") if isinstance(data, dict) else None
            if schema != "tracetriage.analysis/1":
                raise TraceFormatError(str(source), f"a {schema} result, not an analysis (tracetriage.analysis/1): compare "
                                                    "takes captures or saved analysis.json files")
        if isinstance(data, dict) and data.get("schema") == "tracetriage.analysis/1":
            from tracetriage.analyzers.compare_side import check_saved

            problem = check_saved(data)
            if problem:
                raise TraceFormatError(str(source), f"a saved analysis, but {problem}")
            return data
    return analyze(str(source), options, runtime).data


def compare(before, after, options: Options | None = None, *, threshold_pct: float = 5.0, runtime: Runtime | None = None,
            across_devices: bool = False, **values) -> Comparison:
    """What changed between two captures: ``before`` and ``after`` are each a trace, a bundle
    folder, a saved analysis.json, or an :class:`Analysis`. ``threshold_pct`` is the smallest
    step-time change, in % of the before step, that counts (``--gate-threshold``); ``across_devices``:
    the same program on two GPUs, each op class held against its own device's peaks
    (``--across-devices``, analyzers/compare_devices.py); the options
    (``symptom``, ``slo``, ``step_range``) apply to the captures analyzed here, and ``slo``'s
    budgets are checked on both sides."""
    from tracetriage.analyzers.compare import compare as _compare

    options = _options(options, values)
    check_arguments({"across_devices": across_devices}, {"threshold_pct": threshold_pct})
    if not 0 < threshold_pct < 100:  # before minutes of parsing, not after
        from tracetriage.errors import UsageError

        raise UsageError(None, f"--gate-threshold {threshold_pct:g}: give a percentage above 0 and below 100")
    runtime = _runtime(runtime)
    from tracetriage.memory import collect_again

    collect_again()  # compare's modules are imported: the sides are read with the collector on
    before_data = load_analysis(before, options, runtime)
    after_data = load_analysis(after, options, runtime)
    labels = ["before" if isinstance(side, _Analysis) else str(side) for side in (before, after)]
    return Comparison(_compare(before_data, after_data, *labels, threshold_pct=threshold_pct, slo=dict(options.slo),
                               across_devices=across_devices))


def check_jobs(jobs: int | None) -> None:
    """None (one worker per core) or at least one worker."""
    if jobs is not None and jobs < 1:
        from tracetriage.errors import UsageError

        raise UsageError(None, "--jobs must be at least 1")


def batch(inputs, outdir, options: Options | None = None, *, runtime: Runtime | None = None, on_error: str = "skip",
          force: bool = False, progress: bool = True, case_timeout: float | None = 600.0,
          perfetto_window: tuple[str, int] | None = None, case_memory: float | None = None, reports: str = "all",
          **values):
    """Every case under ``inputs`` (directories, glob patterns, trace files, archives) analyzed
    into ``outdir``: ``cases/<id>/report.html`` and ``analysis.json``, ``index.html``,
    ``summary.parquet``, ``findings.parquet``, ``kernels.parquet``. Cases run on ``runtime``'s
    executor (``Runtime(jobs=4)``, ``Runtime(dask_address=...)``); a failed case is a record with
    its error (``on_error="fail"``: the rest are not run); a case whose files and tool version are
    unchanged since the last run into ``outdir`` is reused unless ``force``; ``perfetto_window``
    (``("steady", 0)``, ``("all", 0)``, ``("worst-steps", n)``) also exports each case's timeline.
    ``case_timeout`` (s) and ``case_memory`` (MB of growth of the case's worker) limit each case, on
    Dask too; a case over a limit, or whose worker died, is a failed record and the rest go on.
    ``reports``: ``"all"``, ``"failed"`` (cases with a finding other than healthy) or ``"none"``:
    which cases get a report.html. Each case's rows are also written as it ends, as Parquet parts
    (``summary/``, ``findings/``, ``kernels/``); Ctrl-C writes the tables of the cases that ended and
    raises :class:`~tracetriage.batches.BatchInterrupted` (a KeyboardInterrupt); a re-run resumes.
    ``inputs`` and ``outdir`` may be URIs that fsspec opens (``s3://bucket/prefix``): read and
    written on the store (:mod:`tracetriage.batch_store`). ``progress``: True, a bar on stderr; False,
    none; or a callable told ``(cases done, cases in all)`` once the cases are found and as each ends
    (the MCP server's progress notifications).
    Returns the :class:`~tracetriage.batches.BatchResult`."""
    from tracetriage.batches import run_batch

    if options is None:
        check_step_range(values.get("step_range"))
    check_arguments({"force": force, **({} if callable(progress) else {"progress": progress})})  # limits: check_limits
    runtime = _runtime(runtime)
    check_jobs(runtime.jobs)
    options = _options(options, values)
    return run_batch(list(_as_list(inputs)), str(outdir), options, runtime, on_error=on_error, force=force,
                     progress=progress, case_timeout=case_timeout, perfetto_window=perfetto_window,
                     case_memory=case_memory, reports=reports)


def _as_list(inputs) -> list[str]:
    return [str(inputs)] if isinstance(inputs, (str, Path)) else [str(item) for item in inputs]


def _batch_folder(inputs: list[str], batch_dir, step_range: str | None, force: bool, runtime: Runtime) -> Path | str:
    """The batch output folder trend reads: ``inputs`` itself when it is one (it holds summary.parquet),
    else the folder batch analyzes the captures into first (``batch_dir``; default: a folder per set of
    inputs under the analysis cache, never beside the captures). A folder on object storage is its
    URI (:mod:`tracetriage.batch_store`)."""
    import hashlib

    from tracetriage.batch_store import is_batch_folder, is_uri
    from tracetriage.errors import UnsupportedInputError, UsageError

    tables = [item for item in inputs if (is_batch_folder(item) if is_uri(item) else
                                          Path(item).is_dir() and (Path(item) / "summary.parquet").is_file())]
    if tables and len(inputs) > 1:
        raise UsageError(None, f"give one batch output folder ({', '.join(tables)} hold batch tables), or captures to analyze")
    for item in inputs:
        if not is_uri(item) and not any(ch in item for ch in "*?[") and not Path(item).exists():
            raise UnsupportedInputError(item, "no such file or directory")  # as analyze names a missing input
    if tables:
        return inputs[0] if is_uri(inputs[0]) else Path(inputs[0])
    from tracetriage.case import check_named_file

    for item in inputs:  # a file named that analyze refuses: refused the same way (exit 3), never skipped unsaid
        if not is_uri(item) and Path(item).exists():
            check_named_file(Path(item))
    if batch_dir:
        outdir = str(batch_dir) if is_uri(str(batch_dir)) else Path(batch_dir)
    else:
        from tracetriage.cache import default_dir

        key = hashlib.sha256("\0".join(item if is_uri(item) else str(Path(item).resolve()) for item in inputs).encode())
        key = key.hexdigest()[:16]
        outdir = (runtime.cache.dir if runtime.cache is not None else default_dir()) / "trend-batch" / key
    # trend's batch keeps no models or metrics in the cache: its tables are what trend reads
    from tracetriage.batches import run_batch  # only when captures are analyzed first (a batch folder needs none)
    from tracetriage.memory import collect_again

    collect_again()  # a batch runs with the collector on (and its forked workers)
    run_batch(inputs, str(outdir), Options(step_range=step_range), replace(runtime, cache=None), force=force, progress=False)
    return outdir


def _in_batch(outdir: Path | str, name: str) -> Path | str:
    """A file of a batch output folder, local or (a URI) on object storage."""
    from tracetriage.batch_store import is_uri, join

    return join(outdir, name) if isinstance(outdir, str) and is_uri(outdir) else Path(outdir) / name


def _read_batch_file(outdir: Path | str, name: str) -> bytes:
    """A file of a batch output folder (OSError, or a TraceTriageError from the store, when it cannot be read)."""
    from tracetriage.batch_store import read_bytes

    where = _in_batch(outdir, name)
    return read_bytes(where) if isinstance(where, str) else where.read_bytes()


def _read_tables(outdir: Path | str):
    """batch's summary, findings and kernels tables (kernels None when absent), typed for trend."""
    from tracetriage.analyzers.trend import coerce_tables
    from tracetriage.analyzers.trend_table import read_table  # pyarrow into numpy: no pandas (~0.3 s of import)
    from tracetriage.errors import TraceFormatError, UsageError

    def table(name: str, required: bool = True):
        where = _in_batch(outdir, name)
        if isinstance(where, Path):
            return read_table(where) if required or where.is_file() else None
        try:
            return read_table(_read_batch_file(outdir, name))
        except TraceFormatError:  # not in the store (other store errors, e.g. unreachable, are said as they are)
            if required:
                raise
            return None

    try:
        summary = table("summary.parquet")
        findings = table("findings.parquet")
        kernels = table("kernels.parquet", required=False)
    except UsageError:  # a store that cannot be reached, or refuses the credentials (exit 2)
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged table is the input's problem, said in one line
        raise TraceFormatError(str(outdir), f"cannot read the batch tables: {exc}") from None
    missing = [column for column in ("capture_start_ns", "device_model", "step_p50_ms") if column not in summary]
    if missing:
        raise TraceFormatError(str(outdir), f"the batch tables lack {', '.join(missing)} (written by an older tracetriage): "
                                            "re-run tracetriage batch with --force into this folder")
    return coerce_tables(summary, findings, kernels)


def _check_analyzed(summary, inputs: list[str], outdir: Path | str) -> None:
    """Some case analyzed, else the input's problem (exit 3) or nothing to follow (exit 4)."""
    from tracetriage.errors import MissingDataError, TraceFormatError

    if (summary["status"] == "ok").any():
        return
    failed = summary.take(summary["status"] != "ok")
    if len(failed):  # every case unreadable: the input's problem, as analyze and compare say it (exit 3)
        raise TraceFormatError(str(inputs[0]), f"no case could be analyzed: {len(failed)} failed, the first: "
                                               f"{failed['error'][0]} (all: {_in_batch(outdir, 'index.html')})")
    if all(Path(item).is_file() for item in inputs):  # named files none of which is a capture: unreadable input
        raise TraceFormatError(str(inputs[0]), "not a capture tracetriage reads (nor a batch output folder)")
    raise MissingDataError(str(inputs[0]), "nothing to follow over time: no capture found")


def _pair_comparer(outdir: Path | str, threshold_pct: float):
    """compare_pair for trend: the comparison of two cases from their saved analysis.json, each
    read and checked once however many changes it borders; None when either file is damaged."""
    import json

    from tracetriage.analyzers.compare import compare as _compare
    from tracetriage.analyzers.compare_side import check_saved
    from tracetriage.errors import TraceTriageError

    loaded: dict[str, dict | None] = {}

    def saved(row) -> dict | None:
        key = str(row["report_json"])
        if key not in loaded:
            try:
                data = json.loads(_read_batch_file(outdir, key).decode("utf-8"))
            except (OSError, TypeError, ValueError, TraceTriageError):
                data = None
            loaded[key] = data if isinstance(data, dict) and not check_saved(data) else None
        return loaded[key]

    def compare_pair(before_row, after_row):
        before, after = saved(before_row), saved(after_row)
        if before is None or after is None:
            return None  # a damaged case file: the change is still reported, without its causes
        return _compare(before, after, str(before_row["path"]), str(after_row["path"]), threshold_pct=threshold_pct)

    return compare_pair


def trend(tables_or_inputs, *, order_by: str = "time", group_by: str | None = None, threshold_pct: float = 5.0,
          baseline: str | None = None, gate: bool = False, batch_dir=None, force: bool = False,
          step_range: str | None = None, runtime: Runtime | None = None) -> Trend:
    """An archive over time. ``tables_or_inputs``: a batch output folder (with summary.parquet),
    or captures, folders and archives that :func:`batch` analyzes first (into ``batch_dir``,
    default a folder under the analysis cache; ``force``, ``step_range`` and ``runtime``'s
    executor apply to it). ``order_by``: time (the capture's start) or name; ``group_by``: an
    extra group key, a path component index (-2: the folder holding the case) or ``tag:FILE``;
    ``threshold_pct``: the practical minimum of a change, in % of the step; ``gate``: judge the
    latest capture of each group, against the capture named ``baseline`` when given."""
    from tracetriage.analyzers.trend import case_names, case_paths, check_grouping, group_by_key
    from tracetriage.analyzers.trend import trend as _trend
    from tracetriage.casenames import matches_baseline
    from tracetriage.errors import UsageError

    check_step_range(step_range)
    check_arguments({"gate": gate, "force": force}, {"threshold_pct": threshold_pct})
    if order_by not in ("time", "name"):
        raise UsageError(None, f"order_by must be time or name (got {order_by!r})")
    if isinstance(group_by, int) and not isinstance(group_by, bool):
        group_by = str(group_by)  # a path component index, as --group-by -2 gives it
    if not 0 < threshold_pct < 100:
        raise UsageError(None, f"--threshold {threshold_pct:g}: give a percentage above 0 and below 100")
    if baseline is not None and not gate:
        raise UsageError(None, f"--baseline {baseline} is the reference of --gate: add --gate (without it trend "
                               "reports the changes each series shows, against no one capture)")
    group_by_key(group_by)  # a bad key is refused before batch runs
    inputs = _as_list(tables_or_inputs)
    outdir = _batch_folder(inputs, batch_dir, step_range, force, _runtime(runtime))
    summary, findings, kernels = _read_tables(outdir)
    _check_analyzed(summary, inputs, outdir)
    names = case_names(summary)
    if baseline is not None and not any(matches_baseline(name, baseline) for name in names.values()):
        raise UsageError(None, f"--baseline {baseline!r}: no case of that name (e.g. {next(iter(names.values()))!r})")
    cases = case_paths(summary)
    grouping = group_by_key(group_by, cases)
    if grouping is not None:
        check_grouping(group_by, grouping, summary, names, cases)
    compare_pair = _pair_comparer(outdir, threshold_pct)
    from tracetriage.memory import collect_again

    collect_again()  # the tables are read, compare is imported: the series and the changes' compares with the collector on
    result = _trend(summary, findings, kernels, order_by=order_by, group_by=grouping, threshold_pct=threshold_pct,
                    baseline=baseline, compare_pair=compare_pair)
    result["batch_dir"] = str(outdir)
    if baseline is not None and not any(matches_baseline(case["name"], baseline)
                                        for group in result["groups"] for case in group["cases"]):
        raise UsageError(None, f"--baseline {baseline}: that case is in no series (failed, or alone in its group), "
                               "so the gate would judge nothing: name a capture of a series")
    return Trend(result, gate)
