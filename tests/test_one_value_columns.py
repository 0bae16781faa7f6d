"""Model columns holding one value are zero-stride views (tracetriage.model.one_value_view): the
same dtype and values as the full column, no memory per row. The reader keeps them so from the
reader threads on (parsers/sqlite.py SpanColumns, concat_columns)."""

from __future__ import annotations

import sqlite3
import sys
import threading

import numpy as np
import pandas as pd
import pytest
from conftest import REAL, ROOT

from tracetriage.model import is_one_value_view, one_value_view
from tracetriage.parsers import nsys, nsys_tables
from tracetriage.parsers.sqlite import SpanColumns, concat_columns, take_rows


@pytest.mark.parametrize("values", [np.full(5, 7, np.int64), np.full(5, 3, np.int32), np.ones(5, bool)])
def test_one_value_becomes_a_view_of_the_same_dtype_and_values(values):
    view = one_value_view(values)
    assert is_one_value_view(view) and view.strides == (0,) and not view.flags.writeable
    assert view.dtype == values.dtype and np.array_equal(view, values)


@pytest.mark.parametrize("values", [np.array([1, 2, 1]), np.array([5]), np.empty(0, np.int64), np.array([0, 0, 1], bool)])
def test_anything_else_is_left_as_it_is(values):
    assert one_value_view(values) is values
    assert not is_one_value_view(values)


def _parts(values: list[np.ndarray], one: bool) -> list[dict]:
    return [{"a": one_value_view(v) if one else v, "b": np.arange(len(v)) + 10 * k} for k, v in enumerate(values)]


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1]])
@pytest.mark.parametrize("values", [[4, 4, 4, 4], [4, 4, 9, 4], [9, 4, 4, 4]])
def test_span_columns_equal_the_plain_gather(order, values):
    """Parts put in any order (threads finish in any order): the gathered columns are the rows
    put, a view only when every part held the same one value."""
    chunks = [np.full(3, v, np.int64) for v in values]
    span = SpanColumns(12)
    threads = [threading.Thread(target=span.put, args=(_parts(chunks, True)[k], slice(3 * k, 3 * k + 3))) for k in order]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    out = span.result()
    assert list(out) == ["a", "b"]
    assert np.array_equal(out["a"], np.concatenate(chunks)) and out["a"].dtype == np.int64
    assert is_one_value_view(out["a"]) == (len(set(values)) == 1)
    assert np.array_equal(out["b"], np.concatenate([np.arange(3) + 10 * k for k in range(4)]))


def test_span_columns_a_full_part_after_one_value_parts():
    span = SpanColumns(6)
    span.put({"a": one_value_view(np.full(3, 2, np.int32))}, slice(0, 3))
    span.put({"a": np.array([2, 5, 2], np.int32)}, slice(3, 6))
    out = span.result()["a"]
    assert out.dtype == np.int32 and out.tolist() == [2, 2, 2, 2, 5, 2] and not is_one_value_view(out)


def test_concat_and_row_selection_keep_views():
    parts = [{"a": one_value_view(np.full(4, 3))}, {"a": one_value_view(np.full(2, 3))}]
    out = concat_columns(parts)["a"]
    assert is_one_value_view(out) and out.tolist() == [3] * 6
    mixed = concat_columns([{"a": one_value_view(np.full(2, 3))}, {"a": one_value_view(np.full(2, 4))}])["a"]
    assert mixed.tolist() == [3, 3, 4, 4]
    keep = np.array([True, False, True, True, False, False])
    assert take_rows(out, keep).tolist() == [3, 3, 3] and is_one_value_view(take_rows(out, keep))
    assert take_rows(np.arange(6), keep).tolist() == [0, 2, 3]


def _generated(tmp_path, n: int = 3000, **shape):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench

    path = tmp_path / "gen.sqlite"
    bench.build(path, n, shape=bench.Shape(**shape) if shape else "decode")
    return path


def test_a_generated_one_process_export_holds_its_one_values_as_views(tmp_path):
    """Ground truth from the export's own rows (SQL), not from the parser."""
    path = _generated(tmp_path)
    with sqlite3.connect(path) as con:
        (gpid,), = con.execute("SELECT DISTINCT globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchall()
        (gtid,), = con.execute("SELECT DISTINCT globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchall()
        streams = {s for (s,) in con.execute("SELECT DISTINCT streamId FROM CUPTI_ACTIVITY_KIND_KERNEL")}
        n_kernels, = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
    trace = nsys.parse(str(path))
    gpu, api = trace.gpu, trace.api
    assert len(gpu) == n_kernels
    for table, col in ((gpu, "pid"), (gpu, "device"), (gpu, "stream"), (gpu, "in_graph"), (gpu, "bytes"),
                       (api, "pid"), (api, "tid")):
        assert is_one_value_view(table[col].to_numpy()), col
    assert set(gpu["pid"].unique()) == set(api["pid"].unique()) == {(gpid >> 24) & 0xFFFFFF}
    assert set(api["tid"].unique()) == {gtid & 0xFFFFFF}
    assert set(gpu["stream"].unique()) == streams
    assert gpu["pid"].dtype == np.int64 and api["tid"].dtype == np.int32 and gpu["device"].dtype == np.int32


def _parse_without_views(path: str, monkeypatch):
    with monkeypatch.context() as m:
        for module in (nsys, nsys_tables):
            m.setattr(module, "one_value_view", lambda values: values)
        return nsys.parse(path)


@pytest.mark.parametrize("path", sorted((REAL / "nsys").glob("*.sqlite")) if (REAL / "nsys").is_dir() else [],
                         ids=lambda p: p.name)
def test_real_exports_parse_to_the_same_tables_with_and_without_views(path, monkeypatch):
    plain = _parse_without_views(str(path), monkeypatch)
    viewed = nsys.parse(str(path))
    for table in ("gpu", "api", "ranges", "syncs"):
        pd.testing.assert_frame_equal(getattr(viewed, table), getattr(plain, table), check_exact=True)


def test_a_two_device_export_keeps_its_varying_columns_whole(tmp_path, monkeypatch):
    path = str(_generated(tmp_path, devices=2, streams=2, nvtx=False, late_rows=500_000))
    trace = nsys.parse(path)
    assert not is_one_value_view(trace.gpu["device"].to_numpy())
    assert not is_one_value_view(trace.gpu["stream"].to_numpy())
    assert is_one_value_view(trace.gpu["pid"].to_numpy())
    plain = _parse_without_views(path, monkeypatch)
    for table in ("gpu", "api"):
        pd.testing.assert_frame_equal(getattr(trace, table), getattr(plain, table), check_exact=True)


@pytest.mark.parametrize("seed", range(30))
def test_a_small_table_read_by_compares_gives_the_gathered_values(seed):
    """model.lookup (a compare per code where the table is small: cat_mask, the parsers' per-category
    columns) against numpy's own gather ``lut[codes]``: every code width, code -1 (the last slot), tables
    of bools and of codes, columns above and below the size where the compares start, a table too large
    for them."""
    from tracetriage.codes import FEW_CODES, lookup

    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, FEW_CODES + 4))
    lut = rng.integers(-1, 5, size).astype(rng.choice([np.int8, np.int16, np.int32])) if seed % 3 else \
        rng.integers(0, 2, size).astype(bool)
    n = int(rng.choice([10, (1 << 16) + 7, 200_000]))
    codes = rng.integers(-1, size - 1, n).astype(rng.choice([np.int8, np.int16, np.int32, np.int64])) if size > 1 else \
        np.full(n, -1, np.int8)
    got = lookup(lut, codes)
    assert got.dtype == lut.dtype and np.array_equal(got, lut[codes])

