"""Read-only, columnar access to a user's SQLite file.

The file is opened with ``mode=ro`` (never written, no journal created) and its
tables and columns are discovered from ``sqlite_master`` / ``PRAGMA table_info``:
profiler schemas change between versions, so nothing is assumed to exist.
The two biggest tables of a multi-GB export are decoded from their b-tree pages where
they are the plain case (``scan_columns``, parsers/btree.py). Other bulk reads go
through ADBC straight into Arrow (no Python object per row), one path for every query
(``_fetch``); the stdlib ``sqlite3`` cursor is its fallback, reads small files whole
and serves the small metadata queries.
"""

from __future__ import annotations

import itertools
import os
import re
import sqlite3
import threading
import time
import urllib.parse
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from tracetriage.errors import TraceFormatError
from tracetriage.memory import release_freed
from tracetriage.model import is_one_value_view
from tracetriage.threads import thread_map

# Arrow's default jemalloc/mimalloc pools keep freed memory; between the big tables of a
# trace the system allocator hands it back, which cut peak RSS by ~20% and time by ~30%
# on the 1M-kernel benchmark. ARROW_DEFAULT_MEMORY_POOL still wins when set.
if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
    pa.set_memory_pool(pa.system_memory_pool())

PARALLEL_MIN_ROWS = 200_000  # below this one connection is as fast
# Below this file size the stdlib cursor reads every table faster than ADBC can be imported
# (20 ms of pyarrow.dataset et al.): a batch over thousands of small captures pays that per case.
ADBC_MIN_BYTES = 4 << 20
MAX_READERS = 4
BATCH_ROWS = 1 << 20
MAX_CHUNKS = 4096  # rowid ranges per table, however sparse its rowids


SQL_TIME_LIMIT_S = float(os.environ.get("TRACETRIAGE_SQL_TIMEOUT", "300"))
# Views are read through sqlite3 under this budget: a real export's views are simple selects,
# one that takes longer recurses or sorts without end.
VIEW_TIME_LIMIT_S = float(os.environ.get("TRACETRIAGE_VIEW_TIMEOUT", "20"))


def readonly_uri(path: str | Path) -> str:
    """Read-only and immutable: SQLite neither locks, nor reads a write-ahead log, nor creates
    -shm/-journal files beside the user's file (leftover -wal files stay untouched)."""
    return "file:" + urllib.parse.quote(str(Path(path).resolve())) + "?mode=ro&immutable=1"


def header_geometry(path: str | Path) -> tuple[int, int, int, int] | None:
    """An SQLite file's page size, reserved bytes per page and page count from its 100-byte header, and
    the file's size; None when the file cannot be read or holds no SQLite header."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
        size = os.path.getsize(path)
    except OSError:
        return None
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return None
    page = int.from_bytes(header[16:18], "big")
    return (65536 if page == 1 else page), header[20], int.from_bytes(header[28:32], "big"), size


def truncation(path: str | Path) -> str | None:
    """Why an SQLite file that does not open is a cut-off copy: fewer bytes than the pages its header
    counts, or a size that is no whole number of pages; None when the header says nothing of the kind."""
    geometry = header_geometry(path)
    if geometry is None:
        return None
    page, _, pages, size = geometry
    if page and pages and size < page * pages:
        return (f"truncated: its header counts {pages:,} pages of {page:,} bytes ({pages * page:,} bytes) and the file "
                f"holds {size:,} ({100 * size / (pages * page):.0f}%): an interrupted copy or download; copy it again")
    if page and size % page:
        return (f"truncated: {size:,} bytes is no whole number of its {page:,}-byte pages: an interrupted copy or "
                "download; copy it again")
    return None


class Database:
    """A read-only SQLite file with its schema discovered up front."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self.uri = readonly_uri(path)
        self.warnings: list[str] = []  # values coerced, leftovers ignored: reported with the input
        self._deadline = [time.monotonic() + SQL_TIME_LIMIT_S]
        try:
            self.conn = _connect(self.uri)
            self.conn.set_progress_handler(lambda: 1 if time.monotonic() > self._deadline[0] else 0, 100_000)
            rows = self.conn.execute(
                "SELECT name, type, sql, rootpage FROM sqlite_master WHERE type IN ('table', 'view')"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, truncation(self.path) or f"not a readable SQLite database: {exc}") from None
        self.objects = {name: kind for name, kind, _, _ in rows}
        self.views = {name for name, kind, _, _ in rows if kind == "view"}
        # each table's b-tree root page and CREATE statement (the b-tree reader's starting point)
        self.tables = {name: (root, sql) for name, kind, sql, root in rows if kind == "table"}
        wal = Path(self.path + "-wal")
        try:
            if wal.exists() and wal.stat().st_size > 0:
                self.warnings.append(f"a write-ahead log ({wal.stat().st_size:,} bytes) lies beside the file: rows not yet "
                                     "checkpointed into it are not read (the file is opened read-only and immutable)")
        except OSError:
            pass
        try:
            self._size = os.path.getsize(self.path)
        except OSError:
            self._size = 0
        self._check_size()
        self._columns: dict[str, list[str]] = {}

    def _check_size(self) -> None:
        """The header's page geometry (``page_size``, ``reserved``: 0 when unreadable); a file
        shorter than its header's page count was cut: say so (queries may still work)."""
        geometry = header_geometry(self.path)
        self.page_size, self.reserved = geometry[:2] if geometry else (0, 0)
        if geometry is None:
            return
        page, _, pages, size = geometry
        if page and pages and size < page * pages:
            self.warnings.append(f"the file is truncated: {size:,} bytes of the {page * pages:,} its header declares; "
                                 "rows in the missing pages are not read")

    def close(self) -> None:
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def has(self, name: str) -> bool:
        return name in self.objects

    def columns(self, table: str) -> list[str]:
        if table not in self._columns:
            try:
                info = self.conn.execute(f'PRAGMA table_info("{table}")').fetchall()
            except sqlite3.DatabaseError as exc:
                raise TraceFormatError(self.path, f"cannot read table {table} ({exc})") from None
            self._columns[table] = [r[1] for r in info]
        return self._columns[table]

    def has_column(self, table: str, column: str) -> bool:
        return self.has(table) and column in self.columns(table)

    def _arm(self, sql: str) -> None:
        """A fresh time budget for one statement on the metadata connection (shorter over a view)."""
        over_view = any(v in sql for v in self.views)
        self._deadline[0] = time.monotonic() + (VIEW_TIME_LIMIT_S if over_view else SQL_TIME_LIMIT_S)

    def scalar(self, sql: str, default=None):
        self._arm(sql)
        try:
            row = self.conn.execute(sql).fetchone()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"query failed: {exc}") from None
        return default if row is None or row[0] is None else row[0]

    def rows(self, sql: str, params=()) -> list[tuple]:
        self._arm(sql)
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"query failed: {exc}") from None

    def frame(self, sql: str, split: str | None = None, text: tuple[str, ...] = ()) -> pd.DataFrame:
        """Run a query and return its result as a DataFrame (columnar, through Arrow), every
        column coerced (parsers/coerce.py): the ``text`` columns to strings, all others to
        int64, counting the values that were not numbers into ``warnings``.

        With ``split`` (a rowid table named in the query) the SQL carries a ``{rowid}``
        placeholder and is read by :meth:`scan`.
        """
        from tracetriage.parsers import coerce

        if split is None:
            tables = [self._fetch(sql)]
        else:
            tables = self.scan(sql, split, lambda t: t)
        tables = [_decoded_text(t, text) for t in tables]
        try:
            # A chunk whose column was all NULL comes back typed null: promote to the others.
            table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")
            df = table.to_pandas(split_blocks=True, self_destruct=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            # chunks typed differently (text in one of them): combine as Python objects, coerced below
            df = pd.concat([t.to_pandas() for t in tables], ignore_index=True)
        source = _source_name(sql)
        for col in df.columns:
            if col in text:
                if df[col].dtype == object or df[col].dtype.kind not in "OSU":
                    df[col] = np.array([None if v is None else coerce.text(v) for v in df[col].to_numpy()], dtype=object)
            else:
                df[col] = coerce.int64(df[col].to_numpy(), f"{source}.{col}", self.warnings)
        return df

    def scan(self, sql: str, table: str, convert, chunk_rows: int = 1_000_000) -> list:
        """Read a big table in rowid ranges on parallel connections, converting each
        Arrow chunk (in its reader thread) at once, so the raw rows of at most one chunk
        per reader are alive at a time. ``sql`` has a ``{rowid}`` placeholder; results
        come back in rowid order."""
        ranges = [("1=1", 0, 0)] if table in self.views else self._chunks(table, chunk_rows)  # a view has no rowid ranges
        return self._converted(sql, ranges, convert)

    def _converted(self, sql: str, ranges: list, convert) -> list:
        """Each range fetched and converted on the reader threads, results in rowid order."""
        return thread_map(lambda r: convert(self._fetch(sql.replace("{rowid}", r[0]))), ranges, MAX_READERS)

    def rowid_ranges(self, table: str, chunk_rows: int) -> list[tuple[str, int, int]]:
        """The table's rowid ranges of about ``chunk_rows`` rows: (condition, offset, width)."""
        return self._chunks(table, chunk_rows)

    def fetch(self, sql: str) -> pa.Table:
        """One query's rows as an Arrow table."""
        return self._fetch(sql)

    def column_expr(self, table: str, column: str, null: int) -> str:
        """A column in a select list with ``null`` for its NULLs, NOT NULL declared or not: a
        damaged file holds NULLs anyway, and every reader (the b-tree one too) reads them
        alike; ``null`` itself where the table lacks the column."""
        if not self.has_column(table, column):
            return str(int(null))
        return f'COALESCE("{column}", {int(null)})'

    def scan_columns(self, table: str, columns: dict[str, tuple[str, int]], convert,
                     chunk_rows: int = 1_000_000) -> dict[str, np.ndarray]:
        """``convert`` (an Arrow table of int64 columns in, a dict of equal-length numpy
        arrays out) over a big table, gathered into one array per key in rowid order.
        ``columns`` maps the names ``convert`` reads to (table column, value of a NULL).

        The table's b-tree pages are decoded directly where it is the plain case
        (parsers/btree.py). Otherwise it is read like :meth:`scan`, each chunk's arrays
        copied, in its reader thread, into one array per key allocated for the table's
        whole rowid span, so no concatenation (a second copy of every column) follows.
        Rowids of an export are dense; gaps left by deleted rows are closed up afterwards.
        ``np.empty`` only reserves address space: pages a sparse span never fills are
        never touched."""
        from tracetriage.parsers import btree

        direct = btree.read_columns(self, table, columns, convert)
        if direct is not None:
            return direct
        select = ", ".join(f"{self.column_expr(table, c, null)} AS {name}" for name, (c, null) in columns.items())
        sql = f'SELECT {select} FROM "{table}" WHERE {{rowid}}'
        ranges = [("1=1", 0, 0)] if table in self.views else self._chunks(table, chunk_rows)
        capacity = ranges[-1][1] + ranges[-1][2]
        if len(ranges) == 1 or capacity > self.most_rows:  # a span wider than the file has rows: sparse
            return concat_columns(self._converted(sql, ranges, convert))
        span = SpanColumns(capacity)
        counts = [0] * len(ranges)

        def run(k: int) -> None:
            cond, offset, width = ranges[k]
            part = convert(self._fetch(sql.replace("{rowid}", cond)))
            n = len(next(iter(part.values()))) if part else 0
            if n > width:
                raise TraceFormatError(self.path, f"corrupt SQLite file ({table} has more rows than rowids in {cond})")
            span.put(part, slice(offset, offset + n))
            counts[k] = n

        thread_map(run, range(len(ranges)), MAX_READERS)
        release_freed()  # the reader threads' Arrow batches, freed into arenas glibc does not trim itself
        total = sum(counts)
        out = span.result()
        if total == capacity:
            return out
        # Deleted rows left holes: move each range's rows down behind the previous ones.
        at = 0
        for (_, offset, _), n in zip(ranges, counts):
            if offset != at:
                for col in out.values():
                    if not is_one_value_view(col):
                        col[at:at + n] = col[offset:offset + n]  # numpy buffers overlapping copies
            at += n
        return {c: (v[:total].copy() if total < 0.75 * capacity and not is_one_value_view(v) else v[:total])
                for c, v in out.items()}

    @property
    def size(self) -> int:
        """The file's size in bytes when it was opened (0 if it could not be read)."""
        return self._size

    @property
    def most_rows(self) -> int:
        """More rows than any table of this file can hold: a row takes at least 8 bytes on disk."""
        return max(1, self._size // 8)

    def _fetch(self, sql: str) -> pa.Table:
        """One query as an Arrow table on its own ADBC connection (sqlite3 fallback).

        A query over a view goes through sqlite3 under a time budget (a progress handler):
        a view can recurse or sort without end, and an ADBC query cannot be interrupted."""
        adbc = None
        if self._size >= ADBC_MIN_BYTES:
            try:
                import adbc_driver_sqlite.dbapi as adbc
            except ImportError:
                pass
        over_view = bool(self.views) and any(re.search(rf'(?<![\w"]){re.escape(v)}(?![\w"])|"{re.escape(v)}"', sql)
                                             for v in self.views)
        if over_view:
            adbc = None
        if adbc is not None:
            try:
                con = adbc.connect(self.uri)
                try:
                    cur = con.cursor()
                    # one Arrow batch per range (the driver's default is 1,024 rows): its
                    # columns then convert to numpy without a copy
                    cur.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
                    cur.execute(sql)
                    from tracetriage.parsers import coerce

                    return coerce.utf8_columns(cur.fetch_arrow_table())  # a flipped bit in a text cell
                finally:
                    con.close()
            except Exception as exc:  # noqa: BLE001
                if "malformed" in str(exc) or "not a database" in str(exc):
                    raise TraceFormatError(self.path, f"corrupt SQLite file ({str(exc).strip()})") from None
        con = _connect(self.uri)
        budget = VIEW_TIME_LIMIT_S if over_view else SQL_TIME_LIMIT_S
        deadline = time.monotonic() + budget
        con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 100_000)
        # A query can yield no more rows than the file could store (a row takes bytes on disk):
        # more means a recursive or exploding view, stopped before it exhausts memory.
        cap = max(1_000_000, self.most_rows)
        try:
            cur = con.execute(sql)
            names = [d[0] for d in cur.description]
            rows = []
            while batch := cur.fetchmany(50_000):
                rows.extend(batch)
                if len(rows) > cap:
                    raise TraceFormatError(self.path, f"a query yields more than {cap:,} rows, more than the file can hold "
                                                      "(a recursive or exploding view?): stopped")
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise TraceFormatError(self.path, f"a query ran past {budget:g} s (a pathological view or "
                                                  "schema?): stopped") from None
            raise TraceFormatError(self.path, f"query failed: {exc}") from None
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"query failed: {exc}") from None
        except MemoryError:
            raise TraceFormatError(self.path, "a query returned more rows than fit in memory") from None
        finally:
            con.close()
        cols = list(zip(*rows)) if rows else [[] for _ in names]
        return pa.table({n: _column(c) for n, c in zip(names, cols)})

    def rowid_span(self, table: str) -> tuple[int, int] | None:
        """The table's lowest and highest rowid; None when it is empty or cannot say."""
        try:
            # Two queries: SQLite answers a lone min() or max() on rowid from the b-tree ends.
            self._arm(table)
            lo = self.conn.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
            hi = self.conn.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
        except sqlite3.DatabaseError:
            return None
        return None if lo is None or hi is None else (lo, hi)

    def _chunks(self, table: str, chunk_rows: int | None = None) -> list[tuple[str, int, int]]:
        """Rowid ranges of a table as (condition, offset of the range in the rowid span, width)."""
        span = self.rowid_span(table)
        if span is None or span[1] - span[0] < PARALLEL_MIN_ROWS:
            return [("1=1", 0, 0)]
        lo, hi = span
        n = max(1, min(os.cpu_count() or 1, MAX_READERS))
        if chunk_rows:
            # no more ranges than the file could fill (a row takes at least 8 bytes on disk),
            # however far apart sparse rowids lie
            most = -(-self.most_rows // chunk_rows) + n
            n = max(n, min(-(-(hi - lo + 1) // chunk_rows), most, MAX_CHUNKS))
        edges = [lo - 1 + (hi - lo + 1) * i // n for i in range(n + 1)]
        return [(f"rowid > {a} AND rowid <= {b}", a - edges[0], b - a) for a, b in itertools.pairwise(edges)]


class SpanColumns:
    """One array per column over a table's whole rowid span, filled part by part from the
    reader threads (a part's arrays are copied in and dropped): the first part fixes each
    column's dtype, and ``np.empty`` only reserves address space, so rows a sparse or
    holed span never holds cost no memory. A column whose parts are all zero-stride views of
    one value (``tracetriage.model.one_value_view``: the pid of a one-process capture) stays one
    value, and becomes an array, filled with it, only when a part holds another."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._arrays: dict[str, np.ndarray] = {}
        self._one: dict[str, np.generic] = {}  # column -> the one value every part put so far held
        self._order: list[str] = []
        self.lock = threading.Lock()

    def put(self, part: dict[str, np.ndarray], at) -> None:
        """Copy ``part`` (equal-length arrays) into the rows ``at`` (a slice or row indices)."""
        with self.lock:
            if not self._order:
                self._order = list(part)
                for c, v in part.items():
                    if is_one_value_view(v):
                        self._one[c] = v[0]
                    else:
                        self._arrays[c] = np.empty(self.capacity, dtype=v.dtype)
            for c in [c for c, one in self._one.items() if not (is_one_value_view(part[c]) and part[c][0] == one)]:
                arr = np.empty(self.capacity, dtype=self._one[c].dtype)
                arr.fill(self._one.pop(c))  # the rows put so far (and any not yet put that hold it)
                self._arrays[c] = arr
        for c in list(part):
            v = part.pop(c)
            arr = self._arrays.get(c)
            if arr is not None:
                arr[at] = v

    def result(self) -> dict[str, np.ndarray]:
        """The columns, in the first part's order: arrays, or zero-stride views of their one value."""
        return {c: self._arrays[c] if c in self._arrays else np.broadcast_to(self._one[c], (self.capacity,))
                for c in self._order}


def take_rows(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """``values[keep]`` (a boolean mask), a zero-stride view staying one."""
    if is_one_value_view(values):
        return np.broadcast_to(values[0], (int(np.count_nonzero(keep)),))
    return values[keep]


def concat_columns(chunks: list[dict]) -> dict:
    """Column-wise concatenation of dicts of arrays that frees each chunk's column as it
    goes (peak: one extra copy of one column, not of the table). Categorical columns must
    share their categories; a single chunk is returned as is."""
    if not chunks:
        return {}
    out = {}
    for col in list(chunks[0]):
        pieces = [c.pop(col) for c in chunks]
        if len(pieces) == 1:
            out[col] = pieces[0]
        elif all(is_one_value_view(x) for x in pieces) and len({x[0] for x in pieces}) == 1:
            out[col] = np.broadcast_to(pieces[0][:1].copy()[0], (sum(len(x) for x in pieces),))  # still no memory
        elif isinstance(pieces[0], pd.Categorical):
            out[col] = pd.Categorical.from_codes(np.concatenate([np.asarray(x.codes) for x in pieces]),
                                                 categories=pieces[0].categories)
        else:
            out[col] = np.concatenate([np.asarray(x) for x in pieces])
        del pieces
    return out


def _decoded_text(table: pa.Table, text: tuple[str, ...]) -> pa.Table:
    """Text columns (blobs too) as valid UTF-8: see coerce.utf8_columns."""
    from tracetriage.parsers import coerce

    return coerce.utf8_columns(table, text)


def _connect(uri: str) -> sqlite3.Connection:
    con = sqlite3.connect(uri, uri=True)
    con.text_factory = lambda b: b.decode("utf-8", "replace")  # invalid UTF-8 in a string table is not fatal
    deadline = time.monotonic() + SQL_TIME_LIMIT_S
    con.set_progress_handler(lambda: 1 if time.monotonic() > deadline else 0, 1_000_000)
    return con


def _source_name(sql: str) -> str:
    m = re.search(r'\bFROM\s+"?([\w]+)', sql, re.IGNORECASE)
    return m.group(1) if m else "query"


def _column(values) -> pa.Array:
    """An Arrow column from Python values; mixed types (SQLite allows them) become text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())
