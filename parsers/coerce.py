"""The one place where untrusted values become the model's types.

Every column read from a user's SQLite file or JSON document passes through here (SQLite
is dynamically typed: an INTEGER column can hold text, blobs or 1e308; JSON numbers can be
Infinity, 5,000 digits long, or strings). The policy per value:

* integers (ids, timestamps, sizes): an integer within ±2^62 is kept; a float that is
  finite and in range is truncated; a numeric string (decimal, or hex with 0x) is parsed; anything else (text,
  blobs, NaN, ±Infinity, out of range, nested JSON) becomes the column's default (-1,
  "unknown") and is counted. Rows whose *timestamps* are invalid are then dropped by
  :func:`sanitize_trace` (an interval that cannot be true is not analyzed).
* floats: finite values are kept, the rest become NaN and are counted.
* text: ``None`` -> "", bytes decoded as UTF-8 with replacement, lone surrogates replaced.

Counts go to the ``warnings`` list given (the input's ``inputs[].warnings``), one line per
column, naming the table/field.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from tracetriage.model import is_sorted

LIMIT = 1 << 62  # |value| beyond this is no timestamp, id or size of a real capture
DAY_NS = 86_400 * 10**9
FAR_NS = 30 * DAY_NS  # further than this from the capture's median start: not the same capture


def _int_of(v, default: int):
    """(value, ok) for one untrusted scalar."""
    if v is None:
        return default, True  # missing, not invalid: NULL / absent fields have their defaults
    if isinstance(v, (bool, np.bool_)):
        return int(v), True
    if isinstance(v, (int, np.integer)):
        return (int(v), True) if -LIMIT < int(v) < LIMIT else (default, False)
    if isinstance(v, (float, np.floating)):
        return (int(v), True) if math.isfinite(v) and -LIMIT < v < LIMIT else (default, False)
    if isinstance(v, (bytes, bytearray)) and 0 < len(v) <= 24:
        v = bytes(v).decode("utf-8", "replace")
    if isinstance(v, str) and 0 < len(v) <= 24:
        s = v.strip()
        try:
            x = int(s, 16) if s[:2] in ("0x", "0X") else int(s)  # ROCm writes stream handles as "0x0"
        except ValueError:
            try:
                f = float(s)
            except ValueError:
                return default, False
            return (int(f), True) if math.isfinite(f) and -LIMIT < f < LIMIT else (default, False)
        return (x, True) if -LIMIT < x < LIMIT else (default, False)
    return default, False


def int64(values, where: str | None = None, warnings: list | None = None, default: int = -1) -> np.ndarray:
    """An int64 array from untrusted values (see the module docstring); invalid ones counted."""
    arr = values.to_numpy() if isinstance(values, (pd.Series, pd.Index)) else np.asarray(values)
    kind = arr.dtype.kind
    if kind in "iub":
        out = arr.astype(np.int64, copy=False)
        if kind == "u" and arr.size and int(arr.max()) >= LIMIT:
            bad = arr >= LIMIT
            out = np.where(bad, default, out).astype(np.int64)
            _count(warnings, where, int(bad.sum()), default)
        return out
    if kind == "f":
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(arr) & (np.abs(arr) < LIMIT)
            out = np.where(ok, arr, default).astype(np.int64)
        nan = np.isnan(arr)
        _count(warnings, where, int((~ok & ~nan).sum()), default)
        out[nan] = default
        return out
    out = np.empty(arr.size, dtype=np.int64)
    bad = 0
    for i, v in enumerate(arr.ravel()):
        if isinstance(v, float) and v != v:  # NaN from a missing value
            out[i] = default
            continue
        out[i], ok = _int_of(v, default)
        bad += not ok
    _count(warnings, where, bad, default)
    return out


def int64_text(values: pd.Series, where: str | None = None, warnings: list | None = None, default: int = -1) -> np.ndarray:
    """An int64 array from a column of text (a CSV's), vectorized: the first integer in each
    cell; a cell without one becomes ``default``, and so does one whose integer lies beyond
    ±2^62 (a 25-digit number, a bit flip: counted). Parsed as a nullable integer, so one bad
    cell never turns the column into floats (a nanosecond timestamp does not survive float64)."""
    if not len(values):
        return np.zeros(0, np.int64)
    digits = values.astype("string").str.extract(r"(-?\d+)", expand=False)
    magnitude = digits.str.lstrip("-").str.lstrip("0").fillna("")
    # equal-length digit strings compare like their numbers: 2^62 has 19 digits
    ok = digits.notna() & ((magnitude.str.len() < 19) | ((magnitude.str.len() == 19) & (magnitude < str(LIMIT))))
    num = pd.to_numeric(digits.where(ok), errors="coerce", dtype_backend="numpy_nullable")
    _count(warnings, where, int((digits.notna() & ~ok).sum()), default)
    return num.to_numpy(dtype=np.int64, na_value=default)


def float64(values, where: str | None = None, warnings: list | None = None) -> np.ndarray:
    """A float64 array from untrusted values: finite numbers kept, the rest NaN (counted)."""
    arr = values.to_numpy() if isinstance(values, (pd.Series, pd.Index)) else np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.float64)
    if arr.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr) & ~np.isnan(arr)
        out = arr.astype(np.float64, copy=True)
        out[bad] = np.nan
        _count(warnings, where, int(bad.sum()), None)
        return out
    out = np.full(arr.size, np.nan)
    bad = 0
    for i, v in enumerate(arr.ravel()):
        if v is None or (isinstance(v, float) and v != v):
            continue
        try:
            f = float(v) if isinstance(v, (int, float, np.number, str)) and not isinstance(v, bool) else None
        except (ValueError, OverflowError):
            f = None
        if f is not None and math.isfinite(f):
            out[i] = f
        else:
            bad += 1
    _count(warnings, where, bad, None)
    return out


def text(v) -> str:
    """Printable text from an untrusted scalar."""
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    s = v if isinstance(v, str) else str(v)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from JSON "\udc80"
        s = s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return s


def utf8_columns(table, only: tuple[str, ...] | None = None):
    """An Arrow table whose string columns hold valid UTF-8 (``only``: those columns, else
    every string column). SQLite stores whatever bytes it is given and the Arrow reader
    does not check them: a flipped bit in a text cell, or text in an integer column,
    would fail the conversion to numpy or pandas. A column that validates is kept as is
    (a C-speed check); one that does not has its invalid sequences replaced by U+FFFD."""
    import pyarrow as pa

    for i, name in enumerate(table.column_names):
        if only is not None and name not in only:
            continue
        col = table.column(i)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                or (only is not None and pa.types.is_binary(col.type))):
            continue
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
            try:
                col.validate(full=True)
                continue
            except pa.ArrowInvalid:
                pass
        raw = col.cast(pa.large_binary() if pa.types.is_large_string(col.type) else pa.binary()).to_pylist()
        fixed = pa.array([None if b is None else b.decode("utf-8", "replace") for b in raw], type=pa.string())
        table = table.set_column(i, name, fixed)
    return table


def number(v):
    """One untrusted JSON/text value as a finite number (an int stays an int, a numeric string
    is parsed), else None: text, bools, NaN, ±Infinity, nested values and out-of-range
    integers are no measurement."""
    if isinstance(v, (bool, np.bool_)) or v is None:
        return None
    if isinstance(v, (int, np.integer)):
        return int(v) if -LIMIT < int(v) < LIMIT else None
    if isinstance(v, str):
        s = v.strip()
        if not 0 < len(s) <= 40:
            return None
        try:
            return number(int(s))
        except ValueError:
            try:
                v = float(s)
            except ValueError:
                return None
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    return None


def scalar_int(v, default=None):
    """One untrusted value as an int, or ``default``."""
    x, ok = _int_of(v, default)
    return x if ok else default


def _count(warnings, where, n: int, default) -> None:
    if warnings is not None and n:
        what = f"set to {default}" if default is not None else "ignored"
        warnings.append(f"{where or 'a column'}: {n:,} values that are not valid numbers {what}")


# --------------------------------------------------------------------------------------
# Intervals that cannot be true


PLAUSIBLE_CHUNK = 1 << 18  # rows per slice: temporaries under the 4 MiB mmap threshold (tracetriage/memory.py)


def _plausible(df: pd.DataFrame, anchor: float | None) -> np.ndarray:
    s = df["start"].to_numpy()
    e = df["end"].to_numpy()
    ok = np.empty(s.size, dtype=bool)
    for k in range(0, s.size, PLAUSIBLE_CHUNK):
        sk, ek = s[k:k + PLAUSIBLE_CHUNK], e[k:k + PLAUSIBLE_CHUNK]
        o = (sk >= 0) & (ek >= sk) & (ek < LIMIT) & (ek - sk <= DAY_NS)  # zero-length records are legal
        if anchor is not None:
            o &= np.abs(sk - anchor) <= FAR_NS
        ok[k:k + PLAUSIBLE_CHUNK] = o
    return ok


def _median(values: np.ndarray) -> float:
    """np.median, without its copy of the column when the column is sorted (gpu is, by start)."""
    n = values.size
    if n > 2 and is_sorted(values):
        return float(np.median(values[(n - 1) // 2:n // 2 + 1]))
    return float(np.median(values))


def sanitize_trace(trace) -> None:
    """Drop intervals that cannot be true — negative or out-of-range times, an end before its
    start, a duration over a day, a start over 30 days from the capture's median — counting
    them into the trace's warnings, table by table."""
    gpu = trace.gpu
    anchor = _median(gpu["start"].to_numpy()) if len(gpu) else None
    from tracetriage.threads import thread_map

    tables = {n: df for n in ("gpu", "api", "ranges", "syncs")
              if len(df := getattr(trace, n)) and "start" in df and "end" in df}
    big = sum(map(len, tables.values())) > 2 * PLAUSIBLE_CHUNK  # big tables are checked side by side
    masks = thread_map(lambda df: _plausible(df, anchor), tables.values(), 2 if big else 1)
    for (name, df), ok in zip(tables.items(), masks):
        if ok.all():
            continue
        dropped = int((~ok).sum())
        setattr(trace, name, df[ok].reset_index(drop=True))
        label = {"gpu": "GPU records", "api": "API calls", "ranges": "annotation ranges", "syncs": "sync records"}[name]
        trace.warnings.append(f"{dropped:,} {label} with impossible times (negative, end before start, longer than a day, "
                              "or 30 days away from the rest of the capture) were dropped")


SETTING_CHARS = 200  # an engine setting longer than this is cut: a model path or a spec config, not a blob


def setting(v):
    """One untrusted engine setting (a config literal, a log's ``key=value``, a metric label) as a
    JSON scalar: bools, None and finite numbers kept, a list of one value unwrapped (vLLM's
    ``served_model_name: ['m']``), anything else as printable text of at most SETTING_CHARS."""
    if isinstance(v, (list, tuple)) and len(v) == 1:
        v = v[0]
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return number(v)
    return text(v if isinstance(v, (str, bytes)) else repr(v)).strip()[:SETTING_CHARS]
