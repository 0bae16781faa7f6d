"""Read-only, columnar access to a user's SQLite file.

The file is opened with ``mode=ro`` (never written, no journal created) and its
tables and columns are discovered from ``sqlite_master`` / ``PRAGMA table_info``:
profiler schemas change between versions, so nothing is assumed to exist.
Bulk reads go through ADBC straight into Arrow (no Python object per row), one
path for every query (``_fetch``); the stdlib ``sqlite3`` cursor is its fallback and
serves the small metadata queries.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from pathlib import Path

import pandas as pd
import pyarrow as pa

from tracetriage.errors import TraceFormatError

# Arrow's default jemalloc/mimalloc pools keep freed memory; between the big tables of a
# trace the system allocator hands it back, which cut peak RSS by ~20% and time by ~30%
# on the 1M-kernel benchmark. ARROW_DEFAULT_MEMORY_POOL still wins when set.
if not os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
    pa.set_memory_pool(pa.system_memory_pool())

SQLITE_MAGIC = b"SQLite format 3\x00"
PARALLEL_MIN_ROWS = 200_000  # below this one connection is as fast
MAX_READERS = 4


def readonly_uri(path: str | Path) -> str:
    return "file:" + urllib.parse.quote(str(Path(path).resolve())) + "?mode=ro"


class Database:
    """A read-only SQLite file with its schema discovered up front."""

    def __init__(self, path: str | Path):
        self.path = str(path)
        self.uri = readonly_uri(path)
        try:
            self.conn = sqlite3.connect(self.uri, uri=True)
            rows = self.conn.execute(
                "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view')"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"not a readable SQLite database ({exc})") from None
        self.objects = {name: kind for name, kind in rows}
        self._columns: dict[str, list[str]] = {}
        self._notnull: dict[str, set[str]] = {}

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
            self._notnull[table] = {r[1] for r in info if r[3]}
        return self._columns[table]

    def not_null(self, table: str, column: str) -> bool:
        """Whether the schema declares the column NOT NULL (SQLite enforces it on insert)."""
        self.columns(table)
        return column in self._notnull.get(table, set())

    def has_column(self, table: str, column: str) -> bool:
        return self.has(table) and column in self.columns(table)

    def scalar(self, sql: str, default=None):
        try:
            row = self.conn.execute(sql).fetchone()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"query failed: {exc}") from None
        return default if row is None or row[0] is None else row[0]

    def rows(self, sql: str, params=()) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"query failed: {exc}") from None

    def frame(self, sql: str, split: str | None = None) -> pd.DataFrame:
        """Run a query and return its result as a DataFrame (columnar, through Arrow).

        Every selected numeric column should be wrapped in COALESCE by the caller so
        the Arrow types are stable (SQLite is dynamically typed). With ``split`` (a
        rowid table named in the query) the SQL carries a ``{rowid}`` placeholder and
        is read by :meth:`scan`.
        """
        if split is None:
            tables = [self._fetch(sql)]
        else:
            tables = self.scan(sql, split, lambda t: t)
        # A chunk whose column was all NULL comes back typed null: promote to the others.
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")
        return table.to_pandas(split_blocks=True, self_destruct=True)

    def scan(self, sql: str, table: str, convert, chunk_rows: int = 1_000_000) -> list:
        """Read a big table in rowid ranges on parallel connections, converting each
        Arrow chunk (in its reader thread) to compact arrays at once, so the raw rows of
        at most one chunk per reader are alive at a time. ``sql`` has a ``{rowid}``
        placeholder; results come back in rowid order."""
        ranges = self._chunks(table, chunk_rows)
        readers = max(1, min(os.cpu_count() or 1, MAX_READERS, len(ranges)))

        def run(cond):
            return convert(self._fetch(sql.replace("{rowid}", cond)))

        if readers == 1:
            return [run(c) for c in ranges]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(readers) as pool:
            return list(pool.map(run, ranges))

    def _fetch(self, sql: str) -> pa.Table:
        """One query as an Arrow table on its own ADBC connection (sqlite3 fallback)."""
        try:
            import adbc_driver_sqlite.dbapi as adbc
        except ImportError:
            adbc = None
        if adbc is not None:
            try:
                con = adbc.connect(self.uri)
                try:
                    cur = con.cursor()
                    cur.execute(sql)
                    return cur.fetch_arrow_table()
                finally:
                    con.close()
            except Exception as exc:  # noqa: BLE001
                if "malformed" in str(exc) or "not a database" in str(exc):
                    raise TraceFormatError(self.path, f"corrupt SQLite file ({str(exc).strip()})") from None
        con = sqlite3.connect(self.uri, uri=True)
        try:
            cur = con.execute(sql)
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"query failed: {exc}") from None
        finally:
            con.close()
        cols = list(zip(*rows)) if rows else [[] for _ in names]
        return pa.table({n: _column(c) for n, c in zip(names, cols)})

    def _chunks(self, table: str, chunk_rows: int | None = None) -> list[str]:
        try:
            # Two queries: SQLite answers a lone min() or max() on rowid from the b-tree ends.
            lo = self.conn.execute(f'SELECT min(rowid) FROM "{table}"').fetchone()[0]
            hi = self.conn.execute(f'SELECT max(rowid) FROM "{table}"').fetchone()[0]
        except sqlite3.DatabaseError:
            return ["1=1"]
        if lo is None or hi - lo < PARALLEL_MIN_ROWS:
            return ["1=1"]
        n = max(1, min(os.cpu_count() or 1, MAX_READERS))
        if chunk_rows:
            n = max(n, -(-(hi - lo + 1) // chunk_rows))
        edges = [lo - 1 + (hi - lo + 1) * i // n for i in range(n + 1)]
        return [f"rowid > {a} AND rowid <= {b}" for a, b in zip(edges[:-1], edges[1:])]


def _column(values) -> pa.Array:
    """An Arrow column from Python values; mixed types (SQLite allows them) become text."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return pa.array([None if v is None else str(v) for v in values], type=pa.string())
