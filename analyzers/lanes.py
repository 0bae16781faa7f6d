"""What the timeline figure draws: a few representative steps, lane by lane.

For the median step and the longest step (or, without steps, the first 10 ms of the
window, or the whole window when it is shorter), per device: its kernels (collectives apart), copies and memsets,
graph replays, the host API calls of its process by category, and its idle gaps with the cause each gap's time
mostly had (timeline's causes: the host's, or ``dependency`` where the GPU held work already queued, by the
timeline's rule). At most MAX_PER_LANE intervals per lane are kept (the longest), so an eager decode step of
thousands of kernels still draws.
"""

from __future__ import annotations

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers import timeline as tl
from tracetriage.model import Trace, cat_mask, is_kind
from tracetriage.wording import fmt_ns

MAX_DEVICES = 8
MAX_PER_LANE = 4000
NO_STEP_SPAN_NS = 10_000_000


def windows(steps: list, lo: int, hi: int) -> list[dict]:
    """The median step and the longest one of the process with the most steps, each labelled with its
    length in ``fmt_ns``, the tables' formatter. With an even count no step is the median: the one drawn
    is the upper of the two middle ones, and its label adds the steps' p50 as the tables print it
    (numpy's percentile in whole ns, as analysis.step_stats writes p50_ns) where the two read apart."""
    with_steps = [s for s in steps if s.count]
    if not with_steps:
        end = min(hi, lo + NO_STEP_SPAN_NS)
        label = "first 10 ms of the window" if end < hi else f"the whole window ({fmt_ns(hi - lo)})"
        return [{"label": label, "start": lo, "end": end}]
    s = max(with_steps, key=lambda x: x.count)
    d = s.durations
    order = np.argsort(d, kind="stable")
    med = int(order[len(order) // 2])
    worst = int(order[-1])
    p50, drawn = fmt_ns(int(np.percentile(d, 50))), fmt_ns(d[med])  # p50 as analysis.step_stats writes p50_ns
    figure = p50 if drawn == p50 else f"{drawn}; p50 {p50}"
    out = [{"label": f"median step (pid {s.pid}, {figure})", "start": int(s.starts[med]), "end": int(s.ends[med])}]
    if worst != med and d[worst] > 1.2 * d[med]:
        out.append({"label": f"longest step (pid {s.pid}, {fmt_ns(d[worst])})", "start": int(s.starts[worst]),
                    "end": int(s.ends[worst])})
    return out


def _cut(s, e, extra, a, b):
    keep = (e > a) & (s < b)
    s, e = np.maximum(s[keep], a), np.minimum(e[keep], b)
    extra = [x[keep] for x in extra]
    if s.size > MAX_PER_LANE:
        top = np.argsort(-(e - s), kind="stable")[:MAX_PER_LANE]
        top.sort()
        s, e, extra = s[top], e[top], [x[top] for x in extra]
    return s, e, extra


def _rows_near(starts: np.ndarray, max_dur: int, a: int, b: int) -> slice:
    """Rows (of a table sorted by start) that can overlap [a, b): two binary searches, no scan."""
    return slice(int(np.searchsorted(starts, a - max_dur, "left")), int(np.searchsorted(starts, b, "left")))


def _ready_at(host, rows: np.ndarray, starts: np.ndarray, gap_e: np.ndarray) -> np.ndarray:
    """For each gap end, the earliest time an operation starting there (``rows``: the device's GPU rows near the
    window, positions in the trace's table, ``starts`` theirs, in start order) was known queued
    (timeline._HostSlicer.ready_of); NEVER where none starts there (the window's end). The timeline's own rule,
    so a gap drawn as a dependency wait is one the analysis counted as one."""
    ready = np.full(gap_e.size, tl.NEVER, np.int64)
    if not host.early_rows.size or not gap_e.size:
        return ready
    first_row = np.searchsorted(starts, gap_e, "left")
    counts = np.searchsorted(starts, gap_e, "right") - first_row
    has = counts > 0
    if has.any():
        counts = counts[has]
        first = np.cumsum(counts) - counts
        idx = np.repeat(first_row[has], counts) + (np.arange(int(counts.sum())) - np.repeat(first, counts))
        ready[has] = np.minimum.reduceat(host.ready_of(rows[idx]), first)
    return ready


def lanes(trace: Trace, wins: list[dict], labels: list[str], hosts: dict | None = None) -> dict:
    """Only the rows near each window are touched (the tables are in start order), so the
    figure costs the same on a 10M-kernel trace as on a small one. ``hosts``: the timeline's
    host slicers by pid, when the analysis has them built (else built here)."""
    g = trace.gpu
    api = trace.api
    gs_all, ge_all = g["start"].to_numpy(), g["end"].to_numpy()
    a_s_all, a_e_all = api["start"].to_numpy(), api["end"].to_numpy()
    g_max = int((ge_all - gs_all).max()) if gs_all.size else 0
    a_max = int((a_e_all - a_s_all).max()) if a_s_all.size else 0
    hosts = {} if hosts is None else hosts
    out = []
    for w in wins:
        a, b = w["start"], w["end"]
        gi = _rows_near(gs_all, g_max, a, b)
        ai = _rows_near(a_s_all, a_max, a, b)
        gw, aw = g.iloc[gi], api.iloc[ai]
        gs, ge = gs_all[gi], ge_all[gi]
        dev = gw["device"].to_numpy()
        coll = gw["collective"].cat.codes.to_numpy() >= 0
        kinds = {k: is_kind(gw, k) for k in ("kernel", "memcpy", "memset", "graph")}
        a_s, a_e, a_pid = a_s_all[ai], a_e_all[ai], aw["pid"].to_numpy()
        a_cat = {c: cat_mask(aw, "category", cats) for c, cats in
                 (("launch", ("launch", "graph_launch")), ("sync", ("sync", "memcpy_sync")),
                  ("other", ("memcpy_async", "memset", "alloc", "other")))}
        devices = []
        for d in range(min(len(trace.devices), MAX_DEVICES)):
            mine = dev == d
            pid = int(trace.devices.iloc[d]["pid"])
            lane = {"id": labels[d], "pid": pid}
            for name, mask in (("kernels", mine & kinds["kernel"] & ~coll), ("collectives", mine & kinds["kernel"] & coll),
                               ("copies", mine & (kinds["memcpy"] | kinds["memset"])), ("graphs", mine & kinds["graph"])):
                s, e, _ = _cut(gs[mask], ge[mask], [], a, b)
                lane[name] = np.stack([s, e], axis=1).tolist() if s.size else []
            hm = a_pid == pid
            host = []
            for cat, cm in a_cat.items():
                s, e, _ = _cut(a_s[hm & cm], a_e[hm & cm], [], a, b)
                host += [[int(x), int(y), cat] for x, y in zip(s, e)]
            lane["host"] = host
            us, ue = iv.union(np.maximum(gs[mine], a), np.minimum(ge[mine], b))
            gap_s, gap_e = iv.complement(us, ue, a, b)
            if pid not in hosts:
                hosts[pid] = tl._HostSlicer(trace, pid)
            ready = _ready_at(hosts[pid], gi.start + np.flatnonzero(mine), gs[mine], gap_e)
            causes, _ = hosts[pid].attribute_queued(gap_s, gap_e, ready)
            names = list(tl.CAUSES)  # what the host did, and the GPU's own waits with its work queued
            which = np.argmax(np.stack([causes[c] for c in names]), axis=0) if gap_s.size else np.empty(0, int)
            s, e, (which,) = _cut(gap_s, gap_e, [which], a, b)
            lane["gaps"] = [[int(x), int(y), names[int(k)]] for x, y, k in zip(s, e, which)]
            devices.append(lane)
        out.append({**w, "devices": devices, "more_devices": max(0, len(trace.devices) - MAX_DEVICES)})
    return {"windows": out}
