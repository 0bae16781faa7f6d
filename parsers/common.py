"""Helpers shared by the parsers: untrusted JSON, per-distinct-value classification, AMD naming rules."""

from __future__ import annotations

import gzip
import json
import os
import re
from collections import Counter, deque

import numpy as np
import pandas as pd

from tracetriage.errors import TraceFormatError
from tracetriage.parsers.head import HEAD_BYTES, read_head  # noqa: F401 - detection's, re-exported for the parsers


def json_document(path: str, data: str | bytes, what: str):
    """``json.loads`` for a file from the user: every failure is that file's one-line format error.

    Besides malformed text this covers input nested deeper than Python's recursion limit
    (``[[[[...``), on which ``json`` raises RecursionError rather than JSONDecodeError.
    """
    try:
        return json.loads(data)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(path, f"{what} is not valid JSON ({exc.msg}: line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"{what} is not valid JSON ({exc.reason})") from None
    except RecursionError:
        raise TraceFormatError(path, f"{what} is nested too deeply to read") from None
    except ValueError as exc:  # e.g. an integer literal over Python's digit limit
        raise TraceFormatError(path, f"{what} is not readable JSON ({str(exc)[:80]})") from None
    except MemoryError:
        raise TraceFormatError(path, f"{what} is too large to read into memory") from None


GZIP_MAGIC = b"\x1f\x8b"
MAX_JSON_BYTES = 4 << 30  # 4 GiB of JSON text: beyond any real capture, before it exhausts memory
MAX_GZIP_RATIO = 200  # a gzipped trace expanding more than this many times its size is a bomb (real ones: 10-30x)
GZIP_FLOOR_BYTES = 64 << 20  # what any gzipped file may expand to, whatever its ratio (a small file, a tiny trace)
MAX_DEPTH = 512  # real traces nest a handful of levels; a streaming parser slows down quadratically with depth
_STEP = np.zeros(256, np.int8)
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class TooDeep(Exception):
    """JSON nested deeper than MAX_DEPTH (seen by BoundedReader's nesting watch)."""


class BoundedReader:
    """A binary reader that refuses to read past MAX_JSON_BYTES (decompressed). With ``depth``,
    it also watches bracket nesting as the bytes go by and raises TooDeep past MAX_DEPTH.
    Brackets inside strings are counted too, and the count never goes below zero, so it can only
    overestimate the depth: a false alarm just sends the file to the tolerant reader."""

    def __init__(self, fh, path, depth=False, keep_tail: int = 0):
        self.fh, self.path, self.size, self.depth, self.rise = fh, path, 0, depth, 0
        self.keep_tail, self._tail, self._tail_size = keep_tail, deque(), 0
        self.limit, self.packed = MAX_JSON_BYTES, None
        if isinstance(fh, gzip.GzipFile):  # decompressed: bounded by its ratio too, before a bomb fills memory
            self.packed = os.path.getsize(path)
            self.limit = min(MAX_JSON_BYTES, max(GZIP_FLOOR_BYTES, MAX_GZIP_RATIO * self.packed))

    @property
    def tail(self) -> bytes:
        """The last ``keep_tail`` bytes read (at least), without a second pass over the file."""
        return b"".join(self._tail)

    def read(self, n=-1):
        if n == 0:  # ijson probes the type of what read() returns with read(0)
            return self.fh.read(0)
        chunk = self.fh.read(n if n > 0 else 1 << 20)
        self.size += len(chunk)
        if self.keep_tail and chunk:
            self._tail.append(chunk)
            self._tail_size += len(chunk)
            while self._tail_size - len(self._tail[0]) >= self.keep_tail:
                self._tail_size -= len(self._tail.popleft())
        if self.size > self.limit:
            if self.limit < MAX_JSON_BYTES:
                raise TraceFormatError(self.path, f"its gzip stream expands past {self.limit / 2**20:,.0f} MiB, the "
                                                  f"bound for a file of {self.packed:,} bytes ({MAX_GZIP_RATIO}x its size, "
                                                  f"never under {GZIP_FLOOR_BYTES >> 20} MiB; real traces expand 10-30x): "
                                                  "a compression bomb or a corrupt stream, refused")
            raise TraceFormatError(self.path, f"JSON larger than {MAX_JSON_BYTES >> 30} GiB uncompressed: refused")
        brackets = chunk.translate(None, _NOT_BRACKETS) if self.depth else b""  # in C: the few bytes that matter
        if brackets:
            # rise_t = max(0, rise_t-1 + step_t), vectorized: max(rise_0 + C_t, C_t - min_s<=t C_s)
            c = np.cumsum(_STEP[np.frombuffer(brackets, np.uint8)], dtype=np.int64)
            lows = np.minimum.accumulate(np.minimum(c, 0))
            rise = np.maximum(self.rise + c, c - lows)
            if int(rise.max()) > MAX_DEPTH:
                raise TooDeep
            self.rise = int(rise[-1])
        return chunk


def gzip_opener(path: str):
    """(gzipped?, the open function for it), from the file's magic bytes."""
    import gzip

    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise TraceFormatError(path, f"unreadable ({exc})") from None
    return gz, gzip.open if gz else open


def read_json(path: str, what: str):
    """A whole JSON file, plain or gzipped, read in chunks under MAX_JSON_BYTES (memory grows with
    the file, not with the limit); every failure is this file's one-line error."""
    import zlib

    gz, opener = gzip_opener(path)
    try:
        with opener(path, "rb") as fh:
            reader, parts = BoundedReader(fh, path), []
            while chunk := reader.read(1 << 24):
                parts.append(chunk)
        raw = b"".join(parts)
        del parts
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(path, f"unreadable ({'corrupt gzip stream: ' if gz else ''}{exc})") from None
    return json_document(path, raw, what)


TEXT_LIMIT = 256 * 1024 * 1024  # a side artifact (log, scrape, matrix) larger than this is not one




def read_text(path: str, limit: int = TEXT_LIMIT) -> str:
    """A text side artifact, plain or gzipped, bounded: at most ``limit`` bytes are
    decompressed (more is this file's format error, not an exhausted machine);
    undecodable bytes become U+FFFD and are counted by the parser as noise."""
    import zlib

    gz, opener = gzip_opener(path)
    try:
        with opener(path, "rb") as fh:
            data = fh.read(limit + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(path, f"cannot read {'the gzip stream' if gz else 'the file'} ({exc})") from None
    if len(data) > limit:
        raise TraceFormatError(path, f"more than {limit // (1024 * 1024)} MiB of text: too large for a log, scrape or matrix")
    return data.decode("utf-8", errors="replace")


def code_dtype(n: int):
    """The smallest integer type for the codes of ``n`` categories (and -1)."""
    return np.int8 if n < 127 else np.int16 if n < 32767 else np.int32


def compact_categorical(codes, categories) -> pd.Categorical:
    """A categorical over only the categories its codes use (code -1 stays missing).

    pandas' ``remove_unused_categories`` finds the used codes with a sort (np.unique):
    1.4 s on 10M rows. Flags set by one scatter do it in one pass (a bincount would too, but
    counting into a handful of bins serializes on the counters: 0.2 s on 10M rows, 8x slower)."""
    codes = np.asarray(codes)
    categories = pd.Index(categories)
    if not len(categories):
        return pd.Categorical.from_codes(codes, categories=categories)
    used = np.zeros(len(categories) + 1, dtype=bool)  # last slot: code -1
    used[codes] = True
    keep = np.flatnonzero(used[:-1])
    dtype = code_dtype(len(keep))
    lut = np.full(len(categories) + 1, -1, dtype=dtype)  # last slot: code -1
    lut[keep] = np.arange(len(keep), dtype=dtype)
    return pd.Categorical.from_codes(lut[codes], categories=categories[keep])  # a code of -1 indexes the last slot


def from_launch(api_keys, values, gpu_keys, fill) -> np.ndarray:
    """For each GPU record, ``values`` of the API call that launched it: the first call with the
    same key (a correlation id, or a (pid, correlation) MultiIndex); ``fill`` where none did."""
    keys = api_keys if isinstance(api_keys, pd.Index) else pd.Index(api_keys)
    first = ~keys.duplicated()
    found = pd.Series(np.asarray(values)[first], index=keys[first]).reindex(gpu_keys)
    return found.where(found.notna(), fill).to_numpy()


def per_category(cat: pd.Categorical, fn, categories: list[str]) -> pd.Categorical:
    """A categorical over ``categories`` computed once per distinct value of ``cat``."""
    lut = np.array([categories.index(v) if (v := fn(str(c))) in categories else -1 for c in cat.categories.tolist()] + [-1],
                   dtype=np.int8)
    return pd.Categorical.from_codes(lut[np.asarray(cat.codes)], categories=categories)  # code -1: the last slot


def per_distinct(values, fn) -> np.ndarray:
    """fn applied once per distinct value, broadcast back (no Python call per event)."""
    if isinstance(values, pd.Categorical):  # already interned: one call per category
        codes, uniq = np.asarray(values.codes), [str(u) for u in values.categories]
        if not len(codes):
            return np.zeros(0, dtype=object)
    else:
        values = np.asarray(values, dtype=object)
        if not len(values):
            return np.zeros(0, dtype=object)
        codes, uniq = pd.factorize(pd.Series(values).astype(str))
    mapped = np.array([fn(u) for u in uniq] + [None], dtype=object)
    return mapped[np.where(codes < 0, len(uniq), codes)]


UNRECORDED_BYTES = -1  # the ``bytes`` of a copy or memset whose size the format does not record (tracetriage/model.py)


def blit_bytes(kinds: np.ndarray) -> np.ndarray:
    """``bytes`` of rows read from kernel dispatches (rocprofv3): 0 for kernels, UNRECORDED_BYTES for the
    copies and memsets the runtime ran as blit kernels (``__amd_rocclr_fill*`` / ``__amd_rocclr_copy*``):
    a dispatch record has no size."""
    return np.where(np.asarray(kinds, dtype=object) == "kernel", 0, UNRECORDED_BYTES).astype(np.int64)


def blit_kind(name: str) -> str:
    if re.search(r"__amd_rocclr_fill", name):
        return "memset"
    if re.search(r"__amd_rocclr_copy", name):
        return "memcpy"
    return "kernel"


def copy_direction(name: str) -> str:
    n = name.upper()
    for key, label in (("HOST_TO_DEVICE", "HtoD"), ("DEVICE_TO_HOST", "DtoH"), ("DEVICE_TO_DEVICE", "DtoD"),
                       ("HOST_TO_HOST", "HtoH"), ("PEER", "PtoP")):
        if key in n:
            return label
    return "other"


def rccl_api_op(name: str) -> str | None:
    m = re.match(r"^(?:nccl|rccl)"
                 r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|AlltoAll|Gather|Scatter)", name)
    if not m:
        return None
    op = m.group(1)
    renamed = {"Send": "SendRecv", "Recv": "SendRecv", "AlltoAll": "AllToAll", "Gather": "Collective", "Scatter": "Collective"}
    return renamed.get(op, op)


def overlapping_groups(paths: list, span) -> list[list]:
    """Files of one run share a clock and overlap in time; files of different runs do not.
    Groups = chains of overlapping ``span(path) -> (lo, hi) | None`` intervals; a file without
    a span is a group of its own, and so is a file whose span is another's to the nanosecond:
    no two processes (or two profiler sessions) begin and end at the same nanosecond, so such
    files are copies of one capture (tracetriage/runs.py says so by name), not two parts of one run."""
    spans = sorted(((span(p) or (0, -1)), str(p), p) for p in paths)
    copies = {s for s, n in Counter(s for s, _, _ in spans).items() if n > 1 and s[1] >= s[0]}
    groups: list[list] = []
    chain, end = None, None  # the group being built and its end
    for (lo, hi), _, p in spans:
        if (lo, hi) in copies:
            groups.append([p])
        elif chain is not None and end is not None and hi >= lo and lo <= end:
            chain.append(p)
            end = max(end, hi)
        else:
            chain = [p]
            groups.append(chain)
            end = hi if hi >= lo else None
    return groups
