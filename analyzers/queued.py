"""Which GPU operations were queued before they ran: the input of the timeline's dependency waits
(timeline.py, cause ``dependency``), and the check that the host's and the GPU's clocks agree enough to tell.

**Clocks.** "Queued before the gap" compares a launch call's end (host clock) with an operation's start (GPU
clock). When the two are offset the test misfires: a GPU clock ahead makes every operation look launched long
before it started (every idle gap a dependency wait), one behind makes operations start before the calls that
launched them. :func:`clock_check` reads the offset off the launch -> operation pairs (joined on pid and
correlation) and, when it finds one, the process has no dependency waits (:func:`queued_early` returns none) and
dependency_wait abstains, saying why (rules/waits.py):

* *behind*: an operation cannot start before its launch call starts; more than ``BEHIND_MIN_PAIRS`` pairs and
  ``BEHIND_MIN_PCT`` % of them doing so, by more than the clock's resolution (at least 1 µs), is an offset.
* *ahead*: an idle GPU starts work launched onto it within the launch latency, so the gaps the host caused
  (those over ``DEPENDENCY_LATENCY_NS``, the only ones a dependency wait can take) end within it of their launch
  call's end. When no such gap does (the least lag, the *floor*, is over DEPENDENCY_LATENCY_NS) and at least
  ``AHEAD_MIN_AT_FLOOR`` of them and ``AHEAD_MIN_AT_FLOOR_PCT`` % end within DEPENDENCY_LATENCY_NS of that floor (the
  host's launches, each displaced by the same offset), the floor is the offset. Caveat: a capture whose every long
  gap is a genuine wait of one length within 50 µs reads as an offset too: it then abstains, it never claims.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from tracetriage.model import Trace, cat_codes, cat_lut
from tracetriage.wording import plural, us

# Once the call that launched an operation has returned, an idle GPU starts it within a few µs (launch latency
# 5-20 µs on CUDA and HIP, a queued op after the previous one a few µs); 50 µs is past both with a margin for the
# host and device clocks of a trace: an idle GPU holding the work longer than that waits on a dependency.
DEPENDENCY_LATENCY_NS = 50_000

LAUNCHING = ("launch", "graph_launch", "memcpy_async", "memcpy_sync", "memset")  # calls that put GPU work on a stream
# What can hold queued work on a GPU: a stream waiting on an event or a memory value (cudaStreamWaitEvent,
# cuStreamWaitValue32, hipStreamWaitEvent ...), or a graph, whose nodes can wait on events. A process that
# made no such call has nothing to wait on: an operation that started late there is one whose predecessors
# the capture lost (a sampled or truncated trace), not a dependency.
WAIT_CALLS = re.compile(r"(?i)StreamWait(?:Event|Value)|WaitValue(?:32|64)|GraphLaunch")

BEHIND_MIN_PAIRS, BEHIND_MIN_PCT = 3, 1.0  # operations started before their launch call: an offset past these
AHEAD_MIN_AT_FLOOR, AHEAD_MIN_AT_FLOOR_PCT = 3, 20.0  # long gaps ending at a floor over the latency: an offset


@dataclass(frozen=True, slots=True)
class ClockCheck:
    """The launch -> operation pairs of one process read for a host/GPU clock offset (see the module's rule).
    ``pairs``: operations joined to their launch call; ``before_call``: those that started before the call
    started (by more than ``tolerance_ns``), ``before_call_ns`` the largest such lead; ``long_gaps``: operations
    with a pair that end an idle gap over DEPENDENCY_LATENCY_NS on their device, ``floor_ns`` the least lag from
    their call's end to their start (None without such gaps), ``at_floor`` how many lag within
    DEPENDENCY_LATENCY_NS of it; ``offset``: ``"behind"`` / ``"ahead"``, or None when the clocks agree enough."""

    pid: int
    pairs: int = 0
    before_call: int = 0
    before_call_ns: int = 0
    tolerance_ns: int = 1000
    long_gaps: int = 0
    floor_ns: int | None = None
    at_floor: int = 0
    offset: str | None = None

    def words(self) -> str:
        """Why the clocks are offset, with the counts that say so ('' when they agree)."""
        if self.offset == "behind":
            return (f"{plural(self.before_call, 'GPU operation')} of {self.pairs:,} joined to their launch call "
                    f"started before that call did, by up to {us(self.before_call_ns)}: the GPU's timestamps run at "
                    f"least that far behind the host's")
        if self.offset == "ahead":
            return (f"none of the {plural(self.long_gaps, 'idle gap')} over {us(DEPENDENCY_LATENCY_NS)} ended within "
                    f"the launch latency of its launch call's return: the least lag is {us(self.floor_ns or 0)}, and "
                    f"{self.at_floor} of them end within {us(DEPENDENCY_LATENCY_NS)} of it (the host's launches, "
                    f"each displaced by one offset): the GPU's timestamps run ~{us(self.floor_ns or 0)} ahead of "
                    "the host's")
        return ""


SLICE_ROWS = 1 << 18  # GPU rows read per slice: temporaries of a slice, not of the table (a 10M-row graph capture)


def _launches(trace: Trace, pid: int, mine: np.ndarray | None) -> tuple | None:
    """(correlations in order, their calls' starts and ends, the process's first call's start) of the process's
    launching calls; None when it made no call that can hold queued work, or no launching call."""
    gpu, api = trace.gpu, trace.api
    if not len(gpu) or not len(api):
        return None

    def own(values: np.ndarray) -> np.ndarray:  # the process's rows of an API column (a view for one process)
        return values if mine is None else values[mine]

    codes, names = cat_codes(api["name"])
    waits = np.array([bool(WAIT_CALLS.search(str(name))) for name in names] + [False], bool)
    if not waits[own(codes)].any():
        return None
    category, launching = cat_lut(api["category"], LAUNCHING)
    corr = own(api["correlation"].to_numpy())
    calls = launching[own(category)] & (corr >= 0)
    if not calls.any():
        return None
    keys = corr[calls]
    order = np.argsort(keys, kind="stable")
    starts, ends = own(api["start"].to_numpy())[calls][order], own(api["end"].to_numpy())[calls][order]
    return keys[order], starts.astype(np.int64), ends.astype(np.int64), int(own(api["start"].to_numpy()).min())


class _Scan:
    """One pass over the process's GPU rows, a slice at a time (row order: start order), joining each to its
    launch call (pid and correlation): the clock check's counts, and with ``early`` the rows :func:`queued_early`
    returns, written into buffers reserved for every row (pages touched only as written)."""

    def __init__(self, trace: Trace, pid: int, launches: tuple, early: bool):
        self.keys, self.call_start, self.call_end, self.first_call = launches
        self.tolerance = max(1000, int(trace.meta.get("clock_resolution_ns") or 1))
        self.pairs = self.behind = 0
        self.lead_max = 0
        self.lags: list[np.ndarray] = []  # call end -> start of the paired rows that end a long idle gap
        self.last_end: dict[int, int] = {}  # per device, the latest end of the process's rows so far
        gpu = trace.gpu
        self.start, self.end = gpu["start"].to_numpy(), gpu["end"].to_numpy()
        self.out = (np.empty(len(gpu), np.int64), np.empty(len(gpu), np.int64)) if early else None
        self.n_out = 0
        pids, corr, device = gpu["pid"].to_numpy(), gpu["correlation"].to_numpy(), gpu["device"].to_numpy()
        for k in range(0, len(gpu), SLICE_ROWS):
            stop = min(k + SLICE_ROWS, len(gpu))
            mine = pids[k:stop] == pid
            if mine.all():  # every row of the slice is the process's (one process: the usual case): views, no gathers
                self._slice(np.arange(k, stop), corr[k:stop], device[k:stop], self.start[k:stop], self.end[k:stop])
                continue
            rows = k + np.flatnonzero(mine)
            if rows.size:
                self._slice(rows, corr[rows], device[rows], self.start[rows], self.end[rows])

    def _long_gaps(self, device: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Which rows (their devices, starts and ends) start after an idle gap over DEPENDENCY_LATENCY_NS on their
        device: every earlier row of the process on that device (this slice's and the earlier slices') ended that
        much before their start."""
        one = device.min() == device.max()  # the usual case: no mask per device
        out = np.empty(device.size, bool) if one else np.zeros(device.size, bool)
        for dev in (device[:1] if one else np.unique(device)).tolist():
            on = None if one else np.flatnonzero(device == dev)
            dev_ends, before = (ends if one else ends[on]), self.last_end.get(dev)
            head = dev_ends[:1] if before is None else np.array([before], np.int64)
            latest = np.maximum.accumulate(np.concatenate((head, dev_ends)))  # latest[i]: the latest end before row i
            gap = (starts if one else starts[on]) - latest[:-1] > DEPENDENCY_LATENCY_NS
            gap[0] &= before is not None  # the device's first row has no gap before it
            if one:
                out = gap
            else:
                out[on] = gap
            self.last_end[dev] = int(latest[-1])
        return out

    def _slice(self, rows: np.ndarray, corr: np.ndarray, device: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        """The process's rows ``rows`` of a slice, with their correlations, devices, starts and ends."""
        long_gap = self._long_gaps(device, starts, ends)
        valid = corr >= 0
        if not valid.all():
            rows, corr, long_gap, starts = rows[valid], corr[valid], long_gap[valid], starts[valid]
        want = corr
        if not rows.size:
            return
        keys = self.keys
        pos = np.minimum(np.searchsorted(keys, want), keys.size - 1)
        hit = keys[pos] == want
        every = bool(hit.all())  # every row's launch call is recorded (the usual case): no compress by hit
        op_start = starts if every else starts[hit]
        lead = self.call_start[pos if every else pos[hit]] - op_start
        early = lead > self.tolerance
        self.pairs += int(hit.sum())
        self.behind += int(early.sum())
        if early.any():
            self.lead_max = max(self.lead_max, int(lead[early].max()))
        lag = (op_start - self.call_end[pos if every else pos[hit]])[long_gap if every else long_gap[hit]]
        if lag.size:
            self.lags.append(lag)
        if self.out is not None:  # paired rows ready at their call's end, rows launched before the capture at its first call
            if every:
                ready = self.call_end[pos]
            else:
                kept = hit | ((~hit) & (want > 0) & (want < keys[0]))
                rows, starts = rows[kept], starts[kept]
                ready = np.where(hit, self.call_end[pos], self.first_call)[kept]
            queued = ready < starts - DEPENDENCY_LATENCY_NS
            n = int(queued.sum())
            self.out[0][self.n_out:self.n_out + n], self.out[1][self.n_out:self.n_out + n] = rows[queued], ready[queued]
            self.n_out += n

    def check(self, pid: int) -> ClockCheck:
        """The rule of the module's docstring on the counts."""
        if not self.pairs:
            return ClockCheck(pid, tolerance_ns=self.tolerance)
        fields = {"pid": pid, "pairs": self.pairs, "before_call": self.behind, "before_call_ns": self.lead_max,
                  "tolerance_ns": self.tolerance}
        if self.behind >= BEHIND_MIN_PAIRS and 100.0 * self.behind >= BEHIND_MIN_PCT * self.pairs:
            return ClockCheck(**fields, offset="behind")
        if not self.lags:
            return ClockCheck(**fields)
        lag = np.concatenate(self.lags)
        floor = int(lag.min())
        at_floor = int((lag <= floor + DEPENDENCY_LATENCY_NS).sum())
        ahead = (floor > DEPENDENCY_LATENCY_NS and at_floor >= AHEAD_MIN_AT_FLOOR
                 and 100.0 * at_floor >= AHEAD_MIN_AT_FLOOR_PCT * lag.size)
        return ClockCheck(**fields, long_gaps=int(lag.size), floor_ns=floor, at_floor=at_floor,
                          offset="ahead" if ahead else None)


# one check per process of a trace, whoever asks (the timeline's and the lanes' host slicers, the analysis): keyed
# by the GPU table's id, held with a weak reference to it so that a later table with a reused id is not taken for it
_CHECKED: dict[tuple[int, int], tuple[weakref.ref, ClockCheck]] = {}
_CHECKED_LOCK = threading.Lock()


def _known(trace: Trace, pid: int) -> ClockCheck | None:
    with _CHECKED_LOCK:
        known = _CHECKED.get((id(trace.gpu), pid))
    return known[1] if known is not None and known[0]() is trace.gpu else None


def _keep(trace: Trace, pid: int, check: ClockCheck) -> ClockCheck:
    with _CHECKED_LOCK:
        for stale in [k for k, (ref, _) in _CHECKED.items() if ref() is None]:
            del _CHECKED[stale]
        _CHECKED[(id(trace.gpu), pid)] = (weakref.ref(trace.gpu), check)
    return check


def clock_check(trace: Trace, pid: int, mine: np.ndarray | None = None, scan: _Scan | None = None) -> ClockCheck:
    """The process's launch -> operation pairs read for a host/GPU clock offset (the module's rule); computed once
    per process of a trace. ``mine``: the process's API rows (None: a one-process trace); ``scan``: its
    :class:`_Scan` when the caller made one."""
    known = _known(trace, pid)
    if known is not None:
        return known
    if scan is not None:
        return _keep(trace, pid, scan.check(pid))
    launches = _launches(trace, pid, mine)
    if launches is None:
        return _keep(trace, pid, ClockCheck(pid, tolerance_ns=max(1000, int(trace.meta.get("clock_resolution_ns") or 1))))
    return _keep(trace, pid, _Scan(trace, pid, launches, early=False).check(pid))


def process_clock_check(trace: Trace, pid: int) -> ClockCheck:
    """:func:`clock_check` of one process, its API rows picked as the timeline's host slicer picks them."""
    pids = trace.api["pid"].to_numpy()
    one = bool(pids.size) and pids.min() == pids.max() == pid
    return clock_check(trace, pid, None if one else pids == pid)


def queued_early(trace: Trace, pid: int, mine: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The process's GPU rows (indices into the trace's table, ascending) whose launch call returned more than
    DEPENDENCY_LATENCY_NS before the row started, with that call's end: the only rows an idle GPU can have
    held queued past the launch latency. Joined on (pid, correlation), the launching calls only. A row whose
    correlation is below every recorded launch call's (ids grow call by call) was launched before the capture
    began: it was queued from the process's first recorded call on. None when the process's host and GPU clocks
    are offset (:func:`clock_check`): then "returned before it started" cannot be told. ``mine``: the process's
    rows of the API table, as the timeline's host slicer has them (None: every row, a one-process trace)."""
    empty = np.empty(0, np.int64), np.empty(0, np.int64)
    launches = _launches(trace, pid, mine)
    if launches is None:
        return empty
    scan = _Scan(trace, pid, launches, early=True)
    if clock_check(trace, pid, mine, scan).offset:
        return empty
    rows, ready = scan.out
    return rows[:scan.n_out], ready[:scan.n_out]
