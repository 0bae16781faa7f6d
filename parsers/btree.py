"""Integer columns of a big SQLite table read from its b-tree pages (``parsers/_btree.c``).

SQLite's own scan of a 10M-row table spends most of its time in its virtual machine, one
call per value; ADBC adds its own per-value cost on top (~45 ns). This reader walks the
table's b-tree itself: the interior pages name the leaf pages in rowid order, runs of
leaves are read with ``pread`` into one buffer per segment, and the C part decodes each
leaf's records into int64 columns with the GIL released, on two threads.

It serves only the plain case and says so by returning ``None``: a rowid table with no
generated columns, values that are integers or NULL, records that fit their page, dense
rowids, every page where the file format puts it. Anything else (a text value in an
integer column, a WITHOUT ROWID table, a truncated or damaged file) sends the caller to
the SQLite path, which reads, coerces and reports exactly as before. The results are the
same values SQL returns, compared on every real export and on damaged copies by the tests.
The file is opened read-only, like SQLite's ``immutable=1``: a ``-wal`` beside it is not read.
"""

from __future__ import annotations

import os
import re
import threading

import numpy as np
import pyarrow as pa

from tracetriage.errors import TraceFormatError
from tracetriage.memory import release_freed
from tracetriage.parsers.sqlite import SpanColumns, take_rows
from tracetriage.threads import thread_map

try:
    from tracetriage.parsers import _btree
except ImportError:  # built without a C compiler: SQLite reads everything
    _btree = None

MIN_BYTES = 4 << 20  # smaller files are read whole by the stdlib cursor (parsers/sqlite.py: ADBC_MIN_BYTES)
SEGMENT_BYTES = 4 << 20  # leaf pages read and decoded per step of a reader thread (they stay in its cache)
MAX_READERS = 2
MAX_DEPTH = 20  # a b-tree of 4 KB pages is 4 deep at a billion rows; deeper is a loop
LEAF, INTERIOR = 0x0D, 0x05


class Unsupported(Exception):
    """Not the plain case: the table is read through SQLite instead."""


def available() -> bool:
    return _btree is not None


def read_columns(db, table: str, columns: dict[str, tuple[str, int]], convert) -> dict[str, np.ndarray] | None:
    """``convert`` applied to the table's columns, segment by segment, its results gathered
    into one array per key in rowid order; ``None`` where the table is not the plain case.

    ``columns`` maps each name ``convert`` reads to (table column, value of a NULL); a
    column the table lacks reads as its NULL value throughout."""
    if _btree is None or db.size < MIN_BYTES or table in db.views:
        return None
    try:
        plan = _Plan(db, table, columns)
        with _File(db.path) as fh:
            return plan.read(fh, convert)
    except (Unsupported, TraceFormatError):
        # TraceFormatError: a schema query the SQLite library cannot answer (table_xinfo is
        # 3.26+) or a damaged file; the SQLite path then reads or reports it as before
        release_freed()
        return None


def iter_columns(db, table: str, columns: dict[str, tuple[str, int]]):
    """The table's columns (as :func:`read_columns` names them) a segment of leaves at a time, in rowid
    order, each part its own arrays (parsers/nsys_stream.py); ``None`` where the table is not the plain
    case. A damage found only while reading stops the stream with :class:`Unsupported`."""
    if _btree is None or db.size < MIN_BYTES or table in db.views:
        return None
    try:
        plan = _Plan(db, table, columns)
        fh = _File(db.path).__enter__()
        leaves = plan.leaves(fh)
    except (Unsupported, TraceFormatError):
        return None
    return plan.parts(fh, leaves)


def _repeats(pages: np.ndarray) -> bool:
    """Whether a page number occurs twice (the numbers are within the file's pages: counted, not sorted;
    ``np.unique`` of a 10M-kernel table's leaves was 45 ms a pass)."""
    return bool((np.bincount(pages) > 1).any())


class _File:
    """The user's file, opened read-only for ``pread``."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        try:
            self.fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            raise Unsupported from None
        return self

    def __exit__(self, *exc):
        os.close(self.fd)

    def read_into(self, view: memoryview, offset: int) -> None:
        """Fill ``view`` from ``offset``; a file shorter than that is not the plain case."""
        done = 0
        while done < len(view):
            got = os.preadv(self.fd, [view[done:]], offset + done)
            if got <= 0:
                raise Unsupported
            done += got


class _Plan:
    """Where the table's values lie: its root page, the page geometry and, for each column
    asked for, its field number in a record."""

    def __init__(self, db, table: str, columns: dict[str, tuple[str, int]]):
        root, sql = db.tables.get(table, (None, None))
        if not isinstance(root, int) or root < 2:
            raise Unsupported  # a virtual table, or a schema row that is not one table
        self.root = root
        if re.search(r"\bWITHOUT\s+ROWID\b", sql or "", re.IGNORECASE):
            raise Unsupported  # its b-tree is an index, keyed by the primary key
        # cid, name, type, notnull, dflt_value, pk, hidden
        info = db.rows(f'PRAGMA table_xinfo("{table}")')
        if any(r[6] for r in info):
            raise Unsupported  # generated or hidden columns: field numbers are not column numbers
        field = {r[1]: (r[0], r[4] is None, r[5]) for r in info}
        self.names, self.fields, self.nulls, self.missing, self.constants = [], [], [], [], {}
        for name, (column, null) in columns.items():
            if column not in field:
                self.constants[name] = null
                continue
            cid, no_default, pk = field[column]
            if pk:
                raise Unsupported  # an INTEGER PRIMARY KEY is stored as the rowid, not in the record
            self.names.append(name)
            self.fields.append(cid)
            self.nulls.append(null)
            self.missing.append(no_default)  # a record older than the column: NULL, or its default
        if not self.names:
            raise Unsupported
        self.fields = np.array(self.fields, np.int32)
        self.nulls = np.array(self.nulls, np.int64)
        self.missing = np.array(self.missing, np.uint8)
        # page geometry, from the header the Database read
        self.page, self.usable = db.page_size, db.page_size - db.reserved
        if self.page < 512 or self.page & (self.page - 1) or self.usable < 480:
            raise Unsupported
        self.pages = db.size // self.page
        self.db = db
        self.table = table
        self._local = threading.local()

    def _page(self, fh: _File, number: int) -> bytearray:
        if not 2 <= number <= self.pages:
            raise Unsupported
        buf = bytearray(self.page)
        fh.read_into(memoryview(buf), (number - 1) * self.page)
        return buf

    def leaves(self, fh: _File) -> np.ndarray:
        """The table's leaf page numbers in rowid order, from its interior pages. All
        leaves of a b-tree lie at one depth, so one page of a level tells whether the
        level is made of leaves (each is checked again when it is decoded)."""
        level = np.array([self.root], np.int64)
        visited = 1
        for _ in range(MAX_DEPTH):
            kind, _ = _btree.children(self._page(fh, int(level[0])), self.usable)
            if kind == LEAF:
                return level
            if kind != INTERIOR:
                raise Unsupported
            below = []
            for number in level.tolist():
                kind, kids = _btree.children(self._page(fh, number), self.usable)
                if kind != INTERIOR:
                    raise Unsupported
                below.append(np.frombuffer(kids, ">u4"))
            level = np.concatenate(below).astype(np.int64)
            visited += len(level)
            # A page named twice, or more pages than the file has: a loop or a damaged tree,
            # given up before it costs more reads than the file has pages.
            if visited > self.pages or level.min() < 2 or level.max() > self.pages or _repeats(level):
                raise Unsupported
        raise Unsupported

    def read(self, fh: _File, convert) -> dict[str, np.ndarray]:
        leaves = self.leaves(fh)
        span = self.db.rowid_span(self.table)
        if span is None:
            raise Unsupported  # an empty table: nothing to gain
        lo, hi = span
        capacity = hi - lo + 1
        if capacity > self.db.most_rows:
            raise Unsupported  # sparse rowids: the SQL path reads them by range
        step = max(1, SEGMENT_BYTES // self.page)
        segments = [leaves[i:i + step] for i in range(0, len(leaves), step)]
        gathered = SpanColumns(capacity)
        present = np.zeros(capacity, np.bool_)

        def run(pages: np.ndarray) -> int:
            part, rowids = self._decode(fh, pages, convert)
            n = len(rowids)
            if not n:
                return 0
            if rowids[0] < lo or rowids[-1] > hi or not (rowids[1:] > rowids[:-1]).all():
                raise Unsupported  # rowids out of order or outside the table's: a damaged tree
            dense = rowids[-1] - rowids[0] == n - 1
            at = slice(rowids[0] - lo, rowids[-1] - lo + 1) if dense else rowids - lo
            with gathered.lock:
                if present[at].any():
                    raise Unsupported  # a leaf reached twice
                present[at] = True
            gathered.put(part, at)
            return n

        total = sum(thread_map(run, segments, MAX_READERS))
        release_freed()
        out = gathered.result()
        if not out:
            raise Unsupported
        if total == capacity:
            return out
        return {c: take_rows(v, present) for c, v in out.items()}  # deleted rows left holes in the rowids

    def parts(self, fh: _File, leaves: np.ndarray):
        """Each segment's columns, copied out of the scratch buffers, in rowid order (one thread)."""
        step = max(1, SEGMENT_BYTES // self.page)
        last = None
        try:
            for i in range(0, len(leaves), step):
                part, rowids = self._decode(fh, leaves[i:i + step], lambda tbl: tbl)
                if not len(rowids):
                    continue
                if not (rowids[1:] > rowids[:-1]).all() or (last is not None and rowids[0] <= last):
                    raise Unsupported  # rowids out of order: a damaged tree
                last = int(rowids[-1])
                yield {name: np.array(part.column(name).to_numpy()) for name in part.column_names}
        finally:
            fh.__exit__(None, None, None)

    def _scratch(self, name: str, n: int, dtype) -> np.ndarray:
        """A buffer of this reader thread, reused from segment to segment: fresh ones cost a
        page fault per 4 KB written (~10 ns a row). What ``convert`` returns may view it, so
        its results are copied out before the thread decodes its next segment."""
        have = getattr(self._local, name, None)
        if have is None or len(have) < n:
            have = np.empty(max(n, 1), dtype)
            setattr(self._local, name, have)
        return have[:n]

    def _decode(self, fh: _File, pages: np.ndarray, convert) -> tuple[dict, np.ndarray]:
        """One segment of leaves: read in runs of consecutive pages, decoded, converted."""
        buf = self._scratch("pages", len(pages) * self.page, np.uint8)
        view = memoryview(buf)
        if pages.min() < 2 or pages.max() > self.pages:
            raise Unsupported
        cuts = np.flatnonzero(np.diff(pages) != 1) + 1
        for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(pages)].tolist()):
            fh.read_into(view[a * self.page:b * self.page], (int(pages[a]) - 1) * self.page)
        n = _btree.leaf_cells(buf, len(pages), self.page, self.usable)
        if n < 0:
            raise Unsupported
        values = self._scratch("values", len(self.names) * n, np.int64).reshape(len(self.names), n)
        rowids = self._scratch("rowids", n, np.int64)
        got = _btree.decode(buf, len(pages), self.page, self.usable, self.fields, self.nulls, self.missing,
                            values, rowids)
        del buf, view
        if got != n:
            raise Unsupported
        table = {name: values[j] for j, name in enumerate(self.names)}
        table.update({name: np.full(n, null, np.int64) for name, null in self.constants.items()})
        return convert(pa.table(table)), rowids
