"""Perfetto slice packets for whole columns at once, in the protobuf wire format.

The export writes tens of millions of slices (a 10M-kernel capture: its kernels, their
launch calls, the idle gaps between them). Building one ``TracePacket`` object per event
with the protobuf classes costs ~3.5 µs a packet, minutes on such a capture; this module
writes the same bytes with numpy, a column at a time (a few ns an event).

Protobuf makes this simple and safe: a message's encoding is the concatenation of its
fields' encodings, in any order, and concatenated ``Trace`` messages are one ``Trace``
(``packet`` is a repeated field). So each begin/end packet is assembled from fields whose
numbers are read from the classes the ``perfetto`` package ships (never typed in here),
and everything that is the same for many events (a track's debug annotations, the
sequence id) is serialized once by those classes and spliced in as bytes.
``tests/test_perfetto.py`` parses the result back with the classes and compares it with
what they serialize for the same events.
"""

from __future__ import annotations

import numpy as np
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import DebugAnnotation, Trace, TracePacket, TrackEvent

try:
    from tracetriage.reports import _protowire
except ImportError:  # built without a C compiler: numpy joins the fields
    _protowire = None
NATIVE = True  # tests turn the compiled join off to compare it with numpy

_VARINT, _FIXED64, _LEN = 0, 1, 2


def _field(message, name: str) -> int:
    return message.DESCRIPTOR.fields_by_name[name].number


def _tag(number: int, wire: int) -> bytes:
    return _varint_bytes((number << 3) | wire)


def _varint_bytes(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


TAG_PACKET = _tag(_field(Trace, "packet"), _LEN)
TAG_TIMESTAMP = _tag(_field(TracePacket, "timestamp"), _VARINT)
TAG_TRACK_EVENT = _tag(_field(TracePacket, "track_event"), _LEN)
TAG_TYPE = _tag(_field(TrackEvent, "type"), _VARINT)
TAG_TRACK_UUID = _tag(_field(TrackEvent, "track_uuid"), _VARINT)
TAG_NAME_IID = _tag(_field(TrackEvent, "name_iid"), _VARINT)
TAG_FLOW = _tag(_field(TrackEvent, "flow_ids"), _FIXED64)
TAG_TERMINATING_FLOW = _tag(_field(TrackEvent, "terminating_flow_ids"), _FIXED64)
TAG_ANNOTATION = _tag(_field(TrackEvent, "debug_annotations"), _LEN)
TAG_ANNOTATION_NAME_IID = _tag(_field(DebugAnnotation, "name_iid"), _VARINT)
TAG_ANNOTATION_INT = _tag(_field(DebugAnnotation, "int_value"), _VARINT)
BATCH_ROWS = 16384
SLICE_BEGIN, SLICE_END = TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END


class Column:
    """Bytes of one field for each row: a left-aligned (rows, width) uint8 matrix and each
    row's length (0: the row has no such field)."""

    __slots__ = ("mat", "len", "full")

    def __init__(self, mat: np.ndarray, length: np.ndarray, full: bool = False):
        self.mat, self.len = mat, length
        self.full = full  # every row has all of its width: nothing to mask


def varint(values: np.ndarray, tag: bytes = b"", present: np.ndarray | None = None) -> Column:
    """``tag`` + the base-128 varint of each value (int64 values as their two's complement,
    as protobuf encodes a negative int64); rows where ``present`` is False get nothing."""
    v = np.asarray(values).astype(np.int64, copy=False).view(np.uint64)
    n = v.size
    top = int(v.max()) if n else 0
    width = max(1, (top.bit_length() + 6) // 7)
    t = len(tag)
    mat = np.empty((n, t + width), np.uint8)
    if t:
        mat[:, :t] = np.frombuffer(tag, np.uint8)
    length = np.full(n, 1 + t, np.int64)
    x = v.copy() if width > 1 else v
    for k in range(width):  # one 7-bit group of every value at a time; more follow while bits are left
        byte = (x & np.uint64(0x7F)).astype(np.uint8)
        if k < width - 1:
            x >>= np.uint64(7)
            more = x != 0
            byte |= more.view(np.uint8) << np.uint8(7)
            length += more
        mat[:, t + k] = byte
    if present is not None:
        length = np.where(present, length, 0)
    return Column(mat, length)


def fixed64(values: np.ndarray, tag: bytes, present: np.ndarray | None = None) -> Column:
    v = np.ascontiguousarray(np.asarray(values).astype("<u8"))
    mat = np.concatenate((np.broadcast_to(np.frombuffer(tag, np.uint8), (v.size, len(tag))),
                          v.view(np.uint8).reshape(-1, 8)), axis=1)
    length = np.full(v.size, len(tag) + 8, np.int64)
    if present is not None:
        length = np.where(present, length, 0)
    return Column(mat, length)


def constant(data: bytes, n: int, present: np.ndarray | None = None) -> Column:
    mat = np.broadcast_to(np.frombuffer(data, np.uint8), (n, len(data))) if data else np.zeros((n, 0), np.uint8)
    length = np.full(n, len(data), np.int64)
    if present is not None:
        length = np.where(present, length, 0)
    return Column(mat, length, full=present is None)


def choose(blobs: list[bytes], index: np.ndarray) -> Column:
    """Per row one of ``blobs`` (index -1: nothing)."""
    width = max((len(b) for b in blobs), default=0)
    table = np.zeros((len(blobs) + 1, width), np.uint8)
    lens = np.zeros(len(blobs) + 1, np.int64)
    for k, b in enumerate(blobs):
        table[k, :len(b)] = np.frombuffer(b, np.uint8)
        lens[k] = len(b)
    idx = np.where(index < 0, len(blobs), index)
    return Column(table[idx], lens[idx])


def total(columns: list[Column]) -> np.ndarray:
    out = columns[0].len.copy()
    for c in columns[1:]:
        out += c.len
    return out


def join(columns: list[Column]) -> bytes:
    """Row by row, each row's fields in column order: one byte string (the compiled join when
    built: one memcpy per field; else numpy, :func:`join_numpy`)."""
    if _protowire is not None and NATIVE:
        n = columns[0].len.size
        parts = []
        for c in columns:
            m = c.mat
            if m.shape[0] and m.strides[0] == 0:  # one row broadcast to all: pass it once
                parts.append((np.ascontiguousarray(m[0]), 0, np.ascontiguousarray(c.len, np.int64)))
            else:
                parts.append((np.ascontiguousarray(m), m.shape[1], np.ascontiguousarray(c.len, np.int64)))
        return _protowire.join(n, parts)
    return join_numpy(columns)


def join_numpy(columns: list[Column]) -> bytes:
    """:func:`join` with numpy.

    When the rows fall into few runs of one length pattern (the usual case: a varint's length
    only changes at powers of 128), each run is cut out of the column matrices with exactly its
    bytes; otherwise the padded matrices are concatenated and compacted through a mask."""
    n = columns[0].len.size
    lens = np.stack([c.len for c in columns], axis=1)
    change = np.flatnonzero((lens[1:] != lens[:-1]).any(axis=1)) + 1
    if change.size < 8:
        bounds = np.concatenate(([0], change, [n]))
        return b"".join(np.concatenate([c.mat[a:b, :ln] for c, ln in zip(columns, lens[a]) if ln], axis=1).tobytes()
                        for a, b in zip(bounds[:-1], bounds[1:]))
    mat = np.concatenate([c.mat for c in columns], axis=1)
    mask = np.concatenate([np.ones((n, c.mat.shape[1]), bool) if c.full else np.arange(c.mat.shape[1])[None, :] < c.len[:, None]
                           for c in columns], axis=1)
    return mat[mask].tobytes()


def annotation_int(name_iid: int, values: np.ndarray, present: np.ndarray | None = None) -> list[Column]:
    """A DebugAnnotation {name_iid, int_value} per row, as the TrackEvent field."""
    body = [constant(TAG_ANNOTATION_NAME_IID + _varint_bytes(name_iid), len(values)),
            varint(values, TAG_ANNOTATION_INT)]
    size = total(body)
    cols = [constant(TAG_ANNOTATION, len(values)), varint(size)] + body
    if present is not None:
        for c in cols:
            c.len = np.where(present, c.len, 0)
            c.full = False
    return cols


def slices(begin: np.ndarray, end: np.ndarray, track_uuid, name_iid, sequence: bytes,
           begin_extra: list[Column] | None = None, end_extra: list[Column] | None = None) -> bytes:
    """One SLICE_BEGIN and one SLICE_END packet per row, interleaved (begin0, end0, begin1, ...).

    ``track_uuid`` and ``name_iid``: an array or one value for all rows. ``sequence``: the
    packet fields every packet carries (its sequence id and flags), serialized once.
    ``begin_extra`` / ``end_extra``: further TrackEvent fields of the begin / end packets
    (debug annotations, flow ids), one Column each, aligned with the rows."""
    n = len(begin)
    if n == 0:
        return b""
    if n > BATCH_ROWS:  # the byte matrices of a batch stay in cache: ~2x faster than one pass over 256K rows
        def part(x, a, b):
            return x if np.ndim(x) == 0 else x[a:b]

        def cols(extra, a, b):
            return [Column(c.mat[a:b], c.len[a:b], c.full) for c in extra or []]

        return b"".join(slices(begin[a:a + BATCH_ROWS], end[a:a + BATCH_ROWS], part(track_uuid, a, a + BATCH_ROWS),
                               part(name_iid, a, a + BATCH_ROWS), sequence, cols(begin_extra, a, a + BATCH_ROWS),
                               cols(end_extra, a, a + BATCH_ROWS)) for a in range(0, n, BATCH_ROWS))
    fixed = []  # TrackEvent fields the same for every row: one constant column
    if np.ndim(track_uuid) == 0:
        fixed_uuid, uuid_col = TAG_TRACK_UUID + _varint_bytes(int(track_uuid)), None
    else:
        fixed_uuid, uuid_col = b"", varint(np.asarray(track_uuid, np.int64), TAG_TRACK_UUID)
    if np.ndim(name_iid) == 0:
        fixed.append(TAG_NAME_IID + _varint_bytes(int(name_iid)))
        name_col = None
    else:
        name_col = varint(np.asarray(name_iid, np.int64), TAG_NAME_IID)
    begin_event = [constant(TAG_TYPE + _varint_bytes(SLICE_BEGIN) + fixed_uuid + b"".join(fixed), n)]
    begin_event += [c for c in (uuid_col, name_col) if c is not None] + list(begin_extra or [])
    end_event = [constant(TAG_TYPE + _varint_bytes(SLICE_END) + fixed_uuid, n)]
    end_event += [c for c in (uuid_col,) if c is not None] + list(end_extra or [])
    row = []
    for ts, event in ((begin, begin_event), (end, end_event)):
        event_len = total(event)
        packet = [varint(ts, TAG_TIMESTAMP), constant(TAG_TRACK_EVENT, n), varint(event_len)] + event + \
            [constant(sequence, n)]
        row += [constant(TAG_PACKET, n), varint(total(packet))] + packet
    return join(row)
