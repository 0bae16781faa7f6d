"""What the host does while a GPU waits: each idle nanosecond of a device attributed to a host range.

Definitions (inside the analysis window [lo, hi) of one device, owned by process ``pid``):

* **Idle** is the device's gaps as :mod:`timeline` measures them: the window minus the union of
  the device's GPU intervals, gaps shorter than the clock's resolution counted busy.
  **Host-code idle** is the idle time in which no runtime/driver call of ``pid`` runs (the
  ``host`` cause of :mod:`timeline`).
* **Host ranges** are the host-side intervals of ``pid`` the capture recorded, in four tiers,
  each naming only the idle time the tiers before it left uncovered:
  (1) named ranges — the ``ranges`` table (PyTorch profiler ``user_annotation``, NVTX, roctx)
  whose name is the program's (not :data:`OPERATOR_NAME`);
  (2) operator ranges — the PyTorch profiler's CPU ops of
  :data:`~tracetriage.parsers.kineto_events.HOST_OP_MIN_US` or longer (``meta["host_ops"]``) and the
  ``ranges`` rows named like an operator or library call (``aten::mm``, an emit_nvtx range);
  (3) OS runtime calls (nsys ``--trace=osrt``, ``meta["host_calls"]``, 100 µs or longer) of the
  threads that launch GPU work — a poll loop on another thread does not hold the GPU;
  (4) long Python frames (``meta["python_frames"]``, ``with_stack=True``).
* **Step ranges are not answers**: a range whose name marks a step (:data:`steps.STEP_PATTERNS`,
  ``ProfilerStep#N``; or the ``--step-range`` pattern), or that encloses a whole step of the
  process, covers everything the step does and names nothing in it. Without steps, a range
  spanning :data:`WHOLE_WINDOW_SHARE` of the window or more is the loop itself and is left out.
* **Attribution**: among named ranges each idle nanosecond goes to the *most specific* one that
  covers it — the one that started last, the shortest among equal starts: for nested ranges the
  innermost (``log_metrics`` inside a ``train_step`` range takes its own time; ``clear_cache``
  inside a benchmark's ``measure|forward``). Among operators, OS calls and Python frames it goes
  to the *outermost* (the one that started first; the longest among equal starts: an operator's
  children are its implementation), so ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``
  takes the time its collate and copy ops run in. Two threads' ranges never count one nanosecond
  twice. Outermost: one sort and a running maximum (a range owns ``[max(start, the latest end of
  every range started before it), end)``); innermost: :func:`_innermost`.
* A row of :attr:`~tracetriage.analyzers.metrics.IdleByHost.ranges`: one range name of one
  source (an emit_nvtx operator range without its ``, seq = N, op_id = N`` tail: one row per
  operator), its idle ns, that as % of the window, the number of distinct gaps it covers part of,
  and its host-code idle ns; the top :data:`TOP_RANGES` by idle ns.
* **Launched inside** (``IdleByHost.launched_gaps``, per row): of the gaps a range covers, how many end
  with a GPU operation whose launch call (joined on (pid, correlation)) starts inside one of the range's
  own intervals: a range that feeds the GPU itself (a model's forward dispatched op by op) rather than
  host work beside the launches.

Cost: linear in the rows read (sorts aside): the device's intervals, the process's ranges and
calls, each once; no per-event Python.
"""

from __future__ import annotations

import re
import threading

import numpy as np
import pandas as pd

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers.metrics import DeviceTimeline, IdleByHost
from tracetriage.analyzers.steps import STEP_PATTERNS, Steps
from tracetriage.model import Trace
from tracetriage.partition import device_rows

try:
    from tracetriage.analyzers import _sweep
except ImportError:  # built without a C compiler: the calls' union streamed past the gaps (numpy)
    _sweep = None

TOP_RANGES = 8
WHOLE_WINDOW_SHARE = 0.9  # without steps, a range spanning this share of the window is the loop, not an answer
DATA_LOADER = re.compile(r"(?i)data_?loader")  # PyTorch's enumerate(DataLoader)#..., a user's dataloader range
# the per-call tail of PyTorch's emit_nvtx operator ranges (``aten::add, seq = 4, op_id = 9, sizes = [...]``):
# one name per operator, not per call
OP_TAIL = re.compile(r", (?:seq|op_id) = -?\d+.*$", re.DOTALL)
# an operator's or library call's range (aten::mm, c10d::allreduce_, FusionExecutorCache::runFusionWithInputs,
# an emit_nvtx operator range): named by the code, not by the program's author
OPERATOR_NAME = re.compile(r"^[A-Za-z_][\w.]*::\w")


def range_name(text: str) -> str:
    """A host range's name as the table groups it: an emit_nvtx operator range without its per-call ids."""
    if ", seq = " not in text and ", op_id = " not in text:  # the tail's mark: most ranges have none (no regex)
        return text
    return OP_TAIL.sub("", text)


def is_data_loader(name: str) -> bool:
    """Whether a host range is a data loader's (PyTorch writes ``enumerate(DataLoader)#<iterator>.__next__``)."""
    return bool(DATA_LOADER.search(name))


class HostRanges:
    """The host ranges of one process as flat columns (start, end, a name code, a source code, a tier),
    built once per process and shared by its devices."""

    def __init__(self, trace: Trace, pid: int):
        self._calls: dict[int, tuple] = {}  # the process's calls, found once for all its devices (:meth:`calls`)
        self._has_calls: dict[int, bool] = {}
        self._lock = threading.Lock()
        names: dict[str, int] = {}
        sources: dict[str, int] = {}
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        ranges = trace.ranges
        if len(ranges):
            mine = ranges["pid"].to_numpy() == pid
            if mine.any():
                table = ranges[mine]
                code = _codes(table["name"], names, range_name, "")
                operator = np.array([bool(OPERATOR_NAME.search(name)) for name in names], bool)
                parts.append((table["start"].to_numpy(np.int64), table["end"].to_numpy(np.int64), code,
                              _codes(table["domain"], sources, _source_of if trace.format == "nsys" else str, "nvtx"),
                              np.where(operator[code], 2, 1)))
        feeding = _feeding_threads(trace, pid)
        for key, source, tier in (("host_ops", "cpu_op", 2), ("host_calls", "osrt", 3), ("python_frames", "python", 4)):
            rows = [row for row in trace.meta.get(key) or [] if _row_pid(row, key, pid)
                    and (key != "host_calls" or int(row[1]) in feeding)]
            if rows:
                start = np.array([row[-3] for row in rows], np.int64)
                end = np.array([row[-2] for row in rows], np.int64)
                code = np.array([names.setdefault(str(row[-1]), len(names)) for row in rows], np.int32)
                parts.append((start, end, code, np.full(len(rows), sources.setdefault(source, len(sources)), np.int32),
                              np.full(len(rows), tier)))
        self.names = list(names)
        self.sources = list(sources)
        if parts:
            self.start = np.concatenate([part[0] for part in parts])
            self.end = np.concatenate([part[1] for part in parts])
            self.name = np.concatenate([part[2] for part in parts])
            self.source = np.concatenate([part[3] for part in parts])
            self.tier = np.concatenate([part[4] for part in parts]).astype(np.int8)
        else:
            self.start = self.end = np.empty(0, np.int64)
            self.name = self.source = np.empty(0, np.int32)
            self.tier = np.empty(0, np.int8)

    @property
    def empty(self) -> bool:
        return not self.start.size

    def has_calls(self, api, pid: int) -> bool:
        """Whether ``pid`` made any runtime/driver call (found once, shared by the process's devices)."""
        with self._lock:
            if pid not in self._has_calls:
                self._has_calls[pid] = bool(self._calls[pid][0].size) if pid in self._calls else \
                    bool(len(api)) and bool((api["pid"].to_numpy() == pid).any())
            return self._has_calls[pid]

    def calls(self, api, pid: int) -> tuple[np.ndarray, np.ndarray, int | None]:
        """(starts, ends, the longest call or None: :func:`_call_span`) of ``pid``'s calls
        (:func:`_process_calls`), found on first use and shared by the process's devices (their threads)."""
        with self._lock:
            if pid not in self._calls:
                call_s, call_e = _process_calls(api, pid)
                self._calls[pid] = (call_s, call_e, _call_span(call_s, call_e))
            return self._calls[pid]


def _codes(column: pd.Series, names: dict[str, int], spelled, missing: str) -> np.ndarray:
    """The rows' codes into ``names`` of their values as ``spelled`` (one lookup per distinct value); a missing
    value is ``missing``."""
    cat = column.astype("category") if not isinstance(column.dtype, pd.CategoricalDtype) else column
    codes = cat.cat.codes.to_numpy()
    categories = cat.cat.categories.tolist()  # one conversion, not an arrow scalar per item
    remap = [names.setdefault(spelled(str(value)), len(names)) for value in categories]
    remap.append(names.setdefault(missing, len(names)) if (codes < 0).any() else -1)
    return np.array(remap, np.int32)[codes]  # code -1 (missing) reads the last slot


def _source_of(domain: str) -> str:
    """An nsys NVTX range's source as the table names it: ``nvtx``, or ``nvtx <domain>`` for a named domain."""
    return "nvtx" if domain == "default" else f"nvtx {domain}"


def _row_pid(row, key: str, pid: int) -> bool:
    """host_ops and host_calls rows are [pid, tid, start, end, name]; python_frames rows [tid, start, end, name]
    (one process a file)."""
    return key == "python_frames" or int(row[0]) == pid


def _feeding_threads(trace: Trace, pid: int) -> set[int]:
    """The threads of ``pid`` that launch GPU work (kernel or graph launches): an OS call on another thread
    (a poll loop, a logger) does not keep the GPU waiting."""
    api = trace.api
    if not len(api) or not trace.meta.get("host_calls"):
        return set()
    launching = (api["pid"].to_numpy() == pid) & api["category"].isin(["launch", "graph_launch"]).to_numpy()
    return set(np.unique(api["tid"].to_numpy()[launching]).tolist())


def _excluded(hosts: HostRanges, steps: Steps | None, lo: int, hi: int) -> np.ndarray:
    """Mask of ranges that cannot be an answer: step ranges by name, and ranges that enclose a whole step
    (or, without steps, span WHOLE_WINDOW_SHARE of the window)."""
    pattern = re.compile(steps.pattern) if steps is not None and steps.pattern else STEP_PATTERNS
    step_named = np.array([bool(pattern.search(name)) or bool(STEP_PATTERNS.search(name)) for name in hosts.names], bool)
    out = step_named[hosts.name] if hosts.names else np.zeros(hosts.start.size, bool)
    if steps is not None and steps.count:
        first = np.searchsorted(steps.starts, hosts.start, "left")  # the first step starting inside the range
        inside = first < steps.count
        out |= inside & (steps.ends[np.minimum(first, steps.count - 1)] <= hosts.end)
    else:
        out |= (np.minimum(hosts.end, hi) - np.maximum(hosts.start, lo)) >= WHOLE_WINDOW_SHARE * (hi - lo)
    return out


def _innermost(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(segment starts, ends, range index): each nanosecond covered by some range goes to the covering
    range that started last (the shortest among equal starts): for nested ranges the innermost one.
    Vectorised: between two consecutive range boundaries the owner is the last range (by start)
    whose end lies past the boundary, found by binary lifting over a sparse table of running end
    maxima (log n array passes, no per-range Python)."""
    order = np.lexsort((-(end - start), start))
    s, e = start[order], end[order]
    bounds = np.sort(np.concatenate((s, e)))
    bounds = bounds[np.concatenate(([True], bounds[1:] != bounds[:-1]))]
    seg_s, seg_e = bounds[:-1], bounds[1:]
    position = np.searchsorted(s, seg_s, "right") - 1  # the last range started by each boundary
    levels = [e]
    while (1 << len(levels)) <= s.size:  # levels[k][i]: the latest end among ranges i-2^k+1 .. i
        step, previous = 1 << (len(levels) - 1), levels[-1]
        levels.append(np.concatenate((previous[:step], np.maximum(previous[step:], previous[:-step]))))
    for k in range(len(levels) - 1, -1, -1):
        # skip the block of 2^k ranges ending at the position when all of them ended by the boundary
        ended = (levels[k][np.maximum(position, 0)] <= seg_s) & (position >= 0)
        position -= ended * (1 << k)
    owned = (position >= 0) & (e[np.maximum(position, 0)] > seg_s)
    return seg_s[owned], seg_e[owned], order[position[owned]]


def _owned(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(segment starts, ends, range index): each range's part not covered by a range started before it
    (the longest first among equal starts), so the outermost range owns every covered nanosecond."""
    order = np.lexsort((-(end - start), start))
    s, e = start[order], end[order]
    before = np.maximum.accumulate(np.concatenate(([np.iinfo(np.int64).min], e[:-1])))
    own_s = np.maximum(s, before)
    keep = e > own_s
    return own_s[keep], e[keep], order[keep]


def _device_gaps(trace: Trace, device: int, lo: int, hi: int, min_gap_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """The device's gaps in [lo, hi), as timeline.py measures them (shorter than min_gap_ns: busy)."""
    gpu = trace.gpu
    start, end = gpu["start"].to_numpy(np.int64), gpu["end"].to_numpy(np.int64)
    rows = device_rows(trace, device) if len(trace.devices) > 1 else None  # (tracetriage.partition)
    if rows is not None:  # the device's rows in the window, gathered a slice at a time (no mask over every row)
        start, end = _in_window(start, end, rows, lo, hi)
    else:
        mine = (end > lo) & (start < hi)
        if not mine.all():  # else the columns themselves: no copy of a lone device's whole table
            start, end = start[mine], end[mine]
    end = iv.not_before(end, start)
    # each operation clipped to the window (copies only when one crosses its edges)
    busy_s, busy_e = iv.union(start if not start.size or start.min() >= lo else np.maximum(start, lo),
                              end if not end.size or end.max() <= hi else np.minimum(end, hi))
    return iv.gaps(busy_s, busy_e, lo, hi, min_gap_ns)


def _in_window(start: np.ndarray, end: np.ndarray, rows: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) of the table's ``rows`` that overlap [lo, hi), in their order: gathered and filtered a
    slice at a time into one pair of arrays (pages touched as written), no temporary the length of ``rows``."""
    out_s, out_e = np.empty(rows.size, np.int64), np.empty(rows.size, np.int64)
    kept = 0
    for i in range(0, rows.size, iv.SLICE):
        at = rows[i:i + iv.SLICE]
        s, e = start[at], end[at]
        keep = (e > lo) & (s < hi)
        n = int(np.count_nonzero(keep))
        out_s[kept:kept + n], out_e[kept:kept + n] = s[keep], e[keep]
        kept += n
    return out_s[:kept], out_e[:kept]


def _process_calls(api, pid: int) -> tuple[np.ndarray, np.ndarray]:
    """The runtime/driver calls of ``pid`` (an end before its start read as the start): the table's
    columns themselves when the process made every call."""
    start, end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    mine = api["pid"].to_numpy() == pid
    if not mine.all():
        start, end = start[mine], end[mine]
    return start, iv.not_before(end, start)


def idle_under(trace: Trace, device: int, lo: int, hi: int, pid: int, name: str, min_gap_ns: int = 1) -> int:
    """The device's idle ns in [lo, hi) under any range of ``pid`` named ``name`` (as :func:`range_name`
    groups it), nested ranges not taken out: the figure for a range the table does not list."""
    ranges = trace.ranges
    if not len(ranges):
        return 0
    mine = (ranges["pid"].to_numpy() == pid) & (ranges["name"].astype(str).map(range_name) == name).to_numpy()
    if not mine.any():
        return 0
    under_s, under_e = iv.union(ranges["start"].to_numpy(np.int64)[mine], ranges["end"].to_numpy(np.int64)[mine])
    gap_s, gap_e = _device_gaps(trace, device, lo, hi, min_gap_ns)
    piece_s, piece_e, _, _ = _pieces(under_s, under_e, gap_s, gap_e)
    return int((piece_e - piece_s).sum())


def _pieces(seg_s, seg_e, gap_s, gap_e) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The overlaps of two disjoint sorted sets: (start, end, segment index, gap index), at most
    len(segments) + len(gaps) of them."""
    first = np.searchsorted(gap_e, seg_s, "right")
    stop = np.searchsorted(gap_s, seg_e, "left")
    count = np.maximum(stop - first, 0)
    seg = np.repeat(np.arange(seg_s.size), count)
    offsets = np.concatenate(([0], np.cumsum(count)[:-1]))
    gap = np.repeat(first - offsets, count) + np.arange(int(count.sum()))
    piece_s = np.maximum(seg_s[seg], gap_s[gap])
    piece_e = np.minimum(seg_e[seg], gap_e[gap])
    keep = piece_e > piece_s
    return piece_s[keep], piece_e[keep], seg[keep], gap[keep]


def idle_in_calls(gap_s: np.ndarray, gap_e: np.ndarray, call_s: np.ndarray, call_e: np.ndarray,
                  sweep: bool = True, span: int | None | str = "find") -> int:
    """The measure of the gaps (disjoint, in order) inside the union of the calls (an end before
    its start: empty). With the calls in start order, by the compiled sweep timeline.py attributes
    gaps with (analyzers/_sweep.c), every call one cause, a slice of gaps at a time against the
    calls that can reach it: one merge of the two lists, linear in both. Else (or without the
    sweep) the calls' union streamed past the gaps (two binary searches per merged call). ``span``: the
    calls' :func:`_call_span` when the caller has it (found here by default)."""
    if not (_sweep is not None and sweep and gap_s.size):
        span = None
    elif span == "find":
        span = _call_span(call_s, call_e)
    if span is None:
        return iv.overlap_measure(gap_s, gap_e, iv.union_slices(call_s, call_e))
    one_cause = np.zeros(1, np.int8)  # one slot: every call's code maps to it (the codes are not read)
    out = np.empty(6 * min(gap_s.size, iv.SLICE), np.int64)
    total = 0
    for a in range(0, gap_s.size, iv.SLICE):
        gs = np.ascontiguousarray(gap_s[a:a + iv.SLICE], np.int64)
        ge = np.ascontiguousarray(gap_e[a:a + iv.SLICE], np.int64)
        i = int(np.searchsorted(call_s, int(gs[0]) - span, "left"))  # no call before it reaches the slice
        j = int(np.searchsorted(call_s, int(ge[-1]), "left"))
        if i < j:
            got = out[:6 * gs.size]
            if _sweep.attribute(gs, ge, call_s, call_e, call_s, one_cause, i, j, got) != 0:
                return iv.overlap_measure(gap_s, gap_e, iv.union_slices(call_s, call_e))
            total += int(got[:gs.size].sum())
    return total


def _call_span(call_s: np.ndarray, call_e: np.ndarray) -> int | None:
    """The longest call, when the calls are flat int64 columns in start order (what the sweep
    reads); else None. One pass, a slice at a time."""
    if not call_s.size or not (call_s.dtype == call_e.dtype == np.int64 and call_s.flags.c_contiguous
                               and call_e.flags.c_contiguous):
        return None
    longest = 0
    for i in range(0, call_s.size, iv.SLICE):
        s = call_s[i:i + iv.SLICE + 1]  # one row past the slice: the order across its edge
        if not bool((s[1:] >= s[:-1]).all()):
            return None
        longest = max(longest, int((call_e[i:i + iv.SLICE] - call_s[i:i + iv.SLICE]).max()))
    return longest


def _segments(hosts: HostRanges, steps: Steps | None, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(starts, ends, range index) of the disjoint segments the host ranges that can answer own (the tiers in
    turn, each naming only what the ones before it left), by start; None when no range owns any."""
    candidate = ~_excluded(hosts, steps, lo, hi) & (hosts.end > np.maximum(hosts.start, lo)) & (hosts.start < hi)
    segments_s, segments_e, segments_of = [], [], []
    taken_s, taken_e = np.empty(0, np.int64), np.empty(0, np.int64)
    for tier in (1, 2, 3, 4):
        rows = np.flatnonzero(candidate & (hosts.tier == tier))
        if not rows.size:
            continue
        own_s, own_e, which = (_innermost if tier == 1 else _owned)(hosts.start[rows], hosts.end[rows])
        if not own_s.size:  # marks only
            continue
        which = rows[which]
        if taken_s.size:  # a later tier names only what the earlier ones left
            free_s, free_e = iv.complement(taken_s, taken_e, int(min(own_s[0], taken_s[0])), int(max(own_e[-1], taken_e[-1])))
            own_s, own_e, at, _ = _pieces(own_s, own_e, free_s, free_e)
            which = which[at]
        segments_s.append(own_s)
        segments_e.append(own_e)
        segments_of.append(which)
        taken_s, taken_e = iv.union(np.concatenate((taken_s, own_s)), np.concatenate((taken_e, own_e)))
    if not segments_s:
        return None
    seg_s, seg_e, seg_of = (np.concatenate(part) for part in (segments_s, segments_e, segments_of))
    order = np.argsort(seg_s, kind="stable")
    return seg_s[order], seg_e[order], seg_of[order]


def idle_by_host(trace: Trace, device: int, lo: int, hi: int, hosts: HostRanges, steps: Steps | None,
                 min_gap_ns: int = 1, timeline: DeviceTimeline | None = None) -> IdleByHost | None:
    """The device's idle time in [lo, hi) by the host range that covers it (module docstring); None when
    the process recorded no host range. ``timeline``: the device's :func:`timeline.device_timeline` over the
    same window and ``min_gap_ns``, whose pass measured the idle ns and the idle inside the process's calls
    on the same gaps (``idle_in_any_call_ns``): then the gaps are found here only when some range can name
    a part of them, and the calls are not swept again."""
    if hosts.empty:
        return None
    window = hi - lo
    pid = int(trace.devices.iloc[device]["pid"])
    segments = _segments(hosts, steps, lo, hi)
    measured = timeline is not None and timeline.idle_in_any_call_ns is not None
    if measured and segments is None:
        gap_s = gap_e = None
    else:
        gap_s, gap_e = _device_gaps(trace, device, lo, hi, min_gap_ns)
    if measured:
        idle_ns, has_calls = timeline.gaps.total_ns, hosts.has_calls(trace.api, pid)
        # host code = idle time outside every call of the process (measured by the timeline's sweep)
        host_code_ns = idle_ns - timeline.idle_in_any_call_ns if has_calls else 0
    else:
        idle_ns = sum(int((gap_e[i:i + iv.SLICE] - gap_s[i:i + iv.SLICE]).sum()) for i in range(0, gap_s.size, iv.SLICE))
        call_s, call_e, span = hosts.calls(trace.api, pid)
        has_calls = bool(call_s.size)
        # host code = idle time outside every call of the process (the calls' union streamed past the gaps)
        host_code_ns = idle_ns - idle_in_calls(gap_s, gap_e, call_s, call_e, span=span) if has_calls else 0
    rows_out: list[dict] = []
    launched: list[int] = []
    attributed = 0
    if segments is not None:
        seg_s, seg_e, seg_of = segments
        piece_s, piece_e, seg, gap = _pieces(seg_s, seg_e, gap_s, gap_e)
        if piece_s.size:
            owner = seg_of[seg]
            key = hosts.name[owner].astype(np.int64) * (len(hosts.sources) + 1) + hosts.source[owner]
            keys, inverse = np.unique(key, return_inverse=True)
            idle = np.bincount(inverse, weights=piece_e - piece_s, minlength=keys.size)
            if has_calls:
                call_s, call_e, _ = hosts.calls(trace.api, pid)
                code = (piece_e - piece_s) - iv.Coverage(*iv.union(call_s, call_e)).overlap(piece_s, piece_e)
            else:
                code = np.zeros(piece_s.size, np.int64)
            code_ns = np.bincount(inverse, weights=code, minlength=keys.size)
            order = np.lexsort((gap, inverse))  # distinct (range, gap) pairs: a sort, no hash table
            pair_key, pair_gap = inverse[order], gap[order]
            first = np.ones(order.size, bool)
            first[1:] = (pair_key[1:] != pair_key[:-1]) | (pair_gap[1:] != pair_gap[:-1])
            gap_count = np.bincount(pair_key[first], minlength=keys.size)
            attributed = int(idle.sum())
            top = np.lexsort((keys, -idle))[:TOP_RANGES]
            launch_at = _gap_launches(trace, device, pid, gap_e) if has_calls else None
            for k in top:
                name_code, source_code = divmod(int(keys[k]), len(hosts.sources) + 1)
                share = round(100.0 * float(idle[k]) / window, 3) if window else 0.0
                rows_out.append({"name": hosts.names[name_code], "source": hosts.sources[source_code],
                                 "idle_ns": int(idle[k]), "pct_of_window": share,
                                 "gaps": int(gap_count[k]), "host_code_ns": int(code_ns[k])})
                if launch_at is not None:
                    mine = (hosts.name == name_code) & (hosts.source == source_code)
                    launched.append(_launched_inside(launch_at[pair_gap[first & (pair_key == k)]],
                                                     hosts.start[mine], hosts.end[mine]))
    return IdleByHost(idle_ns=idle_ns, host_code_idle_ns=host_code_ns, attributed_ns=attributed,
                      sources=sorted(hosts.sources), ranges=rows_out, api_calls_recorded=has_calls,
                      launched_gaps=tuple(launched) if len(launched) == len(rows_out) else ())


def _gap_launches(trace: Trace, device: int, pid: int, gap_e: np.ndarray) -> np.ndarray:
    """Per gap, the start of the runtime call of ``pid`` that launched the GPU operation ending the gap (the
    device's operation starting at the gap's end, joined to its call on (pid, correlation)); -1 where none is
    recorded (the window's last gap, an operation of another process, a call not traced)."""
    out = np.full(gap_e.size, -1, np.int64)
    gpu, api = trace.gpu, trace.api
    rows = device_rows(trace, device) if len(trace.devices) > 1 else np.arange(len(gpu))
    if not rows.size or not len(api) or not gap_e.size:
        return out
    op_start = gpu["start"].to_numpy(np.int64)[rows]
    order = np.argsort(op_start, kind="stable")
    op_start, rows = op_start[order], rows[order]
    at = np.minimum(np.searchsorted(op_start, gap_e, "left"), op_start.size - 1)
    ends_gap = op_start[at] == gap_e
    op_rows = rows[at[ends_gap]]
    op_pid = gpu["pid"].to_numpy()[op_rows]
    op_corr = gpu["correlation"].to_numpy()[op_rows]
    mine = api["pid"].to_numpy() == pid
    call_corr = api["correlation"].to_numpy()[mine]
    call_start = api["start"].to_numpy(np.int64)[mine]
    by_corr = np.argsort(call_corr, kind="stable")
    call_corr, call_start = call_corr[by_corr], call_start[by_corr]
    if not call_corr.size:
        return out
    hit = np.minimum(np.searchsorted(call_corr, op_corr, "left"), call_corr.size - 1)
    found = (call_corr[hit] == op_corr) & (op_pid == pid) & (op_corr > 0)
    launch = np.where(found, call_start[hit], -1)
    out[np.flatnonzero(ends_gap)] = launch
    return out


def _launched_inside(launch_at: np.ndarray, start: np.ndarray, end: np.ndarray) -> int:
    """How many of the gaps (their launch times, -1: unknown) end with an operation launched inside one of the
    intervals [start, end)."""
    known = launch_at[launch_at >= 0]
    if not known.size or not start.size:
        return 0
    union_s, union_e = iv.union(start, end)
    at = np.searchsorted(union_s, known, "right") - 1
    return int(((at >= 0) & (known < union_e[np.maximum(at, 0)])).sum())
