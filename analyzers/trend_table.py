"""batch's tables as trend reads them, without pandas (issue 36 item 1: importing pandas was ~0.3 s of
a ~1 s trend over 1,000 rows, its frames ~10 ms of the work): each Parquet table read by pyarrow into
numpy columns, converted and coerced as ``pandas.read_parquet`` and :func:`trend_cases.coerce_tables`
did with pandas, value for value (``tests/test_trend_table.py`` holds the pandas code they replace).

A :class:`Table` is a dict of equal-length numpy columns: float64 for numbers (NaN missing), object
arrays of ``str`` for texts (``""`` missing) and of ``int`` or ``None`` for the nullable integers
(``capture_start_ns``, ``device_count``, ``world_size``); a column not coerced is as the file holds it.
"""

from __future__ import annotations

import math
from numbers import Number

import numpy as np

INT_LIMIT = 2**62  # a nullable integer at or beyond this is missing (as the pandas code's where(abs < 2**62))


class Table:
    """Columns by name, all of one length; ``take`` keeps the rows of an index array or a boolean mask."""

    __slots__ = ("columns", "length")

    def __init__(self, columns: dict[str, np.ndarray], length: int):
        self.columns = columns
        self.length = length

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def __setitem__(self, name: str, values) -> None:
        self.columns[name] = values

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    def __len__(self) -> int:
        return self.length

    def take(self, rows) -> Table:
        rows = np.asarray(rows)
        if rows.dtype == bool:
            rows = np.flatnonzero(rows)
        return Table({name: values[rows] for name, values in self.columns.items()}, len(rows))

    def copy(self) -> Table:
        return Table(dict(self.columns), self.length)


def read_table(source) -> Table:
    """A Parquet file (a path, or its bytes) as a :class:`Table`, each column as pandas would hold it
    after ``read_parquet``: integers without nulls int64, with nulls float64 (NaN), booleans with nulls
    and texts object arrays (None missing)."""
    import pyarrow.parquet as pq

    if isinstance(source, (bytes, bytearray, memoryview)):
        import pyarrow as pa

        source = pa.BufferReader(source)
    table = pq.ParquetFile(source).read()
    return Table({name: _numpy(table.column(i)) for i, name in enumerate(table.column_names)}, table.num_rows)


def _numpy(column) -> np.ndarray:
    """One column as pandas reads it, without pyarrow's pandas conversion (which imports pandas): fixed-width
    numbers from their buffers (NaN where null; integers with nulls as float64), the rest as Python values."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_dictionary(kind):
        column, kind = column.cast(kind.value_type), kind.value_type
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_integer(kind) or pa.types.is_floating(kind):
        validity, data = column.buffers()[:2]
        dtype = np.dtype(kind.to_pandas_dtype())
        size, offset = len(column), column.offset
        values = (np.frombuffer(data, dtype, count=size, offset=offset * dtype.itemsize) if data is not None and size
                  else np.zeros(size, dtype))
        if not column.null_count:
            return values.copy()
        valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[offset:offset + size].astype(bool)
        out = values.astype(np.float64) if dtype.kind in "iu" else values.copy()
        out[~valid] = np.nan
        return out
    out = np.empty(len(column), object)
    out[:] = column.to_pylist()
    if pa.types.is_boolean(kind) and not column.null_count:
        return out.astype(bool)
    return out


def numbers(values: np.ndarray) -> np.ndarray:
    """``pd.to_numeric(values, errors="coerce").astype("float64")``: anything that is no number NaN."""
    if values.dtype != object:
        return values.astype(np.float64)
    return np.array([_number(value) for value in values.tolist()], np.float64)


def _number(value) -> float:
    if value is None:
        return math.nan
    if isinstance(value, (bool, int, float, np.integer, np.floating, Number)):
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            return math.nan
    if isinstance(value, str) and "_" not in value:
        try:
            return float(int(value))
        except ValueError:
            try:
                return float(value)
            except ValueError:
                return math.nan
    return math.nan


def integers(values: np.ndarray) -> np.ndarray:
    """The pandas code's nullable integers: ``to_numeric`` (coerce), missing where ``abs >= 2**62``,
    rounded, as ``Int64``; here an object array of ``int`` or ``None``."""
    if values.dtype == object:
        parsed = [_integer_or_float(value) for value in values.tolist()]
        values = (np.array(parsed, np.int64) if all(type(value) is int for value in parsed) else
                  np.array(parsed, np.float64))
    elif values.dtype == bool:
        values = values.astype(np.int64)
    if values.dtype.kind in "iu":
        inside = np.abs(values.astype(np.float64)) < INT_LIMIT
        if inside.all():
            out = np.empty(len(values), object)
            out[:] = values.astype(np.int64).tolist()
            return out
        values = values.astype(np.float64)  # pandas' where() upcasts the column to float64 (NaN) then
    values = np.where(np.abs(values) < INT_LIMIT, values, np.nan).round()
    out = np.empty(len(values), object)
    out[:] = [None if value != value else int(value) for value in values.tolist()]
    return out


def _integer_or_float(value):
    if isinstance(value, str) and "_" not in value:
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    return _number(value)


def texts(values: np.ndarray) -> np.ndarray:
    """``values.astype("string").fillna("")``: each value as text, missing ones empty."""
    out = np.empty(len(values), object)
    if values.dtype == object:
        out[:] = ["" if value is None or value != value else value if type(value) is str else _text(value)
                  for value in values.tolist()]
    elif values.dtype.kind == "f":
        out[:] = ["" if value != value else str(value) for value in values.tolist()]
    else:
        out[:] = [str(value) for value in values.tolist()]
    return out


def _text(value) -> str:
    return str(value)


def signature_texts(values: np.ndarray) -> list:
    """``values.astype(str).tolist()`` of a coerced column, as the group keys read it: a missing
    nullable integer stays NaN (pandas' string dtype keeps it missing)."""
    return [math.nan if value is None else str(value) for value in values.tolist()]


def starts_with(values: np.ndarray, prefix: str) -> np.ndarray:
    """``values.astype(str).str.startswith(prefix)`` of a raw text column (missing: False)."""
    return np.array([isinstance(value, str) and value.startswith(prefix) for value in values.tolist()], bool)


def isin(values: np.ndarray, keys) -> np.ndarray:
    keys = set(keys)
    return np.array([value in keys for value in values.tolist()], bool)


def is_missing(values: np.ndarray) -> np.ndarray:
    """``values.isna()`` of a coerced column."""
    if values.dtype.kind == "f":
        return np.isnan(values)
    if values.dtype == object:
        return np.array([value is None or value != value for value in values.tolist()], bool)
    return np.zeros(len(values), bool)


def group_means(cases: np.ndarray, names: np.ndarray, values: np.ndarray):
    """``frame.groupby(["case_id", "name"])[values].mean().unstack("name")``: the sorted case ids, the
    sorted names and their (cases x names) means, NaN where a pair has no row or no value. The means
    are summed in row order with Kahan's compensation, as pandas' group_mean sums them, so each is the
    same float64."""
    case_keys, case_codes = np.unique(cases.astype(str), return_inverse=True) if len(cases) else (np.array([]), [])
    name_keys, name_codes = np.unique(names.astype(str), return_inverse=True) if len(names) else (np.array([]), [])
    width = len(name_keys)
    group = np.asarray(case_codes, np.int64).reshape(-1) * width + np.asarray(name_codes, np.int64).reshape(-1)
    size = len(case_keys) * width
    total = np.zeros(size)
    compensation = np.zeros(size)
    count = np.zeros(size, np.int64)
    present = np.zeros(size, bool)
    present[group] = True
    known = ~np.isnan(values)
    group, values = group[known], values[known]
    order = np.argsort(group, kind="stable")  # each group's rows in table order
    group, values = group[order], values[order]
    starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1] if len(group) else np.array([], np.int64)
    rank = np.arange(len(group)) - np.repeat(starts, np.diff(np.r_[starts, len(group)]))
    for k in range(int(rank.max()) + 1 if len(rank) else 0):
        at = rank == k
        where, value = group[at], values[at]
        y = value - compensation[where]
        t = total[where] + y
        comp = t - total[where] - y
        compensation[where] = np.where(comp != comp, 0.0, comp)
        total[where] = t
        count[where] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    means[~present] = np.nan
    return list(case_keys), list(name_keys), means.reshape(len(case_keys), width)


def descending(values: np.ndarray) -> np.ndarray:
    """The order of ``pd.Series(values).sort_values(ascending=False)`` (pandas' nargsort: quicksort of
    the reversed values, reversed back; NaN last)."""
    mask = np.isnan(values)
    index = np.arange(len(values))
    non_nans, non_nan_index = values[~mask][::-1], index[~mask][::-1]
    order = non_nan_index[non_nans.argsort(kind="quicksort")][::-1]
    return np.concatenate([order, np.flatnonzero(mask)])
