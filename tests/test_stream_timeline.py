"""The streamed timeline (analyzers/stream_timeline.py, issue 36 item 3) against the whole-table path:
every device timeline, the kernel summary and the kernel median equal, with small chunks forced, on
the benchmark's generated shapes and the real nsys exports; what it cannot stream exactly it refuses."""

import dataclasses
import sys
from dataclasses import replace

import numpy as np
import pytest
from conftest import REAL, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import shapes  # noqa: E402

from tracetriage.analyzers import analysis  # noqa: E402
from tracetriage.analyzers import kernels as kern  # noqa: E402
from tracetriage.analyzers import stream_timeline as stl  # noqa: E402
from tracetriage.case import open_export  # noqa: E402
from tracetriage.parsers import btree, nsys  # noqa: E402
from tracetriage.parsers import nsys_stream as ns  # noqa: E402


def whole(path):
    """What analyze_trace computes for the timelines and kernel summaries, on the whole-table model."""
    trace = nsys.parse(str(path))
    lo, hi, spans = stl.whole_table_window(trace)
    timelines, min_gap = stl.whole_table_timelines(trace, lo, hi, spans)
    summary = (kern.kernel_summary(trace, lo, hi), kern.kernel_duration_median(trace, lo, hi))
    return (lo, hi, spans, min_gap), {k: dataclasses.asdict(v) for k, v in timelines.items()}, summary


def streamed(path, args, chunk_rows, lookahead):
    lo, hi, spans, min_gap = args
    with open_export(path) as db:
        got = stl.analyze_streamed(db, lo, hi, spans, analysis.SYNC_SLACK_NS, min_gap, chunk_rows, lookahead)
    return got, {k: dataclasses.asdict(v) for k, v in got.timelines.items()}, (got.kernels, got.kernel_median_ns)


def assert_equal(path, chunk_rows, lookahead):
    args, timelines, summary = whole(path)
    got, got_timelines, got_summary = streamed(path, args, chunk_rows, lookahead)
    assert got_timelines == timelines
    assert got_summary == summary
    return got


LATE = replace(shapes.SHAPES["sync2dev"], late_rows=10_000, late_by=3_000)  # ~20 runtime rows in 20K written late


@pytest.mark.parametrize("direct", [False, True], ids=["sql", "btree"])
@pytest.mark.parametrize("name", ["decode", "sync2dev", "tp8", "late"])
def test_generated_shapes_stream_to_the_same_numbers(tmp_path, monkeypatch, name, direct):
    if direct:  # the b-tree reader (and its read-ahead thread), as on files over btree.MIN_BYTES
        monkeypatch.setattr(btree, "MIN_BYTES", 0)
    path = tmp_path / f"{name}.sqlite"
    shapes.build(path, 20_000, shape=LATE if name == "late" else name)
    got = assert_equal(path, 1_000, 4_000)
    assert got.chunks >= 4  # the chunks were small: the merge across them was exercised
    assert got.kernels_in_window > 0


def test_a_row_later_than_the_lookahead_is_refused(tmp_path):
    path = tmp_path / "late.sqlite"
    shapes.build(path, 20_000, shape=LATE)
    args, _, _ = whole(path)
    with pytest.raises(stl.NotStreamable):
        streamed(path, args, 500, 500)


def test_graph_node_kernels_stream_to_the_same_numbers(tmp_path):
    """Kernels as CUDA-graph nodes (the benchmark's graph shape: every kernel of a replay carries its graph
    launch's correlation): their process makes graph-launch calls, so its dependency waits are joined."""
    path = tmp_path / "graph.sqlite"
    shapes.build(path, 2_000, shape="graph")
    got = assert_equal(path, 100, 300)
    assert got.chunks >= 4


REAL_NSYS = sorted((REAL / "nsys").glob("*.sqlite")) if (REAL / "nsys").is_dir() else []
# processes with stream-wait calls: their dependency waits joined in the stream (analyzers/stream_queued.py)
WAITS = {"nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite",
         "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite",
         "nsys2026.2_2xH100_mfu_after.sqlite", "nsys2026.2_2xH100_mfu_before.sqlite"}


@pytest.mark.parametrize("path", REAL_NSYS, ids=lambda p: p.name)
def test_real_exports_stream_to_the_same_numbers(path):
    if path.name in WAITS:
        # their runtime rows come a thread at a time (rows up to ~6,800 late): within a 10,000-row lookahead
        # they stream, the stream-wait calls' processes joined for dependency waits; a 20-row one refuses them
        got = assert_equal(path, 7, 10_000)
        assert got.chunks > 100
        args, _, _ = whole(path)
        with pytest.raises(stl.NotStreamable, match="written more than 20 rows after its place"):
            streamed(path, args, 7, 20)
        return
    assert_equal(path, 7, 20)


def _write_late(path, table: str, k: int, late_by: int, seed: int) -> None:
    """Rewrite ``table`` with ``k`` of its rows (chosen at random) each written 1..``late_by`` rows
    after its place, the other rows in their order: the rows' values unchanged, only their rowids."""
    import sqlite3

    db = sqlite3.connect(path)
    n = db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    rng = np.random.default_rng(seed)
    order = [float(i) for i in range(n)]  # each row's place in the new table order
    for i in rng.choice(n, k, replace=False).tolist():
        order[i] = i + int(rng.integers(1, late_by + 1)) + 0.5
    db.execute(f"CREATE TEMP TABLE moved AS SELECT * FROM {table} ORDER BY rowid")
    db.execute("CREATE TEMP TABLE place (r INTEGER PRIMARY KEY, at REAL)")
    db.executemany("INSERT INTO place VALUES (?, ?)", enumerate(order, 1))
    db.execute(f"DELETE FROM {table}")
    db.execute(f"INSERT INTO {table} SELECT moved.* FROM moved JOIN place ON place.r = moved.rowid ORDER BY place.at")
    db.commit()
    db.close()


@pytest.mark.parametrize("table", [ns.KERNEL, ns.RUNTIME])
def test_rows_written_late_are_equal_or_refused_never_wrong(tmp_path, table):
    base = tmp_path / "base.sqlite"
    shapes.build(base, 20_000, shape="sync2dev")
    args, timelines, summary = whole(base)
    path = tmp_path / "late.sqlite"
    path.write_bytes(base.read_bytes())
    _write_late(path, table, 30, 2_000, 11)
    assert whole(path)[1:] == (timelines, summary)  # the whole-table path sorts: the truth is unchanged
    outcomes = {}
    for chunk_rows, lookahead in [(300, 100), (1_000, 500), (700, 1_500), (1_000, 4_000), (2_500, 9_000)]:
        try:
            got, got_timelines, got_summary = streamed(path, args, chunk_rows, lookahead)
        except stl.NotStreamable as e:
            assert "rows after its place" in str(e)
            outcomes[lookahead] = "refused"
            continue
        assert (got_timelines, got_summary) == (timelines, summary)
        outcomes[lookahead] = "equal"
    assert outcomes[100] == "refused"  # rows 2,000 late: far beyond the lookahead
    assert outcomes[4_000] == outcomes[9_000] == "equal"  # within it: streamed in order


def test_rows_come_out_in_start_order():
    rng = np.random.default_rng(3)
    start = np.sort(rng.integers(0, 10**9, 5_000))
    late = rng.choice(5_000 - 200, 40, replace=False)
    order = np.arange(5_000)
    for i in late:  # each moved up to 150 rows after its place
        j = i + int(rng.integers(1, 150))
        order[i:j + 1] = np.roll(order[i:j + 1], -1)
    written = start[order]
    parts = ({"start": written[k:k + 100], "row": order[k:k + 100]} for k in range(0, 5_000, 100))
    out = list(ns.in_start_order(parts, lookahead=200))
    assert len(out) > 10 and out[-1][1] is None
    got = np.concatenate([p["start"] for p, _ in out])
    assert (got == np.sort(written)).all()
    for i, (p, mark) in enumerate(out[:-1]):  # every row below a watermark came before it
        assert p["start"].max() <= mark <= min(q["start"].min() for q, _ in out[i + 1:])
    assert max(len(p["start"]) for p, _ in out) <= 100  # handed on in pieces no larger than a part


def test_value_counts_give_numpy_quantiles():
    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 1000):
        x = rng.integers(0, 50, n)
        vc = stl.ValueCounts()
        for k in range(0, n, 13):
            vc.add(x[k:k + 13])
        values, counts = vc.compact()
        for q in (0.5, 0.99):
            assert stl.quantile(values, counts, q) == np.percentile(x, 100 * q)
        assert stl.median(values, counts) == np.median(x)


def test_distinct_counts_and_few_distinct_are_numpy_unique():
    rng = np.random.default_rng(9)
    for x in (rng.integers(0, 300, 1_000), rng.integers(-10**12, 10**12, 1_000), np.array([5]),
              rng.integers(-50, 50, 10) * 10**9):
        values, counts = stl.distinct_counts(x)
        want_values, want_counts = np.unique(x, return_counts=True)
        assert (values == want_values).all() and (counts == want_counts).all()
        assert stl.few_distinct(x, most=4) == want_values.tolist() == stl.few_distinct(x, most=2_000)


def test_read_ahead_hands_on_every_part_its_error_and_stops_early():
    import threading

    assert list(ns.read_ahead(iter(range(100)))) == list(range(100))

    def failing():
        yield 1
        raise ns.NotStreamable("damaged")

    got = []
    with pytest.raises(ns.NotStreamable, match="damaged"):
        for x in ns.read_ahead(failing()):
            got.append(x)
    assert got == [1]
    closed = threading.Event()

    def endless():
        try:
            while True:
                yield 0
        finally:
            closed.set()

    stream = ns.read_ahead(endless())
    next(stream)
    stream.close()  # the consumer stops: the reader thread ends and closes its source
    assert closed.wait(5)
