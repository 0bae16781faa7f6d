"""The Perfetto file's writer: one packet sequence with interned names and track descriptors
(the ``perfetto`` package's ``TracePacket`` classes through its ``StreamingTraceProtoBuilder``),
the bulk written a slice of rows at a time by :mod:`protowire` in the same wire format; and
the tracks an export spreads slices over (:class:`Lanes`). Formatting only: it draws what
it is given."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
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

from tracetriage.reports import protowire as pw

SEQUENCE_ID = 0x7472  # one writer sequence for the whole file ("tr")
CHUNK_ROWS = 1 << 15  # rows encoded at a time: their byte matrices stay in cache (~2x faster than 256K)


def proto_text(value) -> str:
    """A capture's string as protobuf takes it: any UTF-8 text unchanged (markup and control
    characters included: they are data), lone surrogates from undecodable bytes as U+FFFD."""
    text = str(value)
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class Writer:
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
        text = proto_text(text)
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
        text = proto_text(text)
        iid = self.arg_strings.get(text)
        if iid is None:
            iid = self.arg_strings[text] = len(self.arg_strings) + 1
            self.pending.debug_annotation_string_values.add(iid=iid, str=text.encode("utf-8"))
            self.has_pending = True
        return iid

    def flush_interned(self) -> None:
        if self.has_pending:
            packet = TracePacket(trusted_packet_sequence_id=SEQUENCE_ID, sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
            packet.interned_data.CopyFrom(self.pending)
            self.builder.write_packet(packet)
            self.pending = InternedData()
            self.has_pending = False

    # -- tracks and packets -----------------------------------------------------------------
    def track(self, name: str | None = None, parent: int | None = None, pid: int | None = None,
              tid: int | None = None, process_name: str | None = None, rank: int | None = None,
              ordered: bool = False) -> int:
        uuid = self.next_uuid
        self.next_uuid += 1
        descriptor = TrackDescriptor(uuid=uuid)
        if parent is not None:
            descriptor.parent_uuid = parent
        if name is not None:
            descriptor.name = proto_text(name)
        if tid is not None:
            descriptor.thread.CopyFrom(ThreadDescriptor(pid=int(pid) & 0x7FFFFFFF, tid=int(tid) & 0x7FFFFFFF,
                                               thread_name=proto_text(name or f"thread {tid}")))
        elif pid is not None:
            descriptor.process.CopyFrom(ProcessDescriptor(pid=int(pid) & 0x7FFFFFFF,
                                                 process_name=proto_text(process_name or f"pid {pid}")))
        if rank is not None:
            descriptor.sibling_order_rank = rank
        if ordered:  # children in their sibling_order_rank
            descriptor.child_ordering = TrackDescriptor.EXPLICIT
        self.builder.write_packet(TracePacket(track_descriptor=descriptor))
        return uuid

    def annotations(self, args: dict) -> bytes:
        """TrackEvent bytes holding only these debug annotations (strings interned)."""
        event = TrackEvent()
        for key, value in args.items():
            if value is None:
                continue
            annotation = DebugAnnotation(name_iid=self.arg_name(key))
            if isinstance(value, (bool, np.bool_)):
                annotation.bool_value = bool(value)
            elif isinstance(value, (int, np.integer)):
                annotation.int_value = int(value)
            elif isinstance(value, (float, np.floating)):
                annotation.double_value = float(value)
            else:
                annotation.string_value_iid = self.arg_string(value)
            event.debug_annotations.append(annotation)
        return event.SerializeToString()

    def slice(self, track: int, start: int, end: int, name: str, args: dict | None = None) -> None:
        """One slice made with the classes (for the few: windows, flags, steps' marks)."""
        self.raw(pw.slices(np.array([start], np.int64), np.array([max(end, start)], np.int64), track, self.name(name),
                           self.sequence, begin_extra=[pw.choose([self.annotations(args or {})], np.zeros(1, np.int64))]))

    def raw(self, data: bytes) -> None:
        self.flush_interned()
        self.fh.write(data)


class NameTable:
    """Category code -> interned iid, filled the first time a code is written. ``column``: a
    categorical column as codes (-1: missing, named ``missing``) and its categories."""

    def __init__(self, writer: Writer, column, missing: str):
        self.writer, self.missing = writer, missing
        self.codes, self.cats = column.codes, column.categories
        self.iid = np.zeros(len(self.cats) + 1, np.int64)

    def __call__(self, rows: slice | np.ndarray) -> np.ndarray:
        codes = self.codes[rows]
        for c in np.unique(codes):
            if not self.iid[c]:
                self.iid[c] = self.writer.name(self.missing if c < 0 else str(self.cats[c]))
        return self.iid[codes]


@dataclass
class Lanes:
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

