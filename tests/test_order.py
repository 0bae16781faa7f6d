"""Start order of nearly sorted tables (tracetriage/order.py) against the full stable sort,
and the nsys parser's tables against a full sort on the real multi-threaded exports."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import REAL as REAL_ALL  # the repository's real captures, then ../shared's

from tracetriage import order
from tracetriage.model import is_sorted
from tracetriage.order import start_order

REAL = REAL_ALL / "nsys"


def _check(values: np.ndarray) -> order.Reorder | None:
    """Every column reordered in place equals the same column taken by the full stable argsort."""
    expected = np.argsort(values, kind="stable")
    plan = start_order(values)
    if plan is None:
        assert (expected == np.arange(values.size)).all()
        return None
    rows = np.arange(values.size)
    assert (plan.apply(rows.copy()) == expected).all()
    start = plan.apply(values.copy())
    assert (start == values[expected]).all()
    cat = pd.Categorical.from_codes((rows % 3).astype(np.int8), categories=["a", "b", "c"])
    assert (plan.apply(cat).codes == cat.codes[expected]).all()
    return plan


def _nearly_sorted(rng, n: int, k: int, far: bool, early: bool, ties: bool) -> np.ndarray:
    """Ascending starts with ``k`` rows moved to another place: later in the table (as a
    thread's buffered rows are written) or earlier, near or anywhere."""
    step = rng.integers(0, 3 if ties else 1000, n) + (0 if ties else 1)
    values = np.cumsum(step).astype(np.int64)
    rows = list(range(n))
    for _ in range(k):
        i = int(rng.integers(0, n))
        d = int(rng.integers(1, n if far else 20))
        j = min(n - 1, i + d) if not early else max(0, i - d)
        rows.insert(j, rows.pop(i))
    return values[np.array(rows)]


@pytest.mark.parametrize("limit", [4096, 40])
@pytest.mark.parametrize("seed", range(150))
def test_nearly_sorted_is_the_stable_sort(seed, limit, monkeypatch):
    """With a limit of 40 rows merged, rows moved far up are merged as early rows (the rows
    they jumped over are all late) and the rest as late rows."""
    monkeypatch.setattr(order, "MAX_MERGED", limit)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    k = int(rng.integers(1, 40))
    values = _nearly_sorted(rng, n, k, far=bool(seed % 2), early=bool(seed % 3 == 0), ties=bool(seed % 5 == 0))
    _check(values)


def test_each_path_is_taken(monkeypatch):
    """The merge of late rows, of early rows, and the span's argsort all serve."""
    monkeypatch.setattr(order, "MAX_MERGED", 40)
    rng = np.random.default_rng(5)
    late = _nearly_sorted(rng, 5000, 10, far=True, early=False, ties=False)
    early = _nearly_sorted(rng, 5000, 10, far=True, early=True, ties=False)
    def out(values, early):
        return order._out_of_place(values, np.flatnonzero(values[1:] < values[:-1]), early)

    assert out(late, False) is not None
    assert out(early, False) is None and out(early, True) is not None
    assert _check(early)._span is None
    mixed = _nearly_sorted(rng, 5000, 60, far=True, early=False, ties=False)
    mixed = mixed[::-1].copy()
    mixed[:2500] = np.sort(mixed[:2500])
    mixed[2500:] = np.sort(mixed[2500:])  # two blocks: neither few late nor few early rows
    assert _check(mixed)._span is not None


@pytest.mark.parametrize("seed", range(40))
def test_shuffled_and_blocks_are_the_stable_sort(seed):
    """Beyond MAX_MERGED rows out of place: the span's argsort (shuffled, two interleaved
    threads written one after the other, few distinct values)."""
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(2, 20000))
    kind = seed % 3
    if kind == 0:
        values = rng.integers(0, n, n)
    elif kind == 1:
        a, b = np.sort(rng.integers(0, 10 * n, n // 2)), np.sort(rng.integers(0, 10 * n, n - n // 2))
        values = np.concatenate((a, b))
    else:
        values = rng.integers(0, 4, n)
    _check(values.astype(np.int64))


def test_many_rows_out_of_place_go_to_the_span_sort(monkeypatch):
    monkeypatch.setattr(order, "MAX_MERGED", 8)
    rng = np.random.default_rng(7)
    for _ in range(30):
        _check(_nearly_sorted(rng, 500, 20, far=True, early=False, ties=False))


def test_out_of_place_at_the_ends():
    """Rows out of place first or last in the table, runs of one row, equal values."""
    for values in ([5, 1, 2, 3], [1, 2, 3, 0], [3, 2, 1], [2, 1, 2, 1, 2, 1], [1, 1, 0, 0, 1, 1],
                   [0, 9, 1, 2, 3, 4], [5, 6, 7, 8, 0, 9], [1, 3, 2, 4, 3, 5, 4, 6]):
        _check(np.array(values, np.int64))


def test_sorted_and_tiny():
    assert start_order(np.arange(10)) is None
    assert start_order(np.array([], np.int64)) is None
    assert start_order(np.array([5, 5, 5])) is None
    plan = _check(np.array([2, 1]))
    assert plan.rows_moved == 1


def test_a_few_late_rows_move_only_themselves():
    """39 late rows in 1M: the merge path, not a sort of the span."""
    rng = np.random.default_rng(27)
    values = _nearly_sorted(rng, 1_000_000, 39, far=True, early=False, ties=False)
    plan = _check(values)
    assert plan.rows_moved <= 39


def test_read_only_column_comes_back_as_a_copy():
    values = np.array([3, 1, 2, 4], np.int64)
    values.flags.writeable = False
    plan = start_order(values)
    out = plan.apply(values)
    assert list(out) == [1, 2, 3, 4] and list(values) == [3, 1, 2, 4]


@pytest.mark.parametrize("name", ["nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite",
                                  "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite"])
def test_real_exports_runtime_table_as_a_full_sort(name):
    """The parser's API table holds the runtime rows as a full stable sort by start of the
    raw rows (read here with sqlite3) orders them; the 2xH100 exports have 1 and 5 rows out
    of start order, each the first of a thread's block written after other threads' rows."""
    import sqlite3

    from tracetriage.model import strip_api_version
    from tracetriage.parsers import nsys

    path = REAL / name
    if not path.exists():
        pytest.skip(f"real sample not present: {path}")
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    names = dict(con.execute("SELECT id, value FROM StringIds"))
    raw = pd.DataFrame(con.execute("SELECT start, end, globalTid, correlationId, nameId "
                                   "FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY rowid").fetchall(),
                       columns=["start", "end", "gtid", "correlation", "name_id"])
    con.close()
    assert not is_sorted(raw["start"].to_numpy())  # the case this pins
    expected = raw.sort_values("start", kind="stable", ignore_index=True)
    got = nsys.parse(str(path)).api
    assert len(got) == len(expected)
    for col in ("start", "end", "correlation"):
        assert (got[col].to_numpy() == expected[col].to_numpy()).all(), col
    assert (got["pid"].to_numpy() == (expected["gtid"].to_numpy() >> 24) & 0xFFFFFF).all()
    assert (got["tid"].to_numpy() == expected["gtid"].to_numpy() & 0xFFFFFF).all()
    assert list(got["name"].astype(object)) == [strip_api_version(names[i]) for i in expected["name_id"]]
    # and the whole trace is the one the full sort gives: nothing downstream sees the difference
    starts = got["start"].to_numpy()
    assert is_sorted(starts)
