"""Device timelines and kernel summaries of an Nsight Systems export streamed in time chunks
(issue 36, item 3; the design is docs/large_captures.md).

The kernel and runtime tables come in start order, a chunk at a time (parsers/nsys_stream.py);
copies, memsets and graph replays are small tables, read whole and merged in by time. Each device
keeps the timeline's own streaming pass (analyzers/timeline.py ``_Pass``) and its open interval
between chunks; its gaps are attributed to the API calls of its process held in a window: the
calls that start below the runtime stream's watermark and end after the start of the device's
oldest open gap. Gap lengths are kept as value counts (the quantiles exact from them), kernel
durations as value counts per name (the medians exact). Every number equals the whole-table
path (tests/test_stream_timeline.py); what cannot be streamed exactly yet raises NotStreamable.

Without a window given, the steps and the window are found from the stream too (analyzers/stream_steps.py);
the CLI takes this path where the whole-table model does not fit in memory (tracetriage/cli_streamed.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers import timeline as tl
from tracetriage.analyzers.metrics import DeviceTimeline
from tracetriage.analyzers.queued import WAIT_CALLS
from tracetriage.analyzers.steps import BLOCKING
from tracetriage.model import API_CATEGORIES, api_category, strip_api_version
from tracetriage.parsers import nsys_stream as ns
from tracetriage.parsers.nsys_tables import GRAPH_TRACE, MEMCPY, MEMSET, StringTable, read_copies, read_graph_replays
from tracetriage.parsers.sqlite import Database

NotStreamable = ns.NotStreamable
HISTOGRAM_INNER = np.array(tl.HISTOGRAM_EDGES_NS[1:], np.int64)  # the gap histogram's inner edges
COMPACT_AT = 1 << 16  # pending value-count entries merged into the running counts past this many (or the counts' size)


@dataclass
class StreamedTrace:
    """What the streamed pass measured: each device's timeline by (pid, ordinal), the kernel summary
    (``kernels.kernel_summary``), the median kernel duration, the kernels in the window, the chunks read."""
    timelines: dict[tuple[int, int], DeviceTimeline]
    kernels: list[dict]
    kernel_median_ns: int | None
    kernels_in_window: int
    chunks: int
    window: object = None  # stream_steps.StreamedWindow: the window and steps found from the stream (None: given)
    passes: tuple[str, ...] = ()  # the passes over the tables, in order: runtime, kernels, overlap, timeline


class ValueCounts:
    """Exact counts of int64 values, merged part by part (memory: about twice the distinct values)."""

    def __init__(self):
        self.values, self.counts = np.empty(0, np.int64), np.empty(0, np.int64)
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.pending_n = 0

    def add(self, values: np.ndarray, counts: np.ndarray | None = None) -> None:
        if not values.size:
            return
        if counts is None:
            values, counts = distinct_counts(values)
        self.pending.append((values, counts))
        self.pending_n += values.size
        if self.pending_n > max(COMPACT_AT, self.values.size):  # memory: ~2x the distinct values; merges amortized
            self.compact()

    def compact(self) -> tuple[np.ndarray, np.ndarray]:
        if self.pending:
            v = np.concatenate([self.values, *(p[0] for p in self.pending)])
            c = np.concatenate([self.counts, *(p[1] for p in self.pending)])
            self.values, inverse = np.unique(v, return_inverse=True)
            self.counts = np.bincount(inverse, weights=c, minlength=self.values.size).astype(np.int64)
            self.pending, self.pending_n = [], 0
        return self.values, self.counts


def distinct_counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_counts=True)``; by counting (no sort) where the values span a small range."""
    low, high = int(x.min()), int(x.max())
    if high - low < 16 * x.size + 65536:  # the counts array costs less than the sort
        counts = np.bincount(x - low)
        at = np.flatnonzero(counts)
        return at + low, counts[at]
    return np.unique(x, return_counts=True)


def few_distinct(x: np.ndarray, most: int = 16) -> list[int]:
    """The distinct values of ``x`` (device keys, pids: a few), sorted; a pass per value up to ``most``."""
    out, rest = [], x
    while rest.size and len(out) < most:
        v = rest[0]
        out.append(int(v))
        rest = rest[rest != v]
    return sorted(out) if not rest.size else np.unique(x).tolist()


def quantile(values: np.ndarray, counts: np.ndarray, q: float) -> float:
    """``np.percentile(x, 100 q)`` (linear) of the sample with these sorted values and counts."""
    n = int(counts.sum())
    at = q * (n - 1)
    below = int(np.floor(at))
    frac = at - below
    ends = np.cumsum(counts)
    a = float(values[np.searchsorted(ends, below, "right")])
    b = float(values[np.searchsorted(ends, min(below + 1, n - 1), "right")])
    diff = b - a
    return a + diff * frac if frac < 0.5 else b - diff * (1 - frac)  # numpy's _lerp


def median(values: np.ndarray, counts: np.ndarray) -> float:
    """``np.median`` of the sample: the middle value, or the mean of the two middle ones."""
    n = int(counts.sum())
    ends = np.cumsum(counts)
    a = values[np.searchsorted(ends, (n - 1) // 2, "right")]
    b = values[np.searchsorted(ends, n // 2, "right")]
    return float(np.mean(np.array([a, b], np.float64)))


class _StreamPass(tl._Pass):
    """A device's timeline pass whose gap lengths go to value counts instead of a row-sized buffer."""

    def keep_lengths(self, length: np.ndarray) -> None:
        self.lengths.add(length)
        self.acc["n"] += length.size
        # np.histogram over the edges and max + 1 (what the whole path bins), without its sort: lengths are >= 0
        self.hist += np.bincount(np.searchsorted(HISTOGRAM_INNER, length, "right"), minlength=self.hist.size)


class _WindowHost(tl._HostSlicer):
    """A process's API calls in the window the open gaps can reach, with the host slicer's methods."""

    def __init__(self, start, end, codes, names, staged, cause_of, call_names, any_calls: bool):
        self.empty = not any_calls
        self.start, self.end, self.cause_of = start, end, cause_of
        self.codes = codes
        self.pageable = None  # the pageable async copy calls (hidden syncs), merged, as the host slicer has them
        if staged.any():
            self.codes = codes.copy()
            self.codes[staged] = len(API_CATEGORIES)
            self.pageable = iv.Coverage(*iv.union(start[staged], end[staged]))
        self.max_dur = int((end - start).max()) if start.size else 0
        self.early_rows = self.early_ready = np.empty(0, np.int64)
        self.contiguous = True
        is_long = ((end - start) >= tl.NAMED_CALL_MIN_NS) & (cause_of[codes] == tl.CAUSES.index("other_cuda"))
        self.named_start, self.named_end, self.named_code = start[is_long], end[is_long], names[is_long]
        self.named_max = int((self.named_end - self.named_start).max()) if self.named_start.size else 0
        self.call_names = call_names


class _Calls:
    """The runtime stream: each call's category code and version-free name code (looked up once per
    string id), each process's window of calls and its blocking calls' ends."""

    def __init__(self, db: Database, strings: StringTable, chunk_rows: int, pageable: dict[int, np.ndarray],
                 lookahead: int, facts=None, hold: bool = True):
        self.pageable = pageable  # per process, the sorted correlations of its pageable copies
        self.facts, self.hold = facts, hold  # the step finder's facts (stream_steps.RuntimeFacts) fed; calls held
        self.stream = ns.in_start_order(ns.api_parts(db, chunk_rows), lookahead=lookahead)
        self.strings = strings
        self.watermark: int | None = -(1 << 62)  # every call below it has been read; None: all
        self.known, self.cat_lut, self.name_lut = np.zeros(0, bool), np.zeros(0, np.int8), np.zeros(0, np.int64)
        self.wait_lut = np.zeros(0, bool)  # per string id + 1: a stream-wait or graph-launch call
        self.names: list[str] = []
        self.name_code: dict[str, int] = {}
        self.window: dict[int, dict[str, np.ndarray]] = {}
        self.sync_ends: dict[int, list[np.ndarray]] = {}
        self.dropped: dict[int, int] = {}  # per process, the end below which calls were let go
        self.seen_pids: set[int] = set()
        self.waits = np.zeros(0, bool)
        self.cause_of = np.full(len(API_CATEGORIES) + 2, -1, np.int8)
        for k, wanted in enumerate(tl._CAUSE_CATEGORIES.values()):
            self.cause_of[[API_CATEGORIES.index(c) for c in wanted if c in API_CATEGORIES]] = k
        self.cause_of[len(API_CATEGORIES)] = tl.CAUSES.index("memcpy_sync")
        self.blocking = [API_CATEGORIES.index(c) for c in BLOCKING]
        self.memcpy_async = API_CATEGORIES.index("memcpy_async")

    def _codes(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each call's category code and name code, from tables indexed by string id + 1 (-1: none),
        grown and filled for the ids not seen before (a gather per part: no sort)."""
        if not ids.size:
            return np.empty(0, np.int8), np.empty(0, np.int64)
        if int(ids.min()) < -1 or int(ids.max()) >= 1 << 31:
            raise NotStreamable("runtime name ids outside 0 .. 2^31")
        top = int(ids.max()) + 2
        if top > self.known.size:
            size = max(top, 2 * self.known.size)
            self.known = np.concatenate((self.known, np.zeros(size - self.known.size, bool)))
            self.cat_lut = np.concatenate((self.cat_lut, np.full(size - self.cat_lut.size, -1, np.int8)))
            self.name_lut = np.concatenate((self.name_lut, np.zeros(size - self.name_lut.size, np.int64)))
            self.wait_lut = np.concatenate((self.wait_lut, np.zeros(size - self.wait_lut.size, bool)))
        at = ids + 1
        new = ~self.known[at]
        for sid in (np.unique(ids[new]).tolist() if new.any() else ()):
            name = strip_api_version(str(self.strings.get(sid, "<unknown>"))) if sid >= 0 else "<unknown>"
            cat = api_category(name)
            code = self.name_code.setdefault(name, len(self.names))
            if code == len(self.names):
                self.names.append(name)
            self.known[sid + 1] = True
            self.cat_lut[sid + 1] = API_CATEGORIES.index(cat) if cat in API_CATEGORIES else -1
            self.name_lut[sid + 1] = code
            self.wait_lut[sid + 1] = bool(WAIT_CALLS.search(name))
        return self.cat_lut[at], self.name_lut[at]

    def read_to(self, bound: int | None) -> None:
        """Read calls until every call starting below ``bound`` (None: every call) is in."""
        while self.watermark is not None and (bound is None or self.watermark < bound):
            try:
                part, self.watermark = next(self.stream)
            except StopIteration:
                self.watermark = None
                return
            cat, name = self._codes(part["name"])
            if self.wait_lut[part["name"] + 1].any():
                raise NotStreamable("a process makes stream-wait or graph-launch calls (dependency waits)")
            if self.facts is not None:
                self.facts.feed(part, cat, self.watermark)
            if self.hold:
                self._hold(part, cat, name)

    def _hold(self, part: dict[str, np.ndarray], cat: np.ndarray, name: np.ndarray) -> None:
        """Each process's calls of the part into its window, its blocking calls' ends into its list."""
        pid = part["pid"]
        for p in few_distinct(pid):
            mine = pid == p
            rows = {"start": part["start"][mine], "end": part["end"][mine], "cat": cat[mine], "name": name[mine]}
            rows["staged"] = (rows["cat"] == self.memcpy_async) & np.isin(part["correlation"][mine],
                                                                        self.pageable.get(p, ()))
            self.seen_pids.add(p)
            blocking = np.isin(rows["cat"], self.blocking)
            self.sync_ends.setdefault(p, []).append(rows["end"][blocking])
            have = self.window.get(p)
            self.window[p] = rows if have is None else {c: np.concatenate((have[c], rows[c])) for c in rows}

    def let_go(self, pid: int, floor: int) -> None:
        """Drop the process's calls that end at or before ``floor`` (no open gap reaches them)."""
        have = self.window.get(pid)
        if have is None:
            return
        keep = have["end"] > floor
        if not keep.all():
            self.window[pid] = {c: v[keep] for c, v in have.items()}
            self.dropped[pid] = max(self.dropped.get(pid, floor), floor)

    def host(self, pid: int, any_calls: bool) -> _WindowHost:
        w = self.window.get(pid) or {"start": np.empty(0, np.int64), "end": np.empty(0, np.int64),
                                     "cat": np.empty(0, np.int8), "name": np.empty(0, np.int64), "staged": np.empty(0, bool)}
        return _WindowHost(np.ascontiguousarray(w["start"]), np.ascontiguousarray(w["end"]),
                           np.ascontiguousarray(w["cat"]), w["name"], w["staged"], self.cause_of, self.names, any_calls)

    def ends(self, pid: int) -> np.ndarray:
        parts = self.sync_ends.get(pid, [])
        if len(parts) > 1:
            self.sync_ends[pid] = parts = [np.sort(np.concatenate(parts))]
        return parts[0] if parts else np.empty(0, np.int64)


def _small_gpu_rows(db: Database) -> tuple[dict[str, np.ndarray], dict[int, np.ndarray]]:
    """Copies, memsets and graph replays (small tables, read whole) as start, end, device key, in start order;
    each process's correlations of its pageable copies."""
    parts = [p for p in (read_copies(db, MEMCPY, "memcpy"), read_copies(db, MEMSET, "memset"), read_graph_replays(db))
             if p is not None and len(p["start"])]
    if db.has(GRAPH_TRACE) and parts and any((p["kind"] == "graph").any() for p in parts):
        raise NotStreamable("graph replays (their launches wait on the graph: dependency waits)")
    start = np.concatenate([p["start"] for p in parts]) if parts else np.empty(0, np.int64)
    end = np.concatenate([p["end"] for p in parts]) if parts else np.empty(0, np.int64)
    dev = np.concatenate([p["dev"] for p in parts]) if parts else np.empty(0, np.int64)
    pid = np.concatenate([p["pid"] for p in parts]) if parts else np.empty(0, np.int64)
    timed = (start > 0) | (end > 0)
    order = np.argsort(start[timed], kind="stable")
    pageable: dict[int, np.ndarray] = {}
    for p in parts:
        rows = p["pageable"] & (p["kind"] == "memcpy")
        for one in np.unique(p["pid"][rows]).tolist():
            have = pageable.get(one, np.empty(0, np.int64))
            pageable[one] = np.unique(np.concatenate((have, p["correlation"][rows & (p["pid"] == one)])))
    return {"start": start[timed][order], "end": end[timed][order],
            "device": (pid[timed] << ns.DEVICE_BITS | (dev[timed] + 1))[order]}, pageable


def _has_calls(db: Database, pid: int) -> bool:
    """Whether the runtime table holds a call of the process (the whole path's "unknown" cause otherwise)."""
    if not db.has(ns.RUNTIME) or not db.has_column(ns.RUNTIME, "globalTid"):
        return False
    return db.scalar(f"SELECT 1 FROM {ns.RUNTIME} WHERE ((globalTid >> 24) & 16777215) = {int(pid)} LIMIT 1") is not None


class _Device:
    def __init__(self, key: int, make_pass, any_calls: bool):
        self.pid, self.ordinal = ns.device_of(key)
        self.pass_ = make_pass()
        self.carry: tuple[int, int] | None = None
        self.any_calls = any_calls


def analyze_streamed(path: str, lo: int | None = None, hi: int | None = None,
                     spans: dict[int, tuple[np.ndarray, np.ndarray]] | None = None,
                     sync_slack_ns: int = 20_000, min_gap_ns: int = 1, chunk_rows: int = ns.CHUNK_ROWS,
                     lookahead: int = ns.LOOKAHEAD_ROWS, step_range: str | None = None) -> StreamedTrace:
    """Every device's timeline in the window [lo, hi) and the kernel summary of an nsys export, read in time
    chunks of ``chunk_rows`` rows, each row held until ``lookahead`` rows after it are read. Without ``lo``
    and ``hi`` the window and each process's long steps are found from the stream as ``analyze_trace``
    finds them (analyzers/stream_steps.py; ``step_range``: ``--step-range``); given, ``spans`` are each
    process's long steps (start, end arrays). Raises NotStreamable where it would not equal the whole-table path."""
    from tracetriage.analyzers import stream_steps as ss
    from tracetriage.memory import release_freed

    with Database(path) as db:
        ctx = _Context(db, chunk_rows, lookahead, sync_slack_ns, min_gap_ns)
        if lo is not None and hi is not None:
            return ctx.timeline(lo, hi, spans or {})
        ranges = ss.read_step_ranges(db, ctx.strings)
        facts = ss.RuntimeFacts()
        named = {int(pid): found for pid in ranges["pid"].unique().tolist()
                 if (found := ss.st.nvtx_steps(ranges, int(pid), step_range)) is not None}
        if not any(found.count >= ss.st.MIN_STEPS for found in named.values()):
            # the window rests on steps inferred from the syncs, or on the GPU activity: the syncs first
            calls = _Calls(db, ctx.strings, chunk_rows, ctx.pageable, lookahead, facts=facts, hold=False)
            calls.read_to(None)
            del calls
            release_freed()  # the reader thread's arena: its pages back before the next pass
            ctx.passes.append("runtime")
            facts.complete = True
            guess = ss.guess_window(ranges, step_range, facts, ctx.small)
        else:
            guess = ss.window_of(named, -(1 << 62), None)
        kernels, gpu = ss.KernelFacts(), ss.Spans()
        if guess is None:  # the GPU activity's window: the kernels' facts first
            ctx.facts_pass(kernels, gpu)
            release_freed()
            found = ctx.final(ranges, step_range, facts, kernels, gpu)
            got = ctx.timeline(found.start_ns, found.end_ns, found.spans)
        else:
            got = ctx.timeline(guess.start_ns, guess.end_ns, guess.spans, None if facts.complete else facts, kernels, gpu)
            facts.complete = True
            found = ctx.final(ranges, step_range, facts, kernels, gpu)
            if not ss.same_window(found, guess):  # the guess was wrong: again, with the window found
                got = ctx.timeline(found.start_ns, found.end_ns, found.spans)
        got.window, got.passes = found, tuple(ctx.passes)
        return got


class _Context:
    """One export's strings, small tables and settings, for the passes over its kernel and runtime tables."""

    def __init__(self, db: Database, chunk_rows: int, lookahead: int, sync_slack_ns: int, min_gap_ns: int):
        self.db, self.chunk_rows, self.lookahead = db, chunk_rows, lookahead
        self.sync_slack_ns, self.min_gap_ns = sync_slack_ns, min_gap_ns
        self.strings = StringTable(db)
        self.small, self.pageable = _small_gpu_rows(db)
        self.passes: list[str] = []

    def kernel_stream(self):
        return ns.in_start_order(ns.kernel_parts(self.db, self.strings, self.chunk_rows), lookahead=self.lookahead)

    def facts_pass(self, kernels, gpu) -> None:
        """The kernel table alone, for the phase rules' facts and each process's GPU span."""
        self.passes.append("kernels")
        for part, _ in self.kernel_stream():
            kernels.feed(part["start"], part["end"], part["name"])
            gpu.feed(part["start"], part["end"], part["device"])
        if self.small["start"].size:
            gpu.feed(self.small["start"], self.small["end"], self.small["device"])

    def final(self, ranges, step_range, facts, kernels, gpu):
        from tracetriage.analyzers import stream_steps as ss

        return ss.final_window(sorted(gpu.of), gpu.of, ranges, step_range, facts, kernels, self.small,
                               lambda lo, hi: ss.overlapping(self, lo, hi))

    def timeline(self, lo: int, hi: int, spans: dict, facts=None, kernels=None, gpu=None) -> StreamedTrace:
        """The timeline pass over the window [lo, hi) (feeding the step finder's facts where given)."""
        self.passes.append("timeline")
        return _timeline_pass(self, lo, hi, spans, facts, kernels, gpu)


def _timeline_pass(ctx: _Context, lo: int, hi: int, spans: dict, facts, kernel_facts, gpu) -> StreamedTrace:
    from tracetriage.analyzers.kernels import TOP_KERNELS

    db, strings, small = ctx.db, ctx.strings, ctx.small
    sync_slack_ns, min_gap_ns = ctx.sync_slack_ns, ctx.min_gap_ns
    edges = np.linspace(lo, hi, tl.TIMELINE_BINS + 1).astype(np.int64)
    calls = _Calls(db, strings, ctx.chunk_rows, ctx.pageable, ctx.lookahead, facts=facts)
    devices: dict[int, _Device] = {}
    durations: dict[int, ValueCounts] = {}
    n_chunks, taken = 0, 0

    def make_pass(pid: int):
        cover = iv.Coverage(*iv.union(*spans[pid])) if pid in spans and len(spans[pid][0]) else None
        p = _StreamPass(None, None, sync_slack_ns, min_gap_ns, edges, cover, None, 0)
        p.lengths, p.hist = ValueCounts(), np.zeros(len(tl.HISTOGRAM_EDGES_NS), np.int64)
        return p

    def feed(dev: _Device, s: np.ndarray, e: np.ndarray, last: bool) -> None:
        dev.pass_.host = calls.host(dev.pid, dev.any_calls)
        dev.pass_.sync_ends = calls.ends(dev.pid)
        dev.carry = dev.pass_.feed([(s, e)] if s.size else [], hi, lo, last, dev.carry)

    def timeline_chunk(s_all: np.ndarray, e_all: np.ndarray, key_all: np.ndarray) -> None:
        if gpu is not None:
            gpu.feed(s_all, e_all, key_all)
        for key in few_distinct(key_all):
            if key not in devices:
                pid = ns.device_of(key)[0]
                if calls.dropped.get(pid, lo) > lo:
                    raise NotStreamable("a device first seen after its process's early calls were let go")
                devices[key] = _Device(key, lambda: make_pass(pid), _has_calls(db, pid))
        for key, dev in devices.items():
            mine = key_all == key
            s, e = s_all[mine], e_all[mine]
            sel = (e > lo) & (s < hi)
            feed(dev, *tl._clipped(s[sel], e[sel], lo, hi), last=False)
        for pid in {d.pid for d in devices.values()}:
            floor = min(d.carry[1] if d.carry else lo for d in devices.values() if d.pid == pid)
            calls.let_go(pid, floor)

    for part, mark in ctx.kernel_stream():
        n_chunks += 1
        s_all, e_all, key_all = part["start"], part["end"], part["device"]
        if kernel_facts is not None:
            kernel_facts.feed(s_all, e_all, part["name"])
        in_window = (s_all >= lo) & (s_all < hi)
        dur = (e_all - s_all)[in_window]
        names = part["name"][in_window]
        _add_durations(durations, dur, names)
        # the small tables' rows of this chunk's time, merged in
        stop = small["start"].size if mark is None else int(np.searchsorted(small["start"], mark, "left"))
        if stop > taken:
            s_all = np.concatenate((s_all, small["start"][taken:stop]))
            e_all = np.concatenate((e_all, small["end"][taken:stop]))
            key_all = np.concatenate((key_all, small["device"][taken:stop]))
            order = np.argsort(s_all, kind="stable")
            s_all, e_all, key_all = s_all[order], e_all[order], key_all[order]
            taken = stop
        calls.read_to(mark)
        timeline_chunk(s_all, e_all, key_all)
    if taken < small["start"].size:  # copies after the last kernel
        calls.read_to(None)
        timeline_chunk(small["start"][taken:], small["end"][taken:], small["device"][taken:])
    calls.read_to(None)
    for dev in devices.values():
        feed(dev, np.empty(0, np.int64), np.empty(0, np.int64), last=True)

    timelines = {}
    for dev in devices.values():
        p = dev.pass_
        values, counts = p.lengths.compact()
        if values.size:
            gap_total = int((values * counts).sum())
            q50, q99 = int(quantile(values, counts, 0.5)), int(quantile(values, counts, 0.99))
            stats = (int(counts.sum()), gap_total, q50, q99, int(values[-1]), p.hist)
        else:
            stats = (0, 0, 0, 0, 0, p.hist)
        timelines[(dev.pid, dev.ordinal)] = tl.timeline_of(p.acc, stats, calls.names, edges, hi - lo)
    kernels, median_all, in_window = _kernel_summary(durations, strings, TOP_KERNELS)
    return StreamedTrace(timelines=timelines, kernels=kernels, kernel_median_ns=median_all,
                         kernels_in_window=in_window, chunks=n_chunks)


def _add_durations(durations: dict[int, ValueCounts], dur: np.ndarray, names: np.ndarray) -> None:
    """Each kernel name's durations into its counts: one sort of (name code, duration) keys for all names."""
    if not dur.size:
        return
    if dur.min() < -(1 << 39) or dur.max() >= 1 << 39:
        raise NotStreamable("a kernel longer than 2^39 ns")
    if names.min() < -1 or names.max() >= (1 << 22) - 1:
        raise NotStreamable("more than 2^22 kernel names")
    low = int(dur.min())
    span = int(dur.max()) - low + 1  # < 2^40; with names + 1 < 2^22 a key fits in int64
    keys, counts = distinct_counts((names.astype(np.int64) + 1) * span + (dur - low))
    code, value = np.divmod(keys, span)
    code -= 1
    value += low
    cuts = np.flatnonzero(np.diff(code)) + 1
    for a, b in zip([0, *cuts.tolist()], [*cuts.tolist(), code.size]):
        durations.setdefault(int(code[a]), ValueCounts()).add(value[a:b], counts[a:b])


def _kernel_summary(durations: dict[int, ValueCounts], strings: StringTable, top: int):
    """``kernels.kernel_summary`` from each name's duration counts; the median of all durations; the count."""
    totals: dict[str, list] = {}
    counts_of: dict[str, list] = {}
    for code, vc in durations.items():
        values, counts = vc.compact()
        name = str(strings.categories[code]) if code >= 0 else "<unknown>"
        acc = totals.setdefault(name, [0, 0.0])
        acc[0] += int(counts.sum())
        acc[1] += float((values * counts).sum())
        counts_of.setdefault(name, []).append((values, counts))
    if not totals:
        return [], None, 0
    grand = sum(v[1] for v in totals.values())
    out = []
    for name in sorted(totals, key=lambda n: (-totals[n][1], n))[:top]:
        count, total = totals[name]
        both = ValueCounts()
        for values, counts in counts_of[name]:
            both.add(values, counts)
        out.append({"name": name, "count": int(count), "total_ns": int(round(total)), "mean_ns": int(round(total / count)),
                    "median_ns": int(round(median(*both.compact()))),
                    "share_pct": round(100.0 * total / grand, 3) if grand else 0.0})
    everything = ValueCounts()
    for parts in counts_of.values():
        for values, counts in parts:
            everything.add(values, counts)
    values, counts = everything.compact()
    return out, int(median(values, counts)), int(counts.sum())


def whole_table_window(trace) -> tuple[int, int, dict[int, tuple[np.ndarray, np.ndarray]]]:
    """The window [lo, hi) and each process's long steps (start, end arrays) as ``analyze_trace`` takes
    them from the whole-table model: what :func:`analyze_streamed` is handed (steps are not streamed yet)."""
    from tracetriage.analyzers import analysis, phases

    finder = phases.Finder(trace)
    steps = finder.steps(analysis._trace_pids(trace), None)
    window, _ = analysis._window(trace, steps, finder)
    spans = {}
    for pid, process_steps in steps.items():
        long = analysis._long(process_steps)
        if long.any():
            spans[pid] = (process_steps.starts[long], process_steps.ends[long])
    return window.start_ns, window.end_ns, spans


def whole_table_timelines(trace, lo: int, hi: int, spans: dict) -> tuple[dict[tuple[int, int], DeviceTimeline], int]:
    """Every device's timeline in [lo, hi) on the whole-table model, as ``analyze_trace`` computes it (the
    reference the streamed pass equals), and the clock resolution it used as the least gap."""
    from tracetriage.analyzers import analysis
    from tracetriage.model import cat_mask

    blocking = trace.api[cat_mask(trace.api, "category", BLOCKING)]
    min_gap = int(trace.meta.get("clock_resolution_ns") or 1)
    hosts, timelines = {}, {}
    for i in range(len(trace.devices)):
        pid, ordinal = int(trace.devices.iloc[i]["pid"]), int(trace.devices.iloc[i]["ordinal"])
        ends = np.sort(blocking.loc[blocking["pid"] == pid, "end"].to_numpy(np.int64))
        timelines[(pid, ordinal)] = tl.device_timeline(trace, i, lo, hi, hosts, sync_ends=ends,
                                                       sync_slack_ns=analysis.SYNC_SLACK_NS, min_gap_ns=min_gap,
                                                       spans=spans.get(pid))
    return timelines, min_gap
