"""trend reads batch's tables without pandas (analyzers/trend_table.py, issue 36 item 1): each step
against the pandas code it replaced, kept here as the reference, value for value (float64 bits where a
number is computed): the tables as read and coerced, the kernels' means per case, their ranking; and
``trend -f json`` imports no pandas."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from test_fixed_costs import _loaded, archive  # noqa: F401 - the fixture, bench_trend's 60 cases

from tracetriage.analyzers.trend import _column_means, _per_case
from tracetriage.analyzers.trend_cases import NUMBER_COLUMNS, coerce_tables, group_keys
from tracetriage.analyzers.trend_table import descending, read_table


def _pandas_coerce(summary, findings, kernels):
    """trend_cases.coerce_tables as it was, on pandas frames."""
    def numbers(frame, columns):
        for column in columns:
            frame[column] = (pd.to_numeric(frame[column], errors="coerce").astype("float64") if column in frame
                             else float("nan"))

    def texts(frame, columns):
        for column in columns:
            frame[column] = frame[column].astype("string").fillna("") if column in frame else ""

    summary = summary.copy()
    numbers(summary, NUMBER_COLUMNS)
    for column in ("capture_start_ns", "device_count", "world_size"):
        values = (pd.to_numeric(summary[column], errors="coerce") if column in summary
                  else pd.Series(float("nan"), index=summary.index))
        summary[column] = values.where(values.abs() < 2**62).round().astype("Int64")
    texts(summary, ["case_id", "path", "status", "error", "device_model", "program", "report_json", "report_html"])
    findings = findings.copy()
    numbers(findings, ["ms_per_step"])
    texts(findings, ["case_id", "id"])
    kernels = kernels.copy()
    numbers(kernels, ["ms_per_step"])
    texts(kernels, ["case_id", "name"])
    return summary, findings, kernels


def _same(mine: np.ndarray, theirs: pd.Series, column: str) -> None:
    if mine.dtype.kind == "f":
        assert mine.tobytes() == theirs.to_numpy(np.float64, na_value=np.nan).tobytes(), column
    else:
        expected = [None if value is pd.NA else value for value in theirs.tolist()]
        assert mine.tolist() == expected, (column, mine.tolist()[:5], expected[:5])


def _random_summary(rng, rows: int) -> pa.Table:
    """A summary table with the columns trend reads, some as batch writes them and some damaged: numbers
    as text (with junk), integers with nulls and out of range, texts as numbers, nulls everywhere."""
    def maybe_null(values, share=0.2):
        return [None if rng.random() < share else value for value in values]

    start = [int(v) for v in rng.integers(1_700_000_000 * 10**9, 1_800_000_000 * 10**9, rows)]
    columns = {
        "case_id": pa.array([f"c{i}" for i in range(rows)]),
        "path": pa.array(maybe_null([f"/a/n{i}/trace.sqlite" for i in range(rows)], 0.05)),
        "status": pa.array([("ok" if rng.random() < 0.8 else "failed") for _ in range(rows)]),
        "error": pa.array(maybe_null(["boom"] * rows, 0.7)),
        "device_model": pa.array(maybe_null(["NVIDIA H100"] * rows)),
        "program": pa.array(maybe_null([1.5] * rows), pa.float64()),  # a text column written as numbers
        "report_json": pa.array([f"cases/c{i}/analysis.json" for i in range(rows)]),
        "report_html": pa.array(maybe_null([f"cases/c{i}/report.html" for i in range(rows)])),
        "capture_start_ns": pa.array(maybe_null(start, 0.1 * rng.integers(0, 2)), pa.int64()),
        "device_count": pa.array(maybe_null([int(v) for v in rng.integers(1, 9, rows)]), pa.int32()),
        "world_size": pa.array(maybe_null([str(v) for v in rng.integers(1, 9, rows)] + ["1.0", "x", " 3", "1e3"])[:rows]),
        "headline": pa.array(maybe_null(["Not enough to judge" if rng.random() < 0.1 else "ok"
                                         for _ in range(rows)])),
    }
    for name in NUMBER_COLUMNS[: len(NUMBER_COLUMNS) // 2]:
        columns[name] = pa.array(maybe_null(list(rng.normal(5, 2, rows))), pa.float64())
    damaged = NUMBER_COLUMNS[len(NUMBER_COLUMNS) // 2]
    columns[damaged] = pa.array(maybe_null([str(v) for v in rng.normal(5, 2, rows)][:-1] + ["abc"]))
    if rng.random() < 0.5:  # out of the nanosecond range: pandas makes the whole column float first
        columns["capture_start_ns"] = pa.array(maybe_null(start[:-1] + [2**63 - 1]), pa.int64())
    return pa.table(columns)


def test_tables_read_and_coerced_as_pandas_did(tmp_path):
    rng = np.random.default_rng(36)
    for trial in range(40):
        rows = int(rng.integers(4, 60))
        summary = _random_summary(rng, rows)
        findings = pa.table({"case_id": pa.array([f"c{int(v)}" for v in rng.integers(0, rows, 3 * rows)]),
                             "id": pa.array([None if rng.random() < 0.1 else f"f{int(rng.integers(0, 4))}"
                                             for _ in range(3 * rows)]),
                             "ms_per_step": pa.array([None if rng.random() < 0.2 else float(v)
                                                      for v in rng.normal(1, 0.3, 3 * rows)])})
        kernels = pa.table({"case_id": pa.array([f"c{int(v)}" for v in rng.integers(0, rows, 5 * rows)]),
                            "name": pa.array([f"k{int(v)}" for v in rng.integers(0, 6, 5 * rows)]),
                            "ms_per_step": pa.array([int(v) for v in rng.integers(0, 9, 5 * rows)], pa.int64())})
        paths = {}
        for name, table in (("summary", summary), ("findings", findings), ("kernels", kernels)):
            paths[name] = tmp_path / f"{name}{trial}.parquet"
            pq.write_table(table, paths[name], row_group_size=max(1, rows // 3))  # several chunks
        mine = coerce_tables(*(read_table(paths[name]) for name in ("summary", "findings", "kernels")))
        theirs = _pandas_coerce(*(pd.read_parquet(paths[name]) for name in ("summary", "findings", "kernels")))
        for table, reference in zip(mine, theirs):
            assert set(table.columns) == set(reference.columns)
            for column in reference.columns:
                if column != "headline":  # not coerced: read as pandas reads it, missing None (pandas: NaN)
                    _same(table[column], reference[column], column)
        ok_mine = mine[0].take(mine[0]["status"] == "ok")
        ok_theirs = theirs[0][theirs[0]["status"] == "ok"]
        keys, expected = group_keys(ok_mine), [tuple(value for value in key) for key in
                                               zip(*[ok_theirs[k].astype(str).tolist() for k in
                                                     ("device_model", "device_count", "world_size", "program")])]
        assert [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in key) for key in keys] == \
               [tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in key) for key in expected]
        # the same bytes read from object storage (the table's file in memory)
        from_bytes = read_table(paths["summary"].read_bytes())
        assert all(np.array_equal(from_bytes[c], read_table(paths["summary"])[c], equal_nan=from_bytes[c].dtype.kind == "f")
                   for c in from_bytes.columns)


def test_kernel_means_and_their_ranking_are_pandas_bit_for_bit():
    """The kernels' ms per step per case (Kahan-summed in row order, as pandas' groupby mean) and the
    top kernels' order (their column means, ranked as ``sort_values(ascending=False)``, ties and NaN
    included) on random tables: up to 8 devices a case, repeated rows, NaN values, cases without rows."""
    rng = np.random.default_rng(36)
    for trial in range(300):
        cases = [f"c{i:02d}" for i in range(int(rng.integers(1, 40)))]
        names = [f"k{i}" for i in range(int(rng.integers(1, 12)))]
        rows = int(rng.integers(1, 400))
        scale = 10.0 ** rng.integers(-3, 4)
        values = rng.normal(1, 0.5, rows) * scale
        if trial % 3 == 0:
            values = np.round(values, 1)  # ties
        values[rng.random(rows) < 0.1] = np.nan
        k = pd.DataFrame({"case_id": rng.choice(cases, rows), "name": rng.choice(names, rows), "ms_per_step": values})
        ids = [case for case in cases if rng.random() < 0.9] or cases[:1]
        k = k[k["case_id"].isin(ids)]
        if not len(k):
            continue
        per = k.groupby(["case_id", "name"])["ms_per_step"].mean().unstack("name").reindex(ids)
        got_names, got = _per_case(k["case_id"].to_numpy(object), k["name"].to_numpy(object),
                                   k["ms_per_step"].to_numpy(np.float64), ids)
        assert got_names == list(per.columns)
        assert got.tobytes() == per.to_numpy(np.float64, na_value=np.nan).tobytes()
        top = list(per.mean().sort_values(ascending=False).index)
        assert [got_names[c] for c in descending(_column_means(got))] == top


def test_descending_is_pandas_sort_values_order():
    rng = np.random.default_rng(7)
    for _ in range(300):
        values = rng.integers(0, 5, int(rng.integers(0, 30))).astype(np.float64)
        values[rng.random(len(values)) < 0.2] = np.nan
        expected = pd.Series(values).sort_values(ascending=False).index.tolist()
        assert descending(values).tolist() == expected


def test_trend_json_imports_no_pandas(archive):  # noqa: F811 - the fixture imported above
    code, heavy = _loaded("trend", archive, "-f", "json", "--no-cache")
    assert code == 0
    assert "pandas" not in heavy and "pyarrow" in heavy, heavy
