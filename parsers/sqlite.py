"""Read-only, columnar access to a user's SQLite file.

The file is opened with ``mode=ro`` (never written, no journal created) and its
tables and columns are discovered from ``sqlite_master`` / ``PRAGMA table_info``:
profiler schemas change between versions, so nothing is assumed to exist.
Bulk reads go through ADBC straight into Arrow (no Python object per row); the
stdlib ``sqlite3`` cursor is the fallback and serves the small metadata queries.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path

import pandas as pd
import pyarrow as pa

from tracetriage.errors import TraceFormatError

SQLITE_MAGIC = b"SQLite format 3\x00"


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
        self._adbc = None

    def close(self) -> None:
        self.conn.close()
        if self._adbc is not None:
            self._adbc.close()

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

    def frame(self, sql: str) -> pd.DataFrame:
        """Run a query and return its result as a DataFrame, columnar when possible.

        Every selected numeric column should be wrapped in COALESCE by the caller so
        the Arrow types are stable (SQLite is dynamically typed).
        """
        table = self._arrow(sql)
        if table is not None:
            return table.to_pandas()
        try:
            cur = self.conn.execute(sql)
            names = [d[0] for d in cur.description]
            return pd.DataFrame.from_records(cur.fetchall(), columns=names)
        except sqlite3.DatabaseError as exc:
            raise TraceFormatError(self.path, f"query failed: {exc}") from None

    def _arrow(self, sql: str) -> pa.Table | None:
        try:
            if self._adbc is None:
                import adbc_driver_sqlite.dbapi as adbc

                self._adbc = adbc.connect(self.uri)
            cur = self._adbc.cursor()
            try:
                cur.execute(sql)
                return cur.fetch_arrow_table()
            finally:
                cur.close()
        except ImportError:
            return None
        except Exception as exc:  # noqa: BLE001 - ADBC raises its own hierarchy
            text = str(exc)
            if "malformed" in text or "not a database" in text:
                raise TraceFormatError(self.path, f"corrupt SQLite file ({text.strip()})") from None
            # Type inference trouble or an unusual build: the row cursor still works.
            return None


def is_sqlite(head: bytes) -> bool:
    return head.startswith(SQLITE_MAGIC)
