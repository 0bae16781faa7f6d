"""The phase finder's window of a capture without steps (analyzers/phases.py ``_activity_window``) from
the kernel table streamed in start order (issue 36 item 3; docs/large_captures.md).

The rules look at few points of the GPU timeline: the kernel-free *stretches* that can pass them.
A set-up stretch is 3x every stretch after it, or half of what is left of the capture: a stretch that
fails both once a later one (or the time since) is known fails for good, so those held are a chain
each 3x the next (or half the rest of the capture each): a few dozen. A tear-down stretch has fewer
than ``STEADY_MIN_OPS`` operations after it: one of the last that many stretches. For each stretch
held, :class:`KernelFacts` keeps what the rules ask at its start and its end (the kernels that start
before it, the kernel time before it), its running maximum (the longest stretch after it; for the
last ones, before it), and each kernel name's first start (the rules' repeated launches); the copies
and memsets are a small table, read whole. :class:`StreamedActivity` answers the rules' questions
(``waiting``, ``ops_from``, ``launches``, ``density``) from those, so ``phases._activity_window``
itself runs on them: the same code, the same numbers. A question at a point not held raises
NotStreamable, as does the warm-up rule where an NVTX range could end a warm-up pass (that rule joins
each kernel to its launch call, which the stream does not keep).
"""

from __future__ import annotations

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers import phases
from tracetriage.parsers.nsys_stream import NotStreamable

RING = phases.STEADY_MIN_OPS  # the last stretches kept for the tear-down rule


class KernelFacts:
    """What the phase rules ask of the kernels (module docstring), fed a start-ordered part at a time."""

    def __init__(self):
        self.count = 0  # kernels fed
        self.first: int | None = None  # the first kernel's start
        self.run_end: int | None = None  # the running maximum of the kernel ends (the open union interval's end)
        self.before_end = 0  # kernels starting before run_end
        self.measure = 0  # the union's closed intervals' time
        self.open_start = 0  # the open union interval's start
        self.negative = False  # a kernel ending before it starts
        # set-up candidates and the last stretches: columns start, end, length, kernels before start / end,
        # kernel time before them, the longest stretch after (set-up) and the longest let go from the ring after
        self.cand = {c: np.empty(0, np.int64) for c in ("s", "e", "n", "ks", "ke", "m", "later", "gone")}
        self.ring = {c: np.empty(0, np.int64) for c in ("s", "e", "n", "ks", "ke", "m")}
        self.gone_after_first = 0  # the longest stretch let go from the ring (all start after the first kernel)
        self.seen = np.zeros(0, bool)  # per name code + 1: seen
        self.first_start: dict[int, int] = {}  # name code -> its first start

    def feed(self, s: np.ndarray, e: np.ndarray, names: np.ndarray) -> None:
        n = s.size
        if not n:
            return
        if (e < s).any():
            self.negative = True
        self._names(s, names)
        if self.first is None:
            self.first, self.open_start, self.run_end = int(s[0]), int(s[0]), int(s[0])
        prior_end, prior_count, prior_before = self.run_end, self.count, self.before_end
        prev = np.empty(n, np.int64)  # the running max end before each kernel
        prev[0] = prior_end
        if n > 1:
            np.maximum.accumulate(e[:-1], out=prev[1:])
            np.maximum(prev[1:], prior_end, out=prev[1:])
        at = np.flatnonzero(s > prev)  # a stretch before each of these kernels
        gs, ge = prev[at], s[at]
        opens = np.concatenate(([self.open_start], ge[:-1]))
        m = self.measure + np.cumsum(gs - opens)  # the kernel time before each stretch
        if at.size:
            self.measure, self.open_start = int(m[-1]), int(ge[-1])
        self.run_end = max(prior_end, int(e.max()))
        self.before_end = prior_count + int(np.searchsorted(s, self.run_end, "left")) if self.run_end > prior_end \
            else prior_before + int(np.searchsorted(s, prior_end, "left"))
        self.count += n
        length = ge - gs
        later = np.zeros(length.size, np.int64)  # the longest stretch after each in this part
        later[:-1] = np.maximum.accumulate(length[::-1])[::-1][1:] if length.size else later[:-1]
        held = np.flatnonzero(self._may_pass(gs, length, later) | (np.arange(length.size) >= length.size - RING))
        ks = np.searchsorted(s, gs[held], "left") + np.where(gs[held] > prior_end, prior_count, prior_before)
        rows = {"s": gs[held], "e": ge[held], "n": length[held], "ks": ks, "ke": prior_count + at[held], "m": m[held]}
        self._stretches(rows, later[held], self._may_pass(rows["s"], rows["n"], later[held]),
                        gs[:max(0, length.size - RING)], length[:max(0, length.size - RING)])

    def _may_pass(self, starts: np.ndarray, lengths: np.ndarray, later: np.ndarray) -> np.ndarray:
        """Held while it can pass the set-up rule: 3x every later stretch, or half the capture left after its start."""
        return (lengths >= phases.SETUP_STRETCH_FACTOR * later) | (lengths >= phases.STALL_MIN_SHARE * (self.run_end - starts))

    def _names(self, s: np.ndarray, names: np.ndarray) -> None:
        top = int(names.max()) + 2 if names.size else 0
        if top > self.seen.size:
            self.seen = np.concatenate((self.seen, np.zeros(top - self.seen.size, bool)))
        at = names + 1  # code -1 (no name) in the first slot
        new = ~self.seen[at]
        if new.any():
            rows = np.flatnonzero(new)
            codes, first = np.unique(at[rows], return_index=True)
            for code, t in zip(codes.tolist(), s[rows[first]].tolist()):
                self.first_start[code - 1] = int(t)
            self.seen[codes] = True

    def _stretches(self, rows: dict[str, np.ndarray], later: np.ndarray, candidate: np.ndarray,
                   early_s: np.ndarray, early_n: np.ndarray) -> None:
        """A part's stretches held (``rows``: its set-up candidates, ``candidate``, and its last ``RING``) into the
        set-up chain and the ring; ``early_*``: the part's stretches before its last ``RING`` (let go from the ring)."""
        c = self.cand
        if rows["n"].size:
            c["later"] = np.maximum(c["later"], max(int(rows["n"].max()), int(early_n.max(initial=0))))
            more = {k: rows[k][candidate] for k in ("s", "e", "n", "ks", "ke", "m")}
            more["later"], more["gone"] = later[candidate], np.zeros(int(candidate.sum()), np.int64)
            c = {k: np.concatenate((c[k], more[k])) for k in c}
        c = {k: v[self._may_pass(c["s"], c["n"], c["later"])] for k, v in c.items()}
        tail = rows["n"].size - min(RING, rows["n"].size)  # the part's last RING stretches are the rows' last
        ring = {k: np.concatenate((self.ring[k], rows[k][tail:])) for k in self.ring}
        cut = max(0, ring["n"].size - RING)
        gone_s = np.concatenate((ring["s"][:cut], early_s)) if early_s.size else ring["s"][:cut]
        gone_n = np.concatenate((ring["n"][:cut], early_n)) if early_n.size else ring["n"][:cut]
        if gone_n.size:
            self.gone_after_first = max(self.gone_after_first, int(gone_n.max(where=gone_s > self.first, initial=0)))
            after = np.concatenate((np.maximum.accumulate(gone_n[::-1])[::-1], [0]))  # the longest from each on
            c["gone"] = np.maximum(c["gone"], after[np.searchsorted(gone_s, c["e"], "right")])
        self.cand, self.ring = c, {k: v[cut:] for k, v in ring.items()}


class StreamedActivity:
    """``phases._Activity``'s answers at the points :class:`KernelFacts` holds, for ``phases._activity_window``."""

    def __init__(self, facts: KernelFacts, small: dict[str, np.ndarray], sync_copies: tuple[np.ndarray, np.ndarray],
                 ranges, first_launch_call: int | None):
        if facts.negative:
            raise NotStreamable("a kernel ends before it starts (the phase rules' kernel time)")
        if small["graph"].any():  # the phase rules count a replay as a kernel, the facts hold kernels only
            raise NotStreamable("graph replays in a capture without steps (the phase rules' kernels)")
        self.facts, self.ranges, self.first_call = facts, ranges, first_launch_call
        self.small_start = small["start"]
        self.total = facts.count
        tail = facts.run_end if facts.count else 0
        self.kernel_time = facts.measure + (tail - facts.open_start) if facts.count else 0
        starts = [small["start"].min()] if small["start"].size else []
        ends = [small["end"].max()] if small["start"].size else []
        if facts.count:
            starts.append(facts.first)
            ends.append(tail)
        self.span = (int(min(starts)), int(max(ends))) if starts else (0, 0)
        ran = [facts.first, tail] if facts.count else []
        self.kernels = (np.array(ran[:1], np.int64), np.array(ran[1:], np.int64))  # the first start, the last end
        copies = iv.union(small["start"], small["end"])
        self.copy_cover = iv.Coverage(*copies)
        self.in_sync = iv.Coverage(*iv.intersect(*iv.union(*sync_copies), *copies))
        self.points: dict[int, tuple[int, int]] = {}
        if facts.count:
            self.points[facts.first] = (0, 0)
        for rows in (facts.cand, facts.ring):
            for s, e, ks, ke, m in zip(*(rows[k].tolist() for k in ("s", "e", "ks", "ke", "m"))):
                self.points[s], self.points[e] = (ks, m), (ke, m)
        self.firsts = np.sort(np.array(list(facts.first_start.values()), np.int64))

    def _at(self, t: int) -> tuple[int, int]:
        """(kernels starting before t, kernel time before t)."""
        t = int(t)
        if t in self.points:
            return self.points[t]
        if t > self.span[1]:
            return self.total, self.kernel_time
        raise NotStreamable(f"the phase rules asked about {t}, a point the stream did not keep")

    def waiting(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        # in a kernel-free stretch the GPU is busy only in copies and memsets
        return (ends - starts) - self.copy_cover.overlap(starts, ends) + self.in_sync.overlap(starts, ends)

    def ops_from(self, t: int) -> int:
        return self.total - self._at(t)[0] + int(self.small_start.size - np.searchsorted(self.small_start, t, "left"))

    def launches(self, a: int, b: int) -> tuple[int, int]:
        n = self._at(b)[0] - self._at(a)[0]
        first = int(np.searchsorted(self.firsts, b, "left") - np.searchsorted(self.firsts, a, "left"))
        return n, n - first

    def density(self, a: int, b: int) -> float:
        b_time = self.kernel_time if b >= self.span[1] and b not in self.points else self._at(b)[1]
        return float(b_time - self._at(a)[1]) / (b - a) if b > a else 0.0

    def setup(self):
        c = self.facts.cand
        return c["s"], c["e"], c["later"]

    def teardown(self, lo: int):
        """The last stretches and, for each, the longest stretch before it that starts after ``lo``."""
        r, c = self.facts.ring, self.facts.cand
        if lo == self.facts.first:
            gone = self.facts.gone_after_first
        else:
            at = np.flatnonzero(c["e"] == lo)
            if not at.size:
                raise NotStreamable(f"the tear-down rule from {lo}, a point the stream did not keep")
            gone = int(c["gone"][at[0]])
        inside = np.where(r["s"] > lo, r["n"], 0)
        earlier = np.maximum(gone, np.concatenate(([0], np.maximum.accumulate(inside)[:-1])) if inside.size else inside)
        return r["s"], r["e"], earlier

    def warmup_end(self, activity, lo: int, hi: int) -> tuple[int, str | None]:
        """``phases._warmup_range_end`` where no range can end a warm-up pass (else NotStreamable): a candidate
        range starts by ``lo``, ends before ``hi`` and after the window's first launch (at or after the
        capture's first launch call, or ``lo``)."""
        ranges = self.ranges
        if ranges is None or not len(ranges) or not self.total:
            return lo, None
        floor = min(lo, self.first_call if self.first_call is not None else lo)
        starts, ends = ranges["start"].to_numpy(np.int64), ranges["end"].to_numpy(np.int64)
        if ((starts <= lo) & (ends > floor) & (ends < hi)).any():
            raise NotStreamable("an NVTX range may end a warm-up pass (the rule joins each kernel to its launch call)")
        return lo, None


def activity_window(activity: StreamedActivity) -> tuple[int, int]:
    """The window ``phases._activity_window`` finds, on the streamed facts."""
    lo, hi, _ = phases._activity_window(activity, activity.setup(), activity.teardown, activity.warmup_end)
    return lo, hi
