"""PyTorch profiler (Kineto) Chrome-trace JSON (``.json`` or ``.json.gz``) -> :class:`Trace`.

Event categories used (``cat`` of complete ``ph: X`` events):

* ``kernel``, ``gpu_memcpy``, ``gpu_memset`` — GPU intervals; in Kineto their ``pid``
  is the *device* and ``tid`` the stream, so the owning host process is the one
  whose runtime call has the same ``args.correlation`` (Kineto writes one process
  per file; a rank-less file stays rank-less, it is not assumed to be rank 0);
* ``cuda_runtime`` / ``cuda_driver`` (also used for HIP names on ROCm) — host API calls;
* ``user_annotation`` — ranges (``ProfilerStep#N`` marks the profiler's steps).

The JSON decoder materializes one dict per event anyway; this reader walks the
events once, into columns, and converts column-wise from there.
Timestamps are microseconds (float, ns resolution in newer PyTorch): converted to
int64 ns. Graph kernels are recorded one by one; a kernel launched by
``cudaGraphLaunch``/``hipGraphLaunch`` is marked as graph work.
"""

from __future__ import annotations

import gzip
import json
import re
import zlib

import numpy as np
import pandas as pd

from tracetriage.errors import MissingDataError, TraceFormatError
from tracetriage.model import (
    API_CATEGORIES,
    COLLECTIVE_OPS,
    COPY_KINDS,
    GPU_KINDS,
    Trace,
    api_category,
    collective_op,
    finish_trace,
)
from tracetriage.parsers import coerce
from tracetriage.parsers.common import compact_categorical, json_document, per_distinct

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
API_CATS = ("cuda_runtime", "cuda_driver")
RANGE_CATS = ("user_annotation",)
GZIP_MAGIC = b"\x1f\x8b"
MAX_BYTES = 4 << 30  # 4 GiB of JSON text: beyond any real capture, before it exhausts memory


class _TooDeep(Exception):
    pass


_STEP = np.zeros(256, np.int8)
_STEP[[ord("["), ord("{")]], _STEP[[ord("]"), ord("}")]] = 1, -1
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
MAX_DEPTH = 512  # real traces nest a handful of levels; a streaming parser slows down quadratically with depth


class _Bounded:
    """A binary reader that refuses to read past MAX_BYTES (decompressed). With ``depth``, it
    also watches bracket nesting as the bytes go by and raises _TooDeep past MAX_DEPTH.
    Brackets inside strings are counted too, and the count never goes below zero, so it can only
    overestimate the depth: a false alarm just sends the file to the tolerant reader."""

    def __init__(self, fh, path, depth=False):
        self.fh, self.path, self.size, self.depth, self.rise = fh, path, 0, depth, 0

    def read(self, n=-1):
        if n == 0:  # ijson probes the type of what read() returns with read(0)
            return self.fh.read(0)
        chunk = self.fh.read(n if n > 0 else 1 << 20)
        self.size += len(chunk)
        if self.size > MAX_BYTES:
            raise TraceFormatError(self.path, f"Kineto JSON larger than {MAX_BYTES >> 30} GiB uncompressed: refused")
        brackets = chunk.translate(None, _NOT_BRACKETS) if self.depth else b""  # in C: the few bytes that matter
        if brackets:
            # rise_t = max(0, rise_t-1 + step_t), vectorized: max(rise_0 + C_t, C_t - min_s<=t C_s)
            c = np.cumsum(_STEP[np.frombuffer(brackets, np.uint8)], dtype=np.int64)
            lows = np.minimum.accumulate(np.minimum(c, 0))
            rise = np.maximum(self.rise + c, c - lows)
            if int(rise.max()) > MAX_DEPTH:
                raise _TooDeep
            self.rise = int(rise[-1])
        return chunk


KEPT_CATS = set(GPU_CATS) | set(API_CATS) | set(RANGE_CATS)
KEPT_ARGS = ("correlation", "device", "stream", "bytes")
HEAD_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo")


MISSING = -(1 << 62)  # an absent id: never a valid value (coerce keeps |v| < 2^62)
INT_FIELDS = ("pid", "tid", "correlation", "device", "stream", "bytes")
KEPT_LIST = sorted(KEPT_CATS)
_CAT_CODE = {c: i for i, c in enumerate(KEPT_LIST)}


class _Events:
    """The kept events as typed columns, filled while the JSON streams by: a category code, a name
    code (each distinct name held once), float µs for ts/dur and int64 ids with MISSING for absent
    ones — about 70 bytes an event instead of a tuple of Python objects. A value of any other type
    (text, a huge integer, a list) is set aside with its position, and the column it belongs to is
    handed whole to :mod:`coerce` at the end, so the policy for untrusted values stays there."""

    def __init__(self):
        from array import array

        self.cat, self.name = array("b"), array("i")
        self.ts, self.dur = array("d"), array("d")
        self.ints = {f: array("q") for f in INT_FIELDS}
        self.names: dict[str, int] = {}
        self.odd: dict[str, list] = {}  # field -> [(row, raw value)]

    def __len__(self):
        return len(self.cat)

    def add(self, e) -> None:
        if type(e) is not dict or e.get("ph") != "X":
            return
        cat = e.get("cat")
        code = _CAT_CODE.get(cat) if type(cat) is str else None
        if code is None:
            return
        n = len(self.cat)
        self.cat.append(code)
        name = e.get("name")
        if type(name) is not str:
            name = coerce.text(name)
        self.name.append(self.names.setdefault(name, len(self.names)))
        for field, col in (("ts", self.ts), ("dur", self.dur)):
            v = e.get(field)
            if type(v) is float:
                col.append(v)
            elif type(v) is int and -coerce.LIMIT < v < coerce.LIMIT:
                col.append(float(v))
            else:
                col.append(np.nan)
                if v is not None:
                    self.odd.setdefault(field, []).append((n, v))
        a = e.get("args")
        a = a if type(a) is dict else {}
        for field in INT_FIELDS:
            v = a.get(field) if field in KEPT_ARGS else e.get(field)
            if type(v) is int and -coerce.LIMIT < v < coerce.LIMIT:
                self.ints[field].append(v)
            else:
                self.ints[field].append(MISSING)
                if v is not None:
                    self.odd.setdefault(field, []).append((n, v))

    def frame(self, warnings: list) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        """(cat/name/id columns, ts µs, dur µs), each column through coerce."""
        # categoricals straight from the codes: no string is copied per event
        cols = {"cat": pd.Categorical.from_codes(np.frombuffer(self.cat, np.int8), categories=pd.Index(KEPT_LIST, dtype=object)),
                "name": pd.Categorical.from_codes(np.frombuffer(self.name, np.int32),
                                                  categories=pd.Index(list(self.names), dtype=object))}
        ts = self._column("ts", np.frombuffer(self.ts, np.float64), warnings)
        dur = self._column("dur", np.frombuffer(self.dur, np.float64), warnings)
        for field in INT_FIELDS:
            vals = self._column(field, np.frombuffer(self.ints[field], np.int64), warnings)
            cols[field] = np.where(vals == MISSING, np.nan, vals.astype(np.float64))
        return pd.DataFrame(cols), ts, dur

    def _column(self, field, arr, warnings):
        where = f"traceEvents[].{field}"
        odd = self.odd.get(field)
        if odd:  # rare (hostile or hand-written files): the whole column takes coerce's per-value path
            arr = arr.astype(object)
            if field in INT_FIELDS:
                arr[arr == MISSING] = None
            for i, v in odd:
                arr[i] = v
        if field in INT_FIELDS:
            return coerce.int64(arr, where, warnings, default=MISSING)
        return coerce.float64(arr, where, warnings)


def _opener(path: str):
    """(gzipped?, the open function for it), from the file's magic bytes."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
    except OSError as exc:
        raise TraceFormatError(path, f"unreadable ({exc})") from None
    return gz, gzip.open if gz else open


def head(path: str) -> dict:
    """The small top-level keys written before the events (schemaVersion, deviceProperties,
    distributedInfo): what a batch needs to tell the ranks of one job apart, without reading
    the events. Empty when the file is not strict JSON or ijson is missing."""
    try:
        import ijson
    except ImportError:
        return {}
    gz, opener = _opener(path)
    doc: dict = {}
    try:
        with opener(path, "rb") as fh:
            builder, key = None, None
            for prefix, event, value in ijson.parse(_Bounded(fh, path, depth=True), use_float=True):
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
    except (ijson.JSONError, UnicodeDecodeError, _TooDeep, OSError, EOFError, zlib.error, TraceFormatError):
        return {}
    return doc


_TAIL_INFO = re.compile(rb'"distributedInfo"\s*:\s*(\{[^{}]*\})')


def tail_info(path: str, size: int = 1 << 16) -> dict | None:
    """distributedInfo from the file's last bytes, for exporters that write it after the events
    (a gzipped file is decompressed as a stream, keeping only its tail)."""
    gz, opener = _opener(path)
    try:
        with opener(path, "rb") as fh:
            if gz:
                reader, tail = _Bounded(fh, path), b""
                while chunk := reader.read(1 << 20):
                    tail = (tail + chunk)[-size:]
            else:
                fh.seek(0, 2)
                fh.seek(max(0, fh.tell() - size))
                tail = fh.read(size)
    except (OSError, EOFError, zlib.error, TraceFormatError):
        return None
    m = _TAIL_INFO.search(tail)
    try:
        info = json.loads(m.group(1)) if m else None
    except ValueError:
        return None
    return info if isinstance(info, dict) else None


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
    gz, opener = _opener(path)
    doc = head(path)  # the small top-level keys, read until the events start
    try:
        events = _Events()
        with opener(path, "rb") as fh:
            for e in ijson.items(_Bounded(fh, path, depth=True), "traceEvents.item", use_float=True):
                events.add(e)
        missing = [k for k in HEAD_KEYS[1:] if k not in doc]
        for k in missing:  # written after the events by some exporters: one more scan, values only
            with opener(path, "rb") as fh:
                doc[k] = next(ijson.items(_Bounded(fh, path, depth=True), k, use_float=True), None)
    except (ijson.JSONError, UnicodeDecodeError, _TooDeep):
        return None  # not strict JSON (NaN, a lone surrogate, a cut file) or nested deeper than any trace: the tolerant reader decides
    except (OSError, EOFError, zlib.error) as exc:
        what = "corrupt gzip stream: " if gz else ""
        raise TraceFormatError(path, f"unreadable ({what}{exc})") from None
    doc["traceEvents"] = events
    return doc


def load_json(path: str) -> dict:
    doc = stream_json(path)
    if doc is not None:
        return doc
    gz, opener = _opener(path)
    try:
        with opener(path, "rb") as fh:  # in chunks: memory grows with the file, not with the limit
            reader, parts = _Bounded(fh, path), []
            while chunk := reader.read(1 << 24):
                parts.append(chunk)
        raw = b"".join(parts)
        del parts
    except (OSError, EOFError, zlib.error) as exc:
        what = "corrupt gzip stream: " if gz else ""
        raise TraceFormatError(path, f"unreadable ({what}{exc})") from None
    doc = json_document(path, raw, "Kineto trace")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceFormatError(path, "JSON without a traceEvents list")
    return doc


def _int(value, default: int = -1) -> int:
    """Kineto args are loosely typed (ints, floats, numeric strings, or missing)."""
    got = coerce.scalar_int(value)
    return default if got is None else got


def _copy_kind(name: str) -> str:
    m = re.search(r"(HtoD|DtoH|DtoD|HtoH|PtoP)", name)
    return m.group(1) if m else "other"


def _columns(events, warnings: list) -> pd.DataFrame:
    """The kept events as one frame: times in int64 ns, ids as float64 with NaN for missing or
    invalid ones (numeric strings accepted), every column through coerce. ``events`` is the
    streaming reader's :class:`_Events`, or the tolerant reader's list of dicts."""
    if not isinstance(events, _Events):
        acc = _Events()
        for e in events:
            acc.add(e)
        events = acc
    df, ts, dur = events.frame(warnings)
    # times in µs (fractional): finite values kept; an event without a valid ts is dropped
    ok = np.isfinite(ts) & (np.abs(ts) < 4e15) & (np.nan_to_num(np.abs(dur)) < 4e15)  # µs: ns must stay under 2^62
    if not ok.all():
        warnings.append(f"traceEvents: {int((~ok).sum()):,} events without a valid ts/dur dropped")
        df, ts, dur = df[ok].reset_index(drop=True), ts[ok], dur[ok]
    # whole-µs timestamps (older Kineto) resolve 1 µs; fractional ones (newer) resolve 1 ns
    whole = ts.size and bool(np.all(ts == np.round(ts))) and bool(np.all(np.nan_to_num(dur) == np.round(np.nan_to_num(dur))))
    df.attrs["clock_resolution_ns"] = 1000 if whole else 1
    df["ts"] = np.round(ts * 1000).astype(np.int64)
    df["dur"] = np.round(np.nan_to_num(dur) * 1000).astype(np.int64)
    return df


def _ints(series: pd.Series, default) -> np.ndarray:
    if isinstance(default, np.ndarray):
        return np.where(series.isna(), default, series.fillna(0)).astype(np.int64)
    return series.fillna(default).astype(np.int64).to_numpy()


GRAPH_LAUNCHES = ["cudaGraphLaunch", "hipGraphLaunch", "cuGraphLaunch"]


def _used(cat: pd.Categorical) -> pd.Categorical:
    """The categorical with only the categories its rows use (names are shared by all event kinds)."""
    return compact_categorical(cat.codes, pd.Index(np.asarray(cat.categories, dtype=object), dtype=object))


def _where_categorical(mask: np.ndarray, values: np.ndarray, categories) -> pd.Categorical:
    """values where mask, missing elsewhere, as a categorical of the model's fixed categories."""
    out = pd.Categorical(values, categories=categories)
    codes = np.where(mask, out.codes, -1).astype(out.codes.dtype)
    return pd.Categorical.from_codes(codes, categories=out.categories)


def parse(path: str) -> Trace:
    doc = load_json(path)
    trace = Trace(path=str(path), format="kineto")
    events = doc.get("traceEvents")
    if not isinstance(events, (list, _Events)):
        raise TraceFormatError(path, "traceEvents is not a list of events")
    ev = _columns(events, trace.warnings)
    del events, doc["traceEvents"]  # the typed columns are all that is needed from here
    trace.meta["clock_resolution_ns"] = ev.attrs.get("clock_resolution_ns", 1)
    dist = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
    trace.meta["version"] = str(doc.get("schemaVersion")) if doc.get("schemaVersion") is not None else None
    trace.meta["rank"] = dist.get("rank")
    trace.meta["world_size"] = dist.get("world_size")
    if not dist or "rank" not in dist:
        trace.warnings.append("no distributedInfo rank in the trace: the rank is unknown (not assumed to be 0)")
    gpu_ev = ev[ev["cat"].isin(list(GPU_CATS))]
    api_ev = ev[ev["cat"].isin(API_CATS)]
    rng_ev = ev[ev["cat"].isin(RANGE_CATS)]
    del ev
    if gpu_ev.empty:
        raise MissingDataError(path, "nothing to analyze: CPU-only profiler trace (no kernel, memcpy or memset events)")

    a_pid, a_corr = _ints(api_ev["pid"], 0), _ints(api_ev["correlation"], -1)
    a_name = _used(api_ev["name"].array)
    trace.api = pd.DataFrame({
        "pid": a_pid, "tid": _ints(api_ev["tid"], 0), "start": api_ev["ts"].to_numpy(),
        "end": (api_ev["ts"] + api_ev["dur"]).to_numpy(), "name": a_name,
        "category": pd.Categorical(per_distinct(a_name, api_category), categories=API_CATEGORIES),
        "correlation": a_corr,
    }).sort_values("start", kind="stable", ignore_index=True)
    host_pid = int(pd.Series(a_pid).mode().iloc[0]) if len(a_pid) else 0
    first = ~pd.Index(a_corr).duplicated()  # the first API call of each correlation id launched it
    corr_pid = pd.Series(a_pid[first], index=a_corr[first])
    graph_launch = np.isin(np.asarray(a_name.categories, dtype=object), GRAPH_LAUNCHES)
    corr_graph = pd.Series(graph_launch[a_name.codes[first]] if len(a_name.categories) else np.zeros(int(first.sum()), bool),
                           index=a_corr[first])

    g_cat = gpu_ev["cat"].array
    g_name = _used(gpu_ev["name"].array)
    g_corr = _ints(gpu_ev["correlation"], -1)
    pid = corr_pid.reindex(g_corr).fillna(host_pid).to_numpy(np.int64) if len(corr_pid) else np.full(len(gpu_ev), host_pid, np.int64)
    in_graph = corr_graph.reindex(g_corr).fillna(False).to_numpy(bool) if len(corr_graph) else np.zeros(len(gpu_ev), bool)
    kind = pd.Categorical(np.asarray(g_cat.categories.map(GPU_CATS), dtype=object)[g_cat.codes], categories=GPU_KINDS)
    is_kernel, is_copy = kind == "kernel", kind == "memcpy"
    gpu = pd.DataFrame({
        # GPU events carry the device as their Chrome "pid" when args.device is absent
        "pid": pid, "ordinal": _ints(gpu_ev["device"], _ints(gpu_ev["pid"], 0)), "stream": _ints(gpu_ev["stream"], -1),
        "start": gpu_ev["ts"].to_numpy(), "end": (gpu_ev["ts"] + gpu_ev["dur"]).to_numpy(), "kind": kind,
        "name": g_name, "correlation": g_corr,
        "collective": _where_categorical(is_kernel, per_distinct(g_name, collective_op), COLLECTIVE_OPS),
        "bytes": np.maximum(_ints(gpu_ev["bytes"], 0), 0),
        "copy_kind": _where_categorical(is_copy, per_distinct(g_name, _copy_kind), COPY_KINDS),
        "pageable": per_distinct(g_name, lambda n: "Pageable" in n).astype(bool) & is_copy,
        "in_graph": in_graph,
    })
    raw_props = doc.get("deviceProperties")
    props = {_int(p.get("id", i), i): p for i, p in enumerate(raw_props if isinstance(raw_props, list) else [])
             if isinstance(p, dict)}

    def device_info(ordinal):
        p = props.get(ordinal, {})
        return {"name": str(p.get("name") or "unknown GPU"), "sm_count": _int(p.get("numSms")),
                "memory_bytes": _int(p.get("totalGlobalMem"))}

    finish_trace(trace, gpu, device_info)
    if not rng_ev.empty:
        trace.ranges = pd.DataFrame({
            "pid": _ints(rng_ev["pid"], host_pid), "tid": _ints(rng_ev["tid"], 0),
            "start": rng_ev["ts"].to_numpy(), "end": (rng_ev["ts"] + rng_ev["dur"]).to_numpy(),
            "name": _used(rng_ev["name"].array),
            "domain": pd.Categorical(["user_annotation"] * len(rng_ev)),
        }).sort_values("start", kind="stable", ignore_index=True)
    trace.meta["graph_trace_mode"] = "node" if bool(trace.gpu["in_graph"].any()) else "unknown"
    return trace
