"""The kernel and runtime tables of an Nsight Systems export read in time chunks, for captures
too big for the whole-table model (issue 36, item 3; docs/large_captures.md).

A table is read in rowid order, a segment of b-tree leaves at a time (parsers/btree.py; SQL
rowid ranges where the b-tree reader steps aside), and its rows are handed on in **start
order** with a *watermark*: after a chunk is handed on, every row with a start below the
watermark has been handed on. Exports are in start order but for a few rows written late (a
thread's buffered rows, a small export's whole thread block: ~7,000 rows in the real 2xH100
exports): a row is held back until ``lookahead`` rows written after it have been read, and
goes when it starts below the smallest start among them. A row that starts below a watermark
already passed (written more than ``lookahead`` rows after its place) makes the stream stop
with :class:`NotStreamable`; the caller then takes the whole-table path.
"""

from __future__ import annotations

import numpy as np

from tracetriage.parsers import btree
from tracetriage.parsers.nsys_tables import KERNEL, RUNTIME, pid_of

CHUNK_ROWS = 1 << 20  # rows per part when SQLite reads the table (the b-tree reader's parts are its segments)
LOOKAHEAD_ROWS = 1 << 20  # a row may be written this many rows after its place (module docstring)
DEVICE_BITS = 20  # a device key is pid << DEVICE_BITS | (ordinal + 1)


class NotStreamable(Exception):
    """The export (or this part of the analysis) cannot be streamed exactly: the reason."""


class SteppedAside(NotStreamable):
    """The b-tree reader met a record it does not decode (damage, or a value that is not the plain case)
    after parts were handed on: the pass is read again through SQLite (``direct=False``), which reads
    what the whole-table path reads and fails with the same one-line error where the file is damaged."""


def table_parts(db, table: str, columns: dict[str, tuple[str, int]], chunk_rows: int = CHUNK_ROWS, direct: bool = True):
    """The table's columns (int64, NULL read as the given value) in rowid order, parts of at most ``chunk_rows``;
    ``direct``: decoded from the b-tree pages where the table is the plain case (else SQLite reads it)."""
    if not db.has(table):
        return
    for part in _raw_parts(db, table, columns, chunk_rows, direct):
        n = len(part["start"])
        for k in range(0, n, chunk_rows):
            yield part if n <= chunk_rows else {c: v[k:k + chunk_rows] for c, v in part.items()}


def _raw_parts(db, table: str, columns: dict[str, tuple[str, int]], chunk_rows: int, direct: bool):
    parts = btree.iter_columns(db, table, columns) if direct else None
    if parts is not None:
        try:
            yield from read_ahead(parts)
        except btree.Unsupported:
            raise SteppedAside(f"{table}: a b-tree page the direct reader does not decode") from None
        return
    select = ", ".join(f"{db.column_expr(table, c, null)} AS {name}" for name, (c, null) in columns.items())
    sql = f'SELECT {select} FROM "{table}" WHERE {{rowid}}'
    ranges = [("1=1", 0, 0)] if table in db.views else db.rowid_ranges(table, chunk_rows)
    for cond, _, _ in ranges:
        tbl = db.fetch(sql.replace("{rowid}", cond))
        part = {name: _ints(tbl.column(name), table, name) for name in columns}
        if len(part["start"]):
            yield part


READ_AHEAD = 2  # parts a reader thread decodes ahead of the analysis


def read_ahead(parts, depth: int = READ_AHEAD):
    """The items of ``parts``, produced by a thread of its own up to ``depth`` ahead (the b-tree reader's
    reads and decoding release the GIL: they overlap the analysis of the parts before); its exception,
    raised here. Stopping early (the consumer's exception, or closing) stops the thread."""
    import queue
    import threading

    out: queue.Queue = queue.Queue(depth)
    stop = threading.Event()
    done = object()

    def put(item) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for part in parts:
                if not put((part, None)):
                    return
            put((done, None))
        except BaseException as e:  # handed to the consumer
            put((done, e))
        finally:
            if stop.is_set() and hasattr(parts, "close"):
                parts.close()

    thread = threading.Thread(target=produce, name="tracetriage-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = out.get()
            if item is done:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()


def _ints(col, table: str, name: str) -> np.ndarray:
    import pyarrow as pa

    if pa.types.is_null(col.type) and not len(col):  # an empty range: SQLite gives its columns no type
        return np.empty(0, np.int64)
    if not pa.types.is_integer(col.type):
        raise NotStreamable(f"{table}.{name} holds values that are not integers")
    return np.asarray(col.to_numpy(), np.int64)


def in_start_order(parts, key: str = "start", lookahead: int = LOOKAHEAD_ROWS):
    """(part, watermark) pairs: the rows of ``parts`` (dicts of equal-length arrays in table order) in start
    order, each with the bound below which every row has now been handed on (the last is ``None``: all).
    A row is held until ``lookahead`` rows written after it have been read: the watermark is the smallest
    start among the newest ``lookahead`` rows, so a row written up to that many rows late still comes in order.
    What is handed on comes in pieces no larger than the largest part read (the last flush is ``lookahead`` rows)."""
    held: list[dict] = []  # parts read and not yet handed on in full, each in start order
    passed = None  # the last watermark handed on
    recent: list[tuple[int, int]] = []  # (smallest start, rows) of the newest parts, covering lookahead rows
    most = 1  # the largest part read: what is handed on comes in pieces of at most this many rows
    for part in parts:
        n = len(part[key])
        if not n:
            continue
        low, most = int(part[key].min()), max(most, n)
        if passed is not None and low < passed:
            raise NotStreamable(f"a row starts at {low}, before rows already streamed (up to {passed}): "
                                f"written more than {lookahead:,} rows after its place")
        recent.append((low, n))
        while len(recent) > 1 and sum(r[1] for r in recent[1:]) >= lookahead:
            recent.pop(0)
        held.append(_sorted(part, key))
        if sum(r[1] for r in recent) < lookahead:
            continue  # not yet lookahead rows after the held ones
        mark = min(r[0] for r in recent)
        cuts = [int(np.searchsorted(h[key], mark, "left")) for h in held]  # rows below every newer row's start go
        if any(cuts):
            out = _sorted({c: np.concatenate([h[c][:k] for h, k in zip(held, cuts)]) for c in part}, key)
            held = [h if not k else {c: v[k:] for c, v in h.items()} for h, k in zip(held, cuts) if k < len(h[key])]
            passed = mark
            yield from _pieces(out, key, mark, most)
    if held:
        yield from _pieces(_sorted({c: np.concatenate([h[c] for h in held]) for c in held[0]}, key), key, None, most)


def _pieces(rows: dict, key: str, mark, most: int):
    """``rows`` (in start order) in pieces of at most ``most`` rows, each with its watermark: the next
    piece's first start (every row below it is in this piece or an earlier one), the last with ``mark``."""
    n = len(rows[key])
    for k in range(0, n, most):
        last = k + most >= n
        yield ({c: v[k:k + most] for c, v in rows.items()} if n > most else rows), (mark if last else int(rows[key][k + most]))


def _sorted(part: dict, key: str) -> dict:
    start = part[key]
    if (start[1:] >= start[:-1]).all():
        return part
    order = np.argsort(start, kind="stable")
    return {c: v[order] for c, v in part.items()}


def kernel_parts(db, strings, chunk_rows: int = CHUNK_ROWS, direct: bool = True, correlation: bool = False):
    """The kernel table's rows with timestamps (CUPTI writes start = end = 0 for rows it could not time)
    as start, end, device key (:data:`DEVICE_BITS`), name (a StringIds category code, -1 none) and, asked for,
    correlation (-1 none), in table order."""
    name_col = "shortName" if db.has_column(KERNEL, "shortName") else "demangledName"
    columns = {"start": ("start", 0), "end": ("end", 0), "dev": ("deviceId", -1), "gpid": ("globalPid", 0),
               "name": (name_col, -1)}
    if correlation:
        columns["correlation"] = ("correlationId", -1)
    for part in table_parts(db, KERNEL, columns, chunk_rows, direct):
        timed = (part["start"] > 0) | (part["end"] > 0)
        dev = part["dev"]
        if dev.size and (dev.min() < -1 or dev.max() >= (1 << DEVICE_BITS) - 1):
            raise NotStreamable("a device id outside the streamed range")
        out = {"start": part["start"], "end": part["end"],
               "device": pid_of(part["gpid"]) << DEVICE_BITS | (dev + 1), "name": strings.codes_of(part["name"])}
        if correlation:
            out["correlation"] = part["correlation"]
        yield out if timed.all() else {c: v[timed] for c, v in out.items()}


def api_parts(db, chunk_rows: int = CHUNK_ROWS, direct: bool = True, correlation: bool = True):
    """The runtime table's rows as start, end, pid, name (a StringIds id) and, asked for, correlation, in
    table order."""
    columns = {"start": ("start", 0), "end": ("end", 0), "gtid": ("globalTid", 0), "name": ("nameId", -1)}
    if correlation:
        columns["correlation"] = ("correlationId", -1)
    for part in table_parts(db, RUNTIME, columns, chunk_rows, direct):
        out = {"start": part["start"], "end": part["end"], "pid": pid_of(part["gtid"]), "name": part["name"]}
        if correlation:
            out["correlation"] = part["correlation"]
        yield out


def device_of(key: int) -> tuple[int, int]:
    """(pid, ordinal) of a device key."""
    return key >> DEVICE_BITS, (key & ((1 << DEVICE_BITS) - 1)) - 1
