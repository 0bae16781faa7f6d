"""Putting a table in start order when it nearly is already.

Exports are written in start order but for a few rows: a multi-threaded capture writes a
thread's buffered calls after calls of other threads that started later (the real 2xH100
exports have 1 and 5 such rows in their runtime tables, a 10M-call export a few dozen).
Sorting the whole table for them (an argsort, then every column gathered into a new
array) cost a second copy of the table and, at 10M rows, over a second.

:func:`start_order` finds the rows out of place in one pass and returns a :class:`Reorder`
that puts any column of the table into the order of a stable sort by start (ties keep
their order in the table: the same rows, in the same order, as
``np.argsort(start, kind="stable")`` gives), **in place**:

- few rows written late (each starts before some row above it) or early (after some row
  below it): the rest is in order, so these rows are sorted among themselves and merged
  in; a column is rearranged by moving the runs between them (overlapping ``memmove``s)
  and writing the few rows at their places: no temporary the size of the column;
- otherwise (e.g. two threads' rows written as two blocks): a stable argsort of the span
  between the first and the last row out of place (rows outside it are where a sort
  puts them), gathered back into the column over that span.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: at most this many rows out of place are merged in; more, and the span is argsorted
MAX_MERGED = 4096


class Reorder:
    """The rearrangement of a table's rows into stable start order, applied column by
    column with :meth:`apply` (every column of the table, the start column included)."""

    def __init__(self, n: int, moves: list[tuple[int, int, int]] | None = None, targets=None, sources=None,
                 span: tuple[int, int] | None = None, order=None):
        self.n = n
        self._moves = moves or []  # (source, destination, length), in a safe order
        self._targets, self._sources = targets, sources  # the merged rows: where they go, where they were
        self._span, self._order = span, order

    @property
    def rows_moved(self) -> int:
        """How many rows were out of place (merged rows, or the argsorted span's length)."""
        if self._span is not None:
            return self._span[1] - self._span[0]
        return int(self._targets.size)

    def apply(self, column):
        """The column in start order: a writable numpy array is rearranged in place and
        returned; a categorical (or a read-only array) comes back as a new one."""
        if isinstance(column, pd.Categorical):
            codes = np.array(column.codes)
            self._apply(codes)
            return pd.Categorical.from_codes(codes, dtype=column.dtype)
        arr = column if isinstance(column, np.ndarray) and column.flags.writeable else np.array(column)
        if arr.shape != (self.n,):
            raise ValueError(f"a column of {arr.shape} rows reordered for a table of {self.n}")
        self._apply(arr)
        return arr

    def _apply(self, arr: np.ndarray) -> None:
        if self._span is not None:
            lo, hi = self._span
            arr[lo:hi] = arr[lo:hi][self._order]
            return
        merged = arr[self._sources]  # read before the runs move over them
        for src, dst, length in self._moves:
            arr[dst:dst + length] = arr[src:src + length]  # 1-D overlapping copies are memmoves
        arr[self._targets] = merged


def start_order(values: np.ndarray) -> Reorder | None:
    """None when ``values`` (a table's start column) already ascends; else the
    :class:`Reorder` that sorts the table stably by it."""
    values = np.asarray(values)
    if values.size < 2:
        return None
    descents = np.flatnonzero(values[1:] < values[:-1])  # the one pass over the column
    if not descents.size:
        return None
    if descents.size <= MAX_MERGED:  # each descent has a late row after it and an early row before it
        for early in (False, True):
            out = _out_of_place(values, descents, early)
            if out is not None:
                return _merge(values, out)
    return _span(values, descents)


def _out_of_place(values: np.ndarray, descents: np.ndarray, early: bool) -> np.ndarray | None:
    """Ascending indices of the rows written late (below a larger value) or early (above a
    smaller one), or None when there are more than MAX_MERGED. Without them the column
    ascends: a row that is not late is at least every value above it, so at least the
    previous such row (and symmetrically for early rows).

    The column is a series of ascending runs cut at the descents: a run's late rows are
    those of its head below the largest value of the runs above (the last of each), its
    early rows those of its tail above the smallest value of the runs below."""
    starts = np.concatenate(([0], descents + 1))
    ends = np.append(descents + 1, values.size)
    found, count = [], 0
    if not early:
        above = np.maximum.accumulate(values[ends[:-1] - 1])  # the largest value above runs 1..
        for lo, hi, bound in zip(starts[1:].tolist(), ends[1:].tolist(), above.tolist()):
            n_late = int(np.searchsorted(values[lo:hi], bound, side="left"))
            found.append(np.arange(lo, lo + n_late))
            count += n_late
            if count > MAX_MERGED:
                return None
    else:
        below = np.minimum.accumulate(values[starts[1:]][::-1])[::-1]  # the smallest value below runs ..-2
        for lo, hi, bound in zip(starts[:-1].tolist(), ends[:-1].tolist(), below.tolist()):
            n_early = hi - lo - int(np.searchsorted(values[lo:hi], bound, side="right"))
            found.append(np.arange(hi - n_early, hi))
            count += n_early
            if count > MAX_MERGED:
                return None
    return np.concatenate(found)


def _merge(values: np.ndarray, out: np.ndarray) -> Reorder:
    """Rows ``out`` (ascending indices) sorted among themselves and merged into the rest,
    which ascends. A row goes after every other row with a smaller (start, index) pair."""
    n, k = values.size, out.size
    out_vals = values[out]
    by_key = np.argsort(out_vals, kind="stable")  # (start, index) order: ``out`` ascends
    sources = out[by_key]
    keys = out_vals[by_key]
    # The rest ("kept", K) ascends; its rows sit in the runs between the out-of-place rows.
    run_starts = np.concatenate(([0], out + 1))
    run_ends = np.concatenate((out, [n]))
    nonempty = run_ends > run_starts
    run_starts, run_ends = run_starts[nonempty], run_ends[nonempty]
    kept_before = run_starts - np.searchsorted(out, run_starts)  # K rows before each run
    firsts = values[run_starts]
    below = np.empty(k, np.int64)  # K rows with a smaller start
    upto = np.empty(k, np.int64)  # K rows with a start at most equal
    for j, v in enumerate(keys.tolist()):
        for side, res in (("left", below), ("right", upto)):
            r = int(np.searchsorted(firsts, v, side=side)) - 1  # the last run whose first row is before v
            if r < 0:
                res[j] = 0
            else:
                res[j] = kept_before[r] + int(np.searchsorted(values[run_starts[r]:run_ends[r]], v, side=side))
    # among K rows with an equal start, those above the row's index come first
    kept_above = sources - np.searchsorted(out, sources)
    before = np.clip(kept_above, below, upto)
    targets = before + np.arange(k)
    return Reorder(n, moves=_runs(n, out, targets), targets=targets, sources=sources)


def _runs(n: int, out: np.ndarray, targets: np.ndarray) -> list[tuple[int, int, int]]:
    """The moves that take the kept rows from between ``out`` to between ``targets``: runs of
    kept rows with one shift each, those moving up done first from the top, those moving
    down from the bottom, so no move overwrites a run that has yet to move."""
    k = out.size
    kept = n - k
    in_bounds = out - np.arange(k)  # kept rank from which j+1 rows are out of place above
    out_bounds = targets - np.arange(k)
    bounds = np.unique(np.concatenate(([0], in_bounds, out_bounds)))
    bounds = bounds[bounds < kept]
    ends = np.append(bounds[1:], kept)
    shift_in = np.searchsorted(in_bounds, bounds, side="right")
    shift_out = np.searchsorted(out_bounds, bounds, side="right")
    up, down = [], []
    for r0, r1, si, so in zip(bounds.tolist(), ends.tolist(), shift_in.tolist(), shift_out.tolist()):
        if si != so and r1 > r0:
            (up if so < si else down).append((r0 + si, r0 + so, r1 - r0))
    return up + down[::-1]


def _span(values: np.ndarray, descents: np.ndarray) -> Reorder:
    """A stable argsort of the span from the first row a sort moves to the last: before it
    the rows ascend and are at most every value after them, after it symmetrically."""
    n = values.size
    first, last = int(descents[0]), int(descents[-1]) + 1
    lo = int(np.searchsorted(values[:first + 1], values[first + 1:].min(), side="right"))
    hi = last + int(np.searchsorted(values[last:], values[:last].max(), side="left"))
    order = np.argsort(values[lo:hi], kind="stable")
    if hi - lo < 1 << 31:
        order = order.astype(np.int32)
    return Reorder(n, span=(lo, hi), order=order)
