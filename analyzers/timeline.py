"""GPU busy time and idle gaps per device, each gap attributed to what the host did.

Definitions (all inside the analysis window [lo, hi)):

* ``busy_ns`` = measure of the union of every GPU interval of the device (kernels,
  copies, memsets, graph replays); overlapping streams count once.
  ``busy_pct`` = busy_ns / window_ns x 100.
* A **gap** is a maximal interval of the window with no GPU activity on the device.
  ``gaps.total_ns`` = window_ns - busy_ns; p50/p99/max are over gap lengths.
* **Cause** of idle time: the host threads of the process that owns the device
  (same pid) during the gap. Each nanosecond of a gap is attributed once, in this
  order: ``sync`` (inside a blocking stream/device/event sync), ``memcpy_sync``
  (inside a synchronous copy call), ``launch`` (inside a kernel or graph launch
  call), ``other_cuda`` (inside any other CUDA/HIP call), and what remains is
  ``host`` (no CUDA call at all: Python, the scheduler, the tokenizer...). When the
  capture holds no API calls of that process, the whole gap is ``unknown``.
  ``by_cause[c]`` is idle ns with cause c; they sum to ``gaps.total_ns``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracetriage.analyzers import intervals as iv
from tracetriage.model import Trace, cat_mask

CAUSES = ("sync", "memcpy_sync", "launch", "other_cuda", "host", "unknown")
_CAUSE_CATEGORIES = {
    "sync": ("sync",),
    "memcpy_sync": ("memcpy_sync",),
    "launch": ("launch", "graph_launch"),
    "other_cuda": ("memcpy_async", "memset", "alloc", "other"),
}
HISTOGRAM_EDGES_NS = [0, 10_000, 100_000, 1_000_000, 10_000_000]
HISTOGRAM_LABELS = ["<10us", "10-100us", "0.1-1ms", "1-10ms", ">=10ms"]
TOP_GAPS = 10
TIMELINE_BINS = 120


def device_union(trace: Trace, device: int) -> tuple[np.ndarray, np.ndarray]:
    g = trace.gpu
    sel = g["device"].to_numpy() == device
    return iv.union(g["start"].to_numpy()[sel], g["end"].to_numpy()[sel])


def host_coverage(trace: Trace, pid: int) -> dict[str, iv.Coverage] | None:
    api = trace.api
    mine = api["pid"].to_numpy() == pid
    if not mine.any():
        return None
    starts, ends = api["start"].to_numpy(), api["end"].to_numpy()
    out = {}
    for cause, cats in _CAUSE_CATEGORIES.items():
        sel = mine & cat_mask(api, "category", cats)
        out[cause] = iv.Coverage(*iv.union(starts[sel], ends[sel]))
    return out


def attribute(gap_s: np.ndarray, gap_e: np.ndarray, cover: dict[str, iv.Coverage] | None) -> dict[str, np.ndarray]:
    """Idle ns per cause for each gap (arrays aligned with the gaps)."""
    length = gap_e - gap_s
    if cover is None:
        out = {c: np.zeros_like(length) for c in CAUSES}
        out["unknown"] = length.copy()
        return out
    remaining = length.copy()
    out = {}
    for cause in ("sync", "memcpy_sync", "launch", "other_cuda"):
        got = np.minimum(cover[cause].overlap(gap_s, gap_e), remaining)
        out[cause] = got
        remaining = remaining - got
    out["host"] = remaining
    out["unknown"] = np.zeros_like(length)
    return out


def _pct(x: int, d: int) -> float:
    return round(100.0 * x / d, 3) if d else 0.0


def device_timeline(trace: Trace, device: int, lo: int, hi: int, coverage_cache: dict | None = None) -> dict:
    """Busy %, gap statistics and idle-by-cause of one device in [lo, hi)."""
    window = hi - lo
    us, ue = device_union(trace, device)
    cs, ce = iv.clip(us, ue, lo, hi)
    del us, ue  # large traces: free as soon as possible
    busy = iv.measure(cs, ce)
    gs, ge = iv.complement(cs, ce, lo, hi)
    lengths = ge - gs
    pid = int(trace.devices.iloc[device]["pid"])
    if coverage_cache is None:
        cover = host_coverage(trace, pid)
    else:  # one process driving several GPUs: its host timeline is built once
        if pid not in coverage_cache:
            coverage_cache[pid] = host_coverage(trace, pid)
        cover = coverage_cache[pid]
    causes = attribute(gs, ge, cover)
    by_cause = {c: int(causes[c].sum()) for c in CAUSES}
    hist = np.histogram(lengths, bins=HISTOGRAM_EDGES_NS + [max(int(lengths.max()) + 1 if lengths.size else 1, HISTOGRAM_EDGES_NS[-1] + 1)])[0]
    top = np.argsort(-lengths, kind="stable")[:TOP_GAPS]
    # The dominant cause is only named for the gaps that are listed.
    dominant = [CAUSES[int(np.argmax([causes[c][i] for c in CAUSES]))] for i in top]
    # Busy fraction over time, for the chart: coverage of the union per bin.
    edges = np.linspace(lo, hi, TIMELINE_BINS + 1).astype(np.int64)
    cov = iv.Coverage(cs, ce)
    widths = np.diff(edges)
    per_bin = cov.overlap(edges[:-1], edges[1:]) / np.where(widths > 0, widths, 1)
    return {
        "busy_ns": busy,
        "window_ns": window,
        "busy_pct": _pct(busy, window),
        "gaps": {
            "count": int(lengths.size),
            "total_ns": int(lengths.sum()),
            "p50_ns": int(np.percentile(lengths, 50)) if lengths.size else 0,
            "p99_ns": int(np.percentile(lengths, 99)) if lengths.size else 0,
            "max_ns": int(lengths.max()) if lengths.size else 0,
            "by_cause": by_cause,
            "by_cause_pct_of_window": {c: _pct(v, window) for c, v in by_cause.items()},
            "histogram": {label: int(n) for label, n in zip(HISTOGRAM_LABELS, hist)},
            "top": [
                {
                    "start_ns": int(gs[i]),
                    "length_ns": int(lengths[i]),
                    "cause": dominant[k],
                }
                for k, i in enumerate(top)
            ],
        },
        "busy_timeline": [round(float(x) * 100, 2) for x in per_bin],
        "_gaps": (gs, ge, causes),
    }


def gaps_after(gap_s: np.ndarray, gap_e: np.ndarray, event_ends: np.ndarray, slack_ns: int) -> np.ndarray:
    """Mask of gaps that begin within ``slack_ns`` before, or contain, the end of an event.

    Used to link idle time to blocking syncs: the GPU drains, the host returns from
    the sync and only then prepares the next step.
    """
    ends = np.sort(np.asarray(event_ends, dtype=np.int64))
    if ends.size == 0 or gap_s.size == 0:
        return np.zeros(gap_s.size, dtype=bool)
    k = np.searchsorted(ends, gap_s - slack_ns, side="left")
    k = np.minimum(k, ends.size - 1)
    first = ends[k]
    return (first >= gap_s - slack_ns) & (first <= gap_e)


def frame_window(trace: Trace) -> tuple[int, int]:
    g = trace.gpu
    return int(g["start"].min()), int(g["end"].max())


def per_device_frame(trace: Trace) -> pd.DataFrame:
    return trace.devices
