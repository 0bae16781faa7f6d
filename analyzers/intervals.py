"""Vectorized interval arithmetic on int64 nanosecond arrays.

An interval set is a pair of arrays (starts, ends) of disjoint, sorted intervals.
Everything here is O(n log n) numpy: a sort, a cumulative max, a searchsorted.
"""

from __future__ import annotations

import numpy as np

from tracetriage.model import is_sorted


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge possibly overlapping intervals into disjoint sorted ones (the inputs themselves
    when they already are).

    Sort by start (skipped when already sorted, the usual case: every table of the
    model is in start order); a new merged interval begins where a start exceeds the
    running maximum of all previous ends (touching intervals merge).
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if starts.size == 0:
        return starts.copy(), ends.copy()
    # Already disjoint and in order (one stream's kernels, one thread's calls): nothing to merge,
    # and the inputs come back as they are (callers never write into the result).
    if bool((starts[1:] > ends[:-1]).all()) and bool((ends >= starts).all()):
        return starts, ends
    if not is_sorted(starts):
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
        del order
    run_max = np.maximum(ends, starts)
    np.maximum.accumulate(run_max, out=run_max)
    begins = np.flatnonzero(starts[1:] > run_max[:-1]) + 1
    first = np.concatenate(([0], begins))
    last = np.concatenate((begins - 1, [starts.size - 1]))
    return starts[first], run_max[last]


def clip(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Intersect a disjoint sorted set with the window [lo, hi)."""
    s = np.clip(starts, lo, hi)
    e = np.clip(ends, lo, hi)
    keep = e > s
    return s[keep], e[keep]


def measure(starts: np.ndarray, ends: np.ndarray) -> int:
    return int((ends - starts).sum()) if starts.size else 0


def complement(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The gaps of a disjoint sorted set inside [lo, hi)."""
    s, e = clip(starts, ends, lo, hi)
    gap_s = np.concatenate(([lo], e))
    gap_e = np.concatenate((s, [hi]))
    keep = gap_e > gap_s
    return gap_s[keep], gap_e[keep]


def subtract(a_s, a_e, b_s, b_e) -> tuple[np.ndarray, np.ndarray]:
    """A minus B for disjoint sorted sets (the part of A not covered by B)."""
    if a_s.size == 0 or b_s.size == 0:
        return a_s.copy(), a_e.copy()
    lo, hi = int(min(a_s[0], b_s[0])), int(max(a_e[-1], b_e[-1]))
    gs, ge = complement(b_s, b_e, lo, hi)
    return intersect(a_s, a_e, gs, ge)


def intersect(a_s, a_e, b_s, b_e) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two disjoint sorted sets."""
    if a_s.size == 0 or b_s.size == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    # Boundaries of both sets; a point is in A∩B when both coverage counts are 1.
    pts = np.unique(np.concatenate((a_s, a_e, b_s, b_e)))
    mids_lo, mids_hi = pts[:-1], pts[1:]
    in_a = _covered(a_s, a_e, mids_lo)
    in_b = _covered(b_s, b_e, mids_lo)
    keep = in_a & in_b
    return union(mids_lo[keep], mids_hi[keep])


def _covered(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether each time t lies in [s_k, e_k) of a disjoint sorted set."""
    k = np.searchsorted(s, t, side="right") - 1
    ok = k >= 0
    res = np.zeros(t.size, dtype=bool)
    res[ok] = t[ok] < e[k[ok]]
    return res


def measure_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """F(t) = |set ∩ (-inf, t)| of a disjoint sorted set at a few times t: one cumulative
    sum over the set and a binary search per t (no lookup tables built, as Coverage does)."""
    t = np.asarray(t, dtype=np.int64)
    if starts.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    lengths = ends - starts
    before = np.concatenate(([0], np.cumsum(lengths)))  # measure of the intervals before k
    k = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
    inside = np.clip(t - starts[np.maximum(k - 1, 0)], 0, lengths[np.maximum(k - 1, 0)])
    return before[np.maximum(k - 1, 0)] + np.where(k > 0, inside, 0)


class Coverage:
    """Cumulative measure F(t) = |set ∩ (-inf, t]| of a disjoint sorted set.

    ``overlap(a, b)`` = F(b) - F(a) gives, for many query intervals at once, how much
    of each is covered by the set.
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.s = np.asarray(starts, dtype=np.int64)
        n = self.s.size
        # Lookup tables with an empty interval at -2^62 in front: every query finds an interval
        # at or before it, so ``at`` needs no masking (it runs on millions of gap edges). Filled
        # in place: three passes over the set, no concatenated copies.
        self._s = np.empty(n + 1, np.int64)
        self._s[0], self._s[1:] = -(1 << 62), self.s
        self._len = np.empty(n + 1, np.int64)
        self._len[0] = 0
        np.subtract(np.asarray(ends, dtype=np.int64), self.s, out=self._len[1:])
        self._cum = np.zeros(n + 1, np.int64)  # measure before each interval
        if n > 1:
            np.cumsum(self._len[1:n], out=self._cum[2:])

    def at(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        if self.s.size == 0:
            return np.zeros(t.shape, dtype=np.int64)
        k = np.searchsorted(self._s, t, side="right")
        k -= 1
        partial = t - self._s[k]
        np.minimum(partial, self._len[k], out=partial)
        np.maximum(partial, 0, out=partial)
        partial += self._cum[k]
        return partial

    def overlap(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.at(b) - self.at(a)

    def overlap_disjoint(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """:meth:`overlap` for query intervals that are themselves disjoint and in order (gaps).
        A set much smaller than the queries (a few syncs among a million gaps) touches few
        of them: those are found by two searches per interval and only they are measured."""
        m = self.s.size
        if m == 0:
            return np.zeros(a.shape, dtype=np.int64)
        if m * 8 > a.size:
            return self.overlap(a, b)
        ends = self.s + self._len[1:]
        first = np.searchsorted(b, self.s, "right")  # the first query ending after the interval starts
        stop = np.searchsorted(a, ends, "left")  # queries starting before the interval ends
        count = np.maximum(stop - first, 0)
        out = np.zeros(a.shape, dtype=np.int64)
        if not count.any():
            return out
        # query indices touched, interval by interval (consecutive intervals may share one)
        idx = np.repeat(first - np.concatenate(([0], np.cumsum(count)[:-1])), count) + np.arange(int(count.sum()))
        idx = np.unique(idx)
        out[idx] = self.at(b[idx]) - self.at(a[idx])
        return out
