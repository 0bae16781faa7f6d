"""rocprofv3 rocpd SQLite (schema version 3, ROCm 7.x; also rocprof-sys) -> :class:`Trace`.

Facts honoured (shared/samples/real/rocprof/SOURCES.md, DESIGN.md):

* Data tables carry a per-process UUID suffix (``rocpd_region_<uuid>``); views with
  plain names (``rocpd_region``) select from them. Read through the views when they
  exist, else through the union of the suffixed tables. A database of another
  schema, or without the tables needed, is rejected with a line naming what is
  missing.
* Ids are unique per (guid, id): every join carries the guid.
* A kernel's launching call is ``rocpd_region.id = rocpd_event.stack_id`` of the
  dispatch's event (``correlation_id`` is usually 0). The model's correlation for
  both sides is that region id, so the usual (pid, correlation) join works.
* ``agent_id`` counts CPUs too: the GPU number is ``type_index`` of GPU agents.
* ``__amd_rocclr_*`` blit kernels are copies (copyBuffer*) or memsets (fillBuffer*).
* RCCL kernels are often named generically: their op comes from the RCCL API call
  that launched them (the launching region, or its parent).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracetriage.errors import MissingDataError, TraceFormatError
from tracetriage.model import (
    API_CATEGORIES,
    Trace,
    api_category,
    collective_op,
    finish_trace,
)
from tracetriage.parsers import coerce
from tracetriage.parsers.common import (
    blit_bytes,
    blit_kind,
    compact_categorical,
    copy_direction,
    per_distinct,
    rccl_api_op,
)
from tracetriage.parsers.sqlite import Database

NEEDED = ("rocpd_string", "rocpd_kernel_dispatch", "rocpd_info_agent")
_GUID_BITS = 40
_MARKER = re.compile(r"(?i)MARKER|ROCTX")


def source(db: Database, base: str) -> str | None:
    """SQL for one logical rocpd table: the union of its UUID tables (what rocprofv3's view of
    the same name selects: tables are read fast and in parallel, a view only through a guarded
    path), else the view or table of that name."""
    parts = [n for n, kind in db.objects.items() if kind == "table" and re.fullmatch(re.escape(base) + r"_[0-9a-fA-F_]{8,}", n)]
    if not parts:
        return f'"{base}"' if db.objects.get(base) in ("view", "table") else None
    cols = None
    for p in parts:  # the union needs the same columns in every part
        c = db.columns(p)
        cols = c if cols is None else [x for x in cols if x in c]
    sel = ", ".join(f'"{c}"' for c in cols)
    return "(" + " UNION ALL ".join(f'SELECT {sel} FROM "{p}"' for p in sorted(parts)) + ")"


def time_span(path: str) -> tuple[int, int] | None:
    """First and last kernel-dispatch time of a rocpd file (cheap: two aggregates)."""
    try:
        with Database(path) as db:
            kd = source(db, "rocpd_kernel_dispatch")
            if kd is None:
                return None
            lo, hi = db.rows(f'SELECT min(start), max("end") FROM {kd}')[0]
    except TraceFormatError:
        return None
    lo, hi = coerce.scalar_int(lo), coerce.scalar_int(hi)
    return (lo, hi) if lo is not None and hi is not None else None


def same_run_groups(paths: list[str]) -> list[list[str]]:
    """Per-process rocpd files of one run share one clock and overlap in time."""
    from tracetriage.parsers.common import overlapping_groups

    return overlapping_groups(paths, time_span)


# rocprof (v1, rocprofiler's bin/tblextr.py) writes results.db: kernels in "A" (until 2020) or
# "KERN" (from 2021) keyed by KernelName; HIP/HSA/KFD API calls, COPY, OPS (GPU ops) and rocTX
# ranges with BeginNs/EndNs columns.
ROCPROF_V1_KERNEL_TABLES = ("A", "KERN")
ROCPROF_V1_TRACE_TABLES = ("HIP", "HSA", "KFD", "COPY", "OPS", "rocTX")


def rocprof_v1_tables(db: Database) -> list[str]:
    """The rocprof v1 tables of a database (empty when it is not one): a kernel table with a
    KernelName column, or a trace table with BeginNs and EndNs."""
    found = [t for t in ROCPROF_V1_KERNEL_TABLES if t in db.tables and "KernelName" in db.columns(t)]
    found += [t for t in ROCPROF_V1_TRACE_TABLES if t in db.tables and {"BeginNs", "EndNs"} <= set(db.columns(t))]
    return found


def looks_like_rocpd(db: Database) -> bool:
    """rocpd v3: rocpd_info_*/rocpd_region/rocpd_kernel_dispatch tables or views (UUID-suffixed or not)."""
    return any(n.startswith(("rocpd_kernel_dispatch", "rocpd_info_", "rocpd_region")) for n in db.objects)


def _col(db: Database, base: str, column: str, default: str = "-1", alias: str = "") -> str:
    name = base if db.has(base) else next((n for n in db.objects if n.startswith(base + "_")), base)
    prefix = f"{alias}." if alias else ""
    return f'COALESCE({prefix}"{column}", {default})' if column in db.columns(name) else default


class _Keyed:
    """Vectorized lookup of (guid code, id) -> value."""

    def __init__(self, guid_codes: np.ndarray, ids: np.ndarray, values):
        keys = (np.asarray(guid_codes).astype(np.int64) << _GUID_BITS) + np.asarray(ids).astype(np.int64)
        first = ~pd.Index(keys).duplicated()  # (guid, id) is a key in real files: the first row of a duplicate wins
        self.index = pd.Index(keys[first])
        self.values = np.asarray(values, dtype=object)[first]

    def get(self, guid_codes, ids, default=None):
        pos = self.index.get_indexer((np.asarray(guid_codes, np.int64) << _GUID_BITS) + np.asarray(ids, np.int64))
        out = np.where(pos >= 0, self.values[np.maximum(pos, 0)] if len(self.values) else default, default)
        return out


def parse(path: str) -> Trace:
    with Database(path) as db:
        missing = [b for b in NEEDED if source(db, b) is None]
        if missing:
            raise TraceFormatError(path, f"rocpd database without {', '.join(missing)} (not schema version 3, or cut)")
        version = _schema_version(db)
        if version not in (None, "3"):
            raise TraceFormatError(path, f"rocpd schema_version {version}: this reader knows version 3")
        tables = _Tables(db)
        ids = _Ids(tables)
        trace = Trace(path=str(path), format="rocpd")
        trace.meta["version"] = f"rocpd schema {version or 3}"
        trace.meta["guids"] = ids.guid_count
        region_lookup = _api_and_ranges(trace, tables.regions, ids)
        _add_marks(trace, tables.marks, ids)
        parts = [_kernel_rows(trace, tables, ids, region_lookup)]
        if tables.copies is not None and len(tables.copies):
            parts.append(_copy_rows(tables.copies, ids))
        gpu = pd.concat(parts, ignore_index=True)
        if not len(gpu):
            raise MissingDataError(path, "nothing to analyze: the rocpd database holds no kernel dispatch or copy")
        agents, procs = tables.agents, tables.procs
        names_by_index = {}
        for gi, nm, t in zip(agents["type_index"].to_numpy(np.int64), agents["name"].astype(object),
                             agents["type"].astype(object)):
            if t == "GPU":
                names_by_index.setdefault(int(gi), str(nm))
        commands = dict(zip(ids.real_pid(procs).tolist(), procs["command"].astype(object).tolist())) if procs is not None else {}
        finish_trace(trace, gpu, lambda o: {"name": names_by_index.get(o, "unknown GPU")}, commands)
        trace.meta["graph_trace_mode"] = "node" if bool(trace.gpu["in_graph"].any()) else "unknown"
        if len(trace.api):
            linked = np.isin(trace.gpu["correlation"].to_numpy(), trace.api["correlation"].to_numpy()).mean()
            trace.meta["linked_fraction"] = float(linked)
            if linked < 0.9:
                trace.warnings.append(f"only {linked:.0%} of GPU operations link to their launching call")
        trace.warnings.extend(db.warnings)
        return trace


def _schema_version(db: Database) -> str | None:
    """The ``schema_version`` tag of ``rocpd_metadata`` (None when the database has none)."""
    version = None
    meta_src = source(db, "rocpd_metadata")
    if meta_src:
        for tag, value in db.rows(f"SELECT tag, value FROM {meta_src}"):
            if tag == "schema_version":
                version = str(value)
    return version


class _Tables:
    """The rocpd tables a trace is read from, as frames (None where the database lacks the table),
    and every frame's ``guid`` column in reading order (``guids``)."""

    def __init__(self, db: Database):
        self.db = db
        self.guids: list[pd.Series] = []
        self.strings = self._frame(f"SELECT id, guid, string FROM {source(db, 'rocpd_string')}")
        self.agents = self._frame(f"SELECT id, guid, type, {_col(db, 'rocpd_info_agent', 'type_index')} AS type_index, "
                                  f"COALESCE(product_name, name, '') AS name FROM {source(db, 'rocpd_info_agent')}")
        proc_src = source(db, "rocpd_info_process")
        self.procs = self._frame(f"SELECT id, guid, pid, COALESCE(command, '') AS command FROM {proc_src}") if proc_src else None
        thr_src = source(db, "rocpd_info_thread")
        self.threads = self._frame(f"SELECT id, guid, tid FROM {thr_src}") if thr_src else None
        sym_src = source(db, "rocpd_info_kernel_symbol")
        self.syms = (self._frame(f"SELECT id, guid, COALESCE(display_name, kernel_name, '') AS name FROM {sym_src}")
                     if sym_src else None)
        self.ev_src = source(db, "rocpd_event")
        self.kernels = self._kernels()
        self.regions = self._regions()
        self.marks = self._marks()
        self.copies = self._copies()

    def _frame(self, sql: str) -> pd.DataFrame:
        df = self.db.frame(sql, text=("guid", "string", "type", "name", "command"))
        if "guid" in df.columns:
            self.guids.append(df["guid"])
        return df

    def _event(self, alias: str, column: str) -> tuple[str, str]:
        """(join, column) for a row's rocpd_event; -1 when the table is absent."""
        if not self.ev_src:
            return "", "-1"
        return (f"LEFT JOIN {self.ev_src} e ON e.id = {alias}.event_id AND e.guid = {alias}.guid",
                f"COALESCE(e.{column}, -1)")

    def _kernels(self) -> pd.DataFrame:
        kd = source(self.db, "rocpd_kernel_dispatch")
        ev_join, stack = self._event("k", "stack_id")
        return self._frame(
            f"SELECT k.guid AS guid, k.pid AS pid, {_col(self.db, 'rocpd_kernel_dispatch', 'tid', '-1', 'k')} AS tid, "
            f"k.agent_id AS agent, k.kernel_id AS kernel_id, COALESCE(k.stream_id, -1) AS stream, "
            f"COALESCE(k.queue_id, -1) AS queue, k.start AS start, k.\"end\" AS \"end\", {stack} AS corr FROM {kd} k {ev_join}"
        )

    def _regions(self) -> pd.DataFrame | None:
        reg_src = source(self.db, "rocpd_region")
        if not reg_src:
            return None
        rj, cat = self._event("r", "category_id")
        parent = self._event("r", "parent_stack_id")[1]
        return self._frame(
            f"SELECT r.id AS id, r.guid AS guid, r.pid AS pid, r.tid AS tid, r.start AS start, r.\"end\" AS \"end\", "
            f"r.name_id AS name_id, {cat} AS category_id, {parent} AS parent FROM {reg_src} r {rj}"
        )

    def _marks(self) -> pd.DataFrame | None:
        smp_src, trk_src = source(self.db, "rocpd_sample"), source(self.db, "rocpd_track")
        if not (smp_src and trk_src):
            return None
        ej, cat = self._event("s", "category_id")
        return self._frame(
            f"SELECT s.guid AS guid, COALESCE(t.pid, -1) AS pid, COALESCE(t.tid, -1) AS tid, s.timestamp AS start, "
            f"COALESCE(t.name_id, -1) AS name_id, {cat} AS category_id FROM {smp_src} s "
            f"LEFT JOIN {trk_src} t ON t.id = s.track_id AND t.guid = s.guid {ej}"
        )

    def _copies(self) -> pd.DataFrame | None:
        mc_src = source(self.db, "rocpd_memory_copy")
        if not mc_src:
            return None
        mj, mstack = self._event("m", "stack_id")
        return self._frame(
            f"SELECT m.guid AS guid, m.pid AS pid, m.start AS start, m.\"end\" AS \"end\", m.name_id AS name_id, "
            f"COALESCE(m.src_agent_id, -1) AS src, COALESCE(m.dst_agent_id, -1) AS dst, COALESCE(m.size, 0) AS size, "
            f"COALESCE(m.stream_id, -1) AS stream, {mstack} AS corr FROM {mc_src} m {mj}"
        )


class _Ids:
    """Ids in a rocpd database are per guid (one per process run): every lookup is keyed on
    (guid code, id). Strings, agent types and indices, and the real pid and tid of process and
    thread ids."""

    def __init__(self, tables: _Tables):
        guids = tables.guids
        all_guids = pd.concat(guids, ignore_index=True).astype(str) if guids else pd.Series([], dtype=str)
        _, guid_uniq = pd.factorize(all_guids)
        self.guid_count = len(guid_uniq)
        self.gcode = {g: i for i, g in enumerate(guid_uniq)}
        gc = self.gc
        strings, agents, procs, threads = tables.strings, tables.agents, tables.procs, tables.threads
        self.string_of = _Keyed(gc(strings), strings["id"].to_numpy(np.int64), strings["string"].astype(object))
        self.agent_type = _Keyed(gc(agents), agents["id"].to_numpy(np.int64), agents["type"].astype(object))
        self.agent_index = _Keyed(gc(agents), agents["id"].to_numpy(np.int64), agents["type_index"].to_numpy(np.int64))
        self.pid_of = (_Keyed(gc(procs), procs["id"].to_numpy(np.int64), procs["pid"].to_numpy(np.int64))
                       if procs is not None and len(procs) else None)
        self.tid_of = (_Keyed(gc(threads), threads["id"].to_numpy(np.int64), threads["tid"].to_numpy(np.int64))
                       if threads is not None and len(threads) else None)

    def gc(self, df: pd.DataFrame) -> np.ndarray:
        """Each row's guid code."""
        return df["guid"].astype(str).map(self.gcode).to_numpy(np.int64)

    def real_pid(self, df: pd.DataFrame) -> np.ndarray:
        if self.pid_of is None:
            return df["pid"].to_numpy(np.int64)
        got = self.pid_of.get(self.gc(df), df["pid"].to_numpy(np.int64), default=-1)
        return np.where(got == -1, df["pid"].to_numpy(np.int64), got).astype(np.int64)

    def real_tid(self, df: pd.DataFrame) -> np.ndarray:
        if self.tid_of is None or "tid" not in df:
            return df["tid"].to_numpy(np.int64) if "tid" in df else np.zeros(len(df), np.int64)
        got = self.tid_of.get(self.gc(df), df["tid"].to_numpy(np.int64), default=-1)
        return np.where(got == -1, df["tid"].to_numpy(np.int64), got).astype(np.int64)

    def corr_key(self, df: pd.DataFrame, col: str = "corr") -> np.ndarray:
        """A correlation id unique across guids (-1 where the row has none)."""
        c = df[col].to_numpy(np.int64)
        return np.where(c >= 0, (self.gc(df) << _GUID_BITS) + c, -1)


def _api_and_ranges(trace: Trace, regions: pd.DataFrame | None, ids: _Ids) -> pd.DataFrame:
    """API regions into ``trace.api`` and marker regions into ``trace.ranges``; the regions by key
    (name, parent key) that kernels are tied to their launching call with."""
    if regions is None or not len(regions):
        return pd.DataFrame({"key": [], "name": [], "parent": []})
    g = ids.gc(regions)
    region_name = ids.string_of.get(g, regions["name_id"].to_numpy(np.int64), default="<unknown>")
    category = ids.string_of.get(g, regions["category_id"].to_numpy(np.int64), default="")
    is_marker = per_distinct(category, lambda c: bool(_MARKER.search(str(c)))).astype(bool)
    pids, tids = ids.real_pid(regions), ids.real_tid(regions)
    rid = (g << _GUID_BITS) + regions["id"].to_numpy(np.int64)
    names = pd.Categorical(region_name.astype(object))
    cats = pd.Categorical([api_category(str(c)) for c in names.categories])
    api_cat = pd.Categorical(np.asarray(cats)[names.codes], categories=API_CATEGORIES)
    api = pd.DataFrame({
        "pid": pids, "tid": tids, "start": regions["start"].to_numpy(np.int64),
        "end": regions["end"].to_numpy(np.int64), "name": names, "category": api_cat, "correlation": rid,
    })
    trace.api = api[~is_marker].sort_values("start", kind="stable", ignore_index=True)
    trace.api["name"] = compact_categorical(trace.api["name"].array.codes, trace.api["name"].cat.categories)
    rng = api[is_marker]
    trace.ranges = pd.DataFrame({
        "pid": rng["pid"].to_numpy(), "tid": rng["tid"].to_numpy(), "start": rng["start"].to_numpy(),
        "end": rng["end"].to_numpy(), "name": pd.Categorical(rng["name"].astype(object)),
        "domain": pd.Categorical(np.asarray(category, dtype=object)[is_marker]),
    }).sort_values("start", kind="stable", ignore_index=True)
    return pd.DataFrame({"key": rid, "name": region_name.astype(object),
                         "parent": np.where(regions["parent"].to_numpy(np.int64) >= 0,
                                            (g << _GUID_BITS) + regions["parent"].to_numpy(np.int64), -1)})


def _add_marks(trace: Trace, marks: pd.DataFrame | None, ids: _Ids) -> None:
    """Instant roctx marks (samples on a marker track) added to ``trace.ranges`` as ranges of zero length."""
    if marks is None or not len(marks):
        return
    mg = ids.gc(marks)
    mname = ids.string_of.get(mg, marks["name_id"].to_numpy(np.int64), default="mark")
    mcat = ids.string_of.get(mg, marks["category_id"].to_numpy(np.int64), default="roctx")
    keep = per_distinct(mcat, lambda c: not c or bool(_MARKER.search(str(c))) or c == "roctx").astype(bool)
    if keep.any():
        m = marks[keep]
        start = m["start"].to_numpy(np.int64)
        mark_rows = pd.DataFrame({
            "pid": ids.real_pid(m), "tid": ids.real_tid(m), "start": start, "end": start,
            "name": pd.Categorical(np.asarray(mname, dtype=object)[keep]),
            "domain": pd.Categorical(np.asarray(mcat, dtype=object)[keep]),
        })
        from tracetriage.model import merge_frames

        trace.ranges = merge_frames([trace.ranges, mark_rows])


def _kernel_rows(trace: Trace, tables: _Tables, ids: _Ids, region_lookup: pd.DataFrame) -> pd.DataFrame:
    """The kernel dispatches as GPU rows (blit kernels as copies and memsets), RCCL kernels given
    their call's op and graph kernels marked; a warning when a dispatch names a non-GPU agent."""
    kernels, syms = tables.kernels, tables.syms
    kg = ids.gc(kernels)
    kname = _Keyed(ids.gc(syms), syms["id"].to_numpy(np.int64), syms["name"].astype(object)).get(
        kg, kernels["kernel_id"].to_numpy(np.int64), default="<unknown kernel>") if syms is not None and len(syms) \
        else np.full(len(kernels), "<unknown kernel>", dtype=object)
    kinds = per_distinct(kname, blit_kind)
    kcorr = ids.corr_key(kernels)
    ops = per_distinct(kname, lambda n: collective_op(str(n)))
    ops = _rccl_ops_from_api(ops, kcorr, region_lookup)
    # Graph kernels are traced one by one; they are graph work when hipGraphLaunch launched them.
    if len(region_lookup):
        rpos = pd.Index(region_lookup["key"].to_numpy(np.int64)).get_indexer(kcorr)
        launcher = np.where(rpos >= 0, region_lookup["name"].to_numpy(object)[np.maximum(rpos, 0)], "")
        k_in_graph = np.asarray(launcher == "hipGraphLaunch", dtype=bool)
    else:
        k_in_graph = np.zeros(len(kernels), bool)
    is_gpu = ids.agent_type.get(kg, kernels["agent"].to_numpy(np.int64), default="GPU")
    gpu_index = ids.agent_index.get(kg, kernels["agent"].to_numpy(np.int64), default=-1)
    if (np.asarray(is_gpu) != "GPU").any():
        trace.warnings.append("some dispatches name a non-GPU agent")
    return pd.DataFrame({
        "pid": ids.real_pid(kernels), "ordinal": np.asarray(gpu_index, dtype=np.int64),
        "stream": kernels["stream"].to_numpy(np.int64), "start": kernels["start"].to_numpy(np.int64),
        "end": kernels["end"].to_numpy(np.int64), "kind": kinds, "name": kname.astype(object), "correlation": kcorr,
        "collective": np.where(kinds == "kernel", ops, None), "bytes": blit_bytes(kinds),
        "copy_kind": np.where(kinds == "memcpy", "other", None), "pageable": np.zeros(len(kernels), bool),
        "in_graph": k_in_graph,
    })


def _copy_rows(copies: pd.DataFrame, ids: _Ids) -> pd.DataFrame:
    """The memory copies as GPU rows, on the GPU agent of the pair."""
    cg = ids.gc(copies)
    direction = ids.string_of.get(cg, copies["name_id"].to_numpy(np.int64), default="")
    ck = per_distinct(direction, lambda d: copy_direction(str(d)))
    src_gpu = ids.agent_type.get(cg, copies["src"].to_numpy(np.int64), default="") == "GPU"
    dst_gpu = ids.agent_type.get(cg, copies["dst"].to_numpy(np.int64), default="") == "GPU"
    dev_agent = np.where(dst_gpu & ~src_gpu, copies["dst"].to_numpy(np.int64), copies["src"].to_numpy(np.int64))
    return pd.DataFrame({
        "pid": ids.real_pid(copies), "ordinal": np.asarray(ids.agent_index.get(cg, dev_agent, default=-1), dtype=np.int64),
        "stream": copies["stream"].to_numpy(np.int64), "start": copies["start"].to_numpy(np.int64),
        "end": copies["end"].to_numpy(np.int64), "kind": "memcpy",
        "name": per_distinct(ck, lambda k: f"memcpy {k}"), "correlation": ids.corr_key(copies),
        "collective": None, "bytes": copies["size"].to_numpy(np.int64), "copy_kind": ck,
        "pageable": np.zeros(len(copies), bool), "in_graph": np.zeros(len(copies), bool),
    })


def _rccl_ops_from_api(ops: np.ndarray, corr: np.ndarray, regions: pd.DataFrame) -> np.ndarray:
    """Give generically named RCCL kernels the op of the RCCL call that launched them:
    the launching region, else its parent, else its grandparent (vectorized)."""
    generic = ops == "Collective"
    if not generic.any() or regions.empty:
        return ops
    idx = pd.Index(regions["key"].to_numpy(np.int64))
    region_op = per_distinct(regions["name"].to_numpy(object), lambda n: rccl_api_op(str(n)))
    parents = regions["parent"].to_numpy(np.int64)
    pos = idx.get_indexer(corr[generic])
    found = np.full(pos.size, None, dtype=object)
    for _ in range(3):
        here = np.where(pos >= 0, region_op[np.maximum(pos, 0)], None)
        take = pd.isna(found) & pd.notna(here)
        found[take] = here[take]
        parent = np.where(pos >= 0, parents[np.maximum(pos, 0)], -1)
        pos = np.where(parent >= 0, idx.get_indexer(parent), -1)
    out = ops.copy()
    out[generic] = np.where(pd.notna(found), found, "Collective")
    return out
