"""rocprofv3 JSON output (``--output-format json``, ``<name>_results.json``) -> :class:`Trace`.

Layout, as rocprofiler-sdk writes it (``source/lib/output/generateJSON.cpp``) and checks
it (``tests/rocprofv3/tracing/validate.py``)::

    {"rocprofiler-sdk-tool": [            # one object per profiled process (older: one object)
        {"metadata": {"pid", "init_time", "fini_time", "command", ...},
         "agents": [{"id": {"handle"}, "type": 1 CPU | 2 GPU, "logical_node_type_id",
                     "name": "gfx942", "product_name", ...}],
         "strings": {"buffer_records": [{"kind": "HIP_RUNTIME_API", "operations": [names]}, ...],
                     "marker_api": messages of roctx ranges, ...},
         "kernel_symbols": [{"kernel_id", "kernel_name", "formatted_kernel_name", ...}],
         "buffer_records": {"kernel_dispatch": [...], "hip_api": [...], "hsa_api": [...],
                            "marker_api": [...], "rccl_api": [...], "memory_copy": [...], ...}}]}

Every record has ``kind``/``operation`` (indices into ``strings.buffer_records``),
``start_timestamp``/``end_timestamp`` (ns), ``thread_id`` and ``correlation_id.internal``,
which links a dispatch or copy to the API call that issued it. A dispatch carries
``dispatch_info`` (``kernel_id``, ``agent_id.handle``, ``queue_id``) and ``stream_id``;
a copy ``src_agent_id``/``dst_agent_id``, ``bytes`` and its direction as the operation
name (``MEMORY_COPY_HOST_TO_DEVICE``). ``__amd_rocclr_fill*``/``copy*`` blit kernels are
memsets and copies, as in the rocpd reader. Every value passes through :mod:`coerce`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracetriage.errors import MissingDataError, TraceFormatError
from tracetriage.model import API_CATEGORIES, Trace, api_category, collective_op, finish_trace
from tracetriage.parsers import coerce
from tracetriage.parsers.common import blit_bytes, blit_kind, copy_direction, from_launch, per_distinct, read_json

ROOT = "rocprofiler-sdk-tool"
API_RECORDS = ("hip_api", "hsa_api", "rccl_api")
GPU_AGENT = 2


def _get(obj, *keys):
    """obj[k1][k2]... where every level is a dict; None otherwise (the file is untrusted)."""
    for k in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(k)
    return obj


def _list(obj) -> list:
    return obj if isinstance(obj, list) else []


def load(path: str) -> list[dict]:
    doc = read_json(path, "rocprofv3 JSON output")
    procs = doc.get(ROOT) if isinstance(doc, dict) else None
    if isinstance(procs, dict):
        procs = [procs]
    if not isinstance(procs, list) or not any(isinstance(p, dict) for p in procs):
        raise TraceFormatError(path, f"rocprofv3 JSON without a \"{ROOT}\" list of processes")
    return [p for p in procs if isinstance(p, dict)]


class _Names:
    """kind/operation indices -> names, from ``strings.buffer_records``."""

    def __init__(self, proc: dict):
        self.kinds: dict[int, tuple[str, list]] = {}
        table = _get(proc, "strings", "buffer_records")
        entries = table.items() if isinstance(table, dict) else enumerate(_list(table))
        for i, e in entries:
            if isinstance(e, dict):
                idx = coerce.scalar_int(e.get("value", i))
                if idx is not None:
                    self.kinds[idx] = (coerce.text(e.get("kind")), _list(e.get("operations")))

    def kind(self, k) -> str:
        return self.kinds.get(coerce.scalar_int(k), ("", []))[0]

    def operation(self, k, op) -> str | None:
        ops = self.kinds.get(coerce.scalar_int(k), ("", []))[1]
        i = coerce.scalar_int(op)
        return coerce.text(ops[i]) if i is not None and 0 <= i < len(ops) else None


def _symbols(proc: dict) -> dict[int, str]:
    out = {}
    for i, s in enumerate(_list(proc.get("kernel_symbols"))):
        if not isinstance(s, dict):
            continue
        kid = coerce.scalar_int(s.get("kernel_id", i))
        name = s.get("formatted_kernel_name") or s.get("kernel_name") or s.get("truncated_kernel_name")
        if kid is not None and name:
            out[kid] = coerce.text(name)
    return out


def _agents(proc: dict) -> dict[int, tuple[bool, int, str]]:
    """agent handle -> (is GPU, GPU index, name). The GPU index is the agent's index among GPUs
    (``logical_node_type_id``), else its rank among the GPU agents by node id."""
    raw = [a for a in _list(proc.get("agents")) if isinstance(a, dict)]
    gpus = sorted((coerce.scalar_int(a.get("node_id"), 0) or 0, n) for n, a in enumerate(raw) if _is_gpu(a))
    rank = {n: r for r, (_, n) in enumerate(gpus)}
    out = {}
    for n, a in enumerate(raw):
        handle = coerce.scalar_int(_get(a, "id", "handle"))
        if handle is None:
            continue
        gpu = _is_gpu(a)
        index = coerce.scalar_int(a.get("logical_node_type_id"))
        index = index if gpu and index is not None and index >= 0 else rank.get(n, -1)
        out[handle] = (gpu, index, coerce.text(a.get("product_name") or a.get("name") or "unknown GPU"))
    return out


def _is_gpu(agent: dict) -> bool:
    t = agent.get("type")
    return t == GPU_AGENT or (isinstance(t, str) and t.upper().endswith("GPU"))


def _records(proc: dict, *names: str) -> list[dict]:
    records = proc.get("buffer_records") if isinstance(proc.get("buffer_records"), dict) else {}
    return [r for n in names for r in _list(records.get(n)) if isinstance(r, dict)]


def _ints(values, where: str, warnings: list, default: int = -1) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):  # element by element: a list value stays one (invalid) element
        arr[i] = v
    return coerce.int64(arr, where, warnings, default=default)


def _corr(r: dict):
    c = r.get("correlation_id")
    return c.get("internal") if isinstance(c, dict) else c


def parse(path: str) -> Trace:
    procs = load(path)
    trace = Trace(path=str(path), format="rocprof_json")
    w = trace.warnings
    trace.meta["version"] = "rocprofv3 JSON"
    gpu_parts, api_parts, range_parts, devices, commands = [], [], [], {}, {}
    for proc in procs:
        pid = coerce.scalar_int(_get(proc, "metadata", "pid"), 0) or 0
        command = _get(proc, "metadata", "command")
        commands[pid] = " ".join(map(coerce.text, command)) if isinstance(command, list) else coerce.text(command or "")
        names, symbols, agents = _Names(proc), _symbols(proc), _agents(proc)
        for gpu, index, name in agents.values():
            if gpu:
                devices.setdefault(index, name)
        for rows, parts in ((_kernel_rows(proc, pid, symbols, agents, w), gpu_parts),
                            (_copy_rows(proc, pid, names, agents, w), gpu_parts),
                            (_api_rows(proc, pid, names, w), api_parts),
                            (_marker_rows(proc, pid, names, w), range_parts)):
            if rows is not None:
                parts.append(rows)
    if not gpu_parts:
        raise MissingDataError(path, "nothing to analyze: the rocprofv3 JSON holds no kernel dispatch or memory copy "
                                     "(capture with --kernel-trace --memory-copy-trace)")
    gpu = pd.concat(gpu_parts, ignore_index=True)
    if api_parts:
        trace.api = _api_table(api_parts)
        # a kernel launched by hipGraphLaunch is graph work (correlation ids are per process)
        keys = pd.MultiIndex.from_arrays([trace.api["pid"].to_numpy(), trace.api["correlation"].to_numpy()])
        gpu["in_graph"] = from_launch(keys, (trace.api["name"] == "hipGraphLaunch").to_numpy(),
                                      pd.MultiIndex.from_arrays([gpu["pid"].to_numpy(np.int64), gpu["correlation"].to_numpy()]),
                                      False).astype(bool)
    if range_parts:
        trace.ranges = _range_table(range_parts)
    if (gpu["ordinal"] < 0).any():
        w.append(f"{int((gpu['ordinal'] < 0).sum()):,} GPU records name an agent that is not a GPU of the file's agents")
    finish_trace(trace, gpu, lambda o: {"name": devices.get(o, "unknown GPU")}, commands)
    trace.meta["graph_trace_mode"] = "node" if bool(trace.gpu["in_graph"].any()) else "unknown"
    return trace


def _agent_index(agents: dict, handles) -> np.ndarray:
    """The GPU index of each agent handle (-1 for a handle that is not among the agents)."""
    return np.array([agents.get(h, (False, -1, ""))[1] for h in handles], dtype=np.int64)


def _kernel_rows(proc: dict, pid: int, symbols: dict, agents: dict, w: list) -> pd.DataFrame | None:
    """One process's kernel dispatches as GPU rows (blit kernels are copies and memsets); None when it has none."""
    ks = _records(proc, "kernel_dispatch", "kernel_dispatches")  # the older name too
    if not ks:
        return None
    kid = _ints([_get(r, "dispatch_info", "kernel_id") for r in ks], "kernel_dispatch[].kernel_id", w)
    kname = np.array([symbols.get(int(k), "<unknown kernel>") for k in kid], dtype=object)
    kinds = per_distinct(kname, blit_kind)
    ops = per_distinct(kname, lambda n: collective_op(str(n)))
    handles = _ints([_get(r, "dispatch_info", "agent_id", "handle") for r in ks], "kernel_dispatch[].agent_id", w)
    return pd.DataFrame({
        "pid": pid, "ordinal": _agent_index(agents, handles),
        "stream": _ints([_get(r, "stream_id", "handle") for r in ks], "kernel_dispatch[].stream_id", w),
        "start": _ints([r.get("start_timestamp") for r in ks], "kernel_dispatch[].start_timestamp", w),
        "end": _ints([r.get("end_timestamp") for r in ks], "kernel_dispatch[].end_timestamp", w),
        "kind": kinds, "name": kname,
        "correlation": _ints([_corr(r) for r in ks], "kernel_dispatch[].correlation_id", w),
        "collective": np.where(kinds == "kernel", ops, None), "bytes": blit_bytes(kinds),
        "copy_kind": np.where(kinds == "memcpy", "other", None), "pageable": False, "in_graph": False,
    })


def _copy_rows(proc: dict, pid: int, names: _Names, agents: dict, w: list) -> pd.DataFrame | None:
    """One process's memory copies as GPU rows, on the GPU agent of the pair; None when it has none."""
    cs = _records(proc, "memory_copy")
    if not cs:
        return None
    direction = np.array([names.operation(r.get("kind"), r.get("operation")) or "" for r in cs], dtype=object)
    ck = per_distinct(direction, copy_direction)
    src = _ints([_get(r, "src_agent_id", "handle") for r in cs], "memory_copy[].src_agent_id", w)
    dst = _ints([_get(r, "dst_agent_id", "handle") for r in cs], "memory_copy[].dst_agent_id", w)
    dst_gpu = np.array([agents.get(int(h), (False,))[0] for h in dst], dtype=bool)
    src_gpu = np.array([agents.get(int(h), (False,))[0] for h in src], dtype=bool)
    return pd.DataFrame({
        "pid": pid, "ordinal": _agent_index(agents, np.where(dst_gpu & ~src_gpu, dst, src)),
        "stream": _ints([_get(r, "stream_id", "handle") for r in cs], "memory_copy[].stream_id", w),
        "start": _ints([r.get("start_timestamp") for r in cs], "memory_copy[].start_timestamp", w),
        "end": _ints([r.get("end_timestamp") for r in cs], "memory_copy[].end_timestamp", w),
        "kind": "memcpy", "name": per_distinct(ck, lambda k: f"memcpy {k}"),
        "correlation": _ints([_corr(r) for r in cs], "memory_copy[].correlation_id", w),
        "collective": None, "bytes": np.maximum(_ints([r.get("bytes") for r in cs], "memory_copy[].bytes", w, 0), 0),
        "copy_kind": ck, "pageable": False, "in_graph": False,
    })


def _api_rows(proc: dict, pid: int, names: _Names, w: list) -> pd.DataFrame | None:
    """One process's runtime API calls; None when it has none."""
    api = _records(proc, *API_RECORDS)
    if not api:
        return None
    an = np.array([names.operation(r.get("kind"), r.get("operation")) or "<unknown>" for r in api], dtype=object)
    return pd.DataFrame({
        "pid": pid, "tid": _ints([r.get("thread_id") for r in api], "hip_api[].thread_id", w, 0),
        "start": _ints([r.get("start_timestamp") for r in api], "hip_api[].start_timestamp", w),
        "end": _ints([r.get("end_timestamp") for r in api], "hip_api[].end_timestamp", w),
        "name": an, "correlation": _ints([_corr(r) for r in api], "hip_api[].correlation_id", w),
    })


def _marker_rows(proc: dict, pid: int, names: _Names, w: list) -> pd.DataFrame | None:
    """One process's roctx ranges, named by their message where the file keeps it, else by the marker
    call's name; None when it has none."""
    ms = _records(proc, "marker_api")
    if not ms:
        return None
    messages = _marker_messages(proc)
    corr = _ints([_corr(r) for r in ms], "marker_api[].correlation_id", w)
    mname = np.array([messages.get(int(c)) or names.operation(r.get("kind"), r.get("operation")) or "marker"
                      for c, r in zip(corr, ms)], dtype=object)
    return pd.DataFrame({
        "pid": pid, "tid": _ints([r.get("thread_id") for r in ms], "marker_api[].thread_id", w, 0),
        "start": _ints([r.get("start_timestamp") for r in ms], "marker_api[].start_timestamp", w),
        "end": _ints([r.get("end_timestamp") for r in ms], "marker_api[].end_timestamp", w),
        "name": mname, "domain": np.array([names.kind(r.get("kind")) or "roctx" for r in ms], dtype=object),
    })


def _api_table(api_parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The model's ``api`` table of every process's calls, in start order."""
    api = pd.concat(api_parts, ignore_index=True)
    names = pd.Categorical(api["name"].astype(object))
    return pd.DataFrame({
        "pid": api["pid"].to_numpy(np.int64), "tid": api["tid"].to_numpy(np.int64), "start": api["start"].to_numpy(np.int64),
        "end": api["end"].to_numpy(np.int64), "name": names,
        "category": pd.Categorical(per_distinct(names, api_category), categories=API_CATEGORIES),
        "correlation": api["correlation"].to_numpy(np.int64),
    }).sort_values("start", kind="stable", ignore_index=True)


def _range_table(range_parts: list[pd.DataFrame]) -> pd.DataFrame:
    """The model's ``ranges`` table of every process's roctx ranges, in start order."""
    rng = pd.concat(range_parts, ignore_index=True)
    return pd.DataFrame({
        "pid": rng["pid"].to_numpy(np.int64), "tid": rng["tid"].to_numpy(np.int64), "start": rng["start"].to_numpy(np.int64),
        "end": rng["end"].to_numpy(np.int64), "name": pd.Categorical(rng["name"].astype(object)),
        "domain": pd.Categorical(rng["domain"].astype(object)),
    }).sort_values("start", kind="stable", ignore_index=True)


def _marker_messages(proc: dict) -> dict[int, str]:
    """roctx messages by correlation id: a {id: text} object, or a list of {key, value} pairs."""
    raw = _get(proc, "strings", "marker_api")
    pairs = raw.items() if isinstance(raw, dict) else (
        (e.get("key"), e.get("value")) for e in _list(raw) if isinstance(e, dict))
    out = {}
    for k, v in pairs:
        k = coerce.scalar_int(k)
        if k is not None and v is not None:
            out[k] = coerce.text(v)
    return out
