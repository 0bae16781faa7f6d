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
    out_s, out_e = np.empty(starts.size, np.int64), np.empty(starts.size, np.int64)  # pages touched as written
    count = 0
    for merged_s, merged_e in union_slices(starts, ends):
        out_s[count:count + merged_s.size], out_e[count:count + merged_s.size] = merged_s, merged_e
        count += merged_s.size
    return out_s[:count], out_e[:count]


def union_slices(starts: np.ndarray, ends: np.ndarray):
    """:func:`union` as it is built, a slice of the input at a time: yields (starts, ends) of merged
    intervals, in order, each once it is closed (the last at the end), so that a caller can use the
    union without holding it, and no temporary is the length of the input (a running maximum of
    the ends carried from slice to slice; a new merged interval begins where a start exceeds it)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    if not is_sorted(starts):
        order = np.argsort(starts, kind="stable")
        starts, ends = starts[order], ends[order]
        del order
    open_s = open_e = None  # the merged interval still open after the slices so far
    for i in range(0, starts.size, SLICE):
        s = starts[i:i + SLICE]
        run = np.maximum(ends[i:i + SLICE], s)
        np.maximum.accumulate(run, out=run)
        if open_e is not None:
            np.maximum(run, open_e, out=run)
        begins = np.empty(s.size, bool)
        begins[0] = open_e is None or s[0] > open_e
        np.greater(s[1:], run[:-1], out=begins[1:])
        at = np.flatnonzero(begins)
        if not at.size:
            open_e = int(run[-1])
            continue
        closed_s, closed_e = s[at[:-1]], run[at[1:] - 1]
        if open_e is not None:  # the interval open before the slice closes where the first one begins
            closed_s = np.concatenate(([open_s], closed_s))
            closed_e = np.concatenate(([run[at[0] - 1] if at[0] else open_e], closed_e))
        if closed_s.size:
            yield closed_s, closed_e
        open_s, open_e = int(s[at[-1]]), int(run[-1])
    if open_e is not None:
        yield np.array([open_s], np.int64), np.array([open_e], np.int64)


def overlap_measure(starts: np.ndarray, ends: np.ndarray, slices) -> int:
    """The measure of a disjoint sorted set's intersection with another given as ordered slices of
    disjoint sorted intervals (:func:`union_slices`): each slice's overlaps found by two binary
    searches into the set, summed."""
    total = 0
    for other_s, other_e in slices:
        first = np.searchsorted(ends, other_s, "right")  # the first interval ending after each starts
        stop = np.searchsorted(starts, other_e, "left")  # ... and those starting before it ends
        count = np.maximum(stop - first, 0)
        if not count.any():
            continue
        which = np.repeat(np.arange(other_s.size), count)
        at = np.repeat(first - np.concatenate(([0], np.cumsum(count)[:-1])), count) + np.arange(int(count.sum()))
        piece = np.minimum(other_e[which], ends[at]) - np.maximum(other_s[which], starts[at])
        total += int(piece[piece > 0].sum())
    return total


def not_before(ends: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``np.maximum(ends, starts)``: each end raised to its start where it lies before it (an
    interval a capture wrote ending before it began is empty), the ends themselves (no copy)
    when none does."""
    return ends if bool((ends >= starts).all()) else np.maximum(ends, starts)


def gaps(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int, min_length: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The gaps of a disjoint sorted set inside [lo, hi) that last ``min_length`` or more: what
    :func:`complement` gives, those shorter dropped, without its clipped copies of the set (one
    array per side, compacted in place a slice at a time)."""
    if starts.size and (starts[0] < lo or ends[-1] > hi):
        starts, ends = clip(starts, ends, lo, hi)
    else:  # an empty interval (a zero-length kernel) splits no gap
        nonempty = ends > starts
        if not nonempty.all():
            starts, ends = starts[nonempty], ends[nonempty]
    n = starts.size
    gap_s = np.empty(n + 1, np.int64)
    gap_e = np.empty(n + 1, np.int64)
    gap_s[0], gap_s[1:] = lo, ends
    gap_e[:-1], gap_e[-1] = starts, hi
    kept = 0
    for i in range(0, n + 1, SLICE):  # a gap's kept place is at or before its own: safe in place
        slice_s, slice_e = gap_s[i:i + SLICE], gap_e[i:i + SLICE]
        keep = slice_e - slice_s >= max(1, min_length)
        count = int(keep.sum())
        gap_s[kept:kept + count], gap_e[kept:kept + count] = slice_s[keep], slice_e[keep]
        kept += count
    return gap_s[:kept], gap_e[:kept]


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


SLICE = 1 << 18  # queries answered 256K at a time where only their sum is asked for


class Coverage:
    """Cumulative measure F(t) = |set ∩ (-inf, t]| of a disjoint sorted set.

    ``overlap(a, b)`` = F(b) - F(a) gives, for many query intervals at once, how much
    of each is covered by the set.

    Memory: the set's own arrays (kept, not copied, when they are int64) and one table
    of the measure before each interval: on a set of 10M intervals 80 MB, against 240 MB
    for three padded tables (a set's starts, lengths and measures behind a sentinel).
    """

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        self.s = np.asarray(starts, dtype=np.int64)
        self.e = np.asarray(ends, dtype=np.int64)
        n = self.s.size
        self._cum = np.empty(n, np.int64)  # measure of the intervals before each one
        if n:
            self._cum[0] = 0
            np.subtract(self.e[:-1], self.s[:-1], out=self._cum[1:])
            np.cumsum(self._cum[1:], out=self._cum[1:])

    def at(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=np.int64)
        if self.s.size == 0:
            return np.zeros(t.shape, dtype=np.int64)
        k = np.searchsorted(self.s, t, side="right")
        # the interval at or before t; before the first one, the first (t - s < 0 then reads 0)
        k -= 1
        np.maximum(k, 0, out=k)
        partial = np.minimum(t, self.e[k])  # min(t - s, e - s): the part of the interval before t
        partial -= self.s[k]
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
        first = np.searchsorted(b, self.s, "right")  # the first query ending after the interval starts
        stop = np.searchsorted(a, self.e, "left")  # queries starting before the interval ends
        count = np.maximum(stop - first, 0)
        out = np.zeros(a.shape, dtype=np.int64)
        if not count.any():
            return out
        # query indices touched, interval by interval (consecutive intervals may share one)
        idx = np.repeat(first - np.concatenate(([0], np.cumsum(count)[:-1])), count) + np.arange(int(count.sum()))
        idx = np.unique(idx)
        out[idx] = self.at(b[idx]) - self.at(a[idx])
        return out


def gaps_after(gap_s: np.ndarray, gap_e: np.ndarray, event_ends: np.ndarray, slack_ns: int) -> np.ndarray:
    """Mask of gaps that begin within ``slack_ns`` before, or contain, the end of an event.

    Used to link idle time to blocking syncs: the GPU drains, the host returns from
    the sync and only then prepares the next step.
    """
    ends = np.asarray(event_ends, dtype=np.int64)
    if not is_sorted(ends):  # the timeline passes them sorted, once for all its slices
        ends = np.sort(ends)
    if ends.size == 0 or gap_s.size == 0:
        return np.zeros(gap_s.size, dtype=bool)
    k = np.searchsorted(ends, gap_s - slack_ns, side="left")
    k = np.minimum(k, ends.size - 1)
    first = ends[k]
    return (first >= gap_s - slack_ns) & (first <= gap_e)
