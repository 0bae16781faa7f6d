"""The event tables of an Nsight Systems export as the model's columns: kernels, copies,
memsets and graph replays (GPU activity), runtime/driver API calls, synchronizations, NVTX
ranges and the PyTorch operators in them. String ids resolve through ``StringIds``
(:class:`StringTable`). parsers/nsys.py assembles the trace."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
from pandas.api.types import union_categoricals

from tracetriage.errors import TraceFormatError
from tracetriage.model import (
    API_CATEGORIES,
    COLLECTIVE_OPS,
    COPY_KINDS,
    GPU_KINDS,
    SYNC_TYPES,
    Trace,
    api_category,
    collective_op,
    is_one_value_view,
    one_value_view,
    strip_api_version,
)
from tracetriage.order import start_order
from tracetriage.parsers import coerce, torch_nvtx
from tracetriage.parsers.common import code_dtype, compact_categorical, per_category
from tracetriage.parsers.nsys_metadata import enum_names
from tracetriage.parsers.sqlite import Database, concat_columns

KERNEL = "CUPTI_ACTIVITY_KIND_KERNEL"
MEMCPY = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET = "CUPTI_ACTIVITY_KIND_MEMSET"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
SYNC = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
NVTX = "NVTX_EVENTS"

# nsys's own numbering, used when the ENUM_* tables were not exported (2021 schema).
_COPY_KIND_IDS = {1: "HtoD", 2: "DtoH", 8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM_HtoD", 12: "UVM_DtoH", 13: "UVM_DtoD"}
_PAGEABLE_KIND_ID = 0
_SYNC_TYPE_IDS = {1: "event_sync", 2: "stream_wait_event", 3: "stream_sync", 4: "context_sync"}
_NVTX_RANGE_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxtPushPopRange": 70, "NvtxtStartEndRange": 71}
_NVTX_MARK_TYPES = {"NvtxMark": 34, "NvtxtMark": 65}
_NVTX_DOMAIN_CREATE = {"NvtxDomainCreate": 75}


def pid_of(gid: np.ndarray) -> np.ndarray:
    return (gid >> 24) & 0xFFFFFF


def tid_of(gid: np.ndarray) -> np.ndarray:
    return gid & 0xFFFFFF


class StringTable:
    """StringIds as a vectorized id -> categorical mapping (duplicates folded)."""

    def __init__(self, db: Database):
        df = db.frame("SELECT COALESCE(id, -1) AS id, COALESCE(value, '') AS value FROM StringIds", text=("value",))
        if df["id"].duplicated().any():  # ids are a primary key in real exports: keep the first of each
            db.warnings.append(f"StringIds: {int(df['id'].duplicated().sum()):,} duplicate ids ignored")
            df = df[~df["id"].duplicated()].reset_index(drop=True)
        ids = df["id"].to_numpy(dtype=np.int64)
        codes, uniques = pd.factorize(df["value"].astype(object))
        self.index = pd.Index(ids)
        self.codes = codes.astype(np.int64)
        # Ids are dense small integers in practice: a lookup table beats hashing.
        self.lut = None
        if len(ids) and ids.min() >= 0 and ids.max() < 50_000_000:
            self.lut = np.full(int(ids.max()) + 1, -1, dtype=np.int32)
            self.lut[ids] = self.codes
        self.categories = pd.Index(uniques.astype(object))
        self.by_id = dict(zip(ids.tolist(), df["value"].astype(object).tolist()))

    def codes_of(self, ids: np.ndarray) -> np.ndarray:
        """Category codes (into ``self.categories``) of string ids; -1 when unknown."""
        ids = np.asarray(ids, dtype=np.int64)
        if not len(self.codes):
            return np.full(ids.shape, -1, dtype=np.int32)
        if self.lut is not None:
            if ids.size and ids.min() >= 0 and ids.max() < len(self.lut):  # every id in the table's range
                return self.lut[ids]
            inside = (ids >= 0) & (ids < len(self.lut))
            return np.where(inside, self.lut[np.where(inside, ids, 0)], -1).astype(np.int32)
        pos = self.index.get_indexer(ids)
        return np.where(pos >= 0, self.codes[np.maximum(pos, 0)], -1).astype(np.int32)

    def categorical(self, ids: np.ndarray) -> pd.Categorical:
        return compact_categorical(self.codes_of(ids), self.categories)

    def get(self, sid, default=None):
        return self.by_id.get(int(sid), default)


def _col(db: Database, table: str, column: str, default: str = "-1") -> str:
    """The column in a select list, its NULLs (or its absence) read as ``default``."""
    return db.column_expr(table, column, int(default))


def _int_column(tbl, name: str, dtype=np.int64, warnings: list | None = None) -> np.ndarray:
    """An integer column of one fetched range: a view of the Arrow buffer when it is one
    int64 chunk (the reader copies it into the table's column right away, and a range
    small enough to be kept as fetched keeps little); anything that is not an integer goes
    through parsers/coerce.py (-1, counted)."""
    col = tbl.column(name)
    if pa.types.is_integer(col.type):
        return np.asarray(col.to_numpy(), dtype=dtype)
    return coerce.int64(col.to_numpy(zero_copy_only=False), name, warnings).astype(dtype)


def _gpu_rows(df: pd.DataFrame, kind: str, name, *, collective=None, nbytes=None, copy_kind=None,
              pageable=None, in_graph=None) -> pd.DataFrame:
    """The common columns of one GPU activity table, shaped for the model's ``gpu`` table.

    Categorical columns are built from codes (no Python object per row); ``name`` is
    any categorical, the others take values of their fixed category lists.
    """
    n = len(df)
    return dict(
        {
            "dev": df["dev"].to_numpy(np.int64),
            "stream": df["stream"].to_numpy(np.int64),
            "start": df["start"].to_numpy(np.int64),
            "end": df["end"].to_numpy(np.int64),
            "kind": pd.Categorical.from_codes(np.full(n, GPU_KINDS.index(kind), np.int8), categories=GPU_KINDS),
            "name": name,
            "correlation": df["correlation"].to_numpy(np.int64),
            "pid": pid_of(df["gpid"].to_numpy(np.int64)),
            "collective": _fixed(collective, COLLECTIVE_OPS, n),
            "bytes": np.zeros(n, dtype=np.int64) if nbytes is None else nbytes,
            "copy_kind": _fixed(copy_kind, COPY_KINDS, n),
            "pageable": np.zeros(n, dtype=bool) if pageable is None else pageable,
            "in_graph": df["node"].to_numpy(np.int64) >= 0 if in_graph is None else np.asarray(in_graph, dtype=bool),
        }
    )


def _fixed(values, categories: list[str], n: int) -> pd.Categorical:
    """A categorical over a fixed category list from an object array (or all missing)."""
    if values is None:
        return pd.Categorical.from_codes(np.full(n, -1, np.int8), categories=categories)
    codes, uniq = pd.factorize(np.asarray(values, dtype=object))
    lut = np.array([categories.index(u) if u in categories else -1 for u in uniq] + [-1], dtype=np.int8)
    return pd.Categorical.from_codes(lut[np.where(codes < 0, len(uniq), codes)], categories=categories)


def _object_categories(col) -> pd.Categorical:
    """The same categorical with object-dtype categories (pandas 3 may infer "str")."""
    cat = col.array if isinstance(col, pd.Series) else col
    if not isinstance(cat, pd.Categorical):
        cat = pd.Categorical(np.asarray(col, dtype=object))
    return pd.Categorical.from_codes(cat.codes, categories=pd.Index(np.asarray(cat.categories, dtype=object), dtype=object))


def concat_gpu_tables(parts: list[dict]) -> dict:
    """The GPU tables (kernels, copies, memsets, replays) as one set of columns: names
    unioned as categoricals, the rest concatenated column by column."""
    names = union_categoricals([_object_categories(p.pop("name")) for p in parts])
    out = concat_columns(parts)
    out["name"] = names
    return out


def read_kernels(db: Database, strings: StringTable) -> dict | None:
    """Kernel rows, streamed: each chunk becomes compact arrays in its reader thread."""
    if not db.has(KERNEL):
        return None
    name_col = "shortName" if db.has_column(KERNEL, "shortName") else "demangledName"
    if not db.has_column(KERNEL, name_col):
        raise TraceFormatError(db.path, f"{KERNEL} has neither shortName nor demangledName")
    columns = {"start": ("start", 0), "end": ("end", 0), "dev": ("deviceId", -1), "stream": ("streamId", -1),
               "correlation": ("correlationId", -1), "gpid": ("globalPid", 0), "name_id": (name_col, -1),
               "node": ("graphNodeId", -1)}
    w = db.warnings

    def convert(tbl) -> dict:  # a column holding one value stays that value (no memory per row)
        one = one_value_view
        return {
            "dev": one(_int_column(tbl, "dev", warnings=w)), "stream": one(_int_column(tbl, "stream", np.int32, w)),
            "start": _int_column(tbl, "start", warnings=w), "end": _int_column(tbl, "end", warnings=w),
            "correlation": _int_column(tbl, "correlation", warnings=w),
            "pid": one(pid_of(_int_column(tbl, "gpid", warnings=w))),
            "name_code": strings.codes_of(_int_column(tbl, "name_id", warnings=w)),
            "in_graph": one(_int_column(tbl, "node", warnings=w) >= 0),
        }

    cols = db.scan_columns(KERNEL, columns, convert)
    n = len(cols["start"])
    if not n:
        return None
    name = compact_categorical(cols.pop("name_code"), strings.categories)
    cols["kind"] = pd.Categorical.from_codes(np.zeros(n, np.int8), categories=GPU_KINDS)
    cols["name"] = name
    cols["collective"] = per_category(name, collective_op, COLLECTIVE_OPS)
    # Kernels move no bytes: a read-only zero-stride column costs no memory (80 MB at 10M).
    cols["bytes"] = np.broadcast_to(np.int64(0), (n,))
    cols["copy_kind"] = pd.Categorical.from_codes(np.full(n, -1, np.int8), categories=COPY_KINDS)
    cols["pageable"] = np.broadcast_to(np.False_, (n,))
    return cols


def read_copies(db: Database, table: str, kind: str) -> pd.DataFrame | None:
    if not db.has(table):
        return None
    is_copy = kind == "memcpy"
    df = db.frame(
        f"SELECT {_col(db, table, 'start', '0')} AS start, {_col(db, table, 'end', '0')} AS end, "
        f"{_col(db, table, 'deviceId')} AS dev, {_col(db, table, 'streamId')} AS stream, "
        f"{_col(db, table, 'correlationId')} AS correlation, {_col(db, table, 'globalPid', '0')} AS gpid, "
        f"{_col(db, table, 'bytes', '0')} AS bytes, "
        f"{_col(db, table, 'copyKind') if is_copy else '-1'} AS copy_kind, "
        f"{_col(db, table, 'srcKind') if is_copy else '-1'} AS src_kind, "
        f"{_col(db, table, 'dstKind') if is_copy else '-1'} AS dst_kind, "
        f"{_col(db, table, 'graphNodeId')} AS node FROM {table} WHERE {{rowid}}",
        split=table,
    )
    n = len(df)
    if not n:
        return None
    if is_copy:
        copy_names = _copy_kind_names(db)
        kinds = df["copy_kind"].map(copy_names).fillna("other").to_numpy(object)
        pageable_id = _pageable_id(db)
        src = df["src_kind"].to_numpy(np.int64)
        dst = df["dst_kind"].to_numpy(np.int64)
        pageable = ((kinds == "HtoD") & (src == pageable_id)) | ((kinds == "DtoH") & (dst == pageable_id))
        names = np.char.add("memcpy ", kinds.astype(str)) if n else np.array([], dtype=object)
    else:
        kinds = np.full(n, None, dtype=object)
        pageable = np.zeros(n, dtype=bool)
        names = np.full(n, "memset", dtype=object)
    return _gpu_rows(df, kind, pd.Categorical(names.astype(object)), nbytes=df["bytes"].to_numpy(np.int64),
                     copy_kind=kinds, pageable=pageable)


def _copy_kind_names(db: Database) -> dict[int, str]:
    enum = enum_names(db, "ENUM_CUDA_MEMCPY_OPER")
    if not enum:
        return dict(_COPY_KIND_IDS)
    out = {}
    for i, name in enum.items():
        m = re.search(r"(UVM_)?(HTOD|DTOH|DTOD|HTOH|PTOP)$", name.upper())
        kind = {"HTOD": "HtoD", "DTOH": "DtoH", "DTOD": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP"}[m.group(2)] if m else "other"
        out[i] = ("UVM_" + kind) if m and m.group(1) else kind
    return out


def _pageable_id(db: Database) -> int:
    for i, name in enum_names(db, "ENUM_CUDA_MEM_KIND").items():
        if name.upper().endswith("PAGEABLE"):
            return i
    return _PAGEABLE_KIND_ID


def read_graph_replays(db: Database) -> pd.DataFrame | None:
    if not db.has(GRAPH_TRACE):
        return None
    t = GRAPH_TRACE
    df = db.frame(
        f"SELECT {_col(db, t, 'start', '0')} AS start, {_col(db, t, 'end', '0')} AS end, "
        f"{_col(db, t, 'deviceId')} AS dev, {_col(db, t, 'streamId')} AS stream, "
        f"{_col(db, t, 'correlationId')} AS correlation, {_col(db, t, 'globalPid', '0')} AS gpid, "
        f"{_col(db, t, 'graphId')} AS graph FROM {t} WHERE {{rowid}}",
        split=t,
    )
    codes, uniq = pd.factorize(df["graph"])  # name each distinct graph once
    names = pd.Categorical.from_codes(codes, categories=[f"graph {g}" for g in uniq])
    df["node"] = 0  # a replay is graph work by definition
    return _gpu_rows(df, "graph", names)


def read_api(db: Database, strings: StringTable) -> pd.DataFrame | None:
    """Runtime/driver calls, streamed like the kernels."""
    if not db.has(RUNTIME):
        return None
    t = RUNTIME
    columns = {"start": ("start", 0), "end": ("end", 0), "gtid": ("globalTid", 0), "correlation": ("correlationId", -1),
               "name_id": ("nameId", -1)}

    w = db.warnings

    def convert(tbl) -> dict:
        gtid = _int_column(tbl, "gtid", warnings=w)  # one process, one thread: no column each
        return {"pid": one_value_view(pid_of(gtid)), "tid": one_value_view(tid_of(gtid).astype(np.int32)),
                "start": _int_column(tbl, "start", warnings=w),
                "end": _int_column(tbl, "end", warnings=w),
                "name_code": strings.codes_of(_int_column(tbl, "name_id", warnings=w)),
                "correlation": _int_column(tbl, "correlation", warnings=w)}

    cols = db.scan_columns(t, columns, convert)
    if not cols or not len(cols["start"]):
        return None
    # In start order but for the few rows a multi-threaded capture writes late: put in place, not sorted.
    plan = start_order(cols["start"])
    if plan is not None:
        for k in list(cols):  # in place, one column at a time (one value in every row: in any order already)
            if not is_one_value_view(cols[k]):
                cols[k] = plan.apply(cols[k])
    raw = compact_categorical(cols.pop("name_code"), strings.categories)
    # Strip the version suffix once per distinct name, then re-intern.
    stripped = [strip_api_version(str(c)) for c in raw.categories]
    codes, uniq = pd.factorize(pd.Index(stripped + ["<unknown>"]))
    lut = codes.astype(code_dtype(len(uniq)))
    name = pd.Categorical.from_codes(lut[np.asarray(raw.codes)],  # code -1 takes the last slot: <unknown>
                                     categories=pd.Index(np.asarray(uniq, dtype=object), dtype=object))
    return pd.DataFrame({
        "pid": cols.pop("pid"), "tid": cols.pop("tid"), "start": cols.pop("start"), "end": cols.pop("end"),
        "name": name, "category": per_category(name, api_category, API_CATEGORIES),
        "correlation": cols.pop("correlation"),
    }, copy=False)


def read_syncs(db: Database) -> pd.DataFrame | None:
    if not db.has(SYNC):
        return None
    t = SYNC
    df = db.frame(
        f"SELECT {_col(db, t, 'start', '0')} AS start, {_col(db, t, 'end', '0')} AS end, "
        f"{_col(db, t, 'globalPid', '0')} AS gpid, {_col(db, t, 'syncType', '0')} AS sync_type, "
        f"{_col(db, t, 'correlationId')} AS correlation FROM {t} WHERE {{rowid}}",
        split=t,
    )
    enum = enum_names(db, "ENUM_CUPTI_SYNC_TYPE")
    names = dict(_SYNC_TYPE_IDS)
    for i, n in enum.items():
        u = n.upper()
        for key, label in (("EVENT_SYNCHRONIZE", "event_sync"), ("STREAM_WAIT_EVENT", "stream_wait_event"),
                           ("STREAM_SYNCHRONIZE", "stream_sync"), ("CONTEXT_SYNCHRONIZE", "context_sync")):
            if u.endswith(key):
                names[i] = label
    types = df["sync_type"].map(names).fillna("unknown")
    return pd.DataFrame(
        {
            "pid": pid_of(df["gpid"].to_numpy(np.int64)),
            "start": df["start"].to_numpy(np.int64),
            "end": df["end"].to_numpy(np.int64),
            "sync_type": pd.Categorical(types.astype(object), categories=SYNC_TYPES),
            "correlation": df["correlation"].to_numpy(np.int64),
        }
    )


def read_ranges(db: Database, strings: StringTable) -> pd.DataFrame | None:
    if not db.has(NVTX):
        return None
    t = NVTX
    event_types = {v: k for k, v in enum_names(db, "ENUM_NSYS_EVENT_TYPE").items()}
    def ids(table):
        return [event_types.get(name, default) for name, default in table.items()]
    range_ids, mark_ids, domain_ids = ids(_NVTX_RANGE_TYPES), ids(_NVTX_MARK_TYPES), ids(_NVTX_DOMAIN_CREATE)
    has_text = db.has_column(t, "text")
    text = "text" if has_text else "NULL"
    wanted = ",".join(str(i) for i in range_ids + mark_ids)
    df = db.frame(
        f"SELECT {_col(db, t, 'start', '0')} AS start, COALESCE(\"end\", start) AS end, "
        f"{_col(db, t, 'eventType')} AS etype, {_col(db, t, 'globalTid', '0')} AS gtid, "
        f"{_col(db, t, 'textId')} AS text_id, {_col(db, t, 'domainId', '0')} AS domain_id, "
        f"{text} AS text FROM {t} WHERE eventType IN ({wanted}) AND {{rowid}}",
        split=t, text=("text",),
    )
    domains: dict[int, str] = {}
    if db.has_column(t, "domainId"):
        did = ",".join(str(i) for i in domain_ids)
        for dom, txt, tid_ in db.rows(
            f"SELECT domainId, {text}, {'textId' if db.has_column(t, 'textId') else 'NULL'} "
            f"FROM {t} WHERE eventType IN ({did})"
        ):
            label = txt if txt else strings.get(coerce.scalar_int(tid_, -1))
            dom = coerce.scalar_int(dom)  # a damaged row holds text here
            if dom is not None and label:
                domains[dom] = coerce.text(label)
    n = len(df)
    text_vals = df["text"].astype(object).to_numpy() if n else np.array([], dtype=object)
    missing = pd.isna(text_vals)
    if missing.any():
        from_ids = np.asarray(strings.categorical(df["text_id"].to_numpy(np.int64)[missing]).astype(object))
        text_vals = text_vals.copy()
        text_vals[missing] = from_ids
    text_vals = np.where(pd.isna(text_vals), "<unnamed>", text_vals)
    dom_codes, dom_uniq = pd.factorize(df["domain_id"])
    dom_labels = [
        domains.get(int(d), "default" if int(d) == 0 else f"domain {int(d)}") for d in dom_uniq
    ]
    gtid = df["gtid"].to_numpy(np.int64)
    return pd.DataFrame(
        {
            "pid": pid_of(gtid),
            "tid": tid_of(gtid),
            "start": df["start"].to_numpy(np.int64),
            "end": np.maximum(df["end"].to_numpy(np.int64), df["start"].to_numpy(np.int64)),
            "name": pd.Categorical(text_vals),
            "domain": pd.Categorical.from_codes(dom_codes, categories=pd.Index(dom_labels).unique())
            if len(set(dom_labels)) == len(dom_labels)
            else pd.Categorical(np.array(dom_labels, dtype=object)[dom_codes]),
        }
    )


OSRT = "OSRT_API"
OSRT_MIN_NS = 100_000  # OS runtime calls kept as host ranges: 100 us or longer (analyzers/host_activity.py)
OSRT_MAX = 20_000  # the longest this many


def read_os_calls(db: Database, strings: StringTable) -> list[list]:
    """The longest OS runtime calls (``nsys --trace=osrt``: poll, read, pthread_cond_wait, ...) of
    OSRT_MIN_NS or longer, at most OSRT_MAX, in start order, as ``[pid, tid, start, end, name]`` rows:
    what a host thread waited in while a GPU idled. Empty without the table."""
    if not db.has(OSRT) or not all(db.has_column(OSRT, c) for c in ("start", "end", "globalTid", "nameId")):
        return []
    rows = db.rows(f'SELECT start, "end", globalTid, nameId FROM {OSRT} WHERE "end" - start >= ? '
                   f'ORDER BY "end" - start DESC LIMIT ?', (OSRT_MIN_NS, OSRT_MAX))
    out = []
    for start, end, gtid, name_id in rows:
        start, end, gtid, name_id = (coerce.scalar_int(v) for v in (start, end, gtid, name_id))
        if None in (start, end, gtid):
            continue
        name = strings.get(name_id, None) if name_id is not None else None
        out.append([int(pid_of(np.int64(gtid))), int(tid_of(np.int64(gtid))), start, end,
                    coerce.text(name)[:300] if name is not None else "<unnamed OS call>"])
    return sorted(out, key=lambda row: (row[2], row[3]))


def read_nvtx_ops(db: Database, strings: StringTable, trace: Trace) -> None:
    """Operator shapes from PyTorch's NVTX operator ranges (``nsys profile
    --pytorch=autograd-shapes-nvtx``) into ``ops`` / ``op_kernels`` (parsers/torch_nvtx.py), each
    op's dtype from the full names of the kernels it launched. ``meta["nvtx_ops"]`` counts the
    operator ranges, those with shapes and the shaped ops left without a dtype."""
    if not len(trace.ranges):
        return
    ops, op_kernels, counts = torch_nvtx.link(trace.ranges, trace.api)
    if counts["op_ranges"]:
        trace.meta["nvtx_ops"] = counts
    if ops.empty:
        return
    ops, counts["without_dtype"] = torch_nvtx.set_dtypes(ops, op_kernels, _launched_kernels(db, strings, op_kernels))
    trace.ops, trace.op_kernels = ops, op_kernels


def _launched_kernels(db: Database, strings: StringTable, op_kernels: pd.DataFrame) -> pd.DataFrame:
    """pid, correlation and full name (``demangledName``: the template arguments carry the data
    type, ``shortName`` drops them) of the kernels the ops' launch calls made: one scan of the
    kernel table's ids, rows kept by correlation id."""
    out = {"pid": [np.empty(0, np.int64)], "correlation": [np.empty(0, np.int64)], "name": [np.empty(0, np.int32)]}
    col = next((c for c in ("demangledName", "shortName") if db.has_column(KERNEL, c)), None)
    if not db.has(KERNEL) or col is None or op_kernels.empty:
        return pd.DataFrame({k: v[0] for k, v in out.items()})
    wanted = np.unique(op_kernels["correlation"].to_numpy(np.int64))
    sql = (f"SELECT {_col(db, KERNEL, 'correlationId')} AS correlation, {_col(db, KERNEL, 'globalPid', '0')} AS gpid, "
           f"{_col(db, KERNEL, col)} AS name_id FROM {KERNEL} WHERE {{rowid}} "
           f"AND correlationId BETWEEN {int(wanted[0])} AND {int(wanted[-1])}")

    def convert(tbl) -> dict:
        corr = _int_column(tbl, "correlation")
        keep = np.isin(corr, wanted)
        return {"pid": pid_of(_int_column(tbl, "gpid")[keep]), "correlation": corr[keep],
                "name": strings.codes_of(_int_column(tbl, "name_id")[keep])}

    for part in db.scan(sql, KERNEL, convert):
        for k in out:
            out[k].append(part[k])
    cols = {k: np.concatenate(v) for k, v in out.items()}
    return pd.DataFrame({"pid": cols["pid"], "correlation": cols["correlation"],
                         "name": compact_categorical(cols["name"].astype(np.int32), strings.categories)})
