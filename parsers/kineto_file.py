"""Reading a Kineto trace file: the small top-level keys before the events (:func:`head`) and after
them (:func:`tail_info`), the events streamed by ijson into :class:`~.kineto_events.Events`
(:func:`stream_json`), the tolerant whole-document reader for files that are not strict JSON
(:func:`load_json`)."""

from __future__ import annotations

import json
import re
import zlib

from tracetriage.errors import TraceFormatError
from tracetriage.parsers.common import BoundedReader, TooDeep, gzip_opener, read_json
from tracetriage.parsers.kineto_events import HEAD_KEYS, Events


def head(path: str) -> dict:
    """The small top-level keys written before the events (schemaVersion, deviceProperties,
    distributedInfo): what a batch needs to tell the ranks of one job apart, without reading
    the events. Empty when the file is not strict JSON or ijson is missing."""
    try:
        import ijson
    except ImportError:
        return {}
    gz, opener = gzip_opener(path)
    doc: dict = {}
    try:
        with opener(path, "rb") as fh:
            builder, key = None, None
            for prefix, event, value in ijson.parse(BoundedReader(fh, path, depth=True), use_float=True):
                if prefix == "traceEvents" and event == "start_array":
                    break
                if builder is None and prefix in HEAD_KEYS:
                    if event in ("start_map", "start_array"):
                        builder, key = ijson.ObjectBuilder(), prefix
                    else:
                        doc[prefix] = value
                        continue
                if builder is not None:
                    builder.event(event, value)
                    if prefix == key and event in ("end_map", "end_array"):
                        doc[key], builder = builder.value, None
    except (ijson.JSONError, UnicodeDecodeError, TooDeep, OSError, EOFError, zlib.error, TraceFormatError):
        return {}
    return doc


TAIL_BYTES = 1 << 20  # top-level keys written after the events sit in the file's last bytes


def keys_in_tail(tail: bytes, keys) -> dict:
    """Top-level values written after the events (some exporters put distributedInfo or
    deviceProperties last), decoded from the file's tail: the last occurrence of each key."""
    text = tail.decode("utf-8", "replace")
    decoder, out = json.JSONDecoder(), {}
    for key in keys:
        m = None
        for m in re.finditer(rf'"{re.escape(key)}"\s*:\s*', text):
            pass
        if m is not None:
            try:
                out[key] = decoder.raw_decode(text, m.end())[0]
            except ValueError:
                pass
    return out


def tail_info(path: str) -> dict | None:
    """distributedInfo from the file's last bytes, without parsing the events (a gzipped file is
    decompressed as a stream, keeping only its tail)."""
    tail = _tail(path)
    info = keys_in_tail(tail, ["distributedInfo"]).get("distributedInfo") if tail is not None else None
    return info if isinstance(info, dict) else None


def _tail(path: str) -> bytes | None:
    gz, opener = gzip_opener(path)
    try:
        with opener(path, "rb") as fh:
            if gz:
                reader = BoundedReader(fh, path, keep_tail=TAIL_BYTES)
                while reader.read(1 << 20):
                    pass
                tail = reader.tail
            else:
                fh.seek(0, 2)
                fh.seek(max(0, fh.tell() - TAIL_BYTES))
                tail = fh.read(TAIL_BYTES)
    except (OSError, EOFError, zlib.error, TraceFormatError):
        return None
    return tail


def stream_json(path: str) -> dict | None:
    """The trace read event by event (ijson, C backend): only the complete events of the kinds
    analyzed are kept, slimmed to the fields used, so memory follows the events kept rather
    than the file (a 1M-kernel trace's CPU-op events are never held, and a kept event is one
    row of typed columns, names held once). None when ijson is not
    available or the file is not strict JSON (NaN/Infinity), so the caller falls back."""
    try:
        import ijson
    except ImportError:
        return None
    gz, opener = gzip_opener(path)
    doc = head(path)  # the small top-level keys, read until the events start
    try:
        events = Events()
        with opener(path, "rb") as fh:
            reader = BoundedReader(fh, path, depth=True, keep_tail=TAIL_BYTES)
            for e in ijson.items(reader, "traceEvents.item", use_float=True):
                events.add(e)
        # keys some exporters write after the events: from the bytes just read, not another pass
        doc.update(keys_in_tail(reader.tail, [k for k in HEAD_KEYS if k not in doc]))  # schemaVersion too (often last)
    except (ijson.JSONError, UnicodeDecodeError, TooDeep):
        # not strict JSON (NaN, a lone surrogate, a cut file) or nested deeper than any trace: the tolerant reader decides
        return None
    except (OSError, EOFError, zlib.error) as exc:
        what = "corrupt gzip stream: " if gz else ""
        raise TraceFormatError(path, f"unreadable ({what}{exc})") from None
    if not len(events.ts) and _top_level_type(path, "traceEvents") != "start_array":
        return {}  # no events array at all (a dict, a string, null, or absent): load_json says so
    doc["traceEvents"] = events
    return doc


def _top_level_type(path: str, key: str) -> str | None:
    """The ijson event that opens top-level ``key`` (start_array, start_map, string, null, ...),
    None when the key is absent or the file cannot be read that far. Only read when a trace
    kept no event, to tell an empty or CPU-only events array from no array at all."""
    import ijson

    _, opener = gzip_opener(path)
    try:
        with opener(path, "rb") as fh:
            for prefix, event, _ in ijson.parse(BoundedReader(fh, path, depth=True), use_float=True):
                if prefix == key and event != "map_key":
                    return event
    except (ijson.JSONError, UnicodeDecodeError, TooDeep, OSError, EOFError, zlib.error, TraceFormatError):
        return None
    return None


def load_json(path: str) -> dict:
    doc = stream_json(path)
    if doc is None:  # not strict JSON: the whole document through the tolerant reader
        doc = read_json(path, "Kineto trace")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), (list, Events)):
        raise TraceFormatError(path, "JSON without a traceEvents list")
    return doc
