"""``tracetriage batch``: many cases, one worker process per case, one table at the end.

Case discovery (per directory, after safe extraction of archives):

* the trace files of a directory, grouped into runs (``same_run``): nsys exports whose capture
  sessions overlap, rocpd ``*_results.db`` files (one per process) that overlap on their clock,
  Kineto ranks of one job (``distributedInfo``); every other trace file is a run of its own; all
  rocprofv3 CSVs of the directory are one trace;
* side artifacts follow their run (``attach_sides``): all of them when the directory holds one
  run, else by name, a topology matrix with every run, and the unclaimed ones as a case of their
  own; a directory with side artifacts but no trace is one case;
* a file that looks like a capture by its name (.sqlite, .db, .rpd, .nsys-rep, .gz)
  but is not one becomes a failed case with the reason, so nothing broken is silent.

Each case writes ``cases/<id>/report.html`` and ``analysis.json``; the run writes
``index.html``, ``summary.parquet`` (one row per case, flat headline metrics, the
same numbers as each case's JSON) and ``findings.parquet`` (one row per finding).
A case whose files (content hash) and tool version are unchanged since the last run
into the same OUTDIR is not re-analyzed unless ``force``.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import shutil
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tracetriage import __version__
from tracetriage.analyzers.compare import SERIES_FIGURES
from tracetriage.errors import ArchiveError, MissingDataError, TraceTriageError
from tracetriage.runtime import Options, Runtime

DEFAULT_CASE_TIMEOUT_S = 600.0
DASK_CONNECT_TIMEOUT_S = 10.0  # a scheduler on the cluster answers in well under a second
TRACE_KINDS = ("nsys", "nsys_rep", "rocpd", "rpd", "gzip_sqlite", "rocprof_csv", "kineto", "rocprof_json")
SIDE_KINDS = ("topology", "rocm_topology", "nccl", "pyspy", "serving")
CAPTURE_SUFFIXES = (".sqlite", ".sqlite3", ".db", ".rpd", ".nsys-rep", ".qdrep", ".gz")


@dataclass
class CaseSpec:
    case_id: str
    label: str
    paths: list[str]
    error: str | None = None
    inputs_hash: str | None = None


@dataclass
class BatchResult:
    records: list[dict] = field(default_factory=list)
    outdir: str = ""
    analyzed: int = 0
    reused: int = 0
    failed: int = 0
    not_run: int = 0
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)  # inputs that held no capture


def _slug(text: str) -> str:
    """A readable folder name from the path's tail: its last components, whole words, never
    starting with a dot (hidden) and never cut mid-word."""
    parts = [re.sub(r"[^A-Za-z0-9._-]+", "_", p).strip("._") for p in re.split(r"[/\\!]+", text) if p.strip("./")]
    out = ""
    for part in reversed([p for p in parts if p]):
        candidate = f"{part}_{out}" if out else part
        if len(candidate) > 60:
            break
        out = candidate
    return out or (parts[-1][:60].strip("._") if parts else "") or "case"


def _case_id(label: str) -> str:
    return f"{_slug(label)}-{hashlib.sha1(label.encode()).hexdigest()[:8]}"


def expand_inputs(inputs: list[str]) -> list[Path]:
    out = []
    for item in inputs:
        if any(ch in item for ch in "*?["):
            hits = sorted(glob.glob(item, recursive=True))
            out.extend(Path(h) for h in hits)
            if not hits:
                raise TraceTriageError(item, "the pattern matches no file")
        elif not os.path.lexists(item):  # as a pattern that matches nothing: the input is missing
            raise TraceTriageError(item, "no such file or directory")
        else:
            out.append(Path(item))
    return out


def same_run(kind: str, files: list[Path]) -> list[list[Path]]:
    """The trace files of one folder grouped into runs, from what each format records cheaply:
    nsys exports whose capture sessions overlap in wall-clock time (one export per rank); rocpd
    files (one per process) whose dispatches overlap on their shared clock; Kineto
    traces whose distributedInfo names one job (same world size, distinct ranks). Anything
    that cannot be shown to belong together stays a case of its own."""
    if len(files) < 2:
        return [[f] for f in files]

    def safely(fn, f, default=None):  # discovery never stops on a file: it just stays alone
        try:
            return fn(str(f))
        except Exception:  # noqa: BLE001 - the case's own analysis reports what is wrong with it
            return default

    if kind in ("nsys", "rocpd"):  # per-rank nsys sessions on the wall clock; per-process rocpd files on one clock
        from tracetriage.parsers.common import overlapping_groups
        from tracetriage.parsers.nsys import session_span
        from tracetriage.parsers.rocpd import time_span

        span = session_span if kind == "nsys" else time_span
        return overlapping_groups(files, lambda f: safely(span, f))
    if kind == "kineto":
        from tracetriage.parsers.kineto import head, tail_info

        jobs: dict[tuple, list[tuple[int, Path]]] = {}
        alone = []
        for f in files:
            info = (safely(head, f, {}) or {}).get("distributedInfo") or safely(tail_info, f)
            rank = info.get("rank") if isinstance(info, dict) else None
            size = info.get("world_size") if isinstance(info, dict) else None
            if isinstance(rank, int) and isinstance(size, int) and size > 1 and 0 <= rank < size:
                jobs.setdefault((size, str(info.get("backend"))), []).append((rank, f))
            else:
                alone.append([f])
        groups = []
        for members in jobs.values():
            ranks = [r for r, _ in members]
            if len(set(ranks)) == len(ranks):  # one rank each: one job
                groups.append(sorted(f for _, f in members))
            else:  # two jobs of the same size in one folder: nothing cheap tells them apart
                groups.extend([f] for _, f in members)
        return sorted(groups + alone, key=lambda g: str(g[0]))
    return [[f] for f in files]


def attach_sides(units: list[list[Path]], sides: list[Path], side_kind: dict) -> list[tuple[list[Path], list[Path]]]:
    """Side artifacts go with the run they belong to. With one run in the folder (or none),
    all of them. With several: a topology matrix describes the machine, so every run gets it;
    another side file goes to the run whose file names share its name's longest prefix (at least
    three characters, and longer than for any other run); the rest form a case of their own."""
    if len(units) <= 1:
        return [(units[0] if units else [], sides)] if units or sides else []
    machine = [s for s in sides if side_kind.get(s) in ("topology", "rocm_topology")]
    out = {i: list(machine) for i in range(len(units))}
    unclaimed = []
    for s in sides:
        if s in machine:
            continue
        score = [max(len(os.path.commonprefix([s.name, f.name])) for f in u) for u in units]
        best = max(score)
        if best >= 3 and score.count(best) == 1:
            out[score.index(best)].append(s)
        else:
            unclaimed.append(s)
    pairs = [(u, out[i]) for i, u in enumerate(units)]
    if unclaimed:
        pairs.append(([], machine + unclaimed))
    return pairs


def _common_stem(files: list[Path]) -> str:
    """A label for several files: their common name prefix, or the first file's name."""
    prefix = os.path.commonprefix([f.name for f in files]).rstrip("._-")
    return prefix if len(prefix) >= 3 else files[0].name


def discover(inputs: list[str], outdir: Path) -> list[CaseSpec]:
    from tracetriage.archive import extract, is_archive
    from tracetriage.case import detect, file_problem

    specs: list[CaseSpec] = []
    seen: set[str] = set()

    def add(spec: CaseSpec):
        if spec.case_id not in seen:
            seen.add(spec.case_id)
            specs.append(spec)

    def scan_dir(root: Path, label_root: str):
        for dirpath, dirs, files in os.walk(root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and Path(dirpath, d).resolve() != outdir.resolve())
            scan_files(Path(dirpath), [Path(dirpath) / f for f in sorted(files) if not f.startswith(".")], root, label_root)

    def failed(f: Path, root: Path, label_root: str, why: str) -> None:
        rel = f"{label_root}/{f.relative_to(root)}" if f != root else str(f)
        add(CaseSpec(_case_id(rel), rel, [str(f)], error=f"{f}: {why}"))

    def scan_files(directory: Path, files: list[Path], root: Path, label_root: str):
        units: list[list[Path]] = []
        csv, sides = [], []
        by_kind: dict[str, list[Path]] = {}
        side_kind: dict[Path, str] = {}
        for f in files:
            # Discovery is isolated per file: a special file, an unreadable or corrupt one is a
            # failed row (or skipped), never the end of the batch.
            problem = file_problem(f)
            if problem:
                if problem.startswith("not a regular file") or "symbolic link" in problem:
                    continue  # FIFOs, sockets, dangling or looping links: skipped (not captures)
                failed(f, root, label_root, problem)
                continue
            try:
                if is_archive(f):
                    scan_archive(f, f"{label_root}/{f.relative_to(root)}" if root != f else str(f))
                    continue
                kind = detect(f)
            except Exception as exc:  # noqa: BLE001 - recorded on the case, the batch goes on
                failed(f, root, label_root, f"cannot be read ({type(exc).__name__}: {exc})")
                continue
            if kind == "rocprof_csv":
                csv.append(f)
            elif kind in ("nsys", "kineto", "rocpd"):
                by_kind.setdefault(kind, []).append(f)
            elif kind in TRACE_KINDS:
                units.append([f])
            elif kind in SIDE_KINDS:
                sides.append(f)
                side_kind[f] = kind
            elif f.name.lower().endswith(CAPTURE_SUFFIXES):
                why = "empty file" if kind == "empty" else kind.split(":", 1)[-1]
                rel = f"{label_root}/{f.relative_to(root)}" if f != root else str(f)
                add(CaseSpec(_case_id(rel), rel, [str(f)], error=f"{f}: not a supported input: {why}"))
        if csv:
            units.append(csv)
        for kind, files in sorted(by_kind.items()):
            units.extend(same_run(kind, files))
        units.sort(key=lambda u: str(u[0]))
        for unit, unit_sides in attach_sides(units, sides, side_kind):
            files_ = unit + unit_sides
            if len(units) <= 1 and (unit_sides or len(unit) > 1):
                rel_path = directory
            elif len(unit) > 1 or not unit:  # a run of several files, or the side files no run claimed
                rel_path = directory / (_common_stem(unit or unit_sides) + ("-run" if unit else "-side-artifacts"))
            else:
                rel_path = unit[0]
            rel = f"{label_root}/{rel_path.relative_to(root)}" if rel_path != root else label_root
            add(CaseSpec(_case_id(rel), rel.rstrip("/."), [str(p) for p in files_]))

    def scan_archive(path: Path, label: str):
        dest = outdir / "_archives" / _case_id(label)
        try:
            if not dest.exists():
                extract(path, dest)
        except ArchiveError as exc:
            add(CaseSpec(_case_id(label), label, [str(path)], error=str(exc)))
            return
        except Exception as exc:  # noqa: BLE001
            add(CaseSpec(_case_id(label), label, [str(path)], error=f"{path}: cannot be extracted ({exc})"))
            return
        scan_dir(dest, label + "!")

    for p in expand_inputs(inputs):
        problem = file_problem(p)
        if problem:
            add(CaseSpec(_case_id(str(p)), str(p), [str(p)], error=f"{p}: {problem}"))
        elif p.is_dir():
            scan_dir(p, str(p))
        elif is_archive(p):
            scan_archive(p, str(p))
        else:
            scan_files(p.parent, [p], p, str(p))
    for s in specs:
        try:
            s.inputs_hash = content_hash(s.paths) if not s.error else None
        except OSError as exc:
            s.error, s.inputs_hash = f"{s.label}: cannot be read ({exc.strerror or exc})", None
    return specs


def content_hash(paths: list[str]) -> str:
    """The inputs' content and the code that analyzes and renders them: a batch re-run redoes a
    case when either changed."""
    from tracetriage.codeversion import code_version

    h = hashlib.sha256(__version__.encode())
    h.update(code_version("tracetriage", "tracetriage.parsers", "tracetriage.analyzers", "tracetriage.reports").encode())
    for p in sorted(paths):
        h.update(Path(p).name.encode())
        with open(p, "rb") as fh:
            while chunk := fh.read(1 << 22):
                h.update(chunk)
    return h.hexdigest()


class CaseTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise CaseTimeout


def analyze_case(spec: dict, outdir: str, options: dict | None = None, settings: dict | None = None,
                 timeout_s: float | None = None) -> dict:
    """Run one case (in a worker process) and write its reports; return its record.
    ``options`` are analyze()'s keyword options (step_range, symptom, slo); ``settings`` the
    batch's :meth:`Runtime.settings <tracetriage.runtime.Runtime.settings>` (plain values)."""
    from tracetriage import analyze, open_case
    from tracetriage.analyzers.compare import trend_record
    from tracetriage.analyzers.summary import headline_metrics
    from tracetriage.captured import capture_start_ns
    from tracetriage.memory import tune_allocator
    from tracetriage.reports import render

    tune_allocator()
    runtime = Runtime.from_settings(settings or {})
    t0 = time.perf_counter()
    case_dir = Path(outdir) / "cases" / spec["case_id"]
    case_dir.mkdir(parents=True, exist_ok=True)
    record = {"case_id": spec["case_id"], "path": spec["label"], "files": spec["paths"], "inputs_hash": spec["inputs_hash"],
              "tool_version": __version__, "options": options or {}, "status": "failed", "error": spec.get("error")}
    import signal
    import warnings

    warnings.simplefilter("ignore")
    armed = False
    if timeout_s and hasattr(signal, "SIGALRM"):
        try:
            signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            armed = True
        except ValueError:  # not the main thread (a Dask thread worker): no per-case alarm
            pass
    options = dict(options or {})
    timeline = options.pop("perfetto_window", None)  # --perfetto: the case's timeline.pftrace beside its report
    if not spec.get("error"):
        try:
            case = open_case(spec["paths"], runtime=runtime)
            analysis = analyze(case, runtime=runtime, **options)
            if timeline and case.traces:
                from tracetriage.analyzers.tracks import build_tracks
                from tracetriage.reports.perfetto import export
                from tracetriage.reports.perfetto_view import left_out_text

                mode, n = timeline
                summary = export(build_tracks(case, analysis, mode=mode, worst_steps=n), analysis, case_dir / "timeline.pftrace")
                analysis.series["perfetto_export"] = {"path": "timeline.pftrace", **summary,
                                                      "left_out_text": left_out_text(summary)}
                record["timeline"] = f"cases/{spec['case_id']}/timeline.pftrace"
            del case
            (case_dir / "analysis.json").write_text(render(analysis, "json"), encoding="utf-8")
            (case_dir / "report.html").write_text(render(analysis, "html", runtime.cache), encoding="utf-8")
            trend = trend_record(analysis.data)
            record.update(status="ok", error=None, metrics=headline_metrics(analysis.data), trend=trend,
                          capture_start_ns=capture_start_ns(analysis.data),  # trend's order
                          findings=[{**{k: f.get(k) for k in ("id", "axis", "severity", "impact_pct", "impact_denominator",
                                                              "title")},
                                     "ms_per_step": trend["findings_ms"].get(f["id"])} for f in analysis.findings])
        except TraceTriageError as exc:
            record["error"] = str(exc)
        except CaseTimeout:
            record["error"] = f"{spec['label']}: timed out after {timeout_s:g} s (--case-timeout)"
        except Exception as exc:  # noqa: BLE001 - a bug must not take the batch down; it is recorded
            record["error"] = f"{spec['label']}: internal error: {type(exc).__name__}: {exc}"
            record["traceback"] = traceback.format_exc(limit=5)
    if armed:
        signal.setitimer(signal.ITIMER_REAL, 0)
    record["seconds"] = round(time.perf_counter() - t0, 3)
    (case_dir / "record.json").write_text(json.dumps(record, indent=1), encoding="utf-8")
    return record


def _previous(outdir: Path, spec: CaseSpec, options: dict) -> dict | None:
    rec = outdir / "cases" / spec.case_id / "record.json"
    if not rec.exists() or spec.inputs_hash is None:
        return None
    try:
        old = json.loads(rec.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if (old.get("inputs_hash") == spec.inputs_hash and old.get("tool_version") == __version__
            and (old.get("options") or {}) == options and (old.get("status") != "ok" or "trend" in old)):
        return old
    return None


def run_batch(inputs: list[str], outdir: str, options: Options = Options(), runtime: Runtime = Runtime(),
              on_error: str = "skip", force: bool = False, progress: bool = True,
              case_timeout: float | None = DEFAULT_CASE_TIMEOUT_S, perfetto_window: tuple[str, int] | None = None) -> BatchResult:
    """Every case under ``inputs`` analyzed with ``options``, on ``runtime``'s executor (its
    ``jobs`` processes, or its Dask scheduler) and cache; ``perfetto_window`` (a parsed
    --perfetto-window): also export each case's timeline."""
    t0 = time.perf_counter()
    options = {k: v for k, v in (("step_range", options.step_range), ("symptom", options.symptom), ("slo", dict(options.slo)),
                                 ("perfetto_window", list(perfetto_window) if perfetto_window else None)) if v}
    out = Path(outdir)
    made = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    specs = discover(inputs, out)
    if not specs:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise MissingDataError(", ".join(inputs), "nothing to analyze: no capture found (no trace, bundle or archive)")
    result = BatchResult(outdir=str(out), skipped=_without_case(inputs, specs))
    todo = []
    by_id = {}
    for s in specs:
        old = None if force else _previous(out, s, options)
        if old is not None:
            old["reused"] = True
            by_id[s.case_id] = old
            result.reused += old.get("status") == "ok"  # a failure kept from the last run counts as failed
        else:
            todo.append(s)
    stop = False
    for record in _execute(todo, out, runtime, options, progress, case_timeout):
        record["reused"] = False
        by_id[record["case_id"]] = record
        result.analyzed += record["status"] == "ok"  # analyzed, unchanged, failed and not run add up to the cases
        if record["status"] != "ok" and on_error == "fail":
            stop = True
            break
    if stop:
        for s in todo:
            if s.case_id not in by_id:
                by_id[s.case_id] = {"case_id": s.case_id, "path": s.label, "files": s.paths, "status": "not_run",
                                    "error": "not run: an earlier case failed and --on-error fail was given"}
                result.not_run += 1
    result.records = [by_id[s.case_id] for s in specs if s.case_id in by_id]
    result.failed = sum(1 for r in result.records if r["status"] == "failed")
    result.seconds = round(time.perf_counter() - t0, 2)
    write_outputs(result, out, runtime.cache)
    return result


def _without_case(inputs: list[str], specs: list[CaseSpec]) -> list[str]:
    """The inputs (after glob expansion) that gave no case: a folder of notes, a file batch does not read."""
    labels = [spec.label for spec in specs]

    def gave_case(path: str) -> bool:
        return any(label == path or label.startswith((path + "/", path + "!")) for label in labels)

    return [str(path) for path in expand_inputs(inputs) if not gave_case(str(path))]


def _execute(todo: list[CaseSpec], out: Path, runtime: Runtime, options: dict, progress: bool,
             case_timeout: float | None = None):
    if not todo:
        return
    bar = _bar(len(todo), progress)
    payload = [asdict(s) for s in todo]
    settings = runtime.settings()
    try:
        if runtime.dask_address:
            from dask.distributed import Client, as_completed

            # the workers do not share the client's working directory: every path they get is absolute
            payload = [{**spec, "paths": [os.path.abspath(path) for path in spec["paths"]]} for spec in payload]
            with _client(Client, runtime.dask_address) as client:
                futures = client.map(analyze_case, payload, outdir=str(out.resolve()), options=options, settings=settings,
                                     timeout_s=case_timeout, pure=False)
                for fut in as_completed(futures):
                    bar.update(1)
                    yield fut.result()
            return
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures import as_completed as done

        ctx = multiprocessing.get_context("spawn")
        jobs = runtime.jobs or os.cpu_count() or 1
        with ProcessPoolExecutor(max_workers=min(jobs, len(todo)), mp_context=ctx) as pool:
            futures = [pool.submit(analyze_case, p, str(out), options, settings, case_timeout) for p in payload]
            try:
                for fut in done(futures):
                    bar.update(1)
                    yield fut.result()
            finally:
                for f in futures:
                    f.cancel()
    finally:
        bar.close()


def _client(client_class, address: str):
    """A Dask client of the scheduler at ``address``; one that cannot be reached is the user's
    error (a wrong address, a scheduler not started), said in one line."""
    from tracetriage.errors import UsageError

    try:
        return client_class(address, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise UsageError(address, f"cannot reach the Dask scheduler ({one_line_reason(exc)})") from None


def one_line_reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _bar(total: int, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="case", file=sys.stderr, disable=not progress or None, leave=False)


SUMMARY_COLUMNS = [
    "case_id", "path", "status", "error", "reused", "seconds", "headline", "top_finding", "top_impact_pct", "top_severity",
    "max_severity", "findings", "abstentions", "devices", "processes", "window_ns", "busy_pct", "busy_pct_min",
    "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct", "idle_other_cuda_pct", "idle_host_pct", "idle_unknown_pct",
    "launches_per_step", "graph_launches_per_step", "syncs_per_step", "step_p50_ns", "step_p99_ns", "steps",
    "collective_share_pct", "collective_exposed_pct", "report_html", "report_json",
    # what trend reads: when the capture started, its comparability signature, the per-step figures
    "capture_start_ns", "device_model", "device_count", "world_size", "program", "step_ranges",
]
# the per-step figures not already in the headline columns (busy %, launches/syncs per step)
TREND_FLOAT_COLUMNS = [f for f in SERIES_FIGURES if f not in SUMMARY_COLUMNS]
SUMMARY_COLUMNS += TREND_FLOAT_COLUMNS


def summary_rows(result: BatchResult) -> tuple[list[dict], list[dict], list[dict]]:
    rows, findings, kernels = [], [], []
    for r in result.records:
        m = r.get("metrics") or {}
        row = {c: m.get(c) for c in SUMMARY_COLUMNS}
        row.update({
            "case_id": r["case_id"], "path": r["path"], "status": r["status"], "error": r.get("error"),
            "reused": bool(r.get("reused")), "seconds": r.get("seconds"),
            "report_html": f"cases/{r['case_id']}/report.html" if r["status"] == "ok" else None,
            "report_json": f"cases/{r['case_id']}/analysis.json" if r["status"] == "ok" else None,
            "capture_start_ns": r.get("capture_start_ns"),
        })
        trend = r.get("trend") or {}
        row.update({k: v for k, v in (trend.get("signature") or {}).items() if k in SUMMARY_COLUMNS})
        row.update({k: v for k, v in (trend.get("figures") or {}).items() if k in TREND_FLOAT_COLUMNS})
        rows.append(row)
        for rank, f in enumerate(r.get("findings") or [], 1):
            findings.append({"case_id": r["case_id"], "path": r["path"], "rank": rank, **f})
        for k in trend.get("kernels") or []:
            kernels.append({"case_id": r["case_id"], "path": r["path"], **k})
    return rows, findings, kernels


def index_rows(rows: list[dict], result: BatchResult) -> list[dict]:
    """The rows of index.html: the headline without its leading ``[id]`` (the finding column
    names it), the impact with its denominator (a % of the window, of TTFT and of the run are
    not one scale), ordered failed first, then by the top finding's severity, then by path;
    never by impact across denominators."""
    from tracetriage.analyzers.summary import SEVERITY_ORDER

    top = {r["case_id"]: (r.get("findings") or [None])[0] for r in result.records}
    out = []
    for r in rows:
        f = top.get(r["case_id"]) or {}
        headline = r.get("headline") or ""
        if r.get("top_finding") and headline.startswith(f"[{r['top_finding']}]"):
            headline = headline[len(r["top_finding"]) + 2:].lstrip()
        impact = ""
        if f and r.get("top_impact_pct") is not None and f.get("id") != "healthy":
            impact = f"{r['top_impact_pct']:.1f}% of the {f.get('impact_denominator') or 'window'}"
        out.append({**r, "headline_text": headline, "impact_text": impact})
    severity = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    return sorted(out, key=lambda r: (r["status"] != "failed", -severity.get(r.get("top_severity"), -1), str(r["path"])))


def write_outputs(result: BatchResult, out: Path, store=None) -> None:
    """summary.parquet, findings.parquet, kernels.parquet and index.html (its compiled template
    kept in ``store``, the analysis cache)."""
    import pandas as pd

    rows, findings, kernels = summary_rows(result)
    summary = pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
    for col in ("top_impact_pct", "busy_pct", "busy_pct_min", "idle_launch_pct", "idle_sync_pct", "idle_memcpy_sync_pct",
                "idle_other_cuda_pct", "idle_host_pct", "idle_unknown_pct", "launches_per_step", "graph_launches_per_step",
                "syncs_per_step", "step_p50_ns", "step_p99_ns", "collective_share_pct", "collective_exposed_pct", "seconds"):
        summary[col] = pd.to_numeric(summary[col], errors="coerce").astype("float64")
    for col in TREND_FLOAT_COLUMNS:
        summary[col] = pd.to_numeric(summary[col], errors="coerce").astype("float64")
    for col in ("findings", "abstentions", "devices", "processes", "window_ns", "steps", "capture_start_ns", "device_count",
                "world_size"):
        summary[col] = pd.to_numeric(summary[col], errors="coerce").astype("Int64")
    for col in ("device_model", "program", "step_ranges"):
        summary[col] = summary[col].astype("string")
    summary.to_parquet(out / "summary.parquet", engine="pyarrow", index=False)
    fdf = pd.DataFrame(findings, columns=["case_id", "path", "rank", "id", "axis", "severity", "impact_pct",
                                          "impact_denominator", "ms_per_step", "title"])
    fdf["impact_pct"] = pd.to_numeric(fdf["impact_pct"], errors="coerce").astype("float64")
    fdf["ms_per_step"] = pd.to_numeric(fdf["ms_per_step"], errors="coerce").astype("float64")
    kdf = pd.DataFrame(kernels, columns=["case_id", "path", "device_rank", "name", "kind", "ms_per_step", "ns_per_call"])
    kdf["device_rank"] = pd.to_numeric(kdf["device_rank"], errors="coerce").astype("Int64")
    kdf["ms_per_step"] = pd.to_numeric(kdf["ms_per_step"], errors="coerce").astype("float64")
    kdf["ns_per_call"] = pd.to_numeric(kdf["ns_per_call"], errors="coerce").astype("float64")
    kdf.to_parquet(out / "kernels.parquet", engine="pyarrow", index=False)
    fdf["rank"] = pd.to_numeric(fdf["rank"], errors="coerce").astype("Int64")
    fdf.to_parquet(out / "findings.parquet", engine="pyarrow", index=False)
    from tracetriage.reports.html import environment

    html = environment(store).get_template("index.html.j2").render(rows=index_rows(rows, result), result=result,
                                                              version=__version__)
    (out / "index.html").write_text(html, encoding="utf-8")
