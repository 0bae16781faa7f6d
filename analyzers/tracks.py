"""What a Perfetto export draws, computed from the trace model and its Analysis: ``Tracks``.

Built only when an export is asked for (:func:`build_tracks`), and handed with the Analysis
to the renderer (reports/perfetto.py), which writes it and computes nothing. Everything is
columnar: the trace's columns are held as views (no copy), the slices tracetriage adds
(idle gaps and their causes, the findings' claims) as numpy arrays, never an object per event.

* the selection (``--perfetto-window``): ``steady`` is the analysis window, ``all`` the whole
  capture, ``worst-steps N`` the N slowest steps of the process with most steps, each with the
  step before and after it; the rows of each table that start inside it;
* per device, its idle gaps as the analysis attributed them: ``timeline.device_timeline``
  runs again with a hook, so each gap has the class and the cause amounts the verdict counted
  (the amounts laid end to end in the order of ``timeline.CAUSES``, as slices of their own);
* per device, each finding's claim on an accounting slice, an amount spread over every gap
  (or busy interval) of that slice in proportion, so the claimed slices show where the claimed
  time lies and sum to the claim (within 1 ns per gap); a finding's pieces that touch are one;
* per process, its steps, the worst one and the long ones (over 3x the median);
* launch -> GPU operation flows: each launch call starting in the selection is linked to the
  first selected GPU operation with its (pid, correlation).

Memory: the trace's columns are shared; the added slices are three int64-and-int8 columns per
drawn gap, cause piece and claimed piece; temporaries are one batch of CHUNK_ROWS rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers import phases
from tracetriage.analyzers import steps as st
from tracetriage.analyzers import timeline as tl
from tracetriage.analyzers.analysis import SYNC_SLACK_NS
from tracetriage.analyzers.track_types import (
    NO_FLOWS,
    Codes,
    DeviceTracks,
    Flows,
    GpuOps,
    HostEvents,
    LongestGap,
    Selected,
    Slices,
    StepTracks,
    TraceTracks,
    Tracks,
    Window,
)
from tracetriage.errors import MissingDataError
from tracetriage.model import cat_mask, is_kind, is_sorted
from tracetriage.partition import device_rows, held, take

CHUNK_ROWS = 1 << 15  # gaps attributed and claims spread at a time: the export writes each batch as one
DEFAULT_WORST_STEPS = 3
LONG_STEP_X_MEDIAN = 3.0  # a step over this many times the median is a long step (the tail finding's)



def build_tracks(case, analysis, mode: str = "steady", worst_steps: int = DEFAULT_WORST_STEPS) -> Tracks:
    """The tracks of ``case`` as ``analysis`` judged it, for ``--perfetto-window mode``."""
    if not case.traces:
        raise MissingDataError(case.paths[0] if len(case.paths) == 1 else None,
                               "no profiler trace in this case: nothing to put on a timeline (the Perfetto export "
                               "needs an nsys, rocprofv3 or PyTorch profiler trace)")
    multi = len(case.traces) > 1
    traces = tuple(_trace_tracks(trace, index, multi, analysis, mode, worst_steps) for index, trace in enumerate(case.traces))
    return Tracks(mode, worst_steps, traces)


# ---------------------------------------------------------------------------------------------
# One trace


def _trace_tracks(trace, index: int, multi: bool, analysis, mode: str, n: int) -> TraceTracks:
    data = analysis.data
    series = analysis.series or {}
    window = (data.get("windows") or [data.get("window")])[index]
    prefix = f"{index}:" if multi else ""
    pids = sorted(int(p) for p in pd.unique(trace.gpu["pid"].to_numpy())) if len(trace.gpu) else []
    steps = phases.find_steps(trace, pids, series.get("step_range"))
    spans, spans_text = _spans(trace, window, mode, n, steps)
    launch_keys, launch_rows = _launches(trace, spans)
    gpu, linked = _gpu_ops(trace, spans, prefix, launch_keys)
    launch_flows = Flows.of(launch_rows[linked], launch_keys[linked])
    findings = {f["id"]: f for f in data.get("findings", [])}
    devices_data = {d["id"]: d for d in data.get("devices", [])}
    hosts: dict = {}  # pid -> the timeline's host slicer, shared by the process's devices
    devices = []
    for device in range(len(trace.devices)):
        with held(trace, device):  # the device's rows found once for its timeline and busy slices
            devices.append(_device_tracks(trace, device, prefix + trace.device_label(device), window, spans, findings,
                                          series, devices_data, hosts))
    devices = tuple(devices)
    processes = trace.processes
    names = dict(zip(processes["pid"].tolist(), processes["name"].tolist())) if len(processes) else {}
    return TraceTracks(path=trace.path, prefix=prefix, window=_window(trace, window), spans=tuple(spans), spans_text=spans_text,
                       process_names=names, gpu=gpu, api=_host_events(trace.api, spans, "category", launch_flows),
                       ranges=_host_events(trace.ranges, spans, "domain", None), devices=devices,
                       steps=tuple(_step_tracks(steps[pid], spans) for pid in pids if steps[pid].count))


def _window(trace, window: dict) -> Window:
    lo, hi = int(window["start_ns"]), int(window["end_ns"])
    first = min([lo] + [int(table["start"].min()) for table in (trace.gpu, trace.api) if len(table)])
    last = max([hi] + ([int(trace.gpu["end"].max())] if len(trace.gpu) else []))
    return Window(lo, hi, window.get("source"), window.get("warmup_steps_excluded", 0), window.get("setup_excluded_ns", 0),
                  first, last)


def _spans(trace, window: dict, mode: str, n: int, steps: dict) -> tuple[list[tuple[int, int]], str]:
    lo, hi = int(window["start_ns"]), int(window["end_ns"])
    tables = [table for table in (trace.gpu, trace.api, trace.ranges) if len(table)]
    if mode == "all":
        first = min([lo] + [int(table["start"].to_numpy().min()) for table in tables])
        last = max([hi] + [int(table["end"].to_numpy().max()) + 1 for table in tables])
        return [(first, last)], "the whole capture"
    if mode == "worst-steps":
        with_steps = [s for s in steps.values() if s.count]
        if with_steps:
            most = max(with_steps, key=lambda x: x.count)
            worst = np.argsort(-most.durations, kind="stable")[:n]
            merged: list[tuple[int, int]] = []
            for i in sorted(int(x) for x in worst):
                a = int(most.starts[max(0, i - 1)])
                b = int(most.ends[min(most.count - 1, i + 1)])
                if merged and a <= merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], b))
                else:
                    merged.append((a, b))
            return merged, f"the {len(worst)} slowest steps of pid {most.pid} and the step before and after each"
        return [(lo, hi)], "the analysis window (no steps were found, so worst-steps could not choose)"
    return [(lo, hi)], "the analysis window"


def in_spans(s: np.ndarray, e: np.ndarray, spans) -> np.ndarray:
    """Mask of the intervals [s, e) that overlap one of the spans."""
    keep = np.zeros(s.size, bool)
    for a, b in spans:
        keep |= (e > a) & (s < b)
    return keep


def _row_ranges(starts: np.ndarray, spans) -> tuple[tuple[int, int], ...]:
    """Rows of a start-ordered column whose start lies in one of the spans."""
    return tuple((int(np.searchsorted(starts, a, "left")), int(np.searchsorted(starts, b, "left"))) for a, b in spans)


def _chunks(ranges):
    for first, last in ranges:
        for k in range(first, last, CHUNK_ROWS):
            yield slice(k, min(k + CHUNK_ROWS, last))


def flow_keys(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Flow id of a (pid, correlation) pair: nonzero, unique per pair (correlations fit 40 bits)."""
    return ((pid.astype(np.int64) & 0xFFFFFF) << 40 | (corr.astype(np.int64) & ((1 << 40) - 1))) + 1


def _launches(trace, spans) -> tuple[np.ndarray, np.ndarray]:
    """The flow keys of the launch calls starting in the spans, sorted, and their rows."""
    api = trace.api
    if not len(trace.gpu) or not len(api):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    start = api["start"].to_numpy()
    mine = cat_mask(api, "category", ("launch", "graph_launch")) & (api["correlation"].to_numpy() >= 0)
    mine &= in_spans(start, start + 1, spans)
    rows = np.flatnonzero(mine)
    keys = flow_keys(api["pid"].to_numpy()[rows], api["correlation"].to_numpy()[rows])
    order = np.argsort(keys, kind="stable")
    return keys[order], rows[order]


def _gpu_ops(trace, spans, prefix: str, launch_keys: np.ndarray) -> tuple[GpuOps, np.ndarray]:
    """The GPU operations and, per launch (in ``launch_keys`` order), whether one ends its flow:
    the first selected operation, in start order, with the launch's (pid, correlation)."""
    gpu = trace.gpu
    n_devices = len(trace.devices)
    start = gpu["start"].to_numpy()
    device, pid, corr = gpu["device"].to_numpy(), gpu["pid"].to_numpy(), gpu["correlation"].to_numpy()
    rows = _row_ranges(start, spans) if len(gpu) else ()
    linked = np.zeros(launch_keys.size, bool)
    flow_ends, flow_ids = [], []
    kernel = is_kind(gpu, "kernel")
    kernels = np.zeros(n_devices, np.int64)
    for chunk in _chunks(rows):
        kernels += np.bincount(device[chunk][kernel[chunk]], minlength=n_devices)[:n_devices]
        if not launch_keys.size:
            continue
        keys = flow_keys(pid[chunk], corr[chunk])
        j = np.minimum(np.searchsorted(launch_keys, keys), launch_keys.size - 1)
        hit = np.flatnonzero((corr[chunk] >= 0) & (launch_keys[j] == keys))
        if hit.size:
            launch, first = np.unique(j[hit], return_index=True)  # one GPU row per launch: its first
            new = ~linked[launch]
            linked[launch[new]] = True
            flow_ends.append(chunk.start + hit[first[new]])
            flow_ids.append(keys[hit[first[new]]])
    del kernel
    flows = Flows.of(np.concatenate(flow_ends), np.concatenate(flow_ids)) if flow_ends else NO_FLOWS
    ops = GpuOps(start=start, end=gpu["end"].to_numpy(), device=device, stream=gpu["stream"].to_numpy(), pid=pid,
                 correlation=corr, nbytes=gpu["bytes"].to_numpy(), pageable=gpu["pageable"].to_numpy(),
                 in_graph=gpu["in_graph"].to_numpy(), is_copy=is_kind(gpu, "memcpy") | is_kind(gpu, "memset"),
                 name=Codes.of(gpu["name"]), kind=Codes.of(gpu["kind"]), collective=Codes.of(gpu["collective"]),
                 copy_kind=Codes.of(gpu["copy_kind"]), rows=Selected(None, rows, len(gpu)), flows=flows,
                 kernels_by_device={prefix + trace.device_label(d): int(kernels[d]) for d in range(n_devices)}
                 if len(gpu) else {})
    return ops, linked


def _selected(table, spans) -> Selected:
    start = table["start"].to_numpy()
    if is_sorted(start):
        return Selected(None, _row_ranges(start, spans), len(table))
    order = np.argsort(start, kind="stable")
    return Selected(order, _row_ranges(start[order], spans), len(table))


def _host_events(table, spans, group: str, flows: Flows | None) -> HostEvents:
    """API calls (``group`` = "category", with their correlations and ``flows``) or annotation
    ranges (``group`` = "domain", ``flows`` None)."""
    return HostEvents(start=table["start"].to_numpy(), end=table["end"].to_numpy(), pid=table["pid"].to_numpy(),
                      tid=table["tid"].to_numpy(), correlation=table["correlation"].to_numpy() if flows is not None else None,
                      name=Codes.of(table["name"]), group=Codes.of(table[group]),
                      rows=_selected(table, spans) if len(table) else Selected(None, (), 0), flows=flows or NO_FLOWS)


def _step_tracks(steps, spans) -> StepTracks:
    durations = steps.durations
    exported = in_spans(steps.starts, steps.ends, spans)
    worst = int(np.argmax(durations))
    median = float(np.percentile(durations, 50))
    long = np.flatnonzero(durations > LONG_STEP_X_MEDIAN * median)
    long = long[in_spans(steps.starts[long], steps.ends[long], spans)]
    return StepTracks(pid=steps.pid, source=steps.source, starts=steps.starts, ends=steps.ends, is_prefill=steps.is_prefill,
                      exported=np.flatnonzero(exported), long_exported=long,
                      worst=worst, worst_duration_ns=int(durations[worst]), worst_x_median=durations[worst] / max(median, 1.0),
                      worst_exported=bool(exported[worst]))


# ---------------------------------------------------------------------------------------------
# One device: its gaps as attributed, and the findings' claims on them


class _ClaimSpread:
    """The pieces of each finding's claim on one device, spread over that slice's intervals.
    A finding's adjacent pieces (its launch and host parts of one gap) are one slice."""

    def __init__(self, claimed: dict[str, dict[str, int]], totals: dict[str, int]):
        self.claimed = claimed  # finding -> slice -> ns, in the findings' order
        self.order = list(claimed)
        self.total = totals  # slice -> ns over the device window (the decomposition)
        self.done: dict[str, int] = {}  # slice -> cumulative ns of the slice seen so far
        self.drawn: dict[str, int] = {}
        self.largest: dict[str, tuple[int, int]] = {}
        self.buffer: list[tuple] = []
        self.out: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.rows = 0

    def wants(self, slice_name: str) -> bool:
        return any(slice_name in self.claimed[fid] for fid in self.order)

    def spread(self, slice_name: str, s: np.ndarray, p: np.ndarray, emit: np.ndarray) -> None:
        """Intervals [s, s + p) of ``slice_name`` in time order (the next ones of the device):
        each finding claiming the slice gets its share of each, end to end in rule order
        (buffered until :meth:`flush`); only the ``emit`` ones are drawn."""
        total = self.total.get(slice_name, 0)
        before = self.done.get(slice_name, 0)
        cum = before + np.cumsum(p)
        self.done[slice_name] = int(cum[-1]) if cum.size else before
        if not total or not p.size:
            return
        prev_cum = cum - p
        frac, pos_prev = 0.0, np.zeros(p.size, np.int64)
        for k, fid in enumerate(self.order):
            ns = self.claimed[fid].get(slice_name, 0)
            if not ns:
                continue
            frac = min(1.0, frac + ns / total)
            amount = np.floor(frac * cum).astype(np.int64) - np.floor(frac * prev_cum).astype(np.int64)
            pos = np.minimum(p, np.maximum(pos_prev, amount))
            keep = (pos > pos_prev) & emit
            if keep.any():
                self.buffer.append((s[keep] + pos_prev[keep], s[keep] + pos[keep], k))
            pos_prev = pos

    def flush(self) -> None:
        """The buffered pieces in time order, a finding's touching pieces joined, as drawn slices."""
        if not self.buffer:
            return
        b = np.concatenate([x[0] for x in self.buffer])
        e = np.concatenate([x[1] for x in self.buffer])
        who = np.concatenate([np.full(x[0].size, x[2], np.int64) for x in self.buffer])
        self.buffer = []
        order = np.argsort(b, kind="stable")
        b, e, who = b[order], e[order], who[order]
        first = np.ones(b.size, bool)
        first[1:] = (who[1:] != who[:-1]) | (b[1:] != e[:-1])
        starts = np.flatnonzero(first)
        last = np.concatenate((starts[1:] - 1, [b.size - 1]))
        b, e, who = b[starts], e[last], who[starts]
        lens = e - b
        for k, fid in enumerate(self.order):
            mine = who == k
            if mine.any():
                self.drawn[fid] = self.drawn.get(fid, 0) + int(lens[mine].sum())
                j = int(np.argmax(np.where(mine, lens, -1)))
                old = self.largest.get(fid)
                if old is None or lens[j] > old[1] - old[0]:
                    self.largest[fid] = (int(b[j]), int(e[j]))
        self.out.append((b, e, who.astype(np.int16)))
        self.rows += b.size


class _GapBuilder:
    """Collects one device's drawn gaps, cause pieces and claims, batch by batch."""

    def __init__(self, spans, whole: bool, spread: _ClaimSpread | None):
        self.spans, self.whole, self.spread = spans, whole, spread
        self.gaps: list[tuple] = []
        self.causes: list[tuple] = []
        self.batches: list[tuple[int, int, int]] = []
        self.n_gaps = self.n_causes = 0
        self.gap_ns = dict.fromkeys(tl.CAUSES, 0)

    def on_gaps(self, gs, ge, causes, after, short) -> None:
        for k in range(0, gs.size, CHUNK_ROWS):
            part = slice(k, k + CHUNK_ROWS)
            self._batch(gs[part], ge[part], {c: v[part] for c, v in causes.items()}, after[part], short[part])

    def _batch(self, gs, ge, causes, after, short) -> None:
        spread = self.spread
        gap_class = np.where(after, 0, np.where(short, 1, 2))
        emit = np.ones(gs.size, bool) if self.whole else in_spans(gs, ge, self.spans)
        amounts = np.stack([causes[c] for c in tl.CAUSES])
        offsets = np.cumsum(amounts, axis=0) - amounts  # each cause's part, end to end in the analysis's order
        if spread is not None:
            for class_index, class_name in enumerate(tl.GAP_CLASSES):
                in_class = gap_class == class_index
                for k, cause in enumerate(tl.CAUSES):
                    name = f"idle:{class_name}:{cause}"
                    if spread.wants(name):
                        mine = in_class & (amounts[k] > 0)
                        spread.spread(name, gs[mine] + offsets[k][mine], amounts[k][mine], emit[mine])
            spread.flush()
        if emit.any():
            self.gaps.append((gs[emit], ge[emit], gap_class[emit].astype(np.int8)))
            self.n_gaps += int(emit.sum())
            b, e, code = [], [], []
            for k, cause in enumerate(tl.CAUSES):
                mine = (amounts[k] > 0) & emit
                if mine.any():
                    b.append(gs[mine] + offsets[k][mine])
                    e.append(gs[mine] + offsets[k][mine] + amounts[k][mine])
                    code.append(np.full(int(mine.sum()), k, np.int8))
                    self.gap_ns[cause] += int(amounts[k][mine].sum())
            if b:
                bb, ee, cc = np.concatenate(b), np.concatenate(e), np.concatenate(code)
                order = np.argsort(bb, kind="stable")
                self.causes.append((bb[order], ee[order], cc[order]))
                self.n_causes += bb.size
        self.end_batch()

    def end_batch(self) -> None:
        self.batches.append((self.spread.rows if self.spread is not None else 0, self.n_gaps, self.n_causes))


def _joined(parts: list[tuple]) -> Slices:
    if not parts:
        return Slices(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int8))
    return Slices(*(np.concatenate([part[k] for part in parts]) for k in range(3)))


def _device_tracks(trace, device: int, label: str, window: dict, spans, findings: dict, series: dict,
                   devices_data: dict, hosts: dict) -> DeviceTracks:
    lo, hi = int(window["start_ns"]), int(window["end_ns"])
    claims = {fid: c for fid, c in ((series.get("claims") or {}).get(label) or {}).items() if fid in findings}
    claimed = {fid: claims[fid] for fid in findings if fid in claims}
    whole = len(spans) == 1 and spans[0][0] <= lo and spans[0][1] >= hi
    # the slices' totals in the analysis (its decomposition): each claim is a share of them
    totals = dict((series.get("slices") or {}).get(label) or {})
    busy = _busy_slices(trace, device, lo, hi, claims) if claims else {}
    for name, (s, e) in busy.items():
        totals[name] = int((e - s).sum())
    spread = _ClaimSpread(claimed, totals) if claims else None
    builder = _GapBuilder(spans, whole, spread)
    pid = int(trace.devices.iloc[device]["pid"])
    tl.device_timeline(trace, device, lo, hi, hosts, sync_ends=_sync_ends(trace, pid), sync_slack_ns=SYNC_SLACK_NS,
                       min_gap_ns=int(trace.meta.get("clock_resolution_ns") or 1), on_gaps=builder.on_gaps)
    batches = builder.batches
    claim_slices = Slices(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int16))
    if spread is not None:
        for name, (s, e) in busy.items():
            spread.spread(name, s, e - s, in_spans(s, e, spans))
        spread.flush()
        builder.end_batch()
        claim_slices = _in_time_order(_joined(spread.out))
        # one finding track: its slices written in time order, after the gaps (a copy piece touching an
        # idle piece of the same finding, both claimed by pageable_memcpy, is one slice, not two that
        # Perfetto would nest wrongly at their common end)
        batches = [(0, gaps, causes) for _, gaps, causes in builder.batches[:-1]]
        batches.append((claim_slices.start.size, builder.n_gaps, builder.n_causes))
    top = (devices_data.get(label) or {}).get("gaps", {}).get("top") or []
    longest = tuple(LongestGap(k + 1, int(gap["start_ns"]), int(gap["length_ns"]), gap["cause"])
                    for k, gap in enumerate(top[:tl.TOP_GAPS])
                    if in_spans(np.array([int(gap["start_ns"])]), np.array([int(gap["start_ns"]) + int(gap["length_ns"])]),
                                spans)[0])
    return DeviceTracks(index=device, label=label, name=str(trace.devices.iloc[device]["name"]), gaps=_joined(builder.gaps),
                        causes=_joined(builder.causes), claims=claim_slices,
                        batches=np.array(batches, np.int64).reshape(-1, 3), claimed=claimed,
                        gap_ns_by_cause=builder.gap_ns, claimed_ns=spread.drawn if spread is not None else None,
                        largest_claim=spread.largest if spread is not None else None, longest_gaps=longest)


def _in_time_order(claims: Slices) -> Slices:
    """The claims' slices sorted by start, a finding's touching slices joined (pieces of its idle and busy
    slices were spread apart)."""
    if not claims.start.size:
        return claims
    order = np.argsort(claims.start, kind="stable")
    b, e, who = claims.start[order], claims.end[order], claims.code[order]
    first = np.ones(b.size, bool)
    first[1:] = (who[1:] != who[:-1]) | (b[1:] != e[:-1])
    starts = np.flatnonzero(first)
    last = np.concatenate((starts[1:] - 1, [b.size - 1]))
    return Slices(b[starts], e[last], who[starts])


def _sync_ends(trace, pid: int) -> np.ndarray:
    """Sorted ends of the process's blocking calls, as the analysis passes them to the timeline."""
    api = trace.api
    if not len(api):
        return np.empty(0, np.int64)
    blocking = cat_mask(api, "category", st.BLOCKING) & (api["pid"].to_numpy() == pid)
    return np.sort(api["end"].to_numpy()[blocking].astype(np.int64))


def _busy_slices(trace, device: int, lo: int, hi: int, claims: dict) -> dict:
    """Where the claimed busy slices lie: ``copy`` = copies and memsets while no kernel runs,
    ``collective`` = collective kernels while no compute kernel runs (accounting's definitions)."""
    wanted = {name for c in claims.values() for name in c if name in ("copy", "collective")}
    if not wanted:
        return {}
    gpu = trace.gpu
    rows = device_rows(trace, device)  # the device's rows (tracetriage.partition; None: every row), no mask over all
    s, e = take(gpu["start"].to_numpy(), rows), take(gpu["end"].to_numpy(), rows)
    mine = (e > lo) & (s < hi)
    kernel, graph = is_kind(gpu, "kernel", rows), is_kind(gpu, "graph", rows)
    out = {}
    if "copy" in wanted:
        copies = mine & (is_kind(gpu, "memcpy", rows) | is_kind(gpu, "memset", rows))
        work = mine & (kernel | graph)
        cs, ce = iv.clip(*iv.union(s[copies], e[copies]), lo, hi)
        ws, we = iv.clip(*iv.union(s[work], e[work]), lo, hi)
        out["copy"] = iv.subtract(cs, ce, ws, we)
    if "collective" in wanted:
        coll = take(gpu["collective"].cat.codes.to_numpy(), rows) >= 0
        cs, ce = iv.clip(*iv.union(s[mine & kernel & coll], e[mine & kernel & coll]), lo, hi)
        ps, pe = iv.clip(*iv.union(s[mine & kernel & ~coll], e[mine & kernel & ~coll]), lo, hi)
        out["collective"] = iv.subtract(cs, ce, ps, pe)
    return out
