"""The slice-at-a-time interval code the phases and idle-by-host passes use (analyzers/intervals.py)
against the whole-array definitions it replaced: union (one sort, one running maximum), complement
then a minimum length, a Coverage's measure of a set's overlap with the gaps."""

import numpy as np
import pytest

from tracetriage.analyzers import intervals as iv


def _union_whole(starts, ends):
    """The union as one pass over the whole arrays (the definition)."""
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    run_max = np.maximum.accumulate(np.maximum(ends, starts))
    begins = np.flatnonzero(starts[1:] > run_max[:-1]) + 1
    return starts[np.concatenate(([0], begins))], run_max[np.concatenate((begins - 1, [starts.size - 1]))]


def _intervals(rng, n, spacing, length, shuffled):
    starts = np.cumsum(rng.integers(0, spacing, n)).astype(np.int64)
    ends = starts + rng.integers(-2, length, n)  # some end before they start: read as empty
    if shuffled:
        rng.shuffle(starts)
    return starts, ends


@pytest.mark.parametrize("n", [1, 2, 100, iv.SLICE - 1, iv.SLICE, iv.SLICE + 1, 2 * iv.SLICE + 17])
@pytest.mark.parametrize("spacing,length", [(3, 5), (1000, 50), (10, 10**6)])
def test_union_by_slices_is_the_whole_array_union(n, spacing, length):
    rng = np.random.default_rng(n + spacing)
    for shuffled in (False, True):
        starts, ends = _intervals(rng, n, spacing, length, shuffled)
        want = _union_whole(starts, ends)
        got = iv.union(starts, ends)
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
        pieces = list(iv.union_slices(starts, ends))
        assert np.concatenate([p[0] for p in pieces]).tolist() == want[0].tolist()
        assert np.concatenate([p[1] for p in pieces]).tolist() == want[1].tolist()


@pytest.mark.parametrize("n", [5, iv.SLICE + 3, 2 * iv.SLICE + 17])
def test_gaps_and_overlap_measure_match_complement_and_coverage(n):
    rng = np.random.default_rng(n)
    starts, ends = _intervals(rng, n, 20, 15, False)
    lo, hi = int(starts.min()) + 7, int(ends.max()) - 7
    busy_s, busy_e = _union_whole(np.maximum(starts, lo), np.minimum(np.maximum(ends, starts), hi))
    for min_length in (1, 2, 9):
        gap_s, gap_e = iv.complement(busy_s, busy_e, lo, hi)
        keep = gap_e - gap_s >= min_length
        got_s, got_e = iv.gaps(busy_s, busy_e, lo, hi, min_length)
        assert got_s.tolist() == gap_s[keep].tolist() and got_e.tolist() == gap_e[keep].tolist()
    gap_s, gap_e = iv.gaps(busy_s, busy_e, lo, hi)
    calls = _intervals(rng, n // 3 + 1, 60, 40, True)
    want = int(iv.Coverage(*_union_whole(*calls)).overlap(gap_s, gap_e).sum())
    assert iv.overlap_measure(gap_s, gap_e, iv.union_slices(*calls)) == want
    assert want == int(iv.Coverage(*iv.union(*calls)).overlap_disjoint(gap_s, gap_e).sum())


def test_coverage_before_inside_and_after_the_set():
    cover = iv.Coverage(np.array([10, 20, 40], np.int64), np.array([15, 30, 41], np.int64))
    t = np.array([-5, 10, 12, 15, 19, 25, 30, 40, 41, 100], np.int64)
    assert cover.at(t).tolist() == [0, 0, 2, 5, 5, 10, 15, 15, 16, 16]
    assert iv.Coverage(np.empty(0, np.int64), np.empty(0, np.int64)).at(t).tolist() == [0] * t.size
