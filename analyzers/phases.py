"""The phases of a capture: set-up, steady state, tear-down, found from the activity itself.

A capture is not one regime: a program loads its weights, warms its allocator, compiles or
captures its graphs, and only then repeats its work. The verdict judges the steady phase
(the analysis window); every other phase is reported with its length and what fills it.

Definitions (one trace, its clock; "kernel" includes CUDA/HIP graph replays):

* The **capture span** runs from the first GPU operation's start to the last one's end.
* With **steps** (steps.py: step annotations such as ``ProfilerStep#N``, SGLang's
  ``step[DECODE ..]``, vLLM's ``execute_model``, or a periodic sync / graph launch), the steady
  phase runs from the first kept step's start to the last step's end; before it is set-up
  (warm-up steps included), after it tear-down — each when it computes at most
  :data:`SETUP_DENSITY_RATIO` as densely as the steps (denser GPU work there is steps the
  annotations missed, or the GPU draining the last steps the host already left).
* Without steps, the steady phase is found from the GPU timeline. A **stretch** is a
  maximal kernel-free interval between the first and the last kernel. A stretch is
  **set-up-like** when for at least :data:`SETUP_WAIT_SHARE` of it the GPU idles or the host
  waits in a synchronous copy (a host-only stretch, a synchronous weight copy; not the
  asynchronous copies a copy-bound loop streams). The steady phase starts at the first kernel
  (copies and memsets before any kernel are set-up: weights loaded, buffers cleared) and moves
  past each set-up-like stretch, earliest first, that is

  - at least :data:`SETUP_STRETCH_FACTOR` times every stretch after it (a stall the loop repeats
    is part of the loop),
  - followed by at least :data:`STEADY_MIN_OPS` GPU operations (a workload),
  - preceded (since the previous cut) by first-time work: fewer than :data:`STEADY_MIN_REPEAT`
    of the kernel launches there run a kernel that already ran earlier in the capture
    (compilation, loading, allocator warm-up run things once; a loop repeats them),
  - and preceded by at most :data:`SETUP_DENSITY_RATIO` times the kernel time per elapsed time
    of what follows it (start-up computes little);

  or that follows a handful of operations (fewer than :data:`STEADY_MIN_OPS` since the previous
  cut) and fills :data:`STALL_MIN_SHARE` or more of what is left of the capture, with a workload
  after it (a start-up stall: a 463 ms blocking copy before ~10 ms of work).

  Tear-down is what follows the last kernel (results read back, buffers freed) when it lasts
  :data:`PHASE_MIN_SHARE` of the capture or more, and, when a few kernels still run at the end,
  what follows the last steady activity: it starts at a set-up-like stretch (host-only, allocator
  frees, a synchronous copy) of :data:`PHASE_MIN_SHARE` of the capture or more, at least
  :data:`SETUP_STRETCH_FACTOR` times every stretch before it, with a workload before it and only a
  handful of operations after it, most of whose kernel launches run kernels the loop never ran
  (:func:`_teardown_start`). A stall inside the work is never cut off at the end: a slow last
  iteration repeats the loop's kernels (nothing else in the timeline tells it from tear-down).
* **No steady phase** (then the analysis abstains instead of judging set-up as steady): the
  window holds at least :data:`STEADY_MIN_OPS` GPU operations, but fewer than
  :data:`STEADY_MIN_REPEAT` of its kernel launches repeat a kernel that ran earlier in the
  capture (``first_launches``: a steady state repeats its work — a loop's iterations, a model's
  layers), or one stall fills :data:`STALL_MIN_SHARE` of it or more with fewer than
  :data:`STEADY_MIN_OPS` operations on either side (``stall``).

What fills a phase (:class:`metrics.Phase`): its GPU-idle stretches (GPU idle on every device,
the longest :data:`STRETCHES_NAMED` of at least :data:`STRETCH_MIN_SHARE` of the phase, each with
the host call covering half of it when one does and the share of it the host spent inside any
runtime/driver call: a stretch is **host-only** when that share is under :data:`CALL_COVER_SHARE`,
else it is GPU idle inside CUDA/HIP calls — a 10 s cudaFree is the driver's time, not the
program's host code), its synchronous copy calls, the bytes its
copies moved, its graph capture/instantiate calls, its allocator calls (cudaMalloc/cudaFree/
hipMalloc ...), the warm-up steps dropped, its kernels and the GPU's busy share.
A set-up or tear-down shorter than :data:`PHASE_MIN_SHARE` of the capture span is not a phase.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers import steps as st
from tracetriage.analyzers.metrics import Phase, Phases
from tracetriage.model import cat_mask, is_kind, is_sorted

# name: (value, why) — the phase rule's thresholds (analyzers/rules/thresholds.py lists them)
THRESHOLDS = {
    "phase_min_share": (0.05, "a set-up or tear-down shorter than 5% of the capture is noise, not a phase"),
    "setup_stretch_factor": (3.0, "a set-up stretch is 3x every stall after it: a stall the loop repeats is the loop's"),
    "setup_density_ratio": (1 / 3, "start-up computes at most a third as densely (kernel time per elapsed time) as steady work"),
    "setup_wait_share": (0.5, "a set-up stretch is half or more GPU idle or host waiting in a synchronous copy"),
    "steady_min_ops": (20, "a steady phase holds a workload: 20 GPU operations or more (judge_min_gpu_ops)"),
    "steady_min_repeat": (0.5, "in a steady phase half the kernel launches or more run a kernel that ran before"),
    "stall_min_share": (0.5, "a stall filling half the window or more, with a handful of operations either side, is start-up"),
}
PHASE_MIN_SHARE = THRESHOLDS["phase_min_share"][0]
SETUP_STRETCH_FACTOR = THRESHOLDS["setup_stretch_factor"][0]
SETUP_DENSITY_RATIO = THRESHOLDS["setup_density_ratio"][0]
SETUP_WAIT_SHARE = THRESHOLDS["setup_wait_share"][0]
STEADY_MIN_OPS = THRESHOLDS["steady_min_ops"][0]
STEADY_MIN_REPEAT = THRESHOLDS["steady_min_repeat"][0]
STALL_MIN_SHARE = THRESHOLDS["stall_min_share"][0]
STRETCH_MIN_SHARE = 0.05  # a host-only stretch named in a phase's contents: at least 5% of the phase
STRETCHES_NAMED = 3
CALL_COVER_SHARE = 0.5  # a host call covering half a stretch names what the host did in it
WARMUP_NAME = re.compile(r"(?i)warm[\s_-]?up|autotun")  # a host range that names itself a warm-up pass
CAPTURE_CALLS = re.compile(r"(?i)(Stream|Thread)?BeginCapture|EndCapture|GraphInstantiate")


class Finder:
    """The phase rule on one trace, its activity (:class:`_Activity`) built at most once for both
    questions asked of it: the steps (:meth:`steps`, inferred again within the steady phase) and the
    phases (:meth:`phases`)."""

    def __init__(self, trace):
        self.trace = trace
        self._activity: _Activity | None = None

    @property
    def activity(self) -> _Activity:
        if self._activity is None:
            self._activity = _Activity(self.trace)
        return self._activity

    def steps(self, pids: list[int], step_range: str | None) -> dict[int, st.Steps]:
        return _find_steps(self, pids, step_range)

    def phases(self, steps: list) -> tuple[Phases, int, int]:
        """The phases (the last question asked: the activity's columns are let go once they are
        found, before the device timelines run; asking again builds it again)."""
        found = _find(self.activity, steps)
        self._activity = None
        return found


def _near(intervals: tuple[np.ndarray, np.ndarray], around: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The intervals of a disjoint sorted set that overlap some interval of ``around`` (disjoint,
    sorted, usually few): only those can intersect it."""
    starts, ends = intervals
    if not around[0].size or not starts.size:
        return starts[:0], ends[:0]
    first = np.searchsorted(ends, around[0], "right")
    stop = np.searchsorted(starts, around[1], "left")
    marks = np.zeros(starts.size + 1, np.int64)
    np.add.at(marks, first, 1)
    np.add.at(marks, np.maximum(stop, first), -1)
    keep = np.cumsum(marks[:-1]) > 0
    return starts[keep], ends[keep]


class _Activity:
    """The GPU and host activity of one trace that the phase rule reads, built once."""

    def __init__(self, trace):
        gpu, api = trace.gpu, trace.api
        self.trace = trace
        self.start, self.end = gpu["start"].to_numpy(np.int64), gpu["end"].to_numpy(np.int64)
        self.kernel = is_kind(gpu, "kernel") | is_kind(gpu, "graph")
        self.span = (int(self.start.min()), int(self.end.max())) if self.start.size else (0, 0)
        self.busy = iv.union(self.start, self.end)
        self.busy_cover = iv.Coverage(*self.busy)
        if self.kernel.all():  # no copy or memset: the kernels are the busy time (one table, not two)
            self.kernels, self.kernel_cover = self.busy, self.busy_cover
        else:
            self.kernels = iv.union(self.start[self.kernel], self.end[self.kernel])
            self.kernel_cover = iv.Coverage(*self.kernels)
        self.op_starts = self.start if is_sorted(self.start) else np.sort(self.start)
        self.launch = Launches(trace, self.kernel)
        self.api_start, self.api_end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
        self.sync_copy = cat_mask(api, "category", "memcpy_sync") if len(api) else np.zeros(0, bool)
        # GPU time the host spends blocked in a synchronous copy: the busy intervals under those calls
        sync = iv.union(self.api_start[self.sync_copy], self.api_end[self.sync_copy])
        self.busy_in_sync = iv.Coverage(*iv.intersect(*sync, *_near(self.busy, sync)))

    def in_calls_share(self, start: int, end: int) -> float:
        """The share of [start, end) the host spends inside runtime/driver calls (any of them, once):
        the union of the calls that touch it, clipped to it (asked of a few stretches: no union of
        every call is kept)."""
        if end <= start:
            return 0.0
        call_end = iv.not_before(self.api_end, self.api_start)
        touching = (self.api_start < end) & (call_end > start)
        inside = iv.union(np.maximum(self.api_start[touching], start), np.minimum(call_end[touching], end))
        return float(iv.measure(*inside)) / (end - start)

    def idle_stretches(self, a: int, b: int, min_length: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """The GPU's idle intervals (no operation on any device) inside [a, b) lasting ``min_length``
        or more, in order; built a slice of the busy intervals at a time."""
        busy_s, busy_e = self.busy
        i = int(np.searchsorted(busy_e, a, "right"))  # the first busy interval ending after a
        j = max(i, int(np.searchsorted(busy_s, b, "left")))  # ... and those starting before b
        count = j - i + 1  # stretch m runs from busy interval i+m-1's end (a for m = 0) to i+m's start (b for the last)
        parts_s, parts_e = [], []
        for m0 in range(0, count, iv.SLICE):
            m1 = min(m0 + iv.SLICE, count)
            starts = busy_e[i + max(m0 - 1, 0):i + m1 - 1]
            ends = busy_s[i + m0:min(i + m1, j)]
            gap_s = np.maximum(np.concatenate(([a], starts)) if m0 == 0 else starts, a)
            gap_e = np.minimum(np.concatenate((ends, [b])) if m1 == count else ends, b)
            keep = (gap_e > gap_s) & (gap_e - gap_s >= min_length)
            parts_s.append(gap_s[keep])
            parts_e.append(gap_e[keep])
        return np.concatenate(parts_s), np.concatenate(parts_e)

    def waiting(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """For each interval, the ns the GPU idles or the host waits in a synchronous copy."""
        busy = self.busy_cover.overlap(starts, ends)
        return (ends - starts) - busy + self.busy_in_sync.overlap(starts, ends)

    def ops_from(self, t: int) -> int:
        return int(self.op_starts.size - np.searchsorted(self.op_starts, t, "left"))

    def launches(self, a: int, b: int) -> tuple[int, int]:
        """Kernel launches starting in [a, b) and how many of them run a kernel that ran before."""
        i, j = np.searchsorted(self.launch.starts, [a, b], "left")
        return int(j - i), self.launch.repeated(int(i), int(j))

    def density(self, a: int, b: int) -> float:
        """Kernel time per elapsed time in [a, b)."""
        return float(self.kernel_cover.overlap(np.array([a]), np.array([b]))[0]) / (b - a) if b > a else 0.0


def _stretches(activity: _Activity) -> tuple[np.ndarray, np.ndarray]:
    """The kernel-free stretches between the first and the last kernel (starts, ends)."""
    ks, ke = activity.kernels
    starts, ends = ke[:-1], ks[1:]
    keep = ends > starts
    return starts[keep], ends[keep]


def _setup_end(activity: _Activity, starts: np.ndarray, ends: np.ndarray, lo: int, hi: int,
               later_max: np.ndarray | None = None) -> int:
    """Where the steady phase starts: ``lo`` (the first kernel) moved past each set-up-like stretch
    that passes the rule (module docstring), earliest first, the density before a stretch measured
    from the previous cut (a long stall does not make the work after it look like start-up). ``later_max``:
    the longest stretch after each one, when the caller has it (the streamed path passes only the
    stretches that can pass the rule)."""
    lengths = ends - starts
    inside = (ends <= hi) & (starts >= lo)
    if later_max is None:  # the longest stretch after each one, up to hi: a running maximum from the end, shifted by one
        later_max = np.zeros(lengths.size, np.int64)
        if lengths.size > 1:
            later_max[:-1] = np.maximum.accumulate(np.where(inside, lengths, 0)[::-1])[::-1][1:]
    # only stretches that can pass the rule are looked at one by one (a loop has many short ones)
    may_pass = (lengths >= SETUP_STRETCH_FACTOR * later_max) | (lengths >= STALL_MIN_SHARE * (hi - starts))
    candidates = np.flatnonzero(inside & (ends < hi) & may_pass)
    setup_like = activity.waiting(starts[candidates], ends[candidates]) >= SETUP_WAIT_SHARE * lengths[candidates]
    for k in candidates[setup_like]:
        cut = int(ends[k])
        if cut <= lo or activity.ops_from(cut) < STEADY_MIN_OPS:
            continue
        handful = activity.ops_from(lo) - activity.ops_from(int(starts[k])) < STEADY_MIN_OPS
        if handful and lengths[k] >= STALL_MIN_SHARE * (hi - int(starts[k])):  # a start-up stall after a handful
            lo = cut
            continue
        if lengths[k] < SETUP_STRETCH_FACTOR * later_max[k]:
            continue
        launches, repeated = activity.launches(lo, cut)
        if launches and repeated >= STEADY_MIN_REPEAT * launches:  # set-up is first-time work, not repeated work
            continue
        if activity.density(lo, cut) <= SETUP_DENSITY_RATIO * activity.density(cut, hi):
            lo = cut
    return lo


def _teardown_start(activity: _Activity, starts: np.ndarray, ends: np.ndarray, lo: int, hi: int,
                    earlier_max: np.ndarray | None = None) -> int:
    """Where the steady phase ends when the capture closes with a tear-down that still runs a few kernels:
    ``hi`` moved back to the start of the earliest set-up-like stretch (host-only, the GPU idle in
    allocator frees or a synchronous copy) inside [lo, hi) that is at least :data:`SETUP_STRETCH_FACTOR`
    times every stretch before it since ``lo`` (the loop's own stalls are the loop's), lasts
    :data:`PHASE_MIN_SHARE` of the capture or more (to the capture's end), has a workload before it
    (:data:`STEADY_MIN_OPS` operations) and a handful after it (fewer than that), of which fewer than
    :data:`STEADY_MIN_REPEAT` of the kernel launches run a kernel that ran before (a slow last iteration
    repeats the loop's kernels: it is not cut off). ``earlier_max``: the longest stretch before each one
    since ``lo``, when the caller has it (the streamed path passes only the last stretches)."""
    span_lo, span_hi = activity.span
    lengths = ends - starts
    inside = (starts > lo) & (ends <= hi)
    if earlier_max is None:  # the longest stretch before each one, from lo
        earlier_max = np.zeros(lengths.size, np.int64)
        if lengths.size > 1:
            earlier_max[1:] = np.maximum.accumulate(np.where(inside, lengths, 0))[:-1]
    candidates = np.flatnonzero(inside & (lengths >= SETUP_STRETCH_FACTOR * earlier_max)
                                & (span_hi - starts >= PHASE_MIN_SHARE * (span_hi - span_lo)))
    for k in candidates:
        start, end = int(starts[k]), int(ends[k])
        if activity.ops_from(end) >= STEADY_MIN_OPS or activity.ops_from(lo) - activity.ops_from(start) < STEADY_MIN_OPS:
            continue
        if activity.waiting(starts[k:k + 1], ends[k:k + 1])[0] < SETUP_WAIT_SHARE * lengths[k]:
            continue
        launches, repeated = activity.launches(end, span_hi + 1)
        if launches and repeated >= STEADY_MIN_REPEAT * launches:
            continue
        return start
    return hi


class Launches:
    """The kernel launches (kernels and graph replays, ``kernel`` marks them) in GPU start order:
    their starts and ends, which of them run a kernel (by name) that already ran earlier in the
    capture, and, when asked (:attr:`launched_at`, :attr:`first_launch`), the host time each was
    launched at (the launch call joined on (pid, correlation); the GPU start when no call is
    traced) and the host time its kernel was first launched.

    A launch repeats unless it is the first of its kernel name: the first launches are found a
    slice at a time (a count of the names in the slice, a sort only of a slice holding a name not
    seen before), no sort of every launch; the starts and ends are the table's columns when every
    operation is a launch and they are in start order (the usual case), not copies."""

    def __init__(self, trace, kernel: np.ndarray):
        gpu = trace.gpu
        self._trace, self._kernel = trace, kernel
        start, end = gpu["start"].to_numpy(np.int64), gpu["end"].to_numpy(np.int64)
        name_column = gpu["name"]
        names = name_column.cat.codes.to_numpy()
        if not kernel.all():
            start, end, names = start[kernel], end[kernel], names[kernel]
        self._order = None if is_sorted(start) else np.argsort(start, kind="stable")
        if self._order is not None:
            start, end, names = start[self._order], end[self._order], names[self._order]
        self.starts, self.ends, self._names = start, end, names
        self._missing = len(name_column.cat.categories)  # the slot of a missing name (code -1)
        self._first_of = _first_occurrences(names, self._missing)
        self._firsts = np.sort(self._first_of[self._first_of >= 0])

    def repeated(self, i: int, j: int) -> int:
        """How many of the launches i .. j-1 run a kernel that ran before (in an earlier launch)."""
        return (j - i) - int(np.searchsorted(self._firsts, j) - np.searchsorted(self._firsts, i))

    @functools.cached_property
    def launched_at(self) -> np.ndarray:
        trace, kernel = self._trace, self._kernel
        gpu, api = trace.gpu, trace.api
        launched = gpu["start"].to_numpy(np.int64)[kernel]
        if len(api) and "correlation" in gpu.columns and "correlation" in api.columns:
            calls = cat_mask(api, "category", ("launch", "graph_launch"))
            call_keys = api["pid"].to_numpy(np.int64)[calls] * (1 << 32) + api["correlation"].to_numpy(np.int64)[calls]
            keys = gpu["pid"].to_numpy(np.int64)[kernel] * (1 << 32) + gpu["correlation"].to_numpy(np.int64)[kernel]
            order = np.argsort(call_keys, kind="stable")
            call_keys, call_starts = call_keys[order], api["start"].to_numpy(np.int64)[calls][order]
            at = np.minimum(np.searchsorted(call_keys, keys), max(0, call_keys.size - 1))
            if call_keys.size:
                tied = (call_keys[at] == keys) & (gpu["correlation"].to_numpy(np.int64)[kernel] >= 0)
                launched[tied] = call_starts[at[tied]]
        return launched if self._order is None else launched[self._order]

    @functools.cached_property
    def first_launch(self) -> np.ndarray:
        codes = self._names.astype(np.intp)
        codes[codes < 0] = self._missing
        return self.launched_at[self._first_of[codes]]


def _first_occurrences(codes: np.ndarray, missing: int) -> np.ndarray:
    """For each name code (code -1, missing, in slot ``missing``), the index of its first row; -1
    for a code no row has. A slice at a time: a count of its codes, and a sort of the slice only
    when it holds a code not seen before."""
    first = np.full(missing + 1, -1, np.int64)
    for i in range(0, codes.size, iv.SLICE):
        chunk = codes[i:i + iv.SLICE].astype(np.intp)
        chunk[chunk < 0] = missing
        new = (np.bincount(chunk, minlength=missing + 1) > 0) & (first < 0)
        if new.any():
            values, at = np.unique(chunk, return_index=True)  # the first row of each code in the slice
            pick = new[values]
            first[values[pick]] = i + at[pick]
    return first


def _phase(activity: _Activity, name: str, start: int, end: int, warmup_steps: int = 0,
           warmup_range: str | None = None) -> Phase:
    """A phase of [start, end) with what fills it (module docstring)."""
    trace = activity.trace
    length = max(1, end - start)
    a, b = np.array([start]), np.array([end])
    busy = int(activity.busy_cover.overlap(a, b)[0])
    idle_s, idle_e = activity.idle_stretches(start, end, STRETCH_MIN_SHARE * length)  # only those named
    idle_len = idle_e - idle_s
    named = np.arange(idle_len.size)
    named = named[np.argsort(-idle_len[named], kind="stable")][:STRETCHES_NAMED]
    host_only = [{"start_ns": int(idle_s[k]), "length_ns": int(idle_len[k]),
                  "call": _covering_call(trace, int(idle_s[k]), int(idle_e[k])),
                  "in_calls_pct": round(100.0 * activity.in_calls_share(int(idle_s[k]), int(idle_e[k])), 1)}
                 for k in sorted(named, key=lambda k: idle_s[k])]
    api = trace.api
    in_phase = (activity.api_end > start) & (activity.api_start < end)
    sync = in_phase & activity.sync_copy
    sync_ns = np.minimum(activity.api_end[sync], end) - np.maximum(activity.api_start[sync], start)
    gpu = trace.gpu
    ops = (activity.start >= start) & (activity.start < end)
    names = api["name"]
    capture = [code for code, call in enumerate(names.cat.categories.tolist()) if CAPTURE_CALLS.search(str(call))] \
        if len(api) and hasattr(names, "cat") else []
    return Phase(
        phase=name, start_ns=int(start), end_ns=int(end), duration_ns=int(end - start),
        busy_pct=round(100.0 * busy / length, 1), kernels=int((ops & activity.kernel).sum()),
        host_only=host_only,
        sync_copies={"count": int(sync.sum()), "longest_ns": int(sync_ns.max(initial=0)), "host_ns": int(sync_ns.sum())},
        copy_bytes=int(gpu["bytes"].to_numpy(np.int64)[ops & is_kind(gpu, "memcpy")].clip(min=0).sum()),  # unrecorded: -1
        graph_capture_calls=int(np.isin(names.cat.codes.to_numpy()[in_phase], capture).sum()) if capture else 0,
        alloc_calls=int((in_phase & cat_mask(api, "category", "alloc")).sum()) if len(api) else 0,
        warmup_steps=int(warmup_steps), warmup_range=warmup_range,
    )


def _covering_call(trace, start: int, end: int) -> str | None:
    """The host call (by name, its calls summed) covering at least half of [start, end), None when
    none does: a 13 s stretch spent in two cudaFree calls is "in cudaFree"."""
    api = trace.api
    if not len(api):
        return None
    s, e = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    overlap = np.minimum(e, end) - np.maximum(s, start)
    touching = overlap > 0
    if not touching.any():
        return None
    codes = api["name"].cat.codes.to_numpy()[touching]
    covered = np.bincount(codes, weights=overlap[touching])
    best = int(np.argmax(covered))
    return str(api["name"].cat.categories[best]) if covered[best] >= CALL_COVER_SHARE * (end - start) else None


def _no_steady(activity: _Activity, lo: int, hi: int, launches: int, repeated: int) -> dict | None:
    """Why the window [lo, hi) of a capture without steps is no steady phase (None when it is one, or
    when it holds a handful of operations, which the oddities already say): its kernels do not
    repeat (``first_launches``), or one stall fills most of it with a handful of operations on
    either side (``stall``: the work the stall separates is no workload either)."""
    ops = activity.ops_from(lo) - activity.ops_from(hi)
    if ops < STEADY_MIN_OPS:
        return None
    if repeated < STEADY_MIN_REPEAT * launches:
        return {"why": "first_launches", "kernels": launches, "repeated": repeated, "stall_ns": 0}
    idle_s, idle_e = activity.idle_stretches(lo, hi, STALL_MIN_SHARE * (hi - lo))  # the longest, if it can be a stall
    if idle_s.size:
        k = int(np.argmax(idle_e - idle_s))
        before, after = activity.ops_from(lo) - activity.ops_from(int(idle_s[k])), activity.ops_from(int(idle_e[k]))
        after -= activity.ops_from(hi)
        if idle_e[k] - idle_s[k] >= STALL_MIN_SHARE * (hi - lo) and max(before, after) < STEADY_MIN_OPS:
            inside = activity.in_calls_share(int(idle_s[k]), int(idle_e[k])) >= CALL_COVER_SHARE
            return {"why": "stall", "kernels": launches, "repeated": repeated, "stall_ns": int(idle_e[k] - idle_s[k]),
                    "stall_call": (_covering_call(activity.trace, int(idle_s[k]), int(idle_e[k])) or "runtime calls")
                    if inside else None}
    return None


def _warmup_range_end(activity: _Activity, lo: int, hi: int) -> tuple[int, str | None]:
    """Where a warm-up pass inside [lo, hi) ends, with its host range's name (``lo`` and None when
    there is none). Kernels belong to a host range by the time the host launched them (the launch
    call); a range's pass ends when the range and the GPU work it launched have both ended. The
    pass is the latest-ending host range that began by ``lo`` and was open when the window's first
    kernels were launched, whose pass ends inside the window
    with at least :data:`STEADY_MIN_OPS` kernel launches after it, such that

    - :data:`STEADY_MIN_REPEAT` or more of the kernel launches after it run a kernel first launched
      inside it (the pass ran first what the steady work repeats: a warm-up or first iteration), and
    - it is set-up rather than the first iteration the capture happens to start in: it computes at
      most :data:`SETUP_DENSITY_RATIO` as densely as what follows it (allocator warm-up, cuDNN/MIOpen
      autotuning and module loading fill it with host time), or its name says so (:data:`WARMUP_NAME`).
    """
    ranges = activity.trace.ranges
    launch = activity.launch
    if not len(ranges) or not launch.starts.size:
        return lo, None
    starts, ends = ranges["start"].to_numpy(np.int64), ranges["end"].to_numpy(np.int64)
    in_window = launch.starts < hi
    # ranges the host was in when it launched the window's first kernels (the GPU may run behind it)
    launched_from = int(launch.launched_at[(launch.starts >= lo) & in_window].min(initial=lo))
    candidates = np.flatnonzero((starts <= lo) & (ends > min(lo, launched_from)) & (ends < hi))
    names = ranges["name"]
    for k in candidates[np.argsort(-ends[candidates], kind="stable")]:
        begin, end = max(int(starts[k]), activity.span[0]), int(ends[k])
        inside = (launch.launched_at >= begin) & (launch.launched_at < end)
        cut = max(end, int(launch.ends[inside].max(initial=end)))
        after = in_window & (launch.launched_at >= end)
        if cut >= hi or after.sum() < STEADY_MIN_OPS:
            continue
        first = launch.first_launch[after]
        if ((first >= begin) & (first < end)).mean() < STEADY_MIN_REPEAT:
            continue
        name = str(names.iloc[k])
        if WARMUP_NAME.search(name) or activity.density(begin, cut) <= SETUP_DENSITY_RATIO * activity.density(cut, hi):
            return cut, name
    return lo, None


def _activity_window(activity: _Activity, setup=None, teardown=None, warmup_end=None) -> tuple[int, int, str | None]:
    """The steady phase of a capture without steps, from its GPU activity (module docstring), and the
    warm-up range the set-up runs to when a warm-up pass ends it. The streamed path (analyzers/stream_phases.py)
    passes the stretches each rule can take with their running maxima (``setup``: starts, ends, later_max;
    ``teardown``: starts, ends, earlier_max; ``lo`` -> (lo, hi) -> ...) and its own warm-up rule."""
    span_lo, span_hi = activity.span
    if not activity.kernels[0].size:  # no kernel ran: all of the activity is what the capture holds
        return span_lo, span_hi, None
    lo, hi = int(activity.kernels[0][0]), span_hi
    s_starts, s_ends, later_max = setup or (*_stretches(activity), None)
    lo = _setup_end(activity, s_starts, s_ends, lo, hi, later_max)
    tail = int(activity.kernels[1][-1])  # copies and memsets after the last kernel: results read back
    if span_hi - tail >= PHASE_MIN_SHARE * (span_hi - span_lo) and tail > lo:
        hi = tail
    t_starts, t_ends, earlier_max = teardown(lo) if teardown else (*_stretches(activity), None)
    hi = _teardown_start(activity, t_starts, t_ends, lo, hi, earlier_max)
    lo, warmup = (warmup_end or _warmup_range_end)(activity, lo, hi)
    return lo, hi, warmup


def find_steps(trace, pids: list[int], step_range: str | None) -> dict[int, st.Steps]:
    """Each process's steps, inferred ones within the steady phase (:func:`_find_steps`)."""
    return Finder(trace).steps(pids, step_range)


def _find_steps(finder: Finder, pids: list[int], step_range: str | None) -> dict[int, st.Steps]:
    """Each process's steps (steps.py), the inferred ones (a periodic sync or graph launch) looked for
    within the steady phase: when a process has no steps over the whole capture and the GPU activity
    puts set-up before (or tear-down after) the steady work, its steps are inferred again inside that
    steady phase — a start-up of seconds without the loop's sync or replay would otherwise hide the
    loop's period (the steps must cover half the activity they are looked for in)."""
    trace = finder.trace
    steps = {pid: st.find_steps(trace, pid, step_range) for pid in pids}
    missing = [pid for pid in pids if not steps[pid].count]
    if step_range or not missing or not len(trace.gpu):
        return steps
    activity = finder.activity
    lo, hi, _ = _activity_window(activity)
    if (lo, hi) == activity.span:
        return steps
    for pid in missing:
        inside = st.find_steps(trace, pid, None, within=(lo, hi))
        if inside.count:
            steps[pid] = inside
    return steps


def cover_steps(lo: int, hi: int, steps, span: tuple[int, int] | None) -> tuple[int, int]:
    """The window [lo, hi) widened to cover each annotated step too few to bound it (a process's
    ``nvtx`` steps, fewer than :data:`steps.MIN_STEPS`: an engine's own iteration range, ProfilerStep#N,
    a --step-range match) where it overlaps the capture's GPU ``span`` (first GPU operation to last).
    Set-up or tear-down is never cut out of a step the capture annotates: a 463 ms blocking copy inside
    the one measured decode step is that step's stall, not start-up. The window still reaches the GPU
    work the steps queued past their ranges (the host leaves an iteration's range once its work is
    queued): it is the union of both. A step's host time before the first GPU operation recorded (the
    host ran ahead of the GPU, which was busy with work launched before the capture) is no GPU idle
    time: the capture holds nothing there to judge."""
    short = [process_steps for process_steps in steps
             if process_steps.source == "nvtx" and 0 < process_steps.count < st.MIN_STEPS]
    for process_steps in short:
        start, end = int(process_steps.starts[0]), int(process_steps.ends[-1])
        if span is not None:
            start, end = max(start, span[0]), min(end, span[1])
        if start < end:
            lo, hi = min(lo, start), max(hi, end)
    return lo, hi


def _find(activity: _Activity, steps: list) -> tuple[Phases, int, int]:
    """The phases of one trace and the analysis window [lo, hi) they choose (the steady phase; the
    candidate steady phase when there is none, so that the figures exist while the verdict abstains).
    ``steps`` are the trace's processes' steps: those with :data:`steps.MIN_STEPS` or more define the
    steady phase, else the GPU activity does, widened to cover any annotated step (:func:`cover_steps`)."""
    trace = activity.trace
    span_lo, span_hi = activity.span
    with_steps = [process_steps for process_steps in steps if process_steps.count >= st.MIN_STEPS]
    if with_steps:
        lo = int(min(process_steps.starts[0] for process_steps in with_steps))
        hi = int(max(process_steps.ends[-1] for process_steps in with_steps))
        source = "steps"
        warmup = sum(process_steps.warmup_dropped for process_steps in with_steps)
        warmup_range = None
    else:
        source, warmup = "activity", 0
        lo, hi, warmup_range = _activity_window(activity)
    lo, hi = cover_steps(lo, hi, steps, activity.span)
    if hi <= lo:
        hi = lo + 1
    span = max(1, span_hi - span_lo)
    steady_density = activity.density(lo, hi)

    def other_phase(start: int, end: int) -> bool:
        # Before the first step or after the last one, GPU work as dense as the steps' is the queue of
        # steps the annotations missed or the GPU still draining them (the host runs ahead), not a phase.
        return end - start >= PHASE_MIN_SHARE * span and (
            not with_steps or activity.density(start, end) <= SETUP_DENSITY_RATIO * steady_density)

    # files of different runs (the parser says so): the time between their events is no stretch of this run
    unrelated = bool(trace.meta.get("clocks_unrelated"))
    setup = _phase(activity, "setup", span_lo, lo, warmup, warmup_range) if other_phase(span_lo, lo) and not unrelated else None
    teardown = _phase(activity, "teardown", hi, span_hi) if other_phase(hi, span_hi) and not unrelated else None
    launches, repeated = activity.launches(lo, hi)
    no_steady = None if with_steps else _no_steady(activity, lo, hi, launches, repeated)
    steady = _phase(activity, "steady", lo, hi) if no_steady is None else None
    return Phases(source=source, setup=setup, steady=steady, teardown=teardown, no_steady=no_steady,
                  repeat_pct=round(100.0 * repeated / launches, 1) if launches else None), lo, hi
