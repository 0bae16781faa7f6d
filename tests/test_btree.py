"""The b-tree reader (parsers/btree.py, parsers/_btree.c) against SQLite itself: every value
it returns is the value SQL returns, and every table outside its plain case (or a damaged
file) goes back to SQLite rather than yielding other numbers or crashing."""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tracetriage.errors import TraceFormatError
from tracetriage.parsers import btree
from tracetriage.parsers.sqlite import Database

BUNDLE = Path(__file__).resolve().parents[1] / "samples" / "bundles" / "eager_decode" / "trace.sqlite"

pytestmark = pytest.mark.skipif(not btree.available(), reason="the C extension was not built (no compiler at install)")

EDGE_VALUES = [0, 1, -1, 127, -128, 128, -129, 32767, -32768, 32768, 2**23 - 1, -(2**23), 2**23, 2**31 - 1, -(2**31),
               2**31, 2**47 - 1, -(2**47), 2**47, 2**63 - 1, -(2**63)]


def identity(tbl) -> dict:
    return {name: tbl.column(name).to_numpy() for name in tbl.column_names}


def read(path, table, columns, monkeypatch, direct: bool):
    """scan_columns with the b-tree reader allowed or not; also whether it served the table."""
    monkeypatch.setattr(btree, "MIN_BYTES", 0 if direct else 1 << 62)
    served = []
    real = btree.read_columns
    monkeypatch.setattr(btree, "read_columns", lambda *a: served.append(r := real(*a)) or r)
    with Database(path) as db:
        out = db.scan_columns(table, columns, identity)
    return out, bool(served and served[0] is not None)


def same(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        assert np.asarray(a[k]).tolist() == np.asarray(b[k]).tolist(), k


def make(path: Path, page_size: int, schema: str, rows, after: list[str] = (), more_rows=()) -> None:
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA page_size = {page_size}")
    con.execute(schema)
    con.executemany(f"INSERT INTO t VALUES ({','.join('?' * len(rows[0]))})", rows)
    for statement in after:
        con.execute(statement)
    if more_rows:
        con.executemany(f"INSERT INTO t VALUES ({','.join('?' * len(more_rows[0]))})", more_rows)
    con.commit()
    con.close()


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_every_integer_width_and_null_at_every_page_size(page_size, tmp_path, monkeypatch):
    """Serial types 0-6, 8 and 9 (NULL, 1-8 byte integers, the constants 0 and 1) over a
    tree three levels deep at 512-byte pages: the values SQL returns, NULLs as asked."""
    rng = random.Random(page_size)
    rows = [(i, rng.choice(EDGE_VALUES + [None]), rng.choice(EDGE_VALUES), rng.getrandbits(40) - (1 << 39))
            for i in range(30_000)]
    path = tmp_path / "t.sqlite"
    make(path, page_size, "CREATE TABLE t (a INTEGER NOT NULL, b INTEGER, c INTEGER, d INTEGER)", rows)
    columns = {"x": ("d", 0), "y": ("b", -7), "z": ("a", 0), "w": ("c", 0), "gone": ("nosuch", 42)}
    direct, served = read(path, "t", columns, monkeypatch, True)
    assert served
    via_sql, _ = read(path, "t", columns, monkeypatch, False)
    same(direct, via_sql)
    assert direct["y"].tolist() == [-7 if r[1] is None else r[1] for r in rows]
    assert set(direct["gone"].tolist()) == {42}


def test_columns_added_after_rows_and_deleted_rows(tmp_path, monkeypatch):
    """Records written before ALTER TABLE ADD COLUMN are shorter: the new column reads as
    NULL (its value for a NULL), or, where it has a default, the table goes to SQLite."""
    path = tmp_path / "t.sqlite"
    make(path, 4096, "CREATE TABLE t (a INTEGER, b INTEGER)", [(i, i * 3) for i in range(5000)],
         after=["ALTER TABLE t ADD COLUMN c INTEGER", "ALTER TABLE t ADD COLUMN d INTEGER DEFAULT 5",
                "DELETE FROM t WHERE a % 5 = 1"],
         more_rows=[(i, -i, i * 7, i) for i in range(5000, 6000)])
    plain = {"a": ("a", 0), "c": ("c", -1)}
    direct, served = read(path, "t", plain, monkeypatch, True)
    assert served
    same(direct, read(path, "t", plain, monkeypatch, False)[0])
    assert direct["c"][:10].tolist() == [-1] * 10 and len(direct["a"]) == 5000 - 1000 + 1000
    with_default = {"a": ("a", 0), "d": ("d", -1)}
    direct, served = read(path, "t", with_default, monkeypatch, True)
    assert not served
    assert direct["d"][:3].tolist() == [5, 5, 5]


@pytest.mark.parametrize("case", ["real", "text", "blob_overflow", "without_rowid", "integer_primary_key", "view"])
def test_tables_outside_the_plain_case_go_to_sqlite(case, tmp_path, monkeypatch):
    path = tmp_path / "t.sqlite"
    rows = [(i, i * 2, "x" * (5000 if case == "blob_overflow" else 3)) for i in range(3000)]
    schema = {"without_rowid": "CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER, s TEXT) WITHOUT ROWID",
              "integer_primary_key": "CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER, s TEXT)"}.get(
        case, "CREATE TABLE t (a INTEGER, b INTEGER, s TEXT)")
    after = {"real": ["UPDATE t SET b = 2.5 WHERE a = 1500"], "text": ["UPDATE t SET b = 'twelve' WHERE a = 7"],
             "view": ["CREATE VIEW v AS SELECT * FROM t"]}.get(case, [])
    make(path, 4096, schema, rows, after=after)
    table = "v" if case == "view" else "t"
    columns = {"a": ("a", 0), "b": ("b", 0)}
    direct, served = read(path, table, columns, monkeypatch, True)
    assert not served
    # the same values as the SQLite path, text and reals included (converted by the caller)
    assert len(direct["a"]) == 3000


def test_integer_primary_key_elsewhere_in_the_table(tmp_path, monkeypatch):
    """An INTEGER PRIMARY KEY is stored as the rowid (a NULL in the record): the fields
    after it still count it."""
    path = tmp_path / "t.sqlite"
    make(path, 4096, "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER, b INTEGER)",
         [(i + 1, i, -i) for i in range(4000)], after=["DELETE FROM t WHERE id % 3 = 0"])
    columns = {"b": ("b", 0), "a": ("a", 0)}
    direct, served = read(path, "t", columns, monkeypatch, True)
    assert served
    same(direct, read(path, "t", columns, monkeypatch, False)[0])


def _kernel_pages(path: Path) -> tuple[int, list[int]]:
    """Page size and the page numbers of the kernel table's b-tree (via dbstat when built in,
    else its root and what follows it)."""
    con = sqlite3.connect(path)
    page = con.execute("PRAGMA page_size").fetchone()[0]
    try:
        pages = [p for (p,) in con.execute("SELECT pageno FROM dbstat WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'")]
    except sqlite3.DatabaseError:
        root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchone()[0]
        pages = list(range(root, root + 40))
    con.close()
    return page, pages


def _model_or_error(path: str):
    from tracetriage.parsers import nsys

    try:
        trace = nsys.parse(path)
    except TraceFormatError as exc:
        return "error", str(exc)
    return "model", trace


def test_damaged_copies_never_crash_and_never_differ_from_sqlite(tmp_path, monkeypatch):
    """Bytes of the kernel table's pages overwritten at random (page headers, cell pointers,
    record headers, interior child numbers), and the file cut short: the b-tree reader
    either returns what SQLite returns for the same file, or leaves it to SQLite."""
    from tracetriage.parsers import sqlite as tt_sqlite

    monkeypatch.setattr(tt_sqlite, "ADBC_MIN_BYTES", 1 << 62)
    page, pages = _kernel_pages(BUNDLE)
    size = BUNDLE.stat().st_size
    rng = random.Random(13)
    served = []
    real = btree.read_columns
    monkeypatch.setattr(btree, "read_columns", lambda *a: served.append(r := real(*a)) or r)
    outcomes = {"served": 0, "left to sqlite": 0}
    for trial in range(60):
        path = tmp_path / f"damaged{trial}.sqlite"
        shutil.copy(BUNDLE, path)
        with open(path, "r+b") as fh:
            if trial % 10 == 9:
                fh.truncate(rng.randrange(size // 2, size))
            else:
                target = rng.choice(pages)
                for _ in range(rng.choice([1, 3, 20])):
                    # headers and cell pointers sit at the start of a page: aim there half the time
                    at = rng.randrange(0, 64) if rng.random() < 0.5 else rng.randrange(0, page)
                    fh.seek((target - 1) * page + at)
                    fh.write(bytes([rng.randrange(256)]))
        served.clear()
        monkeypatch.setattr(btree, "MIN_BYTES", 0)
        direct = _model_or_error(str(path))
        used = bool(served) and served[0] is not None
        monkeypatch.setattr(btree, "MIN_BYTES", 1 << 62)
        via_sql = _model_or_error(str(path))
        outcomes["served" if used else "left to sqlite"] += 1
        if not used:
            assert direct[0] == via_sql[0]
            continue
        if via_sql[0] == "model" and direct[0] == "model":
            a, b = direct[1].gpu, via_sql[1].gpu
            assert len(a) == len(b), trial
            for col in ("start", "end", "correlation", "stream"):
                assert a[col].tolist() == b[col].tolist(), (trial, col)
    assert outcomes["served"] and outcomes["left to sqlite"], outcomes


@pytest.mark.parametrize("damage", ["child_is_root", "child_twice", "child_past_end"])
def test_interior_pages_that_loop_or_point_outside(damage, tmp_path, monkeypatch):
    """An interior page naming the root again (a loop), the same child twice, or a page past
    the end of the file: the reader gives up at once and SQLite decides (here: the file is
    reported corrupt, or read as SQLite reads it)."""
    path = tmp_path / "t.sqlite"
    make(path, 512, "CREATE TABLE t (a INTEGER, b INTEGER)", [(i, i * 3) for i in range(30_000)])
    con = sqlite3.connect(path)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 't'").fetchone()[0]
    pages = con.execute("PRAGMA page_count").fetchone()[0]
    con.close()
    with open(path, "r+b") as fh:
        fh.seek((root - 1) * 512)
        page = bytearray(fh.read(512))
        assert page[0] == 0x05  # interior: the tree is more than one level deep
        first = int.from_bytes(page[12:14], "big")
        second = int.from_bytes(page[14:16], "big")
        child = {"child_is_root": root, "child_twice": int.from_bytes(page[second:second + 4], "big"),
                 "child_past_end": pages + 1000}[damage]
        page[first:first + 4] = child.to_bytes(4, "big")
        fh.seek((root - 1) * 512)
        fh.write(page)
    served = []
    real = btree.read_columns
    monkeypatch.setattr(btree, "read_columns", lambda *a: served.append(r := real(*a)) or r)
    monkeypatch.setattr(btree, "MIN_BYTES", 0)
    try:
        with Database(path) as db:
            db.scan_columns("t", {"a": ("a", 0)}, identity)
    except TraceFormatError:
        pass
    assert served == [None]
