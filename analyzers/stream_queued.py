"""Dependency waits of a streamed Nsight Systems export (timeline.py's cause ``dependency``; queued.py's
``queued_early`` and ``clock_check``), from the kernel and runtime tables in time chunks (issue 36 item 3;
docs/large_captures.md).

The whole-table path joins each GPU operation of a process that made a stream-wait or graph-launch call to
its launch call (pid and correlation; the launching categories of ``queued.LAUNCHING``) and calls it *early*
when the call returned more than DEPENDENCY_LATENCY_NS before the operation started; an operation whose
correlation is below every launch call's was launched before the capture, queued from the process's first
call on. The stream holds each such process's launch calls (correlation, start, end), in correlation order:

* an operation in a chunk has its call read when it is early: every call that starts before the chunk's
  watermark has been read, and a call read later starts after the operation, so it returned after it too;
* the clock check counts every pair, the late ones too: an operation whose call is not read yet waits,
  in correlation order, for the calls read after it (it is early for none of them);
* a run of operations on a device starting more than DEPENDENCY_LATENCY_NS after the device's last end so
  far (``_long_gap_ends``) keeps its lag from its call's end, as value counts (the floor and the count near it);
* "launched before the capture" is decided when the operation comes (its correlation below every launch call's
  read so far, the process's first call read); it is checked at the end, and the analysis refused if a later
  call made it wrong.

Which processes queue (a wait call, a launch call, no clock offset) is known only at the end: the pass assumes
every process may when the export's strings hold a wait call's name (none otherwise: nothing is joined, the
pass costs what it did), and the caller runs the timeline again where a process it assumed to queue did not
and some of its idle time was put down to a dependency (:meth:`QueuedJoin.settle`).
"""

from __future__ import annotations

import numpy as np

from tracetriage.analyzers import queued
from tracetriage.analyzers.queued import DEPENDENCY_LATENCY_NS
from tracetriage.model import API_CATEGORIES
from tracetriage.parsers.nsys_stream import DEVICE_BITS, NotStreamable

NEVER = np.iinfo(np.int64).max  # timeline.NEVER: an operation never known queued
HELD_MOST = 1 << 25  # launch calls (or operations waiting for theirs) held per process: ~0.8 GB at 24 B each
_EMPTY = np.empty(0, np.int64)


def any_wait_call(strings) -> bool:
    """Whether the export's strings name a call that can hold queued work (``queued.WAIT_CALLS``)."""
    return any(queued.WAIT_CALLS.search(str(name)) for name in strings.categories.tolist())


class _Sorted:
    """Rows of int64 columns found by their first column (the first row added with a key is the one found, as
    a stable sort's first), added in parts: sorted runs, the newer merged into the older when as large (a lookup
    searches a few runs, an add costs a logarithmic number of merges per row)."""

    def __init__(self):
        self.runs: list[list[np.ndarray]] = []  # oldest first, each sorted (stably) by its first column

    @property
    def size(self) -> int:
        return sum(run[0].size for run in self.runs)

    def add(self, *cols: np.ndarray) -> None:
        if not cols[0].size:
            return
        order = np.argsort(cols[0], kind="stable")
        self.runs.append([c[order] for c in cols])
        while len(self.runs) > 1 and self.runs[-2][0].size <= 2 * self.runs[-1][0].size:
            newer = self.runs.pop()
            older = self.runs.pop()
            both = [np.concatenate((o, n)) for o, n in zip(older, newer)]
            order = np.argsort(both[0], kind="stable")
            self.runs.append([c[order] for c in both])
        if self.size > HELD_MOST:
            raise NotStreamable(f"more than {HELD_MOST:,} launch calls or operations held for the dependency join")

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """Whether each key has a row, and the other columns of its first row (0 where it has none)."""
        if keys.size > 1:  # runs of one key (a graph's kernels carry their launch's): each run looked up once
            heads = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            if 2 * heads.size < keys.size:
                hit, values = self._lookup(keys[heads])
                counts = np.diff(np.append(heads, keys.size))
                return np.repeat(hit, counts), [np.repeat(v, counts) for v in values]
        return self._lookup(keys)

    def _lookup(self, keys: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        hit = np.zeros(keys.size, bool)
        width = len(self.runs[0]) - 1 if self.runs else 0
        values = [np.zeros(keys.size, np.int64) for _ in range(width)]
        for run in self.runs:
            todo = np.flatnonzero(~hit)
            if not todo.size:
                break
            pos = np.minimum(np.searchsorted(run[0], keys[todo], "left"), run[0].size - 1)
            found = run[0][pos] == keys[todo]
            at = todo[found]
            hit[at] = True
            for k in range(width):
                values[k][at] = run[k + 1][pos[found]]
        return hit, values

    def take(self, keys: np.ndarray) -> list[np.ndarray]:
        """Every row whose key is one of ``keys`` (sorted, distinct), taken out: its columns."""
        out = []
        for k, run in enumerate(self.runs):
            a, b = np.searchsorted(run[0], keys, "left"), np.searchsorted(run[0], keys, "right")
            counts = b - a
            if not counts.any():
                continue
            idx = np.repeat(a, counts) + (np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts))
            out.append([c[idx] for c in run])
            keep = np.ones(run[0].size, bool)
            keep[idx] = False
            self.runs[k] = [c[keep] for c in run]
        self.runs = [run for run in self.runs if run[0].size]
        return [np.concatenate(cols) for cols in zip(*out)] if out else []


class _Process:
    def __init__(self):
        self.calls = _Sorted()  # its launch calls: correlation, start, end
        self.fresh: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # the calls added since the waiting were paired
        self.waiting = _Sorted()  # operations whose call was not read when they came: correlation, start, long gap (0/1)
        self.min_corr: int | None = None  # the least correlation of its launch calls
        self.first_call: int | None = None  # its first call's start (any call)
        self.waits = False  # a stream-wait or graph-launch call
        self.pairs = self.behind = self.behind_ns = 0
        self.lags: list[np.ndarray] = []  # op start - call end of the pairs ending a long gap
        self.before: list[np.ndarray] = []  # correlations of operations taken as launched before the capture, early
        self.last_end: dict[int, int] = {}  # per device key, the latest end of its operations so far


class QueuedJoin:
    """The dependency join of the module docstring, for the processes in ``assumed`` (None: every process)."""

    def __init__(self, assumed: set[int] | None, tolerance_ns: int):
        self.assumed, self.tolerance_ns = assumed, tolerance_ns
        self.procs: dict[int, _Process] = {}
        self.launching = np.isin(np.arange(len(API_CATEGORIES) + 1), [API_CATEGORIES.index(c) for c in queued.LAUNCHING])
        self.launching[-1] = False  # category -1: none

    def joins(self, pid: int) -> bool:
        return self.assumed is None or pid in self.assumed

    def _proc(self, pid: int) -> _Process:
        return self.procs.setdefault(pid, _Process())

    def calls(self, pid: int, start: np.ndarray, end: np.ndarray, corr: np.ndarray, cat: np.ndarray,
              wait: np.ndarray) -> None:
        """A part of the process's calls, in start order (``cat``: category codes, -1 none; ``wait``: a wait call)."""
        if not self.joins(pid) or not start.size:
            return
        proc = self._proc(pid)
        if proc.first_call is None:
            proc.first_call = int(start[0])
        proc.waits |= bool(wait.any())
        mine = self.launching[cat] & (corr >= 0)
        if mine.any():
            c, cs, ce = corr[mine], start[mine], end[mine]
            least = int(c.min())
            proc.min_corr = least if proc.min_corr is None else min(proc.min_corr, least)
            proc.calls.add(c, cs, ce)
            if proc.waiting.size:
                proc.fresh.append((c, cs, ce))

    def ready(self, start: np.ndarray, end: np.ndarray, key: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """For each operation of the chunk (in start order), when it was known queued: its early call's end;
        NEVER when it was not early, or its process is not joined."""
        from tracetriage.analyzers.stream_timeline import few_distinct

        out = np.full(start.size, NEVER, np.int64)
        pids = key >> DEVICE_BITS
        for pid in few_distinct(pids):
            if not self.joins(pid):
                continue
            mine = pids == pid
            out[mine] = self._ready(self._proc(pid), start[mine], end[mine], key[mine], corr[mine])
        return out

    def _ready(self, proc: _Process, s: np.ndarray, e: np.ndarray, key: np.ndarray, corr: np.ndarray) -> np.ndarray:
        self._pair_waiting(proc)
        long = self._long_gaps(proc, s, e, key)
        ready = np.full(s.size, NEVER, np.int64)
        valid = corr >= 0
        hit, (call_start, call_end) = proc.calls.lookup(corr) if proc.calls.runs else (np.zeros(s.size, bool), (None, None))
        hit &= valid
        if hit.any():
            call_start, call_end = call_start[hit], call_end[hit]
            self._count_pairs(proc, s[hit], call_start, call_end, long[hit])
            ready[hit] = np.where(call_end < s[hit] - DEPENDENCY_LATENCY_NS, call_end, NEVER)
        alone = valid & ~hit
        if alone.any():
            proc.waiting.add(corr[alone], s[alone], long[alone].astype(np.int64))
            before = alone & (corr > 0) & (corr < (proc.min_corr if proc.min_corr is not None else NEVER))
            if before.any() and proc.first_call is not None:
                early = before & (proc.first_call < s - DEPENDENCY_LATENCY_NS)
                ready[early] = proc.first_call
                proc.before.append(corr[early])
        return ready

    def _long_gaps(self, proc: _Process, s: np.ndarray, e: np.ndarray, key: np.ndarray) -> np.ndarray:
        """Whether each operation starts more than DEPENDENCY_LATENCY_NS after every earlier one of its device ended."""
        from tracetriage.analyzers.stream_timeline import few_distinct

        long = np.zeros(s.size, bool)
        for dev in few_distinct(key):
            on = np.flatnonzero(key == dev)
            ends = e[on]
            last = proc.last_end.get(dev)
            prior = np.empty(on.size, np.int64)
            prior[0] = last if last is not None else 0
            if on.size > 1:
                np.maximum.accumulate(ends[:-1], out=prior[1:])
                if last is not None:
                    np.maximum(prior[1:], last, out=prior[1:])
            flag = s[on] - prior > DEPENDENCY_LATENCY_NS
            if last is None:
                flag[0] = False  # the device's first operation has no gap before it
            long[on] = flag
            top = int(ends.max())
            proc.last_end[dev] = top if last is None else max(last, top)
        return long

    def _count_pairs(self, proc: _Process, op_start, call_start, call_end, long) -> None:
        proc.pairs += op_start.size
        lead = call_start - op_start
        early = lead > self.tolerance_ns
        if early.any():
            proc.behind += int(early.sum())
            proc.behind_ns = max(proc.behind_ns, int(lead[early].max()))
        if long.any():
            proc.lags.append((op_start - call_end)[long])

    def _pair_waiting(self, proc: _Process) -> None:
        """The operations that waited for their call, paired with the calls read since (each with its first)."""
        if not proc.fresh:
            return
        c, cs, ce = (np.concatenate(col) for col in zip(*proc.fresh))
        proc.fresh = []
        taken = proc.waiting.take(np.unique(c))
        if not taken:
            return
        w_corr, w_start, w_long = taken
        order = np.argsort(c, kind="stable")
        c, cs, ce = c[order], cs[order], ce[order]
        at = np.searchsorted(c, w_corr, "left")  # the first fresh call with the correlation
        self._count_pairs(proc, w_start, cs[at], ce[at], w_long.astype(bool))

    def offset(self, proc: _Process) -> str | None:
        """queued._clock_check's rule on the counts."""
        if not proc.pairs:
            return None
        if proc.behind >= queued.BEHIND_MIN_PAIRS and 100.0 * proc.behind >= queued.BEHIND_MIN_PCT * proc.pairs:
            return "behind"
        lag = np.concatenate(proc.lags) if proc.lags else _EMPTY
        if not lag.size:
            return None
        floor = int(lag.min())
        at_floor = int((lag <= floor + DEPENDENCY_LATENCY_NS).sum())
        ahead = (floor > DEPENDENCY_LATENCY_NS and at_floor >= queued.AHEAD_MIN_AT_FLOOR
                 and 100.0 * at_floor >= queued.AHEAD_MIN_AT_FLOOR_PCT * lag.size)
        return "ahead" if ahead else None

    def settle(self) -> set[int]:
        """The processes that hold queued work (a wait call, a launch call, no clock offset), once every call is
        read; raises NotStreamable where an operation taken as launched before the capture has its call after all."""
        queues = set()
        for pid, proc in self.procs.items():
            self._pair_waiting(proc)
            if not (proc.waits and proc.min_corr is not None and self.offset(proc) is None):
                continue  # it holds no queued work (a pass that took it to is run again where that moved a number)
            before = np.concatenate(proc.before) if proc.before else _EMPTY
            if before.size and (proc.calls.lookup(before)[0].any() or (before >= proc.min_corr).any()):
                raise NotStreamable("an operation taken as launched before the capture has its launch call later "
                                    "in the runtime table (the dependency join)")
            queues.add(pid)
        return queues
