"""The capture and its verdict on one timeline: a Perfetto trace (``--format perfetto``).

Built with the ``perfetto`` package: track descriptors, interned names and every packet
made of few events are its ``TracePacket`` classes written through its
``StreamingTraceProtoBuilder``; the bulk (kernels, API calls, ranges, idle gaps, claimed
slices) is written a slice of rows at a time by :mod:`protowire` in the same wire format.
Nothing is held per event: memory is one slice of rows (CHUNK_ROWS) plus the name tables.

Times are the capture's own clock (ns), so a timestamp reads the same in Nsight Systems,
rocprofv3 or the PyTorch trace. Tracks:

* per device ``<device id> <GPU name>``: ``stream N`` (kernels, copies with direction and
  bytes, memsets, graph replays; collectives carry ``collective``), and tracetriage's own
  ``tracetriage: idle gaps`` (each gap a slice ``idle gap (<class>)`` holding one slice
  ``idle: <cause>`` per cause, as the analysis attributed it: timeline.device_timeline runs
  again with a hook, nothing is re-derived here), ``tracetriage: findings`` (each finding's
  claimed nanoseconds, from the same ledger the verdict uses) and ``tracetriage: flags``
  (the longest gaps of the analysis);
* per process: one thread track per host thread (runtime/driver calls), ``ranges <domain>
  (tid N)`` (NVTX / roctx / user annotations), ``tracetriage: steps`` with the worst step
  flagged;
* ``tracetriage: window`` (the analysis window, the excluded warm-up / set-up and tail),
  ``tracetriage: export`` (what this file holds and what it leaves out, as arguments) and
  ``tracetriage: verdict`` (findings with no slice of a device window: tail, serving, errors);
* flows from each launch call to the first GPU operation with its (pid, correlation).

The analysis attributes each gap's time to causes as amounts (sync first, then synchronous
copy, launch, other CUDA, host), not as positions: a gap's cause slices are laid end to end
in that order. A finding's claim on an accounting slice is likewise an amount: it is spread
over every gap (or busy interval) of that slice in proportion, so the findings track shows
where the claimed time lies and sums to the claim (within 1 ns per gap).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    DebugAnnotation,
    InternedData,
    ProcessDescriptor,
    ThreadDescriptor,
    TracePacket,
    TrackDescriptor,
    TrackEvent,
)
from perfetto.trace_builder.proto_builder import StreamingTraceProtoBuilder

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers import steps as st
from tracetriage.analyzers import timeline as tl
from tracetriage.analyzers.analysis import SYNC_SLACK_NS
from tracetriage.analyzers.evidence import plural
from tracetriage.model import cat_codes, cat_mask, is_kind, is_sorted
from tracetriage.reports import protowire as pw

SEQUENCE_ID = 0x7472  # one writer sequence for the whole file ("tr")
CHUNK_ROWS = 1 << 15  # rows encoded at a time: their byte matrices stay in cache (~2x faster than 256K)
DEFAULT_WORST_STEPS = 3
GAP_CLASS_NAMES = {"after_sync": "idle gap (after sync)", "short": "idle gap (short)", "long": "idle gap (long)"}
MAX_EVIDENCE_ARGS = 12


def _text(value) -> str:
    """A capture's string as protobuf takes it: any UTF-8 text unchanged (markup and control
    characters included: they are data), lone surrogates from undecodable bytes as U+FFFD."""
    s = str(value)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class _Writer:
    """One packet sequence: interned names, track descriptors, packets."""

    def __init__(self, fh):
        self.fh = fh
        self.builder = StreamingTraceProtoBuilder(fh)
        self.sequence = TracePacket(trusted_packet_sequence_id=SEQUENCE_ID,
                                    sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE).SerializeToString()
        self.event_names: dict[str, int] = {}
        self.arg_names: dict[str, int] = {}
        self.arg_strings: dict[str, int] = {}
        self.pending = InternedData()
        self.has_pending = False
        self.next_uuid = 1
        first = TracePacket(trusted_packet_sequence_id=SEQUENCE_ID,
                            sequence_flags=TracePacket.SEQ_INCREMENTAL_STATE_CLEARED)
        self.builder.write_packet(first)

    # -- interning ------------------------------------------------------------------------
    def name(self, text) -> int:
        text = _text(text)
        iid = self.event_names.get(text)
        if iid is None:
            iid = self.event_names[text] = len(self.event_names) + 1
            self.pending.event_names.add(iid=iid, name=text)
            self.has_pending = True
        return iid

    def arg_name(self, text: str) -> int:
        iid = self.arg_names.get(text)
        if iid is None:
            iid = self.arg_names[text] = len(self.arg_names) + 1
            self.pending.debug_annotation_names.add(iid=iid, name=text)
            self.has_pending = True
        return iid

    def arg_string(self, text) -> int:
        text = _text(text)
        iid = self.arg_strings.get(text)
        if iid is None:
            iid = self.arg_strings[text] = len(self.arg_strings) + 1
            self.pending.debug_annotation_string_values.add(iid=iid, str=text.encode("utf-8"))
            self.has_pending = True
        return iid

    def flush_interned(self) -> None:
        if self.has_pending:
            p = TracePacket(trusted_packet_sequence_id=SEQUENCE_ID, sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
            p.interned_data.CopyFrom(self.pending)
            self.builder.write_packet(p)
            self.pending = InternedData()
            self.has_pending = False

    # -- tracks and packets -----------------------------------------------------------------
    def track(self, name: str | None = None, parent: int | None = None, pid: int | None = None,
              tid: int | None = None, process_name: str | None = None, rank: int | None = None,
              ordered: bool = False) -> int:
        uuid = self.next_uuid
        self.next_uuid += 1
        d = TrackDescriptor(uuid=uuid)
        if parent is not None:
            d.parent_uuid = parent
        if name is not None:
            d.name = _text(name)
        if tid is not None:
            d.thread.CopyFrom(ThreadDescriptor(pid=int(pid) & 0x7FFFFFFF, tid=int(tid) & 0x7FFFFFFF,
                                               thread_name=_text(name or f"thread {tid}")))
        elif pid is not None:
            d.process.CopyFrom(ProcessDescriptor(pid=int(pid) & 0x7FFFFFFF, process_name=_text(process_name or f"pid {pid}")))
        if rank is not None:
            d.sibling_order_rank = rank
        if ordered:  # children in their sibling_order_rank
            d.child_ordering = TrackDescriptor.EXPLICIT
        self.builder.write_packet(TracePacket(track_descriptor=d))
        return uuid

    def annotations(self, args: dict) -> bytes:
        """TrackEvent bytes holding only these debug annotations (strings interned)."""
        ev = TrackEvent()
        for key, value in args.items():
            if value is None:
                continue
            a = DebugAnnotation(name_iid=self.arg_name(key))
            if isinstance(value, (bool, np.bool_)):
                a.bool_value = bool(value)
            elif isinstance(value, (int, np.integer)):
                a.int_value = int(value)
            elif isinstance(value, (float, np.floating)):
                a.double_value = float(value)
            else:
                a.string_value_iid = self.arg_string(value)
            ev.debug_annotations.append(a)
        return ev.SerializeToString()

    def slice(self, track: int, start: int, end: int, name: str, args: dict | None = None) -> None:
        """One slice made with the classes (for the few: windows, flags, steps' marks)."""
        self.raw(pw.slices(np.array([start], np.int64), np.array([max(end, start)], np.int64), track, self.name(name),
                           self.sequence, begin_extra=[pw.choose([self.annotations(args or {})], np.zeros(1, np.int64))]))

    def raw(self, data: bytes) -> None:
        self.flush_interned()
        self.fh.write(data)


class _Lut:
    """Category code -> interned iid, filled the first time a code is written."""

    def __init__(self, writer: _Writer, col: pd.Series, missing: str, fmt=str):
        self.writer, self.missing, self.fmt = writer, missing, fmt
        self.codes, self.cats = cat_codes(col)
        self.iid = np.zeros(len(self.cats) + 1, np.int64)

    def __call__(self, rows: slice | np.ndarray) -> np.ndarray:
        codes = self.codes[rows]
        for c in np.unique(codes):
            if not self.iid[c]:
                self.iid[c] = self.writer.name(self.missing if c < 0 else self.fmt(self.cats[c]))
        return self.iid[codes]


@dataclass
class _Lanes:
    """Tracks keyed by (owner, lane): a slice that starts inside an earlier one of its track and
    ends after it (improper nesting: Perfetto would drop it) goes to an ``(overlapping)`` track."""

    make: object
    tracks: dict = field(default_factory=dict)
    run_end: dict = field(default_factory=dict)
    moved: int = 0

    def assign(self, keys: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        uniq, inv = np.unique(keys, return_inverse=True)
        out = np.empty(keys.size, np.int64)
        for j, k in enumerate(uniq.tolist()):
            idx = np.flatnonzero(inv == j)
            ss, ee = s[idx], e[idx]
            prev = np.maximum.accumulate(np.concatenate(([self.run_end.get(k, np.iinfo(np.int64).min)], ee)))
            before = prev[:-1]
            improper = (ss < before) & (ee > before)
            self.run_end[k] = int(prev[-1])
            out[idx] = self.track(k, 0)
            if improper.any():
                out[idx[improper]] = self.track(k, 1)
                self.moved += int(improper.sum())
        return out

    def track(self, key, lane: int) -> int:
        got = self.tracks.get((key, lane))
        if got is None:
            got = self.tracks[(key, lane)] = self.make(key, lane)
        return got


def _row_ranges(starts: np.ndarray, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Rows of a start-ordered table whose start lies in one of the spans."""
    return [(int(np.searchsorted(starts, a, "left")), int(np.searchsorted(starts, b, "left"))) for a, b in spans]


def _chunks(ranges):
    for r0, r1 in ranges:
        for k in range(r0, r1, CHUNK_ROWS):
            yield slice(k, min(k + CHUNK_ROWS, r1))


def _in_spans(s: np.ndarray, e: np.ndarray, spans) -> np.ndarray:
    keep = np.zeros(s.size, bool)
    for a, b in spans:
        keep |= (e > a) & (s < b)
    return keep


def _flow_keys(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    """Flow id of a (pid, correlation) pair: nonzero, unique per pair (correlations fit 40 bits)."""
    return ((pid.astype(np.int64) & 0xFFFFFF) << 40 | (corr.astype(np.int64) & ((1 << 40) - 1))) + 1


# ---------------------------------------------------------------------------------------------
# What to export


def _spans(trace, window: dict, mode: str, n: int, steps: dict) -> tuple[list[tuple[int, int]], str]:
    lo, hi = int(window["start_ns"]), int(window["end_ns"])
    if mode == "all":
        starts = [t["start"].to_numpy() for t in (trace.gpu, trace.api, trace.ranges) if len(t)]
        ends = [t["end"].to_numpy() for t in (trace.gpu, trace.api, trace.ranges) if len(t)]
        a = min([lo] + [int(x.min()) for x in starts])
        b = max([hi] + [int(x.max()) + 1 for x in ends])
        return [(a, b)], "the whole capture"
    if mode == "worst-steps":
        with_steps = [s for s in steps.values() if s.count]
        if with_steps:
            s = max(with_steps, key=lambda x: x.count)
            d = s.durations
            worst = np.argsort(-d, kind="stable")[:n]
            spans = []
            for i in sorted(int(x) for x in worst):
                a = int(s.starts[max(0, i - 1)])
                b = int(s.ends[min(s.count - 1, i + 1)])
                spans.append((a, b))
            merged = []
            for a, b in spans:
                if merged and a <= merged[-1][1]:
                    merged[-1] = (merged[-1][0], max(merged[-1][1], b))
                else:
                    merged.append((a, b))
            return merged, f"the {len(worst)} slowest steps of pid {s.pid} and the step before and after each"
        return [(lo, hi)], "the analysis window (no steps were found, so worst-steps could not choose)"
    return [(lo, hi)], "the analysis window"


# ---------------------------------------------------------------------------------------------
# The export


def _finding_args(f: dict, slice_name: str | None = None) -> dict:
    args = {"finding": f["id"], "severity": f["severity"], "axis": f["axis"],
            "impact_pct": round(float(f.get("impact_pct") or 0.0), 3), "impact_denominator": f.get("impact_denominator"),
            "title": f.get("title")}
    if slice_name:
        args["claims"] = slice_name
    for k, e in enumerate((f.get("evidence") or [])[:MAX_EVIDENCE_ARGS]):
        args[f"evidence {k + 1}"] = e.get("text") or ""
    return args


class _Claims:
    """The pieces of each finding's claim on one device, spread over that slice's intervals.
    A finding's adjacent pieces (its launch and host parts of one gap) are drawn as one slice."""

    def __init__(self, w: _Writer, track: int, findings: dict, claims: dict, slices_total: dict):
        self.w, self.track = w, track
        self.claims = claims  # finding -> slice -> ns
        self.order = [fid for fid in findings if fid in claims]
        self.total = slices_total  # slice -> ns over the device window (the decomposition)
        self.done = {}  # slice -> cumulative ns of the slice seen so far
        self.drawn: dict[str, int] = {}
        self.largest: dict[str, tuple[int, int]] = {}  # finding -> its longest slice (start, end)
        self.blob_of, self.blobs = {}, []
        for fid in self.order:
            claimed = ", ".join(f"{sl} {ns / 1e6:.3f} ms" for sl, ns in claims[fid].items())
            self.blob_of[fid] = len(self.blobs)
            self.blobs.append(w.annotations(_finding_args(findings[fid], claimed)))
        self.name_iid = {fid: w.name(fid) for fid in self.order}
        self.buffer: list[tuple] = []

    def wants(self, slice_name: str) -> bool:
        return any(slice_name in self.claims[f] for f in self.order)

    def spread(self, slice_name: str, s: np.ndarray, p: np.ndarray, emit: np.ndarray | None = None) -> None:
        """Intervals [s, s + p) of ``slice_name`` in time order (the next ones of the device):
        each finding claiming the slice gets its share of each, end to end in rule order
        (buffered until :meth:`flush`)."""
        total = self.total.get(slice_name, 0)
        before = self.done.get(slice_name, 0)
        cum = before + np.cumsum(p)
        self.done[slice_name] = int(cum[-1]) if cum.size else before
        if not total or not p.size:
            return
        prev_cum = cum - p
        frac, pos_prev = 0.0, np.zeros(p.size, np.int64)
        for k, fid in enumerate(self.order):
            ns = self.claims[fid].get(slice_name, 0)
            if not ns:
                continue
            frac = min(1.0, frac + ns / total)
            amount = np.floor(frac * cum).astype(np.int64) - np.floor(frac * prev_cum).astype(np.int64)
            pos = np.minimum(p, np.maximum(pos_prev, amount))
            keep = pos > pos_prev
            if emit is not None:
                keep &= emit
            if keep.any():
                self.buffer.append((s[keep] + pos_prev[keep], s[keep] + pos[keep], k))
            pos_prev = pos

    def flush(self) -> None:
        if not self.buffer:
            return
        b = np.concatenate([x[0] for x in self.buffer])
        e = np.concatenate([x[1] for x in self.buffer])
        who = np.concatenate([np.full(x[0].size, x[2], np.int64) for x in self.buffer])
        self.buffer = []
        order = np.argsort(b, kind="stable")
        b, e, who = b[order], e[order], who[order]
        # one slice for a finding's pieces that touch (the causes of one gap lie end to end)
        first = np.ones(b.size, bool)
        first[1:] = (who[1:] != who[:-1]) | (b[1:] != e[:-1])
        starts = np.flatnonzero(first)
        last = np.concatenate((starts[1:] - 1, [b.size - 1]))
        b, e, who = b[starts], e[last], who[starts]
        lens = e - b
        for k, fid in enumerate(self.order):
            m = who == k
            if m.any():
                self.drawn[fid] = self.drawn.get(fid, 0) + int(lens[m].sum())
                j = int(np.argmax(np.where(m, lens, -1)))
                old = self.largest.get(fid)
                if old is None or lens[j] > old[1] - old[0]:
                    self.largest[fid] = (int(b[j]), int(e[j]))
        names = np.array([self.name_iid[f] for f in self.order], np.int64)[who]
        blobs = np.array([self.blob_of[f] for f in self.order], np.int64)[who]
        self.w.raw(pw.slices(b, e, self.track, names, self.w.sequence, begin_extra=[pw.choose(self.blobs, blobs)]))


class _TraceExport:
    def __init__(self, w: _Writer, trace, index: int, multi: bool, analysis, mode: str, n: int):
        self.w, self.trace, self.index, self.multi = w, trace, index, multi
        data = analysis.data
        self.window = (data.get("windows") or [data.get("window")])[index]
        self.prefix = f"{index}:" if multi else ""
        self.findings = {f["id"]: f for f in data.get("findings", [])}
        self.claims = (analysis.series or {}).get("claims") or {}
        self.devices_data = {d["id"]: d for d in data.get("devices", [])}
        step_range = (analysis.series or {}).get("step_range")
        pids = sorted(int(p) for p in pd.unique(trace.gpu["pid"].to_numpy())) if len(trace.gpu) else []
        self.steps = {pid: st.find_steps(trace, pid, step_range) for pid in pids}
        self.spans, self.spans_text = _spans(trace, self.window, mode, n, self.steps)
        self.process_tracks: dict[int, int] = {}
        self.names = dict(zip(trace.processes["pid"].tolist(), trace.processes["name"].tolist())) if len(trace.processes) else {}
        self.counts = {"kernels": {}, "gpu_ops": 0, "api_calls": 0, "ranges": 0, "gap_ns_by_cause": {}, "claimed_ns": {},
                       "idle_slices_measured": {}, "largest_claim": {}, "worst_step": {}}
        self.slices = (analysis.series or {}).get("slices") or {}
        self.hosts: dict = {}
        self.left_out = {}

    def process_track(self, pid: int) -> int:
        got = self.process_tracks.get(pid)
        if got is None:
            name = str(self.names.get(pid, f"pid {pid}"))
            got = self.process_tracks[pid] = self.w.track(pid=pid, process_name=f"{self.prefix}{name}" if self.multi else name)
        return got

    # -- device side ---------------------------------------------------------------------------
    def run(self) -> None:
        t = self.trace
        self.device_tracks = {}
        for d in range(len(t.devices)):
            row = t.devices.iloc[d]
            did = self.prefix + t.device_label(d)
            self.device_tracks[d] = self.w.track(name=f"{did} {row['name']}", rank=d, ordered=True)
        self.flows()
        self.gpu()
        self.api()
        self.ranges()
        self.steps_tracks()
        self.window_tracks()
        for d in range(len(t.devices)):
            self.tracetriage_device(d)

    def flows(self) -> None:
        """The exported launch calls' flow keys, sorted: :meth:`gpu_flows` links each to the first
        exported GPU operation with the same (pid, correlation), :meth:`api` starts the flows that
        found one. Memory: two int64 columns of the launch calls, one flag each."""
        t = self.trace
        a = t.api
        self.launch_keys = self.launch_rows = np.empty(0, np.int64)
        self.linked = np.zeros(0, bool)
        if not len(t.gpu) or not len(a):
            return
        a_start = a["start"].to_numpy()
        mine = cat_mask(a, "category", ("launch", "graph_launch")) & (a["correlation"].to_numpy() >= 0)
        mine &= _in_spans(a_start, a_start + 1, self.spans)  # calls starting in the exported spans
        rows = np.flatnonzero(mine)
        del mine
        keys = _flow_keys(a["pid"].to_numpy()[rows], a["correlation"].to_numpy()[rows])
        order = np.argsort(keys, kind="stable")
        self.launch_keys, self.launch_rows = keys[order], rows[order]
        self.linked = np.zeros(rows.size, bool)

    def gpu_flows(self, pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
        """Mask of these GPU rows (the next exported ones, in start order) that end a flow."""
        out = np.zeros(pid.size, bool)
        if not self.launch_keys.size:
            return out
        keys = _flow_keys(pid, corr)
        j = np.minimum(np.searchsorted(self.launch_keys, keys), self.launch_keys.size - 1)
        hit = np.flatnonzero((corr >= 0) & (self.launch_keys[j] == keys))
        if hit.size:
            uniq, first = np.unique(j[hit], return_index=True)  # one GPU row per launch: its first
            new = ~self.linked[uniq]
            self.linked[uniq[new]] = True
            out[hit[first[new]]] = True
        return out

    def gpu(self) -> None:
        t, w = self.trace, self.w
        g = t.gpu
        if not len(g):
            return
        start, end = g["start"].to_numpy(), g["end"].to_numpy()
        dev, stream = g["device"].to_numpy(), g["stream"].to_numpy()
        pid, corr, nbytes = g["pid"].to_numpy(), g["correlation"].to_numpy(), g["bytes"].to_numpy()
        kind_codes, kinds = cat_codes(g["kind"])
        coll_codes, colls = cat_codes(g["collective"])
        ck_codes, cks = cat_codes(g["copy_kind"])
        pageable, in_graph = g["pageable"].to_numpy(), g["in_graph"].to_numpy()
        names = _Lut(w, g["name"], "(unnamed)")
        is_copy = is_kind(g, "memcpy") | is_kind(g, "memset")
        kernel = is_kind(g, "kernel")
        n_kinds = len(kinds) + 1
        blob_index: dict[int, int] = {}
        blobs: list[bytes] = []
        bytes_iid, corr_iid = w.arg_name("bytes"), w.arg_name("correlation")

        def make(key, lane):
            d, s = int(key) >> 32, int(key) & 0xFFFFFFFF
            s = s - (1 << 32) if s >= 1 << 31 else s
            label = f"stream {s}" if s >= 0 else "stream unknown"
            return w.track(name=label + (" (overlapping)" if lane else ""), parent=self.device_tracks[d], rank=2 * (s & 0xFFFF) + lane + 10)

        lanes = _Lanes(make)
        kernels = np.zeros(len(t.devices), np.int64)
        for rows in _chunks(_row_ranges(start, self.spans)):
            s, e = start[rows], np.maximum(end[rows], start[rows])
            keys = (dev[rows].astype(np.int64) << 32) | (stream[rows].astype(np.int64) & 0xFFFFFFFF)
            track = lanes.assign(keys, s, e)
            combo = ((kind_codes[rows].astype(np.int64) + 1) * (len(colls) + 1) + coll_codes[rows] + 1) * (len(cks) + 1) + ck_codes[rows] + 1
            combo = (combo * 2 + pageable[rows]) * 2 + in_graph[rows]
            uniq, inv = np.unique(combo, return_inverse=True)
            for c in uniq.tolist():
                if c not in blob_index:
                    x = c
                    graph_node, x = x % 2, x // 2
                    page, x = x % 2, x // 2
                    ck, x = x % (len(cks) + 1) - 1, x // (len(cks) + 1)
                    co, x = x % (len(colls) + 1) - 1, x // (len(colls) + 1)
                    kd = x - 1
                    kind = str(kinds[kd]) if 0 <= kd < n_kinds - 1 else "unknown"
                    args = {"kind": kind}
                    if co >= 0:
                        args["collective"] = str(colls[co])
                    if kind in ("memcpy", "memset"):
                        args["direction"] = str(cks[ck]) if ck >= 0 and kind == "memcpy" else ("set" if kind == "memset" else "other")
                        args["pageable"] = bool(page)
                    if graph_node:
                        args["in_graph"] = True
                    blob_index[c] = len(blobs)
                    blobs.append(w.annotations(args))
            blob_rows = np.array([blob_index[c] for c in uniq.tolist()], np.int64)[inv]
            extra = [pw.choose(blobs, blob_rows)]
            extra += pw.annotation_int(bytes_iid, nbytes[rows], is_copy[rows])
            extra += pw.annotation_int(corr_iid, corr[rows], corr[rows] >= 0)
            flow = self.gpu_flows(pid[rows], corr[rows])
            if flow.any():
                extra.append(pw.fixed64(_flow_keys(pid[rows], corr[rows]), pw.TAG_TERMINATING_FLOW, flow))
            w.raw(pw.slices(s, e, track, names(rows), w.sequence, begin_extra=extra))
            kernels += np.bincount(dev[rows][kernel[rows]], minlength=len(t.devices))[:len(t.devices)]
            self.counts["gpu_ops"] += s.size
        self.counts["kernels"] = {self.prefix + t.device_label(d): int(kernels[d]) for d in range(len(t.devices))}
        self.counts["overlapping_gpu_ops"] = lanes.moved

    # -- host side -----------------------------------------------------------------------------
    def _host_rows(self, df):
        start = df["start"].to_numpy()
        if is_sorted(start):
            return list(_chunks(_row_ranges(start, self.spans)))
        order = np.argsort(start, kind="stable")
        sorted_start = start[order]
        return [order[r] for r in _chunks(_row_ranges(sorted_start, self.spans))]

    def api(self) -> None:
        t, w = self.trace, self.w
        a = t.api
        if not len(a):
            return
        start, end = a["start"].to_numpy(), a["end"].to_numpy()
        pid, tid, corr = a["pid"].to_numpy(), a["tid"].to_numpy(), a["correlation"].to_numpy()
        names = _Lut(w, a["name"], "(unnamed call)")
        cat_c, cats = cat_codes(a["category"])
        blobs = [w.annotations({"category": str(c)}) for c in cats]
        corr_iid = w.arg_name("correlation")
        api_flow = np.zeros(len(a), bool)
        api_flow[self.launch_rows[self.linked]] = True

        def make(key, lane):
            p, th = divmod_key(key)
            self.process_track(p)
            if not lane:
                return w.track(name=f"thread {th}", pid=p, tid=th)
            return w.track(name=f"CUDA/HIP calls (tid {th}, overlapping)", parent=self.process_track(p))

        lanes = _Lanes(make)
        for rows in self._host_rows(a):
            s, e = start[rows], np.maximum(end[rows], start[rows])
            keys = _pair_key(pid[rows], tid[rows])
            track = lanes.assign(keys, s, e)
            extra = [pw.choose(blobs, cat_c[rows].astype(np.int64))]
            extra += pw.annotation_int(corr_iid, corr[rows], corr[rows] >= 0)
            flow = api_flow[rows]
            if flow.any():
                extra.append(pw.fixed64(_flow_keys(pid[rows], corr[rows]), pw.TAG_FLOW, flow))
            w.raw(pw.slices(s, e, track, names(rows), w.sequence, begin_extra=extra))
            self.counts["api_calls"] += s.size

    def ranges(self) -> None:
        t, w = self.trace, self.w
        r = t.ranges
        if not len(r):
            return
        start, end = r["start"].to_numpy(), r["end"].to_numpy()
        pid, tid = r["pid"].to_numpy(), r["tid"].to_numpy()
        names = _Lut(w, r["name"], "(unnamed range)")
        dom_c, doms = cat_codes(r["domain"])

        def make(key, lane):
            p, th, dc = key
            dom = str(doms[dc]) if dc >= 0 else "default"
            return w.track(name=f"ranges {dom} (tid {th})" + (" (overlapping)" if lane else ""), parent=self.process_track(p))

        ids: dict = {}  # (pid, tid, domain code) -> key of its track
        lanes = _Lanes(lambda k, lane: make(k, lane))
        for rows in self._host_rows(r):
            s, e = start[rows], np.maximum(end[rows], start[rows])
            cols = np.stack([pid[rows].astype(np.int64), tid[rows].astype(np.int64), dom_c[rows].astype(np.int64)])
            uniq, inv = np.unique(cols, axis=1, return_inverse=True)
            ids_here = [ids.setdefault(tuple(int(x) for x in uniq[:, j]), len(ids)) for j in range(uniq.shape[1])]
            keys = np.array(ids_here, np.int64)[inv.ravel()]
            lanes.make = lambda k, lane, _rev={v: k2 for k2, v in ids.items()}: make(_rev[k], lane)
            track = lanes.assign(keys, s, e)
            w.raw(pw.slices(s, e, track, names(rows), w.sequence))
            self.counts["ranges"] += s.size

    def steps_tracks(self) -> None:
        w = self.w
        for pid, s in self.steps.items():
            if not s.count:
                continue
            track = w.track(name="tracetriage: steps", parent=self.process_track(pid))
            d = s.durations
            keep = _in_spans(s.starts, s.ends, self.spans)
            worst = int(np.argmax(d))
            p50 = float(np.percentile(d, 50))
            blobs = [w.annotations({"source": s.source, "kind": "decode"}), w.annotations({"source": s.source, "kind": "prefill"})]
            idx = np.flatnonzero(keep)
            name = np.where(s.is_prefill[idx], w.name("prefill step"), w.name("step")) if s.is_prefill.size else w.name("step")
            extra = [pw.choose(blobs, s.is_prefill[idx].astype(np.int64) if s.is_prefill.size else np.zeros(idx.size, np.int64))]
            extra += pw.annotation_int(w.arg_name("step"), idx)
            w.raw(pw.slices(s.starts[idx], s.ends[idx], track, name, w.sequence, begin_extra=extra))
            flags = w.track(name="tracetriage: flags", parent=self.process_track(pid))
            if keep[worst]:
                self.counts["worst_step"][pid] = (int(s.starts[worst]), int(s.ends[worst]))
                w.slice(flags, int(s.starts[worst]), int(s.ends[worst]), "worst step",
                        {"step": worst, "duration_ns": int(d[worst]), "x_median": round(d[worst] / max(p50, 1.0), 2),
                         "steps_source": s.source})

    def window_tracks(self) -> None:
        w, t = self.w, self.trace
        win = self.window
        lo, hi = int(win["start_ns"]), int(win["end_ns"])
        track = w.track(name=f"{self.prefix}tracetriage: window", rank=-2)
        first = min([lo] + [int(x["start"].min()) for x in (t.gpu, t.api) if len(x)])
        last = max([hi] + [int(x["end"].max()) for x in (t.gpu,) if len(x)])
        if first < lo:
            what = plural(win["warmup_steps_excluded"], "warm-up step") if win.get("warmup_steps_excluded") else "set-up before the window"
            w.slice(track, first, lo, "excluded: warm-up / set-up", {"what": what, "setup_excluded_ns": win.get("setup_excluded_ns", 0)})
        w.slice(track, lo, hi, "analysis window", {"source": win.get("source"), "duration_ns": hi - lo,
                                                  "warmup_steps_excluded": win.get("warmup_steps_excluded", 0)})
        if last > hi:
            w.slice(track, hi, last, "excluded: after the window", {"what": "activity after the last steady step"})

    def tracetriage_device(self, d: int) -> None:
        """The device's gaps, as the analysis attributed them, and the findings' claims."""
        t, w = self.trace, self.w
        did = self.prefix + t.device_label(d)
        lo, hi = int(self.window["start_ns"]), int(self.window["end_ns"])
        parent = self.device_tracks[d]
        gaps_track = w.track(name="tracetriage: idle gaps", parent=parent, rank=1)
        find_track = w.track(name="tracetriage: findings", parent=parent, rank=2)
        flag_track = w.track(name="tracetriage: flags", parent=parent, rank=3)
        claims = {fid: c for fid, c in (self.claims.get(did) or {}).items() if fid in self.findings}
        pid = int(t.devices.iloc[d]["pid"])
        ends = self.sync_ends(pid)
        class_iid = np.array([w.name(GAP_CLASS_NAMES[c]) for c in tl.GAP_CLASSES], np.int64)
        cause_iid = np.array([w.name(f"idle: {c}") for c in tl.CAUSES], np.int64)
        gap_ns = dict.fromkeys(tl.CAUSES, 0)
        measured: dict[str, int] = {}  # slice -> ns, as this pass attributed it
        spans = self.spans
        whole = len(spans) == 1 and spans[0][0] <= lo and spans[0][1] >= hi
        # the slices' totals in the analysis (its decomposition): each claim is a share of them
        totals = dict((self.slices.get(did) or {}))
        busy = self._busy_slices(d, lo, hi, claims) if claims else {}
        for name, (s, e) in busy.items():
            totals[name] = int((e - s).sum())
        spread = _Claims(w, find_track, self.findings, claims, totals) if claims else None

        def on_gaps(gs, ge, causes, after, short):
            for k in range(0, gs.size, CHUNK_ROWS):
                part = slice(k, k + CHUNK_ROWS)
                gaps(gs[part], ge[part], {c: v[part] for c, v in causes.items()}, after[part], short[part])

        def gaps(gs, ge, causes, after, short):
            cls = np.where(after, 0, np.where(short, 1, 2))
            emit = np.ones(gs.size, bool) if whole else _in_spans(gs, ge, spans)
            P = np.stack([causes[c] for c in tl.CAUSES])
            offs = np.cumsum(P, axis=0) - P  # each cause's part, end to end in the analysis's order
            for ci, cname in enumerate(tl.GAP_CLASSES):
                m = cls == ci
                for k, c in enumerate(tl.CAUSES):
                    name = f"idle:{cname}:{c}"
                    measured[name] = measured.get(name, 0) + int(P[k].sum(where=m))
                    if spread is not None and spread.wants(name):
                        mm = m & (P[k] > 0)
                        spread.spread(name, gs[mm] + offs[k][mm], P[k][mm], emit[mm])
            if spread is not None:
                spread.flush()
            if not emit.any():
                return
            w.raw(pw.slices(gs[emit], ge[emit], gaps_track, class_iid[cls[emit]], w.sequence))
            b, e, nm = [], [], []
            for k, c in enumerate(tl.CAUSES):
                m = (P[k] > 0) & emit
                if m.any():
                    b.append(gs[m] + offs[k][m])
                    e.append(gs[m] + offs[k][m] + P[k][m])
                    nm.append(np.full(int(m.sum()), cause_iid[k], np.int64))
                    gap_ns[c] += int(P[k][m].sum())
            if b:
                bb, ee, nn = np.concatenate(b), np.concatenate(e), np.concatenate(nm)
                order = np.argsort(bb, kind="stable")
                w.raw(pw.slices(bb[order], ee[order], gaps_track, nn[order], w.sequence))

        min_gap = int(t.meta.get("clock_resolution_ns") or 1)
        tl.device_timeline(t, d, lo, hi, self.hosts, sync_ends=ends, sync_slack_ns=SYNC_SLACK_NS, min_gap_ns=min_gap,
                           on_gaps=on_gaps)
        self.counts["gap_ns_by_cause"][did] = gap_ns
        self.counts["idle_slices_measured"][did] = measured
        if spread is not None:
            for name, (s, e) in busy.items():
                spread.spread(name, s, e - s, _in_spans(s, e, spans))
            spread.flush()
            self.counts["claimed_ns"][did] = spread.drawn
            self.counts["largest_claim"][did] = spread.largest
        top = (self.devices_data.get(did) or {}).get("gaps", {}).get("top") or []
        for k, gap in enumerate(top[:tl.TOP_GAPS]):
            s0, ln = int(gap["start_ns"]), int(gap["length_ns"])
            if _in_spans(np.array([s0]), np.array([s0 + ln]), spans)[0]:
                w.slice(flag_track, s0, s0 + ln, f"longest gap #{k + 1}", {"length_ns": ln, "cause": gap["cause"], "rank": k + 1})

    def sync_ends(self, pid: int) -> np.ndarray:
        """Sorted ends of the process's blocking calls, as analysis.analyze_trace passes them."""
        api = self.trace.api
        if not len(api):
            return np.empty(0, np.int64)
        blocking = cat_mask(api, "category", st.BLOCKING) & (api["pid"].to_numpy() == pid)
        return np.sort(api["end"].to_numpy()[blocking].astype(np.int64))

    def _busy_slices(self, d: int, lo: int, hi: int, claims: dict) -> dict:
        """Where the claimed busy slices lie: ``copy`` = copies and memsets while no kernel runs,
        ``collective`` = collective kernels while no compute kernel runs (accounting's definitions)."""
        wanted = {sl for c in claims.values() for sl in c if sl in ("copy", "collective")}
        if not wanted:
            return {}
        g = self.trace.gpu
        mine = g["device"].to_numpy() == d
        s, e = g["start"].to_numpy(), g["end"].to_numpy()
        mine &= (e > lo) & (s < hi)
        kernel, graph = is_kind(g, "kernel"), is_kind(g, "graph")
        out = {}
        if "copy" in wanted:
            copies = mine & (is_kind(g, "memcpy") | is_kind(g, "memset"))
            work = mine & (kernel | graph)
            cs, ce = iv.clip(*iv.union(s[copies], e[copies]), lo, hi)
            ws, we = iv.clip(*iv.union(s[work], e[work]), lo, hi)
            out["copy"] = iv.subtract(cs, ce, ws, we)
        if "collective" in wanted:
            coll = g["collective"].cat.codes.to_numpy() >= 0
            cs, ce = iv.clip(*iv.union(s[mine & kernel & coll], e[mine & kernel & coll]), lo, hi)
            ps, pe = iv.clip(*iv.union(s[mine & kernel & ~coll], e[mine & kernel & ~coll]), lo, hi)
            out["collective"] = iv.subtract(cs, ce, ps, pe)
        return out

    def left_out_counts(self) -> dict:
        t = self.trace
        out = {}
        for name, df in (("gpu_ops", t.gpu), ("api_calls", t.api), ("ranges", t.ranges)):
            total = len(df)
            kept = {"gpu_ops": self.counts["gpu_ops"], "api_calls": self.counts["api_calls"], "ranges": self.counts["ranges"]}[name]
            out[name] = int(total - kept)
        return out


def _pair_key(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.int64) << 32) | (b.astype(np.int64) & 0xFFFFFFFF)


def divmod_key(k: int) -> tuple[int, int]:
    hi, lo = int(k) >> 32, int(k) & 0xFFFFFFFF
    return hi, lo - (1 << 32) if lo >= 1 << 31 else lo


def _verdict_track(w: _Writer, analysis, exports: list[_TraceExport]) -> None:
    """Findings that claim no device slice (tail, serving, errors, healthy) on their own tracks,
    over what they are about: the long steps of a tail finding, else the exported span."""
    drawn = {fid for x in exports for c in x.counts["claimed_ns"].values() for fid, ns in c.items() if ns}
    rest = [f for f in analysis.data.get("findings", []) if f["id"] not in drawn]
    if not rest or not exports:
        return
    group = w.track(name="tracetriage: verdict", rank=-1)
    x = exports[0]
    a, b = x.spans[0][0], x.spans[-1][1]
    for f in rest:
        track = w.track(name=f"{f['id']} ({f['severity']})", parent=group)
        args = _finding_args(f)
        spans = []
        if f["axis"] == "tail":
            for ex in exports:
                for s in ex.steps.values():
                    if s.count:
                        d = s.durations
                        long = np.flatnonzero(d > 3.0 * float(np.percentile(d, 50)))
                        keep = _in_spans(s.starts[long], s.ends[long], ex.spans)
                        spans += [(int(s.starts[i]), int(s.ends[i])) for i in long[keep]]
        if not spans:
            spans = [(a, b)]
        for s0, s1 in sorted(spans):
            w.slice(track, s0, s1, f["id"], args)


def export(case, analysis, path, mode: str = "steady", worst_steps: int = DEFAULT_WORST_STEPS) -> dict:
    """Write ``case`` with ``analysis``'s annotations to ``path`` (a Perfetto protobuf trace).
    Returns what was written and what was left out (also in the trace, on ``tracetriage: export``)."""
    from tracetriage.errors import MissingDataError

    if not case.traces:
        raise MissingDataError(case.paths[0] if len(case.paths) == 1 else None,
                               "no profiler trace in this case: nothing to put on a timeline (the Perfetto export "
                               "needs an nsys, rocprofv3 or PyTorch profiler trace)")
    exports = []
    with open(path, "wb", buffering=1 << 20) as fh:
        w = _Writer(fh)
        multi = len(case.traces) > 1
        for i, trace in enumerate(case.traces):
            x = _TraceExport(w, trace, i, multi, analysis, mode, worst_steps)
            x.run()
            exports.append(x)
        _verdict_track(w, analysis, exports)
        summary = _summary(exports, mode, worst_steps)
        info = w.track(name="tracetriage: export", rank=-3)
        for x, s in zip(exports, summary["traces"]):
            for a, b in x.spans:
                w.slice(info, a, b, "exported span", {
                    "trace": s["path"], "mode": summary["mode"], "what": x.spans_text,
                    "left_out_gpu_ops": s["left_out"]["gpu_ops"], "left_out_api_calls": s["left_out"]["api_calls"],
                    "left_out_ranges": s["left_out"]["ranges"], "clock": "the capture's own (ns)"})
        w.flush_interned()
    return summary


def _summary(exports: list[_TraceExport], mode: str, n: int) -> dict:
    traces = []
    for x in exports:
        traces.append({"path": x.trace.path, "spans": [list(s) for s in x.spans], "what": x.spans_text,
                       "kernels_by_device": x.counts["kernels"], "gpu_ops": x.counts["gpu_ops"],
                       "api_calls": x.counts["api_calls"], "ranges": x.counts["ranges"],
                       "gap_ns_by_cause": x.counts["gap_ns_by_cause"], "claimed_ns": x.counts["claimed_ns"],
                       "largest_claim": x.counts["largest_claim"], "worst_step": x.counts["worst_step"],
                       "left_out": x.left_out_counts()})
    return {"mode": f"worst-steps {n}" if mode == "worst-steps" else mode, "traces": traces}
