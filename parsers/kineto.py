"""PyTorch profiler (Kineto) Chrome-trace JSON (``.json`` or ``.json.gz``) -> :class:`Trace`.

Event categories used (``cat`` of complete ``ph: X`` events):

* ``kernel``, ``gpu_memcpy``, ``gpu_memset`` — GPU intervals; in Kineto their ``pid``
  is the *device* and ``tid`` the stream, so the owning host process is the one
  whose runtime call has the same ``args.correlation`` (Kineto writes one process
  per file; a rank-less file stays rank-less, it is not assumed to be rank 0);
* ``cuda_runtime`` / ``cuda_driver`` (also used for HIP names on ROCm) — host API calls;
* ``user_annotation`` — ranges (``ProfilerStep#N`` marks the profiler's steps);
* ``cpu_op`` — kept only when it carries recorded shapes (``record_shapes=True``: ``Input Dims``,
  ``Input type``, ``Concrete Inputs``) and is of a kind with a work formula
  (:func:`~tracetriage.model.is_work_op`), as the ``ops`` table; a GPU event's ``External id``
  names the op that launched it (``op_kernels``), and ops that launched nothing are dropped. An op
  of :data:`~tracetriage.model.CONTEXT_OPS` (a fused MoE) gets, as a fourth element of its shape
  record, the shaped child ops of :data:`~tracetriage.model.CONTEXT_CHILD_OPS` recorded inside it
  on its thread, in start order (``[name, dims, types, concrete]`` each): its top-k and the views
  of its expert weights.
  Apart from that, every CPU op of :data:`HOST_OP_MIN_US` or longer (the longest
  :data:`HOST_OPS_MAX`) is kept as a host range, ``meta["host_ops"]`` rows ``[pid, tid, start ns,
  end ns, name]``: what the host did while a GPU idled (analyzers/host_activity.py).

Category names match case-insensitively among the format's known names, current and legacy:
PyTorch 1.8–1.10 (Kineto before its November 2021 logger refactor) wrote fixed capitalised names,
``Kernel``, ``Memcpy``, ``Memset``, ``Runtime``, ``Operator`` (every CPU op and user range;
``ProfilerStep#N`` is one, and is kept as the step's range), ``User`` (GPU-side user spans),
their GPU events' ``tid`` as ``"stream N"``, host ``tid`` as a numeric string and the launch's op as
``args["external id"]``; those traces record no ``deviceProperties`` (said in a warning, never
guessed). A GPU event or launch call without ``args.correlation`` takes the id of the CPU→GPU flow
event bound to it (same pid, tid and ts): ``async``/``launch`` (PyTorch 1.8–1.10),
``async_cpu_to_gpu`` (1.11–1.13), ``ac2g`` (later).

Activity of a device other than a CUDA or ROCm GPU (libkineto's ``mtia_*``, ``hpu_op``, ``xpu_*``,
``privateuse1_*`` activity types) is not modelled: a trace whose device work is only that is
refused naming the device ("a device this tool does not model yet: MTIA"), never called CPU-only.

The JSON decoder materializes one dict per event anyway; this reader walks the
events once, into columns, and converts column-wise from there.
Timestamps are microseconds (float, ns resolution in newer PyTorch): converted to
int64 ns. Graph kernels are recorded one by one; a kernel launched by
``cudaGraphLaunch``/``hipGraphLaunch`` is marked as graph work.
"""

from __future__ import annotations

import bisect
import heapq
import json
import re
import zlib

import numpy as np
import pandas as pd

from tracetriage.errors import MissingDataError, TraceFormatError, UnsupportedInputError
from tracetriage.model import (
    API_CATEGORIES,
    COLLECTIVE_OPS,
    CONTEXT_CHILD_OPS,
    CONTEXT_OPS,
    COPY_KINDS,
    GPU_KINDS,
    Trace,
    api_category,
    collective_op,
    empty_op_kernels,
    finish_trace,
    is_work_op,
)
from tracetriage.parsers import coerce, graph_replays
from tracetriage.parsers.common import (
    BoundedReader,
    TooDeep,
    compact_categorical,
    from_launch,
    gzip_opener,
    per_category,
    per_distinct,
    read_json,
)

GPU_CATS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
API_CATS = ("cuda_runtime", "cuda_driver")
RANGE_CATS = ("user_annotation",)
KEPT_CATS = set(GPU_CATS) | set(API_CATS) | set(RANGE_CATS)
KEPT_ARGS = ("correlation", "device", "stream", "bytes", "External id")
# The fixed category names PyTorch 1.8–1.10 wrote (libkineto output_json.cpp before Nov 2021),
# each with the activity-type name that replaced it.
LEGACY_CATS = {"Kernel": "kernel", "Memcpy": "gpu_memcpy", "Memset": "gpu_memset", "Runtime": "cuda_runtime",
               "Operator": "cpu_op", "User": "gpu_user_annotation"}
# Activity types of devices this tool does not model (libkineto ActivityType.h): category -> device type
OTHER_DEVICE_CATS = {
    "mtia_runtime": "MTIA", "mtia_ccp_events": "MTIA", "mtia_insight": "MTIA", "mtia_counters": "MTIA",
    "hpu_op": "HPU", "xpu_runtime": "XPU", "xpu_driver": "XPU", "xpu_scope_profiler": "XPU", "xpu_sync": "XPU",
    "privateuse1_runtime": "PrivateUse1", "privateuse1_driver": "PrivateUse1",
}
KNOWN_CATS = (*sorted(KEPT_CATS), "cpu_op", "python_function", "gpu_user_annotation", *OTHER_DEVICE_CATS)
# CPU->GPU flow events ("s" at the launch call, "f" bound to the GPU event), by category: their id
# is the launch's correlation id
FLOW_CATS = frozenset(("async", "async_cpu_to_gpu", "ac2g"))
STEP_PREFIX = "ProfilerStep#"  # a legacy Operator of this name is the profiler's step range
MAX_SPELLINGS = 4096  # category spellings remembered with their code
HEAD_KEYS = ("schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds")


PY_FRAME_MIN_US = 1000.0  # python_function events kept to name a blocking call's caller: 1 ms or longer only
PY_FRAMES_MAX = 20_000  # and at most this many (memory stays small on a 1M-event trace)
# CPU ops kept as host ranges (what the host did while a GPU idled: analyzers/host_activity.py): 100 µs or
# longer, the longest HOST_OPS_MAX of them (an op's enclosing ops are at least as long, so the outermost stay)
HOST_OP_MIN_US = 100.0
HOST_OPS_MAX = 20_000
MAX_SHAPE_CHARS = 4096  # a shape record longer than this (a huge tensor list) is not kept
CONTEXT_CHILDREN_MAX = 200_000  # child ops kept for CONTEXT_OPS (TopK, 3-D views): bounded memory
MISSING = -(1 << 62)  # an absent id: never a valid value (coerce keeps |v| < 2^62)
INT_FIELDS = ("pid", "tid", *KEPT_ARGS)
KEPT_LIST = sorted(KEPT_CATS)
_CAT_CODE = {c: i for i, c in enumerate(KEPT_LIST)}
# codes of the categories that are not kept as rows (negative)
_CPU_OP, _PY_FRAME, _OTHER_DEVICE, _IGNORED = -1, -2, -3, -4
_SPECIAL_CODE = {"cpu_op": _CPU_OP, "python_function": _PY_FRAME, **{c: _OTHER_DEVICE for c in OTHER_DEVICE_CATS}}
_BY_LOWER = {**{c.lower(): c for c in KNOWN_CATS}, **{c.lower(): name for c, name in LEGACY_CATS.items()}}


def canonical_category(cat: str) -> str:
    """The current Kineto name of a category as a trace spells it: a case-insensitive match among
    the format's known names (current and PyTorch 1.8–1.10); any other name unchanged."""
    return _BY_LOWER.get(cat.lower(), cat)


def _ids(value):
    """A pid/tid as written: an int, a numeric string (PyTorch 1.8–1.10 host threads) or
    ``"stream N"`` (their GPU events); anything else returned as is, for coerce."""
    if type(value) is str:
        text = value[7:] if value.startswith("stream ") else value
        if text.isdigit() and len(text) < 19:
            return int(text)
    return value


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
        # CPU ops with recorded shapes, as columns: name and shape codes, ids, µs times
        self.op_name, self.op_shape = array("i"), array("i")
        self.op_ext, self.op_pid = array("q"), array("q")
        self.op_ts, self.op_dur = array("d"), array("d")
        self.op_names: dict[str, int] = {}
        self.kept_names: dict[str, bool] = {}  # op name -> is_work_op (memo: one test per distinct name)
        self.context_parents: list[tuple] = []  # (op row, pid, tid, ts, end µs) of CONTEXT_OPS ops
        self.context_children: list[tuple] = []  # (pid, tid, ts µs, [name, dims, types, concrete])
        self.py_frames: list[tuple] = []  # (tid, ts µs, dur µs, name) of long python_function events
        self.host_ops: list[tuple] = []  # a min-heap of (dur µs, n, pid, tid, ts µs, name): the longest CPU ops
        self.shapes: dict[str, int] = {}
        # the kernel a launch call names (ROCm runtime events: args.kernel), code into launch_kernels; -1 none
        self.launch_kernel = array("i")
        self.launch_kernels: dict[str, int] = {}
        self.cat_codes: dict[str, int] = {**_CAT_CODE, **_SPECIAL_CODE}  # every spelling seen -> its code
        self.legacy: set[str] = set()  # the PyTorch 1.8–1.10 category names seen
        self.untyped_shapes = 0  # ops with a work formula whose shapes are PyTorch 1.8's "Input dims" (no types)
        self.other_devices: dict[str, int] = {}  # category of a device not modelled -> events
        # CPU->GPU flow events: (is start, pid, tid, id) four int64 apiece, and ts µs
        self.flow_ints, self.flow_ts = array("q"), array("d")

    def __len__(self):
        return len(self.cat)

    def _code(self, cat: str) -> int:
        """The code of a category spelling not seen before (then remembered, up to MAX_SPELLINGS:
        a file of endless distinct categories costs time, not memory)."""
        name = canonical_category(cat)
        if cat in LEGACY_CATS:
            self.legacy.add(cat)
        code = _CAT_CODE.get(name, _SPECIAL_CODE.get(name, _IGNORED))
        if len(self.cat_codes) < MAX_SPELLINGS:
            self.cat_codes[cat] = code
        return code

    def add(self, e) -> None:
        if type(e) is not dict:
            return
        ph = e.get("ph")
        if ph != "X":
            if ph == "s" or ph == "f":
                self.add_flow(e)
            return
        cat = e.get("cat")
        if type(cat) is not str:
            return
        code = self.cat_codes.get(cat)
        if code is None:
            code = self._code(cat)
        if code < 0:
            if code == _CPU_OP:
                name = e.get("name")
                if type(name) is str and name.startswith(STEP_PREFIX):  # a legacy trace's step
                    self._add_row(e, _CAT_CODE["user_annotation"])
                else:
                    self.add_op(e)
            elif code == _PY_FRAME:
                self.add_py(e)
            elif code == _OTHER_DEVICE:
                name = canonical_category(cat)
                self.other_devices[name] = self.other_devices.get(name, 0) + 1
            return
        self._add_row(e, code)

    def add_flow(self, e: dict) -> None:
        """A CPU->GPU flow event with integer id, pid, tid and a finite ts (others are of no use)."""
        cat = e.get("cat")
        if type(cat) is not str or cat not in FLOW_CATS or (cat == "async" and e.get("name") != "launch"):
            return
        fid, ts, pid, tid = e.get("id"), e.get("ts"), e.get("pid"), e.get("tid")
        if type(pid) is not int:
            pid = _ids(pid)
        if type(tid) is not int:
            tid = _ids(tid)
        if (type(fid) is int and type(pid) is int and type(tid) is int and type(ts) in (int, float)
                and -coerce.LIMIT < fid < coerce.LIMIT and -coerce.LIMIT < pid < coerce.LIMIT
                and -coerce.LIMIT < tid < coerce.LIMIT and -4e15 < ts < 4e15):
            self.flow_ints.extend((e["ph"] == "s", pid, tid, fid))
            self.flow_ts.append(ts)

    def flows_frame(self) -> pd.DataFrame:
        """The kept flow events: start (True at the launch call), pid, tid, ts ns, id."""
        ints = np.frombuffer(self.flow_ints, np.int64).reshape(-1, 4)
        return pd.DataFrame({
            "start": ints[:, 0].astype(bool), "pid": ints[:, 1].astype(np.float64), "tid": ints[:, 2].astype(np.float64),
            "ts": np.round(np.frombuffer(self.flow_ts, np.float64) * 1000).astype(np.int64), "id": ints[:, 3].copy(),
        })

    def _add_row(self, e: dict, code: int) -> None:
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
        k = a.get("kernel")
        self.launch_kernel.append(self.launch_kernels.setdefault(k, len(self.launch_kernels))
                                  if type(k) is str and len(k) < 4096 else -1)
        if "External id" not in a and "external id" in a:  # PyTorch 1.8–1.10 spelling on GPU events and launches
            a = {**a, "External id": a["external id"]}
        for source, fields in ((e, ("pid", "tid")), (a, KEPT_ARGS)):
            for field in fields:
                v = source.get(field)
                if type(v) is str and source is e:
                    v = _ids(v)
                if type(v) is int and -coerce.LIMIT < v < coerce.LIMIT:
                    self.ints[field].append(v)
                else:
                    self.ints[field].append(MISSING)
                    if v is not None:
                        self.odd.setdefault(field, []).append((n, v))

    def add_py(self, e: dict) -> None:
        """A Python frame (with_stack=True) of PY_FRAME_MIN_US or longer: what a long blocking call
        is called from (tracetriage/analyzers names a start-up stall's caller with it)."""
        ts, dur, tid = e.get("ts"), e.get("dur"), e.get("tid")
        if (len(self.py_frames) < PY_FRAMES_MAX and type(ts) in (int, float) and type(dur) in (int, float)
                and PY_FRAME_MIN_US <= dur < 4e15 and abs(ts) < 4e15):
            tid = tid if type(tid) is int and -coerce.LIMIT < tid < coerce.LIMIT else -1
            self.py_frames.append((tid, float(ts), float(dur), coerce.text(e.get("name"))[:300]))

    def add_op(self, e: dict) -> None:
        """A CPU op, kept when it carries shapes and has a work formula; its shape record is
        interned as compact JSON (one string per distinct shape), and an odd value drops the op."""
        name, a = e.get("name"), e.get("args")
        self.add_host_op(e, name)
        if type(name) is not str or type(a) is not dict:
            return
        if name in CONTEXT_CHILD_OPS:
            self.add_context_child(e, name, a)
            return
        kept = self.kept_names.get(name)
        if kept is None:
            kept = self.kept_names.setdefault(name, is_work_op(name))
        if not kept:
            return
        if type(a.get("Input Dims")) is not list:
            if "Input dims" in a:
                self.untyped_shapes += 1  # PyTorch 1.8: dims without input types, so no work is modelled
            return
        ext, pid, ts, dur = a.get("External id"), e.get("pid"), e.get("ts"), e.get("dur")
        if not all(type(v) is int and -coerce.LIMIT < v < coerce.LIMIT for v in (ext, pid)):
            return
        if not all(type(v) in (int, float) and abs(v) < 4e15 for v in (ts, dur)):
            return
        try:
            key = json.dumps([a["Input Dims"], a.get("Input type"), a.get("Concrete Inputs")], separators=(",", ":"),
                             allow_nan=False)
        except (TypeError, ValueError):
            return
        if len(key) > MAX_SHAPE_CHARS:
            return
        if name in CONTEXT_OPS and type(e.get("tid")) is int:
            self.context_parents.append((len(self.op_name), pid, e["tid"], float(ts), float(ts) + float(dur)))
        self.op_name.append(self.op_names.setdefault(name, len(self.op_names)))
        self.op_shape.append(self.shapes.setdefault(key, len(self.shapes)))
        self.op_ext.append(ext)
        self.op_pid.append(pid)
        self.op_ts.append(float(ts))
        self.op_dur.append(float(dur))

    def add_context_child(self, e: dict, name: str, a: dict) -> None:
        """A child op a CONTEXT_OPS op may need (TopK: its k; a 3-D aten::view: an expert weight),
        kept apart with its thread and start (at most CONTEXT_CHILDREN_MAX)."""
        dims, pid, tid, ts = a.get("Input Dims"), e.get("pid"), e.get("tid"), e.get("ts")
        if len(self.context_children) >= CONTEXT_CHILDREN_MAX or type(dims) is not list or not dims:
            return
        if name == "aten::view" and not (type(dims[0]) is list and len(dims[0]) == 3):
            return
        if type(pid) is not int or type(tid) is not int or type(ts) not in (int, float) or abs(ts) >= 4e15:
            return
        self.context_children.append((pid, tid, float(ts), [name, dims, a.get("Input type"), a.get("Concrete Inputs")]))

    def add_context(self) -> None:
        """Each CONTEXT_OPS op's shape record extended with the child ops inside it, on its thread."""
        if not self.context_parents or not self.context_children:
            return
        children = sorted(self.context_children, key=lambda child: child[:3])
        keys = [(pid, tid, ts) for pid, tid, ts, _ in children]
        shapes = list(self.shapes)
        for row, pid, tid, ts, end in self.context_parents:
            first = bisect.bisect_left(keys, (pid, tid, ts))
            last = bisect.bisect_right(keys, (pid, tid, end))
            if first == last:
                continue
            record = json.loads(shapes[self.op_shape[row]])
            try:
                key = json.dumps(record[:3] + [[child[3] for child in children[first:last]]], separators=(",", ":"),
                                 allow_nan=False)
            except (TypeError, ValueError):
                continue
            if len(key) <= MAX_SHAPE_CHARS:
                self.op_shape[row] = self.shapes.setdefault(key, len(self.shapes))

    def add_host_op(self, e: dict, name) -> None:
        """A CPU op of HOST_OP_MIN_US or longer, among the longest HOST_OPS_MAX: a host range."""
        ts, dur, pid, tid = e.get("ts"), e.get("dur"), e.get("pid"), e.get("tid")
        if not (type(ts) in (int, float) and type(dur) in (int, float) and HOST_OP_MIN_US <= dur < 4e15 and abs(ts) < 4e15):
            return
        if len(self.host_ops) >= HOST_OPS_MAX and dur <= self.host_ops[0][0]:
            return
        pid = pid if type(pid) is int and -coerce.LIMIT < pid < coerce.LIMIT else -1
        tid = tid if type(tid) is int and -coerce.LIMIT < tid < coerce.LIMIT else -1
        row = (float(dur), len(self.cat), pid, tid, float(ts), (name if type(name) is str else coerce.text(name))[:300])
        if len(self.host_ops) < HOST_OPS_MAX:
            heapq.heappush(self.host_ops, row)
        else:
            heapq.heapreplace(self.host_ops, row)

    def ops_frame(self) -> pd.DataFrame:
        """The kept ops: pid, start/end ns, name and shape (categoricals), ext_id."""
        self.add_context()
        ts = np.frombuffer(self.op_ts, np.float64)
        start = np.round(ts * 1000).astype(np.int64)
        return pd.DataFrame({
            "pid": np.frombuffer(self.op_pid, np.int64).copy(), "start": start,
            "end": start + np.round(np.frombuffer(self.op_dur, np.float64) * 1000).astype(np.int64),
            "name": pd.Categorical.from_codes(np.frombuffer(self.op_name, np.int32),
                                              categories=pd.Index(list(self.op_names), dtype=object)),
            "shape": pd.Categorical.from_codes(np.frombuffer(self.op_shape, np.int32),
                                               categories=pd.Index(list(self.shapes), dtype=object)),
            "ext_id": np.frombuffer(self.op_ext, np.int64).copy(),
        })

    def frame(self, warnings: list) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
        """(cat/name/id columns, ts µs, dur µs), each column through coerce."""
        # categoricals straight from the codes: no string is copied per event
        cols = {"cat": pd.Categorical.from_codes(np.frombuffer(self.cat, np.int8), categories=pd.Index(KEPT_LIST, dtype=object)),
                "name": pd.Categorical.from_codes(np.frombuffer(self.name, np.int32),
                                                  categories=pd.Index(list(self.names), dtype=object)),
                "launch_kernel": pd.Categorical.from_codes(np.frombuffer(self.launch_kernel, np.int32),
                                                           categories=pd.Index(list(self.launch_kernels), dtype=object))}
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
        events = _Events()
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
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), (list, _Events)):
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
    # whole-µs timestamps (older Kineto) resolve 1 µs; fractional ones (newer) are written to the
    # ns, but a float64 holding 6.5e12 µs (a boot-time clock) only resolves 2^-10 µs (0.98 ns).
    # A gap is next start - (start + duration): three rounded values, so one shorter than 1.5x
    # their combined resolution is rounding, not idle time (back-to-back graph kernels show
    # "gaps" of 0.98 and 1.95 ns).
    whole = ts.size and bool(np.all(ts == np.round(ts))) and bool(np.all(np.nan_to_num(dur) == np.round(np.nan_to_num(dur))))
    if whole:
        df.attrs["clock_resolution_ns"] = 1000
    else:
        spacing_ns = float(np.spacing(np.max(np.abs(ts)))) * 1000.0 if ts.size else 0.0
        df.attrs["clock_resolution_ns"] = max(1, int(np.ceil(1.5 * spacing_ns + 1.5)))
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


def _only(cat: pd.Categorical, mask: np.ndarray) -> pd.Categorical:
    """The categorical where mask holds, missing elsewhere."""
    return pd.Categorical.from_codes(np.where(mask, cat.codes, -1).astype(cat.codes.dtype), categories=cat.categories)


LAUNCH_SLACK_NS = 1_000  # the op and its launch call are rounded from µs floats apiece


def _link_ops(ops: pd.DataFrame, ext: np.ndarray, pid: np.ndarray, corr: np.ndarray,
              in_graph: np.ndarray, launched_at: np.ndarray) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(ops that launched GPU events, one row per such event: pid, correlation, op row). A GPU
    event's External id is the id of the innermost op on the host stack when it was launched, so
    the op's span holds the launch call (``launched_at``, -1 where no call has the event's
    correlation) in the same process: a link that breaks this is a number that happens to match
    (older traces give GPU events their correlation as External id) and is not made. A
    graph-replayed event's External id (an older CUDA trace repeats the graph launch's) is not
    its op's either: the op around the replay did not launch it (parsers/graph_replays.py ties those)."""
    if ops.empty or not (ext >= 0).any():
        return ops.iloc[:0].reset_index(drop=True), empty_op_kernels()
    ops = ops.drop_duplicates("ext_id", keep="last").sort_values("ext_id", ignore_index=True)
    ids = ops["ext_id"].to_numpy()
    at = np.clip(np.searchsorted(ids, ext), 0, len(ids) - 1)
    start, end, op_pid = (ops[c].to_numpy()[at] for c in ("start", "end", "pid"))
    held = (launched_at >= 0) & (start - LAUNCH_SLACK_NS <= launched_at) & (launched_at <= end + LAUNCH_SLACK_NS) \
        & (op_pid == pid)
    hit = (ext >= 0) & (ids[at] == ext) & (corr >= 0) & ~in_graph & held
    used, op = np.unique(at[hit], return_inverse=True)
    kept = ops.iloc[used].reset_index(drop=True)
    for col in ("name", "shape"):
        kept[col] = kept[col].cat.remove_unused_categories()
    return kept, pd.DataFrame({"pid": pid[hit].astype(np.int64), "correlation": corr[hit].astype(np.int64),
                               "nth": np.full(int(hit.sum()), -1, np.int64), "op": op.astype(np.int64)})


def _correlate_by_flow(ev: pd.DataFrame, flows: pd.DataFrame) -> None:
    """Fill the correlation of GPU events and launch calls that carry none from the CPU->GPU flow
    event bound to them: an "f" at the GPU event's pid, tid and ts, an "s" at the launch call's
    (Chrome-trace flow binding, as Kineto writes it). The first flow at a place wins."""
    missing = ev["correlation"].isna().to_numpy()
    if flows.empty or not missing.any():
        return
    for start, cats in ((False, list(GPU_CATS)), (True, list(API_CATS))):
        rows = np.flatnonzero(missing & ev["cat"].isin(cats).to_numpy())
        side = flows[flows["start"] == start].drop_duplicates(["pid", "tid", "ts"])
        if not len(rows) or side.empty:
            continue
        found = ev.iloc[rows][["pid", "tid", "ts"]].merge(side, how="left", on=["pid", "tid", "ts"])["id"].to_numpy()
        hit = ~np.isnan(found)
        ev.iloc[rows[hit], ev.columns.get_loc("correlation")] = found[hit]


def _check_device(path: str, warnings: list, no_gpu: bool, no_launches: bool, other_devices: dict) -> None:
    """Refuse a trace whose device work is of a device this tool does not model (MTIA, HPU, XPU, a
    PrivateUse1 backend): nothing on a CUDA/ROCm GPU, or GPU rows without one CUDA/HIP launch
    call beside that device's runtime (an XPU's kernels share the ``kernel`` category). A trace
    with no device activity at all is CPU-only. Beside CUDA/ROCm work, such events are left out,
    with a warning."""
    devices = sorted({OTHER_DEVICE_CATS[c] for c in other_devices})
    counts = ", ".join(f"{n:,} {c}" for c, n in sorted(other_devices.items()))
    if devices and (no_gpu or no_launches):
        raise UnsupportedInputError(path, f"a device this tool does not model yet: {', '.join(devices)} "
                                          f"({counts} events; it models CUDA and ROCm GPUs)")
    if no_gpu:
        raise MissingDataError(path, "nothing to analyze: CPU-only profiler trace (no kernel, memcpy or memset events)")
    if devices:
        warnings.append(f"{counts} events of a device this tool does not model yet ({', '.join(devices)}) left out")


def parse(path: str) -> Trace:
    doc = load_json(path)
    trace = Trace(path=str(path), format="kineto")
    events = doc["traceEvents"]  # a list or _Events: load_json checked
    if not isinstance(events, _Events):
        acc = _Events()
        for e in events:
            acc.add(e)
        events = acc
    ops = events.ops_frame()
    flows = events.flows_frame()
    legacy, other_devices, untyped_shapes = sorted(events.legacy), dict(events.other_devices), events.untyped_shapes
    # long Python frames, in the events' ns: [tid, start, end, name] (JSON-friendly for the cache)
    trace.meta["python_frames"] = [[tid, round(ts * 1000), round((ts + dur) * 1000), name]
                                   for tid, ts, dur, name in events.py_frames]
    # long CPU ops, in start order: [pid, tid, start, end, name] (JSON-friendly for the cache)
    trace.meta["host_ops"] = [[pid, tid, round(ts * 1000), round((ts + dur) * 1000), name]
                              for dur, _, pid, tid, ts, name in sorted(events.host_ops, key=lambda row: (row[4], row[1]))]
    ev = _columns(events, trace.warnings)
    del events, doc["traceEvents"]  # the typed columns are all that is needed from here
    _correlate_by_flow(ev, flows)
    trace.meta["clock_resolution_ns"] = ev.attrs.get("clock_resolution_ns", 1)
    dist = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
    trace.meta["version"] = str(doc.get("schemaVersion")) if doc.get("schemaVersion") is not None else None
    base = coerce.number(doc.get("baseTimeNanoseconds"))
    trace.meta["started_utc_ns"] = int(base) if isinstance(base, int) and base > 0 else None  # wall-clock start
    trace.meta["rank"] = dist.get("rank")
    trace.meta["world_size"] = dist.get("world_size")
    trace.meta["backend"] = dist.get("backend")
    if not dist or "rank" not in dist:
        trace.warnings.append("no distributedInfo rank in the trace: the rank is unknown (not assumed to be 0)")
    gpu_ev = ev[ev["cat"].isin(list(GPU_CATS))]
    api_ev = ev[ev["cat"].isin(API_CATS)]
    rng_ev = ev[ev["cat"].isin(RANGE_CATS)]
    del ev
    _check_device(path, trace.warnings, gpu_ev.empty, api_ev.empty, other_devices)

    a_pid, a_corr = _ints(api_ev["pid"], 0), _ints(api_ev["correlation"], -1)
    a_name = _used(api_ev["name"].array)
    trace.api = pd.DataFrame({
        "pid": a_pid, "tid": _ints(api_ev["tid"], 0), "start": api_ev["ts"].to_numpy(),
        "end": (api_ev["ts"] + api_ev["dur"]).to_numpy(), "name": a_name,
        "category": pd.Categorical(per_distinct(a_name, api_category), categories=API_CATEGORIES),
        "correlation": a_corr,
        "_ext": _ints(api_ev["External id"], -1), "_kernel": api_ev["launch_kernel"].array,
    }).sort_values("start", kind="stable", ignore_index=True)
    a_ext = trace.api.pop("_ext").to_numpy()
    a_kernel = np.asarray(trace.api.pop("_kernel").astype(object))
    host_pid = int(pd.Series(a_pid).mode().iloc[0]) if len(a_pid) else 0
    graph_launch = np.isin(np.asarray(a_name.categories, dtype=object), GRAPH_LAUNCHES)

    g_cat = gpu_ev["cat"].array
    g_name = _used(gpu_ev["name"].array)
    g_corr = _ints(gpu_ev["correlation"], -1)
    # the owning process and graph-ness come from the launching call (same correlation id)
    pid = from_launch(a_corr, a_pid, g_corr, host_pid).astype(np.int64)
    in_graph = from_launch(a_corr, graph_launch[np.asarray(a_name.codes)] if len(graph_launch) else np.zeros(len(a_corr), bool),
                           g_corr, False).astype(bool)
    kind = pd.Categorical(np.asarray(g_cat.categories.map(GPU_CATS), dtype=object)[g_cat.codes], categories=GPU_KINDS)
    is_kernel, is_copy = kind == "kernel", kind == "memcpy"
    gpu = pd.DataFrame({
        # GPU events carry the device as their Chrome "pid" when args.device is absent
        "pid": pid, "ordinal": _ints(gpu_ev["device"], _ints(gpu_ev["pid"], 0)), "stream": _ints(gpu_ev["stream"], -1),
        "start": gpu_ev["ts"].to_numpy(), "end": (gpu_ev["ts"] + gpu_ev["dur"]).to_numpy(), "kind": kind,
        "name": g_name, "correlation": g_corr,
        "collective": _only(per_category(g_name, collective_op, COLLECTIVE_OPS), is_kernel),
        "bytes": np.maximum(_ints(gpu_ev["bytes"], 0), 0),
        "copy_kind": _only(per_category(g_name, _copy_kind, COPY_KINDS), is_copy),
        "pageable": per_distinct(g_name, lambda n: "Pageable" in n).astype(bool) & is_copy,
        "in_graph": in_graph,
    })
    raw_props = doc.get("deviceProperties")
    props = {_int(p.get("id", i), i): p for i, p in enumerate(raw_props if isinstance(raw_props, list) else [])
             if isinstance(p, dict)}
    if legacy:
        schema = f"PyTorch 1.8–1.10 Kineto trace (categories {', '.join(legacy)})"
        if not props:
            trace.warnings.append(f"{schema} without deviceProperties: the GPU model, its SM count and memory are unknown "
                                  "(not guessed)")
        if untyped_shapes:
            trace.meta["untyped_shapes"] = untyped_shapes  # the efficiency row says why, with the capture that has types
            trace.warnings.append(f"{schema}: {untyped_shapes:,} operators record input dims without input types, so their "
                                  "work (FLOPs, bytes) is not modelled (not guessed)")

    # ROCm traces number kernels by the physical device (HIP_VISIBLE_DEVICES=2 -> device 2) while
    # deviceProperties lists the visible ones from 0: one of each is the same GPU
    lone = next(iter(props.values())) if len(props) == 1 and gpu["ordinal"].nunique() == 1 else {}

    def device_info(ordinal):
        p = props.get(ordinal, lone)
        return {"name": str(p.get("name") or "unknown GPU"), "sm_count": _int(p.get("numSms")),
                "memory_bytes": _int(p.get("totalGlobalMem"))}

    launched_at = from_launch(a_corr, api_ev["ts"].to_numpy(), g_corr, -1).astype(np.int64)
    trace.ops, trace.op_kernels = _link_ops(ops, _ints(gpu_ev["External id"], -1), pid, g_corr, in_graph, launched_at)
    finish_trace(trace, gpu, device_info)
    if not rng_ev.empty:
        trace.ranges = pd.DataFrame({
            "pid": _ints(rng_ev["pid"], host_pid), "tid": _ints(rng_ev["tid"], 0),
            "start": rng_ev["ts"].to_numpy(), "end": (rng_ev["ts"] + rng_ev["dur"]).to_numpy(),
            "name": _used(rng_ev["name"].array),
            "domain": pd.Categorical(["user_annotation"] * len(rng_ev)),
        }).sort_values("start", kind="stable", ignore_index=True)
    trace.meta["graph_trace_mode"] = "node" if bool(trace.gpu["in_graph"].any()) else "unknown"
    # graph captures (the launch calls and shaped ops between Begin/EndCapture), and this trace's
    # replays tied to them where they are the same kernels (parsers/graph_replays.py)
    caps = graph_replays.captures(trace.api, a_ext, a_kernel, ops, trace.ranges)
    if caps:
        trace.meta["graph_captures"] = caps
    if bool(trace.gpu["in_graph"].any()):
        graph_replays.tie(trace, [(str(path), caps, True)] if caps else [])
    return trace
