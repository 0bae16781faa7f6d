"""Nsight Systems SQLite export (``nsys export --type sqlite``) -> :class:`Trace`.

Facts this parser honours (see shared/samples/real/nsys/SOURCES.md):

* Tables exist only when that data was captured; a missing table means "not
  captured", never an error. Columns are discovered, not assumed (the 2021 schema
  lacks ``mangledName``, newer ones add ``greenContextId``, ``graphId``...).
* ``correlationId`` is unique per process only: every join is on (pid, correlation).
* ``globalPid``/``globalTid`` are serialized ids: pid = (gid >> 24) & 0xFFFFFF,
  tid = gid & 0xFFFFFF.
* API names carry version suffixes (``cudaLaunchKernel_v7000``); driver-API rows
  (``cuLaunchKernelEx``) live in the same RUNTIME table.
* In the default CUDA-graph trace mode a replayed graph's kernels are absent from
  the kernel table and appear only as one interval in
  ``CUPTI_ACTIVITY_KIND_GRAPH_TRACE``; in node mode the kernels carry a
  ``graphNodeId``. Both are GPU activity.
* The metadata table was renamed (``EXPORT_META_DATA`` -> ``META_DATA_EXPORT`` +
  ``META_DATA_CAPTURE``) and old exports have none: the version then comes from the
  install path in ``StringIds``, or stays unknown.
* Memory-kind and copy-kind ids follow the ``ENUM_CUDA_MEM_KIND`` /
  ``ENUM_CUDA_MEMCPY_OPER`` tables when present, else nsys's fixed numbering.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracetriage.errors import MemoryNeededError, MissingDataError, TraceFormatError
from tracetriage.model import Trace, distinct, gpu_column_order, is_kind, is_one_value_view, is_sorted, one_value_view
from tracetriage.order import start_order
from tracetriage.parsers.nsys_metadata import (
    capture_says,
    capture_session_span,
    export_version,
    read_devices,
    read_metadata,
    read_processes,
)
from tracetriage.parsers.nsys_tables import (
    GRAPH_TRACE,
    KERNEL,
    MEMCPY,
    MEMSET,
    RUNTIME,
    StringTable,
    concat_gpu_tables,
    read_api,
    read_copies,
    read_graph_replays,
    read_kernels,
    read_nvtx_ops,
    read_os_calls,
    read_ranges,
    read_syncs,
)
from tracetriage.parsers.sqlite import Database


def looks_like_nsys(db: Database) -> bool:
    """An nsys export has StringIds plus CUPTI/NVTX/TARGET_INFO tables."""
    names = db.objects
    return "StringIds" in names and any(
        n.startswith(("CUPTI_ACTIVITY_KIND_", "TARGET_INFO_", "NVTX_EVENTS", "META_DATA_", "EXPORT_META_DATA"))
        for n in names
    )


def session_span(path: str) -> tuple[int, int] | None:
    """The capture session in UTC ns: ``TARGET_INFO_SESSION_START_TIME.utcEpochNs`` plus
    ``ANALYSIS_DETAILS.duration``. Event times are on each session's own clock, so two exports
    (one per rank) are compared on this wall-clock span. None when the export lacks either table."""
    try:
        with Database(path) as db:
            return capture_session_span(db)
    except TraceFormatError:
        return None


def device_keys(pid: np.ndarray, ordinal: np.ndarray) -> tuple[np.ndarray, pd.DataFrame]:
    """Devices are (pid, ordinal) pairs: each row's int32 key, and the pairs in sorted order.

    One process with ordinals in [-1, 65535] (every real export) goes through a lookup
    table: no int64 key, hash table or sort over the 10M rows."""
    if pid.size and pid.min() == pid.max() and ordinal.min() >= -1 and ordinal.max() < 1 << 16:
        present = np.zeros((1 << 16) + 1, bool)
        present[ordinal] = True  # -1 lands in the last slot
        uniq = np.flatnonzero(present[:-1])
        if present[-1]:
            uniq = np.concatenate(([-1], uniq))
        lut = np.full((1 << 16) + 1, -1, np.int32)
        lut[uniq] = np.arange(uniq.size, dtype=np.int32)
        keys = np.broadcast_to(lut[ordinal[0]], ordinal.shape) if is_one_value_view(ordinal) else lut[ordinal]
        return keys, pd.DataFrame({"pid": np.full(uniq.size, pid[0], np.int64), "ordinal": uniq.astype(np.int64)})
    pairs = pd.DataFrame({"pid": pid, "ordinal": ordinal})
    keys = pairs.groupby(["pid", "ordinal"], sort=True).ngroup().to_numpy().astype(np.int32)
    return keys, pairs.drop_duplicates().sort_values(["pid", "ordinal"], ignore_index=True)


def parse(path: str) -> Trace:
    """Read an nsys SQLite export. Raises TraceFormatError / MissingDataError."""
    with Database(path) as db:
        if not looks_like_nsys(db):
            raise TraceFormatError(path, "SQLite database without Nsight Systems tables")
        if not db.has("StringIds"):
            raise TraceFormatError(path, "nsys export without a StringIds table")
        _check_memory(path, db)
        strings = StringTable(db)
        export, capture = read_metadata(db)
        parts = [p for p in (
            read_kernels(db, strings),
            read_copies(db, MEMCPY, "memcpy"),
            read_copies(db, MEMSET, "memset"),
            read_graph_replays(db),
        ) if p is not None and len(p["start"])]
        api = read_api(db, strings)
        ranges = read_ranges(db, strings)
        syncs = read_syncs(db)
        trace = Trace(path=str(path), format="nsys")
        _describe_export(trace.meta, db, export)
        mode = (capture.get("CUDA_GRAPH_TRACE_OPTIONS:MODE") or [None])[0]
        _require_gpu_activity(path, db, parts, api, capture)
        cols = concat_gpu_tables(parts)
        del parts
        cols["pid"] = one_value_view(cols["pid"])
        trace_warnings = _drop_untimed(cols)
        if not len(cols["start"]):
            raise MissingDataError(path, "nothing to analyze: no GPU record has timestamps")
        cols["device"], pairs = device_keys(cols["pid"], cols.pop("dev"))
        trace.devices = read_devices(db, pairs)
        _put_in_start_order(cols)
        for col in ("device", "stream", "in_graph"):  # one device, one stream, no graph: no column each
            cols[col] = one_value_view(cols[col])
        trace.gpu = pd.DataFrame({c: cols.pop(c) for c in gpu_column_order()}, copy=False)
        _attach_host_tables(trace, api, ranges, syncs)
        read_nvtx_ops(db, strings, trace)
        trace.meta["host_calls"] = read_os_calls(db, strings)
        pids = distinct(trace.gpu["pid"].to_numpy(), trace.api["pid"].to_numpy())
        trace.processes = read_processes(db, pids, capture)
        trace.meta["graph_trace_mode"] = _graph_trace_mode(trace.gpu, mode)
        trace.warnings.extend(trace_warnings)
        trace.warnings.extend(db.warnings)
        _warn(trace, export)
        return trace


# the whole-table model's least size per GPU-activity or runtime row: measured 47-57 B at 10M kernels
# (benchmarks/README.md: 1.15 GB for 10M kernels and their 10M launch calls, 905 MiB on the 8-device shape)
MODEL_BYTES_PER_ROW = 40


def _check_memory(path: str, db: Database) -> None:
    """A :class:`MemoryNeededError` before any table is read when the export's rows cannot fit in the memory
    this process has left (tracetriage.memory.available_bytes): refused in one line, not killed mid-read."""
    from tracetriage.memory import available_bytes

    rows = 0
    for table in (KERNEL, MEMCPY, MEMSET, RUNTIME, GRAPH_TRACE):
        span = db.rowid_span(table) if db.has(table) else None
        rows += min(span[1] - span[0] + 1, db.most_rows) if span else 0
    need, free = rows * MODEL_BYTES_PER_ROW, available_bytes()
    if free is not None and need > free:
        raise MemoryNeededError(path, f"too large for the memory this machine has free: its {rows:,} kernel, copy and "
                                      f"runtime rows need at least {need / 2**30:.1f} GiB to analyze, {free / 2**30:.1f} GiB "
                                      "is available; analyze it on a machine with more memory, or capture a shorter "
                                      "window (nsys profile --delay/--duration, or a cudaProfilerStart/Stop capture range)")


def _describe_export(meta: dict, db: Database, export: dict[str, str]) -> None:
    """The export's identity in ``meta``: nsys version, schema version, the event tables present,
    and the capture session's wall-clock span and start."""
    meta["version"] = export_version(db, export)
    meta["schema_version"] = export.get("EXPORT_SCHEMA_VERSION")
    meta["tables"] = sorted(n for n in db.objects if n.startswith(("CUPTI_", "NVTX_", "OSRT_")))
    meta["session_utc_ns"] = capture_session_span(db)  # wall clock: which exports are one run (tracetriage/runs.py)
    meta["started_utc_ns"] = meta["session_utc_ns"][0] if meta["session_utc_ns"] else None  # the report's date


def _require_gpu_activity(path: str, db: Database, parts: list[dict], api: pd.DataFrame | None,
                          capture: dict[str, list[str]]) -> None:
    """A :class:`MissingDataError` when no GPU activity table has rows, saying what the capture recorded."""
    if not parts and not db.has(KERNEL) and not db.has(GRAPH_TRACE):
        what = "no CUDA kernel, memcpy or graph tables"
        if api is not None and len(api):
            what += f" ({len(api)} CUDA API calls but no GPU activity recorded; {capture_says(capture, db)})"
        raise MissingDataError(path, f"nothing to analyze: {what}")
    if not parts:
        raise MissingDataError(path, "nothing to analyze: the GPU activity tables are empty")


def _drop_untimed(cols: dict) -> list[str]:
    """Remove, in place, the GPU rows CUPTI could not time (it writes start = end = 0: such rows
    are not activity); the warning that counts them, if any."""
    untimed = (cols["start"] <= 0) & (cols["end"] <= 0)
    if not untimed.any():
        return []
    keep = ~untimed
    n = int(keep.sum())
    for col in list(cols):
        values = cols[col]
        cols[col] = np.broadcast_to(values[:1].copy()[0], (n,)) if is_one_value_view(values) else values[keep]
    return [f"{int(untimed.sum()):,} GPU records without timestamps (start = end = 0) were ignored"]


def _put_in_start_order(cols: dict) -> None:
    """The GPU columns put in start order, in place, one column at a time (exports are usually
    in start order already: then nothing moves)."""
    plan = start_order(cols["start"])
    if plan is not None:
        for col in list(cols):
            if not is_one_value_view(cols[col]):  # one value in every row: in any order already
                cols[col] = plan.apply(cols[col])


def _attach_host_tables(trace: Trace, api: pd.DataFrame | None, ranges: pd.DataFrame | None,
                        syncs: pd.DataFrame | None) -> None:
    """The API calls and NVTX ranges (in start order) and the synchronizations, where the export has them."""
    if api is not None:
        starts = api["start"].to_numpy()
        trace.api = api if is_sorted(starts) else api.sort_values("start", kind="stable", ignore_index=True)
    if ranges is not None:
        trace.ranges = ranges.sort_values("start", kind="stable", ignore_index=True)
    if syncs is not None:
        trace.syncs = syncs


def _graph_trace_mode(gpu: pd.DataFrame, mode: str | None) -> str:
    """How CUDA graphs were traced: "graph" (replays are whole intervals), "node" (their kernels
    carry a graph node id), else the capture's own setting in lower case, or "unknown"."""
    has_replays = bool((gpu["kind"] == "graph").any())
    has_nodes = bool(gpu["in_graph"].any() & (gpu["kind"] != "graph").any())
    return "graph" if has_replays else "node" if has_nodes else (mode or "unknown").lower()


def _warn(trace: Trace, export: dict[str, str]) -> None:
    w = trace.warnings
    if "DERIVED_WINDOW_NS" in export:
        w.append(
            f"the export is a time window ({export['DERIVED_WINDOW_NS']} ns) cut from a larger capture"
            f" by {export.get('DERIVED_BY', 'a script')}: work launched before the window has no launch call"
        )
    api = trace.api
    graph_launches = int((api["category"] == "graph_launch").sum())
    replays = int((trace.gpu["kind"] == "graph").sum())
    if graph_launches and not replays and not trace.gpu["in_graph"].any():
        w.append(
            f"{graph_launches} graph launches but no graph replay or graph-node GPU records: "
            "graph GPU activity was not traced, busy time is underestimated"
        )
    is_kernel = is_kind(trace.gpu, "kernel")
    if len(api) and is_kernel.any():
        linked = _linked_fraction(trace.gpu, is_kernel, api)
        if linked < 0.9:
            w.append(f"only {linked:.0%} of kernels have their launch call in the trace")
    elif is_kernel.any() and not len(api):
        w.append("no CUDA API calls in the trace: host-side causes of idle time cannot be attributed")


LINK_SAMPLE = 200_000


def _linked_fraction(gpu: pd.DataFrame, rows: np.ndarray, api: pd.DataFrame) -> float:
    """Share of the selected GPU rows whose (pid, correlation) matches an API call,
    estimated on an even stride of at most LINK_SAMPLE rows (it only gates a warning).

    One process and correlation ids already ascending (the API table is in start order,
    and ids are handed out as calls begin) is the usual case: it is searched as it is,
    without building and sorting a key per call."""
    idx = np.flatnonzero(rows)
    if not idx.size:
        return 1.0
    idx = idx[:: max(1, idx.size // LINK_SAMPLE)]
    pids, corr = api["pid"].to_numpy(), api["correlation"].to_numpy()
    if pids.size and pids.min() == pids.max():
        g_pid, g = gpu["pid"].to_numpy()[idx], gpu["correlation"].to_numpy()[idx]
        a = corr if is_sorted(corr) else np.sort(corr)
        same = g_pid == pids[0]
    else:
        g = gpu["pid"].to_numpy()[idx] * (1 << 32) + gpu["correlation"].to_numpy()[idx]
        a = np.sort(pids * (1 << 32) + corr)
        same = True
    pos = np.minimum(np.searchsorted(a, g), a.size - 1)
    return float(((a[pos] == g) & same).mean())
