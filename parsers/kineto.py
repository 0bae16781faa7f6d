"""PyTorch profiler (Kineto) Chrome-trace JSON (``.json`` or ``.json.gz``) -> :class:`Trace`.

Event categories used (``cat`` of complete ``ph: X`` events):

* ``kernel``, ``gpu_memcpy``, ``gpu_memset`` — GPU intervals; in Kineto their ``pid``
  is the *device* and ``tid`` the stream, so the owning host process is the one
  whose runtime call has the same ``args.correlation`` (Kineto writes one process
  per file; a rank-less file stays rank-less, it is not assumed to be rank 0);
* ``cuda_runtime`` / ``cuda_driver`` (also used for HIP names on ROCm) — host API calls;
* ``user_annotation`` — ranges (``ProfilerStep#N`` marks the profiler's steps).

The JSON decoder materializes one dict per event anyway, so this reader walks the
events once per column; Kineto files are bounded (the profiler's own ring buffer).
Timestamps are microseconds (float, ns resolution in newer PyTorch): converted to
int64 ns. Graph kernels are recorded one by one; a kernel launched by
``cudaGraphLaunch``/``hipGraphLaunch`` is marked as graph work.
"""

from __future__ import annotations

import gzip
import json
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
from tracetriage.parsers.common import (
    per_distinct,
)

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
API_CATS = ("cuda_runtime", "cuda_driver")
RANGE_CATS = ("user_annotation",)
MAX_BYTES = 8 * 1024**3


def _args(event: dict) -> dict:
    a = event.get("args")
    return a if isinstance(a, dict) else {}


def load_json(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
        opener = gzip.open if head == b"\x1f\x8b" else open
        with opener(path, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise TraceFormatError(path, "Kineto JSON larger than 8 GiB uncompressed: refused")
        doc = json.loads(raw)
    except (OSError, EOFError) as exc:
        raise TraceFormatError(path, f"unreadable ({exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TraceFormatError(path, f"not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(path, "JSON without a traceEvents list")
    return doc


def _int(value, default: int = -1) -> int:
    """Kineto args are loosely typed (ints, floats, numeric strings, or missing)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return default


def _copy_kind(name: str) -> str:
    m = re.search(r"(HtoD|DtoH|DtoD|HtoH|PtoP)", name)
    return m.group(1) if m else "other"


def parse(path: str) -> Trace:
    doc = load_json(path)
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
    cats = np.array([str(e.get("cat", "")) for e in events], dtype=object)
    trace = Trace(path=str(path), format="kineto")
    dist = doc.get("distributedInfo") or {}
    trace.meta["version"] = str(doc.get("schemaVersion")) if doc.get("schemaVersion") is not None else None
    trace.meta["rank"] = dist.get("rank")
    trace.meta["world_size"] = dist.get("world_size")
    if not dist or "rank" not in dist:
        trace.warnings.append("no distributedInfo rank in the trace: the rank is unknown (not assumed to be 0)")

    def pick(mask):
        return [e for e, m in zip(events, mask) if m]

    gpu_ev = pick(np.isin(cats, list(GPU_CATS)))
    api_ev = pick(np.isin(cats, API_CATS))
    rng_ev = pick(np.isin(cats, RANGE_CATS))
    if not gpu_ev:
        raise MissingDataError(path, "nothing to analyze: CPU-only profiler trace (no kernel, memcpy or memset events)")

    def ns(e, key):
        v = e.get(key)
        try:
            return int(round(float(v) * 1000))
        except (TypeError, ValueError, OverflowError):
            return 0

    a_start = np.array([ns(e, "ts") for e in api_ev], dtype=np.int64)
    a_dur = np.array([ns(e, "dur") for e in api_ev], dtype=np.int64)
    a_pid = np.array([_int(e.get("pid"), 0) for e in api_ev], dtype=np.int64)
    a_tid = np.array([_int(e.get("tid"), 0) for e in api_ev], dtype=np.int64)
    a_corr = np.array([_int(_args(e).get("correlation")) for e in api_ev], dtype=np.int64)
    a_name = np.array([str(e.get("name", "")) for e in api_ev], dtype=object)
    names = pd.Categorical(a_name)
    cat_map = np.array([api_category(str(c)) for c in names.categories] + ["other"], dtype=object)
    category = pd.Categorical(cat_map[np.where(names.codes < 0, len(names.categories), names.codes)], categories=API_CATEGORIES)
    trace.api = pd.DataFrame({"pid": a_pid, "tid": a_tid, "start": a_start, "end": a_start + a_dur, "name": names,
                              "category": category, "correlation": a_corr}).sort_values("start", kind="stable", ignore_index=True)
    host_pid = int(pd.Series(a_pid).mode().iloc[0]) if len(a_pid) else 0
    corr_pid = pd.Series(a_pid, index=a_corr)
    corr_pid = corr_pid[~corr_pid.index.duplicated()]
    corr_api = pd.Series(a_name, index=a_corr)
    corr_api = corr_api[~corr_api.index.duplicated()]

    g_kind = np.array([GPU_CATS[str(e.get("cat"))] for e in gpu_ev], dtype=object)
    props = {_int(p.get("id", i), i): p for i, p in enumerate(doc.get("deviceProperties") or []) if isinstance(p, dict)}
    g_name = np.array([str(e.get("name", "")) for e in gpu_ev], dtype=object)
    g_args = [_args(e) for e in gpu_ev]
    g_start = np.array([ns(e, "ts") for e in gpu_ev], dtype=np.int64)
    g_end = g_start + np.array([ns(e, "dur") for e in gpu_ev], dtype=np.int64)
    g_dev = np.array([_int(a.get("device", e.get("pid")), 0) for a, e in zip(g_args, gpu_ev)], dtype=np.int64)
    g_stream = np.array([_int(a.get("stream")) for a in g_args], dtype=np.int64)
    g_corr = np.array([_int(a.get("correlation")) for a in g_args], dtype=np.int64)
    g_bytes = np.array([max(0, _int(a.get("bytes"), 0)) for a in g_args], dtype=np.int64)
    pid = corr_pid.reindex(g_corr).fillna(host_pid).to_numpy(np.int64) if len(corr_pid) else np.full(len(gpu_ev), host_pid, np.int64)
    launcher = corr_api.reindex(g_corr).fillna("").to_numpy(object) if len(corr_api) else np.full(len(gpu_ev), "", object)
    copy_kind = np.where(g_kind == "memcpy", per_distinct(g_name, _copy_kind), None)
    pageable = np.asarray(per_distinct(g_name, lambda n: "Pageable" in n), dtype=bool) & (g_kind == "memcpy")
    ops = per_distinct(g_name, lambda n: collective_op(n))
    gpu = pd.DataFrame({
        "pid": pid, "ordinal": g_dev, "stream": g_stream, "start": g_start, "end": g_end, "kind": g_kind,
        "name": g_name, "correlation": g_corr, "collective": np.where(g_kind == "kernel", ops, None), "bytes": g_bytes,
        "copy_kind": copy_kind, "pageable": pageable,
        "in_graph": np.isin(launcher, ["cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch"]),
    })
    def device_info(ordinal):
        p = props.get(ordinal, {})
        return {"name": str(p.get("name") or "unknown GPU"), "sm_count": _int(p.get("numSms")),
                "memory_bytes": _int(p.get("totalGlobalMem"))}

    finish_trace(trace, gpu, device_info)
    if rng_ev:
        r_start = np.array([ns(e, "ts") for e in rng_ev], dtype=np.int64)
        trace.ranges = pd.DataFrame({
            "pid": np.array([_int(e.get("pid"), host_pid) for e in rng_ev], dtype=np.int64),
            "tid": np.array([_int(e.get("tid"), 0) for e in rng_ev], dtype=np.int64),
            "start": r_start, "end": r_start + np.array([ns(e, "dur") for e in rng_ev], dtype=np.int64),
            "name": pd.Categorical([str(e.get("name", "")) for e in rng_ev]),
            "domain": pd.Categorical(["user_annotation"] * len(rng_ev)),
        }).sort_values("start", kind="stable", ignore_index=True)
    trace.meta["graph_trace_mode"] = "node" if bool(trace.gpu["in_graph"].any()) else "unknown"
    return trace
