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

import bisect
import glob
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tracetriage import __version__
from tracetriage.batch_pool import Limits
from tracetriage.batch_records import CaseRecord, CaseRequest, CaseSpec
from tracetriage.batch_records import case_id_of as _case_id
from tracetriage.batch_tables import SUMMARY_COLUMNS, TREND_FLOAT_COLUMNS  # noqa: F401 - the tables' columns, as before
from tracetriage.errors import ArchiveError, MissingDataError, OutputError, TraceTriageError, UnsupportedInputError
from tracetriage.progress import CasesDone, case_counter
from tracetriage.runtime import Options, Runtime

DEFAULT_CASE_TIMEOUT_S = 600.0
DASK_CONNECT_TIMEOUT_S = 10.0  # a scheduler on the cluster answers in well under a second
TRACE_KINDS = ("nsys", "nsys_rep", "rocpd", "rpd", "gzip_sqlite", "rocprof_csv", "kineto", "rocprof_json")
SIDE_KINDS = ("topology", "rocm_topology", "nccl", "pyspy", "serving")
CAPTURE_SUFFIXES = (".sqlite", ".sqlite3", ".db", ".rpd", ".nsys-rep", ".qdrep", ".gz")
DISCOVERY_THREADS = 8  # top-level folders scanned at once (waiting on the file system, not the CPU)


@dataclass
class BatchResult:
    """What a batch did: ``records`` each case's record (its contract: record.json's keys, and ``reused``),
    in discovery order, and the counts."""

    records: list[dict] = field(default_factory=list)
    outdir: str = ""
    analyzed: int = 0
    reused: int = 0
    failed: int = 0
    not_run: int = 0
    seconds: float = 0.0
    skipped: list[str] = field(default_factory=list)  # inputs that held no capture (why: SKIPPED_WHY)

    def __repr__(self) -> str:
        """The counts, not every record (a notebook cell shows this: 10,000 records would flood it)."""
        return (f"BatchResult(outdir={self.outdir!r}, records={len(self.records)}, analyzed={self.analyzed}, "
                f"reused={self.reused}, failed={self.failed}, not_run={self.not_run}, skipped={len(self.skipped)}, "
                f"seconds={self.seconds:.2f})")


def expand_inputs(inputs: list[str]) -> list[Path]:
    """The local inputs, globs expanded (a store URI is listed by :func:`tracetriage.batch_store.store_cases`)."""
    from tracetriage.batch_store import is_uri

    out = []
    for item in inputs:
        if is_uri(item):
            continue
        if any(ch in item for ch in "*?["):
            hits = sorted(glob.glob(item, recursive=True))
            out.extend(Path(h) for h in hits)
            if not hits:
                raise UnsupportedInputError(item, "the pattern matches no file")
        elif not os.path.lexists(item):  # as a pattern that matches nothing: the input is missing
            raise UnsupportedInputError(item, "no such file or directory")
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


def discover(inputs: list[str], outdir: Path, store_outdir: str | None = None) -> list[CaseSpec]:
    """The cases under ``inputs``, in a stable order, each with its :func:`cheap_identity
    <tracetriage.batch_case.cheap_identity>`. A folder's top-level subfolders are scanned in
    parallel (threads: the time is mostly waiting on the file system); the cases come out in the
    order of a serial walk. Inputs on object storage are listed there (after the local ones;
    ``store_outdir``, OUTDIR's URI, is never an input): :func:`tracetriage.batch_store.store_cases`."""
    from tracetriage.batch_store import is_uri, store_cases

    stored = [spec for item in inputs if is_uri(item) for spec in store_cases(item, store_outdir)]
    return _unique(_discover_local([item for item in inputs if not is_uri(item)], outdir) + stored)


def _unique(found: list[CaseSpec]) -> list[CaseSpec]:
    specs, seen = [], set()
    for spec in found:
        if spec.case_id not in seen:
            seen.add(spec.case_id)
            specs.append(spec)
    return specs


def _discover_local(inputs: list[str], outdir: Path) -> list[CaseSpec]:
    """:func:`discover` of local inputs."""
    from concurrent.futures import ThreadPoolExecutor

    from tracetriage.archive import extract, is_archive
    from tracetriage.batch_case import cheap_identity
    from tracetriage.case import detect, file_problem

    skip = outdir.resolve()

    def visible_dirs(dirpath, dirs) -> list[str]:
        return sorted(d for d in dirs if not d.startswith(".") and Path(dirpath, d).resolve() != skip)

    def scan_dir(root: Path, label_root: str, found: list, top: Path | None = None):
        """``root`` walked (from ``top``, one of its subfolders, when given), its cases into ``found``."""
        for dirpath, dirs, files in os.walk(top or root, followlinks=False):
            dirs[:] = visible_dirs(dirpath, dirs)
            scan_files(Path(dirpath), [Path(dirpath) / f for f in sorted(files) if not f.startswith(".")], root, label_root,
                       found)

    def failed(f: Path, root: Path, label_root: str, why: str, found: list) -> None:
        rel = f"{label_root}/{f.relative_to(root)}" if f != root else str(f)
        found.append(CaseSpec(_case_id(rel), rel, [str(f)], error=f"{f}: {why}"))

    def scan_files(directory: Path, files: list[Path], root: Path, label_root: str, found: list):
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
                failed(f, root, label_root, problem, found)
                continue
            try:
                if is_archive(f):
                    scan_archive(f, f"{label_root}/{f.relative_to(root)}" if root != f else str(f), found)
                    continue
                kind = detect(f)
            except Exception as exc:  # noqa: BLE001 - recorded on the case, the batch goes on
                failed(f, root, label_root, f"cannot be read ({type(exc).__name__}: {exc})", found)
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
                found.append(CaseSpec(_case_id(rel), rel, [str(f)], error=f"{f}: not a supported input: {why}"))
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
            found.append(CaseSpec(_case_id(rel), rel.rstrip("/."), [str(p) for p in files_]))

    def scan_archive(path: Path, label: str, found: list):
        dest = outdir / "_archives" / _case_id(label)
        try:
            if not dest.exists():
                extract(path, dest)
        except ArchiveError as exc:
            found.append(CaseSpec(_case_id(label), label, [str(path)], error=str(exc)))
            return
        except Exception as exc:  # noqa: BLE001
            found.append(CaseSpec(_case_id(label), label, [str(path)], error=f"{path}: cannot be extracted ({exc})"))
            return
        scan_dir(dest, label + "!", found)

    def scan_tree(root: Path, found: list, pool) -> None:
        """A folder: its own files here, each top-level subfolder in the pool; in walk order."""
        try:
            entries = sorted(os.listdir(root))
        except OSError:  # as os.walk does: a folder that cannot be listed holds no case
            return
        subdirs = visible_dirs(root, [e for e in entries if (root / e).is_dir() and not (root / e).is_symlink()])
        files = [root / e for e in entries if not e.startswith(".") and e not in subdirs and not (root / e).is_dir()]
        scan_files(root, files, root, str(root), found)
        parts: list[list[CaseSpec]] = [[] for _ in subdirs]
        list(pool.map(lambda i: scan_dir(root, str(root), parts[i], root / subdirs[i]), range(len(subdirs))))
        for part in parts:
            found.extend(part)

    found: list[CaseSpec] = []
    with ThreadPoolExecutor(max_workers=DISCOVERY_THREADS) as pool:
        for p in expand_inputs(inputs):
            problem = file_problem(p)
            if problem:
                found.append(CaseSpec(_case_id(str(p)), str(p), [str(p)], error=f"{p}: {problem}"))
            elif p.is_dir():
                scan_tree(p, found, pool)
            elif is_archive(p):
                scan_archive(p, str(p), found)
            else:
                scan_files(p.parent, [p], p, str(p), found)
        specs = _unique(found)

        def identify(spec: CaseSpec) -> CaseSpec:
            try:
                return replace(spec, identity=cheap_identity(spec.paths) if not spec.error else None)
            except OSError as exc:
                return replace(spec, error=f"{spec.label}: cannot be read ({exc.strerror or exc})", identity=None)

        return list(pool.map(identify, specs))


def _previous(record_text: bytes | str | None, spec: CaseSpec, options: dict, reports: str) -> tuple[CaseRecord | None, bool]:
    """The record of the last run into OUTDIR (``record_text``: its record.json, None when it has
    none) when it may hold for this case (the same tool version and options, a report.html where
    ``reports`` wants one and none elsewhere), and whether the cheap identity of its files is the
    same (then it is reused as it is; else its worker compares the full content hash first)."""
    from tracetriage.batch_case import wants_report

    if record_text is None or spec.identity is None:
        return None, False
    try:
        old = CaseRecord.from_contract(json.loads(record_text))
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError, ValueError, AttributeError):
        return None, False
    has_report = old.report_html is None or bool(old.report_html)  # a record of a version that did not say: it had one
    if (old.tool_version == __version__ and old.options == options
            and (not old.ok or old.trend is not None and has_report == wants_report(reports, old.findings))):
        return old, old.inputs_identity == spec.identity
    return None, False


class BatchInterrupted(KeyboardInterrupt):
    """The batch was stopped (Ctrl-C, SIGTERM) after writing the tables and index of the cases that had ended."""


def run_batch(inputs: list[str], outdir: str, options: Options = Options(), runtime: Runtime = Runtime(),
              on_error: str = "skip", force: bool = False, progress: bool | CasesDone = True,
              case_timeout: float | None = DEFAULT_CASE_TIMEOUT_S, perfetto_window: tuple[str, int] | None = None,
              case_memory: float | None = None, reports: str = "all") -> BatchResult:
    """Every case under ``inputs`` analyzed with ``options``, on ``runtime``'s executor (its
    ``jobs`` processes, or its Dask scheduler) and cache; ``perfetto_window`` (a parsed
    --perfetto-window): also export each case's timeline; ``case_timeout`` (s) and ``case_memory``
    (MB) the limits of one case (:mod:`tracetriage.batch_pool`); ``reports``: all, failed or none
    (which cases get a report.html: :func:`~tracetriage.batch_case.wants_report`); ``progress``: a bar on
    stderr (True), or a :data:`CasesDone` callable.

    Each case's rows are written as it ends (:mod:`tracetriage.batch_tables`); the tables and
    index.html of every case that ended are written however the run ends: a worker that died, an
    error, Ctrl-C or SIGTERM (then the cases not run are rows of their own and
    :class:`BatchInterrupted` is raised after)."""
    from tracetriage.batch_case import REPORT_MODES
    from tracetriage.batch_store import StoreOutdir, is_uri
    from tracetriage.errors import UsageError

    if reports not in REPORT_MODES:
        raise UsageError(None, f"reports must be one of {', '.join(REPORT_MODES)} (got {reports!r})")
    check_limits(case_timeout, case_memory, on_error)
    if runtime.dask_address:
        check_dask_address(runtime.dask_address)
    t0 = time.perf_counter()
    options = {k: v for k, v in (("step_range", options.step_range), ("symptom", options.symptom), ("slo", dict(options.slo)),
                                 ("perfetto_window", list(perfetto_window) if perfetto_window else None)) if v}
    store = StoreOutdir(outdir) if is_uri(outdir) else None  # OUTDIR on object storage: staged here, uploaded
    try:
        return _run(inputs, outdir, store, options, runtime, on_error, force, progress, Limits(case_timeout, case_memory),
                    reports, t0)
    finally:
        if store is not None:
            store.close()


def _run(inputs: list[str], outdir: str, store, options: dict, runtime: Runtime, on_error: str, force: bool,
         progress: bool | CasesDone, limits: Limits, reports: str, t0: float) -> BatchResult:
    """:func:`run_batch` into ``outdir``, a local folder or (``store``: its :class:`~tracetriage.batch_store.StoreOutdir`)
    a store's: the cases found, those the last run's records still hold kept, the others run, and the
    tables written however the run ends."""
    out = store.staging if store is not None else Path(outdir)
    made = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, no permission: the outdir's error (exit 7), not a bug
        lost = isinstance(exc, FileNotFoundError) and out.parent.is_dir()  # /proc/x: its parent is there but takes none
        problem = ("a file is in the way: give a folder" if out.is_file() else f"{out.parent} does not take new folders "
                   f"({exc.strerror})" if lost else exc.strerror or str(exc))
        raise OutputError(str(outdir), f"cannot make the output folder: {problem}") from None
    try:
        specs = discover(inputs, out, outdir if store is not None else None)
        if not specs:
            raise MissingDataError(", ".join(inputs), "nothing to analyze: no capture found (no trace, bundle or archive)")
    except TraceTriageError:  # a missing input, a pattern matching nothing, no capture: no output folder left behind
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise
    result = BatchResult(outdir=str(outdir if store is not None else out), skipped=_without_case(inputs, specs))
    todo, by_id = _reuse_plan(specs, out, store, options, reports, force, result)
    tell = case_counter(progress, len(specs) - len(todo), len(specs))
    stopped = None
    try:
        stopped = _collect(_execute(todo, outdir if store is not None else out, runtime, options, progress is True, limits,
                                    reports, tell), out, store, by_id, result, on_error)  # the workers stopped once it returns
    except KeyboardInterrupt:
        stopped = "the batch was interrupted (Ctrl-C or SIGTERM) before this case started"
        raise BatchInterrupted from None
    except BaseException as exc:
        stopped = f"the batch stopped before this case started ({type(exc).__name__}: {one_line_reason(exc)})"
        raise
    finally:
        _finish(specs, todo, by_id, stopped, out, store, result, runtime.cache, t0)
    return result


def _reuse_plan(specs: list[CaseSpec], out: Path, store, options: dict, reports: str, force: bool,
                result: BatchResult) -> tuple[list[CaseSpec], dict[str, CaseRecord]]:
    """The cases to run (with the last run's content hash where only their cheap identity changed),
    and the last run's records of those that are unchanged (marked reused, counted in ``result``),
    by case id; unless ``force``."""
    from tracetriage.batch_tables import has_parts, write_case_parts

    todo, kept = [], {}
    texts = store.records([spec.case_id for spec in specs]) if store is not None and not force else {}
    for spec in specs:
        text = None if force else texts.get(spec.case_id) if store is not None else _local_record(out, spec.case_id)
        old, same = (None, False) if force else _previous(text, spec, options, reports)
        if old is None or not same:
            todo.append(replace(spec, reuse_hash=old.inputs_hash if old is not None and old.ok else None))
            continue
        kept[spec.case_id] = old.with_(reused=True)
        result.reused += old.ok  # a failure kept from the last run counts as failed
        if not (store.has_parts(spec.case_id) if store is not None else has_parts(out, spec.case_id)):
            write_case_parts(out, old.with_(reused=False))  # an OUTDIR written before parts existed
            if store is not None:
                store.push_parts(spec.case_id)
    return todo, kept


def _collect(records, out: Path, store, by_id: dict[str, CaseRecord], result: BatchResult, on_error: str) -> str | None:
    """Each case's ``records`` as it ends: its parts written, kept in ``by_id``, counted in ``result``;
    why the rest were not run when ``on_error`` is fail and one failed, else None."""
    from tracetriage.batch_tables import write_case_parts

    for record in records:
        record = record.with_(reused=record.kept_by_content, kept_by_content=False)  # its worker found the content unchanged
        write_case_parts(out, record.with_(reused=False))
        if store is not None:
            store.push_parts(record.case_id)
        by_id[record.case_id] = record
        result.analyzed += record.ok and not record.reused
        result.reused += record.reused  # analyzed, unchanged, failed and not run add up to the cases
        if not record.ok and on_error == "fail":
            return "an earlier case failed and --on-error fail was given"
    return None


def _finish(specs: list[CaseSpec], todo: list[CaseSpec], by_id: dict[str, CaseRecord], stopped: str | None, out: Path,
            store, result: BatchResult, cache, t0: float) -> None:
    """However the run ended: the cases it did not reach (when ``stopped`` says why) as rows of their
    own, ``result`` filled in, the tables and index.html written (``cache``: the analysis cache), the
    parts of cases no longer among the inputs removed."""
    from tracetriage.batch_tables import prune_parts, write_outputs

    for spec in todo if stopped else ():
        if spec.case_id not in by_id:
            by_id[spec.case_id] = CaseRecord.not_run(spec, f"{spec.label}: {stopped}")
            result.not_run += 1
    records = [by_id[spec.case_id] for spec in specs if spec.case_id in by_id]
    result.records = [record.to_contract() for record in records]
    result.failed = sum(1 for record in records if record.status == "failed")
    result.seconds = round(time.perf_counter() - t0, 2)
    write_outputs(records, out, result, cache)
    prune_parts(out, set(by_id))
    if store is not None:
        store.push_outputs()
        store.prune_parts(set(by_id))


def _local_record(out: Path, case_id: str) -> str | None:
    try:
        return (out / "cases" / case_id / "record.json").read_text()
    except OSError:
        return None


def _without_case(inputs: list[str], specs: list[CaseSpec]) -> list[str]:
    """The inputs (after glob expansion) that gave no case: a folder of notes, a file batch does not read."""
    labels = sorted(spec.label for spec in specs)
    exact = set(labels)

    def under(prefix: str) -> bool:  # some label starts with ``prefix``: the first label not below it does (sorted)
        at = bisect.bisect_left(labels, prefix)
        return at < len(labels) and labels[at].startswith(prefix)

    def gave_case(path: str) -> bool:  # binary searches, not a scan: a glob of 10,000 inputs is not 10^8 comparisons
        return path in exact or under(path + "/") or under(path + "!")

    return [str(path) for path in expand_inputs(inputs) if not gave_case(str(path))]


def _execute(todo: list[CaseSpec], out: Path | str, runtime: Runtime, options: dict, progress: bool, limits: Limits,
             reports: str, ended: Callable[[], None] = lambda: None):
    """Each case's record as it ends, from the local workers or the Dask cluster (:mod:`tracetriage.batch_pool`);
    ``out``: OUTDIR, a local folder or a store's URI (the workers write there); ``progress``: draw the bar;
    ``ended`` is called as each case ends."""
    from tracetriage.batch_pool import run_dask, run_local
    from tracetriage.batch_store import is_uri

    if not todo:
        return
    bar = _bar(len(todo), progress)
    settings = runtime.settings()
    # the workers do not share the client's working directory: every path they get is absolute
    outdir = out if isinstance(out, str) else str(out.resolve())
    requests = [CaseRequest(replace(spec, paths=[path if is_uri(path) else os.path.abspath(path) for path in spec.paths]),
                            outdir, options, settings, limits.timeout_s, reports) for spec in todo]
    given = {spec.case_id: [(os.path.abspath(path), path) for path in spec.paths if not is_uri(path)
                            and os.path.abspath(path) != path] for spec in todo}
    try:
        if runtime.dask_address:
            from dask.distributed import Client

            with _client(Client, runtime.dask_address) as client:
                for record in run_dask(requests, client, limits):
                    bar.update(1)
                    ended()
                    yield record.with_paths_as_given(given.get(record.case_id, ()))
            return
        for record in run_local(requests, runtime.jobs or os.cpu_count() or 1, limits):
            bar.update(1)
            ended()
            yield record.with_paths_as_given(given.get(record.case_id, ()))
    finally:
        bar.close()


ON_ERROR = ("skip", "fail")


def check_limits(case_timeout, case_memory, on_error) -> None:
    """The per-case limits and the failure policy, checked before anything is written: a limit is
    a positive, finite number (``case_timeout`` None: no time limit; ``case_memory`` None: no ceiling)."""
    import math

    from tracetriage.errors import UsageError

    def positive(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0

    if case_timeout is not None and not positive(case_timeout):
        raise UsageError(None, f"--case-timeout must be a positive number of seconds (got {case_timeout!r})")
    if case_memory is not None and not positive(case_memory):
        shown = f"{case_memory:g}" if isinstance(case_memory, (int, float)) else repr(case_memory)
        raise UsageError(None, f"--case-memory must be a positive number of MB (got {shown})")
    if on_error not in ON_ERROR:
        raise UsageError(None, f"--on-error must be one of {', '.join(ON_ERROR)} (got {on_error!r})")


def check_dask_address(address: str) -> None:
    """A scheduler address Dask can parse (``tcp://host:port``, ``host:port``, ``tls://...``), checked
    before the outdir is touched: a malformed one is the user's error, as an unreachable one is."""
    from tracetriage.errors import UsageError

    try:
        from distributed.comm.addressing import normalize_address, parse_address, parse_host_port
    except ImportError:
        return  # no distributed: the run says so where it needs it
    try:
        scheme, location = parse_address(normalize_address(address))
        if scheme in ("tcp", "tls", "ws", "wss", "ucx"):
            parse_host_port(location)
    except (ValueError, TypeError) as exc:
        raise UsageError(address, f"not a Dask scheduler address ({one_line_reason(exc)}); give tcp://HOST:PORT") from None


def _client(client_class, address: str):
    """A Dask client of the scheduler at ``address``; one that cannot be reached is the user's
    error (a wrong address, a scheduler not started), said in one line."""
    from tracetriage.errors import UsageError

    check_dask_address(address)
    try:
        return client_class(address, timeout=DASK_CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise UsageError(address, f"cannot reach the Dask scheduler ({one_line_reason(exc)})") from None


def one_line_reason(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _bar(total: int, progress: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="case", file=sys.stderr, disable=not progress or None, leave=False)


