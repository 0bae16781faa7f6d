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
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)
SLICE_BEGIN, SLICE_END = TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END


class Column:
    """Bytes of one field for each row: a left-aligned (rows, width) uint8 matrix and each
    row's length (0: the row has no such field)."""

    __slots__ = ("mat", "len")

    def __init__(self, mat: np.ndarray, length: np.ndarray):
        self.mat, self.len = mat, length


def varint(values: np.ndarray, tag: bytes = b"", present: np.ndarray | None = None) -> Column:
    """``tag`` + the base-128 varint of each value (int64 values as their two's complement,
    as protobuf encodes a negative int64); rows where ``present`` is False get nothing."""
    v = np.asarray(values).astype(np.int64, copy=False).view(np.uint64)
    n = v.size
    top = int(v.max()) if n else 0
    width = max(1, (top.bit_length() + 6) // 7)
    shifts = (np.arange(width, dtype=np.uint64) * np.uint64(7))
    groups = ((v[:, None] >> shifts[None, :]) & np.uint64(0x7F)).astype(np.uint8)
    # a value's length in bytes: 1 + how many of 2^7, 2^14, ... it reaches
    length = 1 + np.searchsorted(_VARINT_LIMITS[:width - 1], v, "right").astype(np.int64)
    more = np.arange(width)[None, :] < (length - 1)[:, None]
    groups |= (more.astype(np.uint8) << 7)
    t = np.frombuffer(tag, np.uint8)
    if t.size:
        groups = np.concatenate((np.broadcast_to(t, (n, t.size)), groups), axis=1)
        length = length + t.size
    if present is not None:
        length = np.where(present, length, 0)
    return Column(groups, length)


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
    return Column(mat, length)


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
    return np.sum([c.len for c in columns], axis=0)


def join(columns: list[Column]) -> bytes:
    """Row by row, each row's fields in column order: one byte string."""
    mat = np.concatenate([c.mat for c in columns], axis=1)
    mask = np.concatenate([np.arange(c.mat.shape[1])[None, :] < c.len[:, None] for c in columns], axis=1)
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
    ts = np.empty(2 * n, np.int64)
    ts[0::2], ts[1::2] = begin, end
    uuid = np.broadcast_to(np.asarray(track_uuid, np.int64), (n,))
    uuid2 = np.repeat(uuid, 2)
    is_begin = np.zeros(2 * n, bool)
    is_begin[0::2] = True
    kind = np.where(is_begin, SLICE_BEGIN, SLICE_END)
    names = np.repeat(np.broadcast_to(np.asarray(name_iid, np.int64), (n,)), 2)
    event = [varint(kind, TAG_TYPE), varint(uuid2, TAG_TRACK_UUID), varint(names, TAG_NAME_IID, is_begin)]
    for extra, side in ((begin_extra, 0), (end_extra, 1)):
        for col in extra or []:
            mat = np.zeros((2 * n, col.mat.shape[1]), np.uint8)
            mat[side::2] = col.mat
            length = np.zeros(2 * n, np.int64)
            length[side::2] = col.len
            event.append(Column(mat, length))
    event_len = total(event)
    packet = [varint(ts, TAG_TIMESTAMP), constant(TAG_TRACK_EVENT, 2 * n), varint(event_len)] + event + \
        [constant(sequence, 2 * n)]
    return join([constant(TAG_PACKET, 2 * n), varint(total(packet))] + packet)
