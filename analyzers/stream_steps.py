"""Each process's steps and the analysis window of an Nsight Systems export, from its tables streamed
(issue 36 item 3; docs/large_captures.md): what ``phases.Finder.steps`` and ``analysis._window`` find
on the whole-table model, by the same code (steps.nvtx_steps, steps.sync_steps,
phases._activity_window) on what the stream keeps.

- NVTX step ranges: the NVTX table is small, read whole (``read_ranges``, as the parser does).
- Steps inferred from the syncs: :class:`RuntimeFacts` keeps each process's blocking calls and, for
  its launch calls, a count per interval between consecutive blocking-call ends (a launch starting
  at t falls after exactly the blocking calls that end by t, all of which start before t: they have
  come when t does). A step runs from one blocking end to another, so its launches are a sum of
  those counts: ``steps._periodic`` gets them exactly, with no launch kept.
- The window without steps: analyzers/stream_phases.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetriage.analyzers import analysis, phases
from tracetriage.analyzers import steps as st
from tracetriage.analyzers.stream_phases import KernelFacts, StreamedActivity, activity_window
from tracetriage.model import API_CATEGORIES
from tracetriage.parsers.nsys_stream import DEVICE_BITS, NotStreamable


class _Process:
    def __init__(self):
        self.b_start: list[np.ndarray] = []
        self.b_end: list[np.ndarray] = []
        self.g_start: list[np.ndarray] = []  # its graph launch calls
        self.g_end: list[np.ndarray] = []
        # step bounds: blocking ends, graph launch starts, graph replay starts (steps.find_steps' candidates)
        self.bounds: list[np.ndarray] = []
        self.pending = np.empty(0, np.int64)  # bounds at or after the last watermark
        self.settled = 0  # bounds before it (every later launch starts after them)
        self.hist = np.zeros(1, np.int64)  # launches by the number of bounds at or before their start
        self.last_launch = -(1 << 62)


class RuntimeFacts:
    """What the step finder asks of the runtime table (module docstring), fed its rows in start order."""

    def __init__(self, replays: dict[int, tuple[np.ndarray, np.ndarray]] | None = None):
        """``replays``: each process's graph replays (start, end arrays), from the small tables."""
        self.replays = replays or {}
        self.blocking_codes = [API_CATEGORIES.index(c) for c in st.BLOCKING]
        self.graph_code = API_CATEGORIES.index("graph_launch")
        self.launch = [API_CATEGORIES.index(c) for c in ("launch", "graph_launch")]
        self.sync_copy = API_CATEGORIES.index("memcpy_sync")
        # per category code (-1, no category, in the last slot): a blocking call, a launch call
        self.is_blocking = np.isin(np.arange(len(API_CATEGORIES) + 1), self.blocking_codes)
        self.is_launch = np.isin(np.arange(len(API_CATEGORIES) + 1), self.launch)
        self.is_blocking[-1] = self.is_launch[-1] = False
        self.procs: dict[int, _Process] = {}
        self.copies_s: list[np.ndarray] = []
        self.copies_e: list[np.ndarray] = []
        self.first_launch: int | None = None  # the capture's first launch call
        self.complete = False

    def feed(self, part: dict[str, np.ndarray], cat: np.ndarray, mark: int | None) -> None:
        from tracetriage.analyzers.stream_timeline import few_distinct

        sc = cat == self.sync_copy
        if sc.any():
            self.copies_s.append(part["start"][sc])
            self.copies_e.append(part["end"][sc])
        pid = part["pid"]
        pids = few_distinct(pid)
        for p in pids:
            if len(pids) == 1:
                start, end, c = part["start"], part["end"], cat
            else:
                mine = pid == p
                start, end, c = part["start"][mine], part["end"][mine], cat[mine]
            proc = self._proc(p)
            blocking, graph = self.is_blocking[c], c == self.graph_code
            if blocking.any():
                proc.b_start.append(start[blocking])
                proc.b_end.append(end[blocking])
            if graph.any():
                proc.g_start.append(start[graph])
                proc.g_end.append(end[graph])
            bounds = np.concatenate((end[blocking], start[graph])) if graph.any() else end[blocking]
            if bounds.size:
                if int(bounds.min()) <= proc.last_launch:
                    raise NotStreamable("a step bound (a blocking call's end, a graph launch) at or before launch calls "
                                        "already counted")
                proc.bounds.append(bounds)
                proc.pending = np.concatenate((proc.pending, bounds))
            launched = start[self.is_launch[c]]
            if launched.size:
                self.first_launch = int(launched[0]) if self.first_launch is None else min(self.first_launch, int(launched[0]))
                k = proc.settled + np.searchsorted(np.sort(proc.pending), launched, "right")
                top = int(k[-1]) + 1
                if top > proc.hist.size:
                    proc.hist = np.concatenate((proc.hist, np.zeros(max(top, 2 * proc.hist.size) - proc.hist.size, np.int64)))
                low = int(k[0])
                proc.hist[low:top] += np.bincount(k - low)
                proc.last_launch = int(launched[-1])
            done = proc.pending < mark if mark is not None else np.ones(proc.pending.size, bool)
            if done.any():
                proc.settled += int(done.sum())
                proc.pending = proc.pending[~done]

    def _proc(self, pid: int) -> _Process:
        proc = self.procs.get(pid)
        if proc is None:
            proc = self.procs[pid] = _Process()
            replayed = self.replays.get(pid, (np.empty(0, np.int64),))[0]
            if replayed.size:  # known before any call: bounds from the start
                proc.bounds.append(replayed)
                proc.pending = replayed.copy()
        return proc

    def _spans(self, pid: int, starts: str, ends: str) -> tuple[np.ndarray, np.ndarray]:
        """A process's calls kept in the ``starts``/``ends`` lists of chunks, joined once (and kept joined)."""
        proc = self.procs.get(pid)
        if proc is None or not getattr(proc, ends):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        for name in (starts, ends):
            if len(getattr(proc, name)) > 1:
                setattr(proc, name, [np.concatenate(getattr(proc, name))])
        return getattr(proc, starts)[0], getattr(proc, ends)[0]

    def graph_launches(self, pid: int) -> tuple[np.ndarray, np.ndarray]:
        return self._spans(pid, "g_start", "g_end")

    def blocking(self, pid: int) -> tuple[np.ndarray, np.ndarray]:
        return self._spans(pid, "b_start", "b_end")

    def launches(self, pid: int) -> _LaunchCounts:
        proc = self._proc(pid)
        if len(proc.bounds) > 1:
            proc.bounds = [np.concatenate(proc.bounds)]
        return _LaunchCounts(np.sort(proc.bounds[0]) if proc.bounds else np.empty(0, np.int64), proc.hist)

    def sync_copies(self) -> tuple[np.ndarray, np.ndarray]:
        s, e = (np.concatenate(p) if p else np.empty(0, np.int64) for p in (self.copies_s, self.copies_e))
        order = np.argsort(s, kind="stable")
        return s[order], e[order]


class _LaunchCounts:
    """A process's launch calls per step (``steps.Selected.per_step``) for steps between its blocking ends."""

    def __init__(self, ends: np.ndarray, hist: np.ndarray):
        self.ends = ends
        self.before = np.cumsum(np.concatenate((hist, np.zeros(max(0, ends.size + 1 - hist.size), np.int64))))

    def _starting_before(self, t: np.ndarray) -> np.ndarray:
        at = np.searchsorted(self.ends, t, "left")
        if not (at < self.ends.size).all() or not (self.ends[np.minimum(at, self.ends.size - 1)] == t).all():
            raise NotStreamable("a step bound that is no blocking call's end, graph launch or replay")
        return self.before[at]

    def per_step(self, steps: st.Steps) -> np.ndarray:
        return self._starting_before(steps.ends) - self._starting_before(steps.starts)


class Spans:
    """Each process's GPU operations: the first start and last end (the processes that ran GPU work)."""

    def __init__(self):
        self.of: dict[int, tuple[int, int]] = {}

    def feed(self, s: np.ndarray, e: np.ndarray, key: np.ndarray) -> None:
        from tracetriage.analyzers.stream_timeline import few_distinct

        pid = key >> DEVICE_BITS
        for p in few_distinct(pid):
            mine = pid == p
            lo, hi = int(s[mine].min()), int(e[mine].max())
            have = self.of.get(p)
            self.of[p] = (lo, hi) if have is None else (min(have[0], lo), max(have[1], hi))


@dataclass
class StreamedWindow:
    """The window and the steps the stream found (``analysis._window``'s Window fields it measures)."""
    start_ns: int
    end_ns: int
    source: str
    warmup_steps_excluded: int
    setup_excluded_ns: int
    steps: dict[int, st.Steps]
    spans: dict[int, tuple[np.ndarray, np.ndarray]]

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def find_steps(pids: list[int], ranges, step_range: str | None, facts: RuntimeFacts,
               spans: dict[int, tuple[int, int]]) -> dict[int, st.Steps]:
    """``steps.find_steps`` of each process over the whole capture."""
    out = {}
    for pid in pids:
        named = st.nvtx_steps(ranges, pid, step_range)
        if named is None:
            span = spans.get(pid, (0, 0))
            named = st.sync_steps(pid, facts.blocking(pid)[1], facts.launches(pid), span)
            if named is None:
                replays = facts.replays.get(pid, (np.empty(0, np.int64),))[0]
                named = st.graph_steps(pid, replays, facts.graph_launches(pid)[0], facts.launches(pid), span)
        out[pid] = named or st.Steps(pid, "none")
    return out


def window_of(steps: dict[int, st.Steps], span_lo: int, activity, span: tuple[int, int] | None = None) -> StreamedWindow:
    """``analysis._window`` (and ``phases._find``'s window) from the steps; ``activity``: a callable giving
    the GPU activity's window, asked only when no process has enough steps; ``span``: the capture's GPU span
    (first operation to last), the part of too few annotated steps the window covers (None before the
    kernels are read: the guess, checked after)."""
    bounding = [s for s in steps.values() if s.count >= st.MIN_STEPS]
    if bounding:
        lo = int(min(s.starts[0] for s in bounding))
        hi = int(max(s.ends[-1] for s in bounding))
        source = "steps:" + "+".join(sorted({s.source for s in bounding}))
        dropped = sum(s.warmup_dropped for s in bounding)
    else:
        (lo, hi), source, dropped = activity(), "gpu_activity", 0
    lo, hi = phases.cover_steps(lo, hi, steps.values(), span)
    if hi <= lo:
        hi = lo + 1
    spans = {}
    for pid, process_steps in steps.items():
        long = analysis._long(process_steps)
        if long.any():
            spans[pid] = (process_steps.starts[long], process_steps.ends[long])
    return StreamedWindow(lo, hi, source, dropped, 0 if bounding else max(0, lo - span_lo), steps, spans)


def within_steps(pid: int, facts: RuntimeFacts, lo: int, hi: int, own: tuple[int, int] | None) -> st.Steps:
    """``steps.find_steps(trace, pid, None, within=(lo, hi))`` for a process without NVTX steps: its
    blocking calls that end by ``lo`` or later and start before ``hi``; ``own``: the first start and last
    end of its GPU operations that overlap [lo, hi) (None: none)."""
    b_start, b_end = facts.blocking(pid)
    ends = b_end[(b_end >= lo) & (b_start < hi)]
    span = own or (0, 0)
    span = (max(span[0], lo), min(span[1], hi))
    found = st.sync_steps(pid, ends, facts.launches(pid), span)
    if found is None:
        r_start, r_end = facts.replays.get(pid, (np.empty(0, np.int64), np.empty(0, np.int64)))
        g_start, g_end = facts.graph_launches(pid)
        found = st.graph_steps(pid, r_start[(r_end > lo) & (r_start < hi)], g_start[(g_end >= lo) & (g_start < hi)],
                               facts.launches(pid), span)
    return found or st.Steps(pid, "none")


def final_window(pids: list[int], gpu: dict[int, tuple[int, int]], ranges, step_range: str | None,
                 facts: RuntimeFacts, kernels: KernelFacts, small: dict[str, np.ndarray], overlapping) -> StreamedWindow:
    """The window and steps ``analyze_trace`` finds (``phases.Finder.steps`` then ``analysis._window``).
    ``overlapping(lo, hi)``: each process's first start and last end of its GPU operations overlapping
    [lo, hi) (a pass over the kernel table, asked only when steps are looked for within the steady phase)."""
    steps = find_steps(pids, ranges, step_range, facts, gpu)
    found: dict[str, tuple[int, int]] = {}

    def activity() -> tuple[int, int]:
        if "window" not in found:
            found["window"] = activity_window(StreamedActivity(kernels, small, facts.sync_copies(), ranges, facts.first_launch))
        return found["window"]

    # processes without steps look for them again within the steady phase (phases._find_steps); with 8 blocking
    # calls or fewer in the whole capture none can be found there, whatever the window: it is not asked
    missing = [pid for pid in pids if not steps[pid].count and max(
        facts.blocking(pid)[1].size, facts.graph_launches(pid)[0].size,
        facts.replays.get(pid, (np.empty(0),))[0].size) > st.MIN_INFERRED_STEPS]
    if not step_range and missing and gpu:
        lo, hi = activity()
        if (lo, hi) != StreamedActivity(kernels, small, facts.sync_copies(), ranges, facts.first_launch).span:
            own = overlapping(lo, hi)
            for pid in missing:
                inside = within_steps(pid, facts, lo, hi, own.get(pid))
                if inside.count:
                    steps[pid] = inside
    span_lo = min(v[0] for v in gpu.values()) if gpu else 0
    span = (span_lo, max(v[1] for v in gpu.values())) if gpu else None
    return window_of(steps, span_lo, activity, span)


def read_step_ranges(db, strings):
    """The NVTX ranges as the whole-table model holds them (``Trace.ranges``: read whole, in start order)."""
    from tracetriage.model import empty_ranges
    from tracetriage.parsers.nsys_tables import read_ranges

    ranges = read_ranges(db, strings)
    return empty_ranges() if ranges is None else ranges.sort_values("start", kind="stable", ignore_index=True)


def guess_window(ranges, step_range: str | None, facts: RuntimeFacts, small: dict[str, np.ndarray]) -> StreamedWindow | None:
    """The window the steps give before the kernels are read, their GPU spans assumed to pass the coverage
    test (checked after the pass: :func:`final_window`); None when no process has steps (the GPU activity's window)."""
    pids = set(facts.procs) | set(int(p) for p in ranges["pid"].unique().tolist())
    pids |= {int(p) for p in np.unique(small["device"] >> DEVICE_BITS).tolist()}
    steps = find_steps(sorted(pids), ranges, step_range, facts, {pid: (0, 1) for pid in pids})
    if not any(s.count >= st.MIN_STEPS for s in steps.values()):
        return None
    return window_of(steps, 0, None)


def same_window(a: StreamedWindow, b: StreamedWindow) -> bool:
    """Whether two windows give the timeline pass the same input: bounds and each process's long steps."""
    if (a.start_ns, a.end_ns) != (b.start_ns, b.end_ns) or set(a.spans) != set(b.spans):
        return False
    return all(np.array_equal(a.spans[p][0], b.spans[p][0]) and np.array_equal(a.spans[p][1], b.spans[p][1]) for p in a.spans)


def overlapping(ctx, lo: int, hi: int) -> dict[int, tuple[int, int]]:
    """Each process's first start and last end of its GPU operations that overlap [lo, hi): a pass over the
    kernel table (in table order: no order needed) and the small tables."""
    from tracetriage.parsers import nsys_stream as ns

    out = Spans()
    ctx.passes.append("overlap")

    def feed(s, e, key):
        sel = (e > lo) & (s < hi)
        if sel.any():
            out.feed(s[sel], e[sel], key[sel])

    for part in ns.kernel_parts(ctx.db, ctx.strings, ctx.chunk_rows, ctx.direct):
        feed(part["start"], part["end"], part["device"])
    feed(ctx.small["start"], ctx.small["end"], ctx.small["device"])
    return out.of
