"""Legacy rocmProfileData (RPD, ``rocpd_api`` / ``rocpd_op`` / ``rocpd_api_ops``) -> :class:`Trace`.

A different format that shares the rocpd name: one ``rocpd_op`` row per GPU
operation (``opType``: KernelExecution, Task = a kernel replayed inside a HIP graph,
CopyHostToDevice / CopyDeviceToHost / CopyDeviceToDevice, FillBuffer, Barrier...),
one ``rocpd_api`` row per host call, and ``rocpd_api_ops`` linking them: a
``hipGraphLaunch`` fans out into every op its graph ran. The model's correlation
is the api id on both sides. ``.rpd.gz`` files are decompressed to a private
temporary file (size-limited), never next to the user's file.
"""

from __future__ import annotations

import gzip
import os
import tempfile

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
from tracetriage.parsers.common import (
    UNRECORDED_BYTES,
    compact_categorical,
    per_distinct,
)
from tracetriage.parsers.sqlite import Database

MAX_DECOMPRESSED = 32 * 1024**3  # refuse a gzip that inflates past 32 GiB
_OP_KIND = {
    "KernelExecution": "kernel", "Task": "kernel", "CopyHostToDevice": "memcpy", "CopyDeviceToHost": "memcpy",
    "CopyDeviceToDevice": "memcpy", "CopyHostToHost": "memcpy", "CopyPeerToPeer": "memcpy", "FillBuffer": "memset",
}
_COPY = {"CopyHostToDevice": "HtoD", "CopyDeviceToHost": "DtoH", "CopyDeviceToDevice": "DtoD", "CopyHostToHost": "HtoH",
         "CopyPeerToPeer": "PtoP"}


def looks_like_rpd(db: Database) -> bool:
    return {"rocpd_api", "rocpd_op"} <= set(db.objects)


def parse_gzip(path: str) -> Trace:
    fd, tmp = tempfile.mkstemp(prefix="tracetriage-", suffix=".rpd")
    try:
        with os.fdopen(fd, "wb") as out, gzip.open(path, "rb") as src:
            copied = 0
            while chunk := src.read(1 << 20):
                copied += len(chunk)
                if copied > MAX_DECOMPRESSED:
                    raise TraceFormatError(path, "gzip inflates past 32 GiB: refused")
                out.write(chunk)
        trace = parse(tmp, display=path)
        return trace
    except (OSError, EOFError) as exc:
        raise TraceFormatError(path, f"corrupt gzip ({exc})") from None
    finally:
        os.unlink(tmp)


def _positions(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For each wanted id, the row of its first occurrence in ``keys``, or -1. Ids are unique
    in a sound file; a damaged one repeats them (NULL ids read as -1), and the first wins
    (-1 itself never matches: it is no id)."""
    keys = np.where(keys < 0, np.iinfo(np.int64).min, keys)
    first = ~pd.Index(keys).duplicated()
    idx = pd.Index(keys[first])
    rows = np.flatnonzero(first)
    pos = idx.get_indexer(np.asarray(wanted, np.int64))
    pos = np.where(np.asarray(wanted) < 0, -1, pos)
    return np.where(pos >= 0, rows[np.maximum(pos, 0)] if len(rows) else -1, -1)


def parse(path: str, display: str | None = None) -> Trace:
    shown = display or path
    with Database(path) as db:
        if not looks_like_rpd(db):
            raise TraceFormatError(shown, "RPD database without rocpd_api / rocpd_op")
        if not db.has("rocpd_string"):
            raise TraceFormatError(shown, "RPD database without rocpd_string")
        strings = db.frame("SELECT id, string FROM rocpd_string", text=("string",))
        strings = strings[~strings["id"].duplicated()].reset_index(drop=True)  # ids are unique in real files
        sidx = pd.Index(strings["id"].to_numpy(np.int64))
        svals = strings["string"].astype(object).to_numpy()

        def text(ids):
            pos = sidx.get_indexer(np.asarray(ids, np.int64))
            return np.where(pos >= 0, svals[np.maximum(pos, 0)] if len(svals) else "", "")

        api = db.frame('SELECT id, pid, tid, start, "end", apiName_id FROM rocpd_api')
        ops = db.frame('SELECT id, gpuId, queueId, start, "end", description_id, opType_id FROM rocpd_op')
        link = (db.frame("SELECT api_id, op_id FROM rocpd_api_ops") if db.has("rocpd_api_ops")
                else pd.DataFrame({"api_id": [], "op_id": []}))
        copy_sizes = None
        if db.has("rocpd_copyapi") and "size" in db.columns("rocpd_copyapi"):
            copy_sizes = db.frame("SELECT api_ptr_id, size FROM rocpd_copyapi")
        meta = dict(db.rows("SELECT tag, value FROM rocpd_metadata")) if db.has("rocpd_metadata") else {}
        db_warnings = list(db.warnings)
    trace = Trace(path=str(shown), format="rpd")
    trace.warnings.extend(db_warnings)
    trace.meta["version"] = f"rpd schema {meta.get('schema_version', '?')}"
    if not len(ops):
        raise MissingDataError(shown, "nothing to analyze: the RPD file holds no GPU operations")
    api_name = text(api["apiName_id"].to_numpy(np.int64))
    names = pd.Categorical(api_name.astype(object))
    cats = np.array([api_category(str(c)) for c in names.categories] + ["other"], dtype=object)
    api_cat = pd.Categorical(cats[np.where(names.codes < 0, len(names.categories), names.codes)], categories=API_CATEGORIES)
    user_marker = (np.asarray(api_name == "UserMarker")
                   | np.asarray(pd.Series(api_name).astype(str).str.startswith("roctx").to_numpy()))
    api_df = pd.DataFrame({
        "pid": api["pid"].to_numpy(np.int64), "tid": api["tid"].to_numpy(np.int64),
        "start": api["start"].to_numpy(np.int64), "end": api["end"].to_numpy(np.int64),
        "name": names, "category": api_cat, "correlation": api["id"].to_numpy(np.int64),
    })
    trace.api = api_df[~user_marker].sort_values("start", kind="stable", ignore_index=True)
    trace.api["name"] = compact_categorical(trace.api["name"].array.codes, trace.api["name"].cat.categories)
    # UserMarker rows are roctx ranges; their text is in the args string.
    if user_marker.any():
        mk = api_df[user_marker]
        trace.ranges = pd.DataFrame({
            "pid": mk["pid"].to_numpy(), "tid": mk["tid"].to_numpy(), "start": mk["start"].to_numpy(),
            "end": mk["end"].to_numpy(), "name": pd.Categorical(["UserMarker"] * len(mk)),
            "domain": pd.Categorical(["roctx"] * len(mk)),
        })
    op_type = text(ops["opType_id"].to_numpy(np.int64))
    desc = text(ops["description_id"].to_numpy(np.int64))
    kind = per_distinct(op_type, lambda t: _OP_KIND.get(t))
    keep = pd.notna(kind)
    # Op -> launching api (first link wins; an op belongs to one call).
    link = link.drop_duplicates("op_id")
    link_api = link["api_id"].to_numpy(np.int64)
    at = _positions(link["op_id"].to_numpy(np.int64), ops["id"].to_numpy(np.int64))
    op_corr = np.where(at >= 0, link_api[np.maximum(at, 0)] if len(link_api) else -1, -1)
    pos = _positions(api["id"].to_numpy(np.int64), op_corr)
    op_pid = np.where(pos >= 0, api["pid"].to_numpy(np.int64)[np.maximum(pos, 0)], -1)
    launch_name = np.where(pos >= 0, api_name[np.maximum(pos, 0)], "")
    other_names = per_distinct(op_type, lambda t: f"memcpy {_COPY[t]}" if t in _COPY else "memset")
    knames = np.where(kind == "kernel", desc, other_names)
    ops_coll = per_distinct(knames, lambda n: collective_op(str(n)))
    # sizes only for the copies rocpd_copyapi lists; a FillBuffer (memset) op records none
    nbytes = np.where(kind == "kernel", 0, UNRECORDED_BYTES).astype(np.int64)
    if copy_sizes is not None and len(copy_sizes):
        sizes = copy_sizes["size"].to_numpy(np.int64)
        at = _positions(copy_sizes["api_ptr_id"].to_numpy(np.int64), op_corr)
        nbytes = np.where((kind == "memcpy") & (at >= 0), sizes[np.maximum(at, 0)], nbytes)
    gpu = pd.DataFrame({
        "pid": op_pid, "ordinal": ops["gpuId"].to_numpy(np.int64), "stream": ops["queueId"].to_numpy(np.int64),
        "start": ops["start"].to_numpy(np.int64), "end": ops["end"].to_numpy(np.int64),
        "kind": kind, "name": knames, "correlation": op_corr,
        "collective": np.where(kind == "kernel", ops_coll, None), "bytes": nbytes,
        "copy_kind": per_distinct(op_type, lambda t: _COPY.get(t)),
        "pageable": np.zeros(len(ops), bool),
        "in_graph": (np.asarray(op_type) == "Task") | (np.asarray(launch_name) == "hipGraphLaunch"),
    })[keep]
    pid_fallback = int(np.bincount(np.maximum(gpu["pid"].to_numpy(), 0)).argmax()) if (gpu["pid"] >= 0).any() else 0
    gpu.loc[gpu["pid"] < 0, "pid"] = pid_fallback
    finish_trace(trace, gpu, lambda ordinal: {"name": "AMD GPU"})
    in_graph = int(trace.gpu["in_graph"].sum())
    trace.meta["graph_trace_mode"] = "node" if in_graph else "unknown"
    return trace
