"""PyTorch profiler (Kineto) Chrome-trace JSON (``.json`` or ``.json.gz``) -> :class:`Trace`.

Event categories used (``cat`` of complete ``ph: X`` events):

* ``kernel``, ``gpu_memcpy``, ``gpu_memset`` — GPU intervals; in Kineto their ``pid``
  is the *device* and ``tid`` the stream, so the owning host process is the one
  whose runtime call has the same ``args.correlation`` (Kineto writes one process
  per file; a rank-less file stays rank-less, it is not assumed to be rank 0);
* ``cuda_runtime`` / ``cuda_driver`` (also used for HIP names on ROCm) — host API calls;
* ``user_annotation`` — ranges (``ProfilerStep#N`` marks the profiler's steps);
* ``cpu_op`` — kept only when it carries recorded shapes (``record_shapes=True``: ``Input Dims``,
  ``Input type``, ``Concrete Inputs``) and is of a kind with a work formula
  (:func:`~tracetriage.model.is_work_op`), as the ``ops`` table; a GPU event's ``External id``
  names the op that launched it (``op_kernels``), and ops that launched nothing are dropped. An op
  of :data:`~tracetriage.model.CONTEXT_OPS` (a fused MoE) gets, as a fourth element of its shape
  record, the shaped child ops of :data:`~tracetriage.model.CONTEXT_CHILD_OPS` recorded inside it
  on its thread, in start order (``[name, dims, types, concrete]`` each): its top-k and the views
  of its expert weights.
  Apart from that, every CPU op of :data:`HOST_OP_MIN_US` or longer (the longest
  :data:`HOST_OPS_MAX`) is kept as a host range, ``meta["host_ops"]`` rows ``[pid, tid, start ns,
  end ns, name]``: what the host did while a GPU idled (analyzers/host_activity.py).

Category names match case-insensitively among the format's known names, current and legacy:
PyTorch 1.8–1.10 (Kineto before its November 2021 logger refactor) wrote fixed capitalised names,
``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``, ``Operator`` (every CPU op and user range;
``ProfilerStep#N`` is one, and is kept as the step's range), ``User`` (GPU-side user spans),
their GPU events' ``tid`` as ``"stream N"``, host ``tid`` as a numeric string and the launch's op as
``args["external id"]``; those traces record no ``deviceProperties`` (said in a warning, never
guessed). A GPU event or launch call without ``args.correlation`` takes the id of the CPU→GPU flow
event bound to it (same pid, tid and ts): ``async``/``launch`` (PyTorch 1.8–1.10),
``async_cpu_to_gpu`` (1.11–1.13), ``ac2g`` (later).

Activity of a device other than a CUDA or ROCm GPU (libkineto's ``mtia_*``, ``hpu_op``, ``xpu_*``,
``privateuse1_*`` activity types) is not modelled: a trace whose device work is only that is
refused naming the device ("a device this tool does not model yet: MTIA"), never called CPU-only.

The JSON decoder materializes one dict per event anyway; this reader walks the
events once, into columns, and converts column-wise from there.
Timestamps are microseconds (float, ns resolution in newer PyTorch): converted to
int64 ns. Graph kernels are recorded one by one; a kernel launched by
``cudaGraphLaunch``/``hipGraphLaunch`` is marked as graph work.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracetriage.errors import MissingDataError, UnsupportedInputError
from tracetriage.model import (
    API_CATEGORIES,
    COLLECTIVE_OPS,
    COPY_KINDS,
    GPU_KINDS,
    Trace,
    api_category,
    collective_of_call,
    collective_op,
    empty_op_kernels,
    finish_trace,
)
from tracetriage.parsers import coerce, graph_replays
from tracetriage.parsers.common import compact_categorical, from_launch, per_category, per_distinct
from tracetriage.parsers.kineto_events import API_CATS, GPU_CATS, OTHER_DEVICE_CATS, RANGE_CATS, Events
from tracetriage.parsers.kineto_file import head, load_json, tail_info  # noqa: F401 (head, tail_info: for batches.py)


def _int(value, default: int = -1) -> int:
    """Kineto args are loosely typed (ints, floats, numeric strings, or missing)."""
    got = coerce.scalar_int(value)
    return default if got is None else got


def _copy_kind(name: str) -> str:
    m = re.search(r"(HtoD|DtoH|DtoD|HtoH|PtoP)", name)
    return m.group(1) if m else "other"


def _columns(events, warnings: list) -> pd.DataFrame:
    """The kept events as one frame: times in int64 ns, ids as float64 with NaN for missing or
    invalid ones (numeric strings accepted), every column through coerce. ``events`` is the
    streaming reader's :class:`Events`, or the tolerant reader's list of dicts."""
    if not isinstance(events, Events):
        acc = Events()
        for e in events:
            acc.add(e)
        events = acc
    df, ts, dur = events.frame(warnings)
    # times in µs (fractional): finite values kept; an event without a valid ts is dropped
    ok = np.isfinite(ts) & (np.abs(ts) < 4e15) & (np.nan_to_num(np.abs(dur)) < 4e15)  # µs: ns must stay under 2^62
    if not ok.all():
        warnings.append(f"traceEvents: {int((~ok).sum()):,} events without a valid ts/dur dropped")
        df, ts, dur = df[ok].reset_index(drop=True), ts[ok], dur[ok]
    # whole-µs timestamps (older Kineto) resolve 1 µs; fractional ones (newer) are written to the
    # ns, but a float64 holding 6.5e12 µs (a boot-time clock) only resolves 2^-10 µs (0.98 ns).
    # A gap is next start - (start + duration): three rounded values, so one shorter than 1.5x
    # their combined resolution is rounding, not idle time (back-to-back graph kernels show
    # "gaps" of 0.98 and 1.95 ns).
    whole = ts.size and bool(np.all(ts == np.round(ts))) and bool(np.all(np.nan_to_num(dur) == np.round(np.nan_to_num(dur))))
    if whole:
        df.attrs["clock_resolution_ns"] = 1000
    else:
        spacing_ns = float(np.spacing(np.max(np.abs(ts)))) * 1000.0 if ts.size else 0.0
        df.attrs["clock_resolution_ns"] = max(1, int(np.ceil(1.5 * spacing_ns + 1.5)))
    df["ts"] = np.round(ts * 1000).astype(np.int64)
    df["dur"] = np.round(np.nan_to_num(dur) * 1000).astype(np.int64)
    return df


def _ints(series: pd.Series, default) -> np.ndarray:
    if isinstance(default, np.ndarray):
        return np.where(series.isna(), default, series.fillna(0)).astype(np.int64)
    return series.fillna(default).astype(np.int64).to_numpy()


GRAPH_LAUNCHES = ["cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch"]


def _used(cat: pd.Categorical) -> pd.Categorical:
    """The categorical with only the categories its rows use (names are shared by all event kinds)."""
    return compact_categorical(cat.codes, pd.Index(np.asarray(cat.categories, dtype=object), dtype=object))


def _only(cat: pd.Categorical, mask: np.ndarray) -> pd.Categorical:
    """The categorical where mask holds, missing elsewhere."""
    return pd.Categorical.from_codes(np.where(mask, cat.codes, -1).astype(cat.codes.dtype), categories=cat.categories)


def _collectives(names: pd.Categorical, calls: pd.Categorical) -> pd.Categorical:
    """Each GPU event's collective op from its kernel name (model.collective_op); a generically named
    NCCL/RCCL kernel (``ncclDevKernel_Generic``: op "Collective") takes the op of the c10d call the profiler
    recorded on it (``args["Collective name"]``: model.collective_of_call) where that names one."""
    ops = per_category(names, collective_op, COLLECTIVE_OPS)
    called = per_category(calls, lambda call: collective_of_call(call) or "", COLLECTIVE_OPS)
    generic = (np.asarray(ops.codes) == COLLECTIVE_OPS.index("Collective")) & (np.asarray(called.codes) >= 0)
    if not generic.any():
        return ops
    return pd.Categorical.from_codes(np.where(generic, called.codes, ops.codes).astype(ops.codes.dtype),
                                     categories=ops.categories)


LAUNCH_SLACK_NS = 1_000  # the op and its launch call are rounded from µs floats apiece


def _link_ops(ops: pd.DataFrame, ext: np.ndarray, pid: np.ndarray, corr: np.ndarray,
              in_graph: np.ndarray, launched_at: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ops that launched GPU events, one row per such event: pid, correlation, op row). A GPU
    event's External id is the id of the innermost op on the host stack when it was launched, so
    the op's span holds the launch call (``launched_at``, -1 where no call has the event's
    correlation) in the same process: a link that breaks this is a number that happens to match
    (older traces give GPU events their correlation as External id) and is not made. A
    graph-replayed event's External id (an older CUDA trace repeats the graph launch's) is not
    its op's either: the op around the replay did not launch it (parsers/graph_replays.py ties those)."""
    if ops.empty or not (ext >= 0).any():
        return ops.iloc[:0].reset_index(drop=True), empty_op_kernels()
    ops = ops.drop_duplicates("ext_id", keep="last").sort_values("ext_id", ignore_index=True)
    ids = ops["ext_id"].to_numpy()
    at = np.clip(np.searchsorted(ids, ext), 0, len(ids) - 1)
    start, end, op_pid = (ops[c].to_numpy()[at] for c in ("start", "end", "pid"))
    held = (launched_at >= 0) & (start - LAUNCH_SLACK_NS <= launched_at) & (launched_at <= end + LAUNCH_SLACK_NS) \
        & (op_pid == pid)
    hit = (ext >= 0) & (ids[at] == ext) & (corr >= 0) & ~in_graph & held
    used, op = np.unique(at[hit], return_inverse=True)
    kept = ops.iloc[used].reset_index(drop=True)
    for col in ("name", "shape"):
        kept[col] = kept[col].cat.remove_unused_categories()
    return kept, pd.DataFrame({"pid": pid[hit].astype(np.int64), "correlation": corr[hit].astype(np.int64),
                               "nth": np.full(int(hit.sum()), -1, np.int64), "op": op.astype(np.int64)})


def _correlate_by_flow(ev: pd.DataFrame, flows: pd.DataFrame) -> None:
    """Fill the correlation of GPU events and launch calls that carry none from the CPU->GPU flow
    event bound to them: an "f" at the GPU event's pid, tid and ts, an "s" at the launch call's
    (Chrome-trace flow binding, as Kineto writes it). The first flow at a place wins."""
    missing = ev["correlation"].isna().to_numpy()
    if flows.empty or not missing.any():
        return
    for start, cats in ((False, list(GPU_CATS)), (True, list(API_CATS))):
        rows = np.flatnonzero(missing & ev["cat"].isin(cats).to_numpy())
        side = flows[flows["start"] == start].drop_duplicates(["pid", "tid", "ts"])
        if not len(rows) or side.empty:
            continue
        found = ev.iloc[rows][["pid", "tid", "ts"]].merge(side, how="left", on=["pid", "tid", "ts"])["id"].to_numpy()
        hit = ~np.isnan(found)
        ev.iloc[rows[hit], ev.columns.get_loc("correlation")] = found[hit]


def _check_device(path: str, warnings: list, no_gpu: bool, no_launches: bool, other_devices: dict,
                  seen: tuple[int, int]) -> None:
    """Refuse a trace whose device work is of a device this tool does not model (MTIA, HPU, XPU, a
    PrivateUse1 backend): nothing on a CUDA/ROCm GPU, or GPU rows without one CUDA/HIP launch
    call beside that device's runtime (an XPU's kernels share the ``kernel`` category). A trace
    with no device activity is empty (no events), untimed (metadata, instants or flows only) or
    CPU-only (timed host events), each said as such. Beside CUDA/ROCm work, another device's
    events are left out, with a warning. ``seen``: the timed and untimed events the file held."""
    devices = sorted({OTHER_DEVICE_CATS[c] for c in other_devices})
    counts = ", ".join(f"{n:,} {c}" for c, n in sorted(other_devices.items()))
    if devices and (no_gpu or no_launches):
        raise UnsupportedInputError(path, f"a device this tool does not model yet: {', '.join(devices)} "
                                          f"({counts} events; it models CUDA and ROCm GPUs)")
    if no_gpu:
        raise MissingDataError(path, "nothing to analyze: " + _no_device_work(*seen))
    if devices:
        warnings.append(f"{counts} events of a device this tool does not model yet ({', '.join(devices)}) left out")


def _no_device_work(timed: int, untimed: int) -> str:
    """What a trace without one kernel, memcpy or memset holds, in words, with the capture that
    would give the tool something to read."""
    capture = "profile with activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (ROCm builds too)"
    if not timed and not untimed:
        return "an empty profiler trace (its traceEvents array holds no events)"
    if not timed:
        return f"a profiler trace without timed events ({untimed:,} metadata, instant or flow events only)"
    return f"CPU-only profiler trace ({timed:,} timed host events, no kernel, memcpy or memset events): {capture}"


def _events(trace: Trace, doc: dict) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, Events]:
    """The document's events as one frame of typed columns, correlated by their flows, with the
    shaped ops and the flows; the long Python frames and CPU ops go to the trace's meta. The events
    are let go of (the returned :class:`Events` keeps only what the parse reads after: the legacy
    categories, other devices' activity, untyped shapes)."""
    events = doc["traceEvents"]  # a list or Events: load_json checked
    if not isinstance(events, Events):
        acc = Events()
        for e in events:
            acc.add(e)
        events = acc
    ops = events.ops_frame()
    flows = events.flows_frame()
    # long Python frames, in the events' ns: [tid, start, end, name] (JSON-friendly for the cache)
    trace.meta["python_frames"] = [[tid, round(ts * 1000), round((ts + dur) * 1000), name]
                                   for tid, ts, dur, name in events.py_frames]
    trace.meta["python_events"] = events.py_events  # the Python tracer's events: its cost is in the host's time
    # long CPU ops, in start order: [pid, tid, start, end, name] (JSON-friendly for the cache)
    trace.meta["host_ops"] = [[pid, tid, round(ts * 1000), round((ts + dur) * 1000), name]
                              for dur, _, pid, tid, ts, name in sorted(events.host_ops, key=lambda row: (row[4], row[1]))]
    ev = _columns(events, trace.warnings)
    del doc["traceEvents"]  # the typed columns are all that is needed from here
    _correlate_by_flow(ev, flows)
    return ev, ops, flows, events


def _document_meta(trace: Trace, doc: dict) -> None:
    """The top-level keys read into the trace's meta: the schema version, the wall-clock start, the
    rank, world size and backend (a warning when the rank is not recorded)."""
    dist = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
    trace.meta["version"] = str(doc.get("schemaVersion")) if doc.get("schemaVersion") is not None else None
    base = coerce.number(doc.get("baseTimeNanoseconds"))
    trace.meta["started_utc_ns"] = int(base) if isinstance(base, int) and base > 0 else None  # wall-clock start
    trace.meta["rank"] = dist.get("rank")
    trace.meta["world_size"] = dist.get("world_size")
    trace.meta["backend"] = dist.get("backend")
    if not dist or "rank" not in dist:
        trace.warnings.append("no distributedInfo rank in the trace: the rank is unknown (not assumed to be 0)")


def _legacy_schema(trace: Trace, legacy: list[str], props: dict, untyped_shapes: int) -> None:
    """What a PyTorch 1.8-1.10 trace does not record, said in warnings (and the untyped shapes'
    count in meta, for the efficiency row)."""
    schema = f"PyTorch 1.8–1.10 Kineto trace (categories {', '.join(legacy)})"
    if not props:
        trace.warnings.append(f"{schema} without deviceProperties: the GPU model, its SM count and memory are unknown "
                              "(not guessed)")
    if untyped_shapes:
        trace.meta["untyped_shapes"] = untyped_shapes  # the efficiency row says why, with the capture that has types
        trace.warnings.append(f"{schema}: {untyped_shapes:,} operators record input dims without input types, so their "
                              "work (FLOPs, bytes) is not modelled (not guessed)")


def _collective_messages(trace: Trace, gpu: pd.DataFrame, gpu_ev: pd.DataFrame, messages: tuple[list, dict]) -> None:
    """``meta["collective_messages"]``: the message of each collective kernel that records one (its own
    args, else those of the record_param_comms op its External id names), as columns ``pid``,
    ``correlation``, ``start`` (its key in ``gpu``), ``bytes`` and ``group`` (the group size): JSON-friendly
    for the cache. Absent when no kernel records one."""
    known, by_op = messages
    codes = gpu_ev["collective_msg"].to_numpy()
    collective = (gpu["collective"].cat.codes.to_numpy() >= 0) if len(gpu) else np.zeros(0, bool)
    ext = _ints(gpu_ev["External id"], -1)
    rows, found = [], []
    for row in np.flatnonzero(collective).tolist():
        code = int(codes[row])
        message = known[code] if code >= 0 else by_op.get(int(ext[row])) if ext[row] >= 0 else None
        if message is not None:
            rows.append(row)
            found.append(message)
    if not rows:
        return
    at = np.asarray(rows, np.int64)
    trace.meta["collective_messages"] = {
        "pid": gpu["pid"].to_numpy(np.int64)[at].tolist(), "correlation": gpu["correlation"].to_numpy(np.int64)[at].tolist(),
        "start": gpu["start"].to_numpy(np.int64)[at].tolist(), "bytes": [nbytes for nbytes, _ in found],
        "group": [group for _, group in found]}


def parse(path: str) -> Trace:
    doc = load_json(path)
    trace = Trace(path=str(path), format="kineto")
    ev, ops, flows, events = _events(trace, doc)
    legacy, other_devices, untyped_shapes = sorted(events.legacy), dict(events.other_devices), events.untyped_shapes
    messages = (list(events.messages), events.op_messages)
    seen = events.timed, events.untimed
    del events
    trace.meta["clock_resolution_ns"] = ev.attrs.get("clock_resolution_ns", 1)
    _document_meta(trace, doc)
    gpu_ev = ev[ev["cat"].isin(list(GPU_CATS))]
    api_ev = ev[ev["cat"].isin(API_CATS)]
    rng_ev = ev[ev["cat"].isin(RANGE_CATS)]
    del ev
    _check_device(path, trace.warnings, gpu_ev.empty, api_ev.empty, other_devices, seen)

    a_pid, a_corr = _ints(api_ev["pid"], 0), _ints(api_ev["correlation"], -1)
    a_name = _used(api_ev["name"].array)
    trace.api = pd.DataFrame({
        "pid": a_pid, "tid": _ints(api_ev["tid"], 0), "start": api_ev["ts"].to_numpy(),
        "end": (api_ev["ts"] + api_ev["dur"]).to_numpy(), "name": a_name,
        "category": pd.Categorical(per_distinct(a_name, api_category), categories=API_CATEGORIES),
        "correlation": a_corr,
        "_ext": _ints(api_ev["External id"], -1), "_kernel": api_ev["launch_kernel"].array,
    }).sort_values("start", kind="stable", ignore_index=True)
    a_ext = trace.api.pop("_ext").to_numpy()
    a_kernel = np.asarray(trace.api.pop("_kernel").astype(object))
    host_pid = int(pd.Series(a_pid).mode().iloc[0]) if len(a_pid) else 0
    graph_launch = np.isin(np.asarray(a_name.categories, dtype=object), GRAPH_LAUNCHES)

    g_cat = gpu_ev["cat"].array
    g_name = _used(gpu_ev["name"].array)
    g_corr = _ints(gpu_ev["correlation"], -1)
    # the owning process and graph-ness come from the launching call (same correlation id)
    pid = from_launch(a_corr, a_pid, g_corr, host_pid).astype(np.int64)
    in_graph = from_launch(a_corr, graph_launch[np.asarray(a_name.codes)] if len(graph_launch) else np.zeros(len(a_corr), bool),
                           g_corr, False).astype(bool)
    kind = pd.Categorical(np.asarray(g_cat.categories.map(GPU_CATS), dtype=object)[g_cat.codes], categories=GPU_KINDS)
    is_kernel, is_copy = kind == "kernel", kind == "memcpy"
    gpu = pd.DataFrame({
        # GPU events carry the device as their Chrome "pid" when args.device is absent
        "pid": pid, "ordinal": _ints(gpu_ev["device"], _ints(gpu_ev["pid"], 0)), "stream": _ints(gpu_ev["stream"], -1),
        "start": gpu_ev["ts"].to_numpy(), "end": (gpu_ev["ts"] + gpu_ev["dur"]).to_numpy(), "kind": kind,
        "name": g_name, "correlation": g_corr,
        "collective": _only(_collectives(g_name, gpu_ev["collective_name"].array), is_kernel),
        "bytes": np.maximum(_ints(gpu_ev["bytes"], 0), 0),
        "copy_kind": _only(per_category(g_name, _copy_kind, COPY_KINDS), is_copy),
        "pageable": per_distinct(g_name, lambda n: "Pageable" in n).astype(bool) & is_copy,
        "in_graph": in_graph,
    })
    raw_props = doc.get("deviceProperties")
    props = {_int(p.get("id", i), i): p for i, p in enumerate(raw_props if isinstance(raw_props, list) else [])
             if isinstance(p, dict)}
    if legacy:
        _legacy_schema(trace, legacy, props, untyped_shapes)

    # ROCm traces number kernels by the physical device (HIP_VISIBLE_DEVICES=2 -> device 2) while
    # deviceProperties lists the visible ones from 0: one of each is the same GPU
    lone = next(iter(props.values())) if len(props) == 1 and gpu["ordinal"].nunique() == 1 else {}

    def device_info(ordinal):
        p = props.get(ordinal, lone)
        return {"name": str(p.get("name") or "unknown GPU"), "sm_count": _int(p.get("numSms")),
                "memory_bytes": _int(p.get("totalGlobalMem"))}

    _collective_messages(trace, gpu, gpu_ev, messages)
    launched_at = from_launch(a_corr, api_ev["ts"].to_numpy(), g_corr, -1).astype(np.int64)
    trace.ops, trace.op_kernels = _link_ops(ops, _ints(gpu_ev["External id"], -1), pid, g_corr, in_graph, launched_at)
    finish_trace(trace, gpu, device_info)
    if not rng_ev.empty:
        trace.ranges = pd.DataFrame({
            "pid": _ints(rng_ev["pid"], host_pid), "tid": _ints(rng_ev["tid"], 0),
            "start": rng_ev["ts"].to_numpy(), "end": (rng_ev["ts"] + rng_ev["dur"]).to_numpy(),
            "name": _used(rng_ev["name"].array),
            "domain": pd.Categorical(["user_annotation"] * len(rng_ev)),
        }).sort_values("start", kind="stable", ignore_index=True)
    trace.meta["graph_trace_mode"] = "node" if bool(trace.gpu["in_graph"].any()) else "unknown"
    # graph captures (the launch calls and shaped ops between Begin/EndCapture), and this trace's
    # replays tied to them where they are the same kernels (parsers/graph_replays.py)
    caps = graph_replays.captures(trace.api, a_ext, a_kernel, ops, trace.ranges)
    if caps:
        trace.meta["graph_captures"] = caps
    if bool(trace.gpu["in_graph"].any()):
        graph_replays.tie(trace, [(str(path), caps, True)] if caps else [])
    return trace
