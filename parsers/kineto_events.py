"""The Kineto events a trace keeps, as typed columns filled while the JSON streams by (parsers/kineto.py
turns them into the model): which categories are kept and how their spellings (current, PyTorch
1.8-1.10) map to them, the ids as written, the CPU ops kept as host ranges and shaped operators, the
long Python frames, the CPU->GPU flows. Definitions: the docstring of parsers/kineto.py."""

from __future__ import annotations

import bisect
import heapq
import json

import numpy as np
import pandas as pd

from tracetriage.model import CONTEXT_CHILD_OPS, CONTEXT_OPS, is_work_op
from tracetriage.parsers import coerce

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
# bytes per element of the dtype a c10d collective records (args["dtype"], c10::ScalarType names)
DTYPE_BYTES = {"Double": 8, "Float": 4, "Half": 2, "BFloat16": 2, "Long": 8, "Int": 4, "Short": 2, "Char": 1, "Byte": 1,
               "Bool": 1, "UInt16": 2, "UInt32": 4, "UInt64": 8, "ComplexDouble": 16, "ComplexFloat": 8, "ComplexHalf": 4,
               "Float8_e4m3fn": 1, "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1}


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


def collective_message(args: dict) -> tuple[int, int] | None:
    """(message bytes, group size) of a c10d collective from its recorded args, None where they are not all
    recorded, or odd. The bytes are the larger of the input and output messages (``In msg nelems`` /
    ``Out msg nelems`` x the dtype's size): nccl-tests' size of the op (an all-gather's whole output, a
    reduce-scatter's whole input, an all-reduce's buffer)."""
    nelems = [args.get("In msg nelems"), args.get("Out msg nelems")]
    group, size = args.get("Group size"), DTYPE_BYTES.get(args.get("dtype"))
    if size is None or type(group) is not int or not 0 < group < 1 << 24:
        return None
    counts = [n for n in nelems if type(n) is int and 0 <= n < 1 << 48]
    return (max(counts) * size, group) if counts else None


def _ids(value):
    """A pid/tid as written: an int, a numeric string (PyTorch 1.8–1.10 host threads) or
    ``"stream N"`` (their GPU events); anything else returned as is, for coerce."""
    if type(value) is str:
        text = value[7:] if value.startswith("stream ") else value
        if text.isdigit() and len(text) < 19:
            return int(text)
    return value


class Events:
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
        self.py_events = 0  # python_function events, all of them: the Python tracer (with_stack=True) was on
        self.host_ops: list[tuple] = []  # a min-heap of (dur µs, n, pid, tid, ts µs, name): the longest CPU ops
        self.shapes: dict[str, int] = {}
        # the kernel a launch call names (ROCm runtime events: args.kernel), code into launch_kernels; -1 none
        self.launch_kernel = array("i")
        self.launch_kernels: dict[str, int] = {}
        # the c10d call a collective kernel runs (PyTorch 2.x: args["Collective name"]), code into call_names; -1 none
        self.call_name = array("i")
        self.call_names: dict[str, int] = {}
        # the message a collective records beside its call (args "In msg nelems", "Out msg nelems", "dtype",
        # "Group size"): (bytes, group size) code into messages; -1 none. The record_param_comms op holds the same
        # args where an older PyTorch puts them on the op only: by its External id, for its kernels
        self.call_msg = array("i")
        self.messages: dict[tuple[int, int], int] = {}
        self.op_messages: dict[int, tuple[int, int]] = {}
        self.cat_codes: dict[str, int] = {**_CAT_CODE, **_SPECIAL_CODE}  # every spelling seen -> its code
        self.legacy: set[str] = set()  # the PyTorch 1.8–1.10 category names seen
        self.untyped_shapes = 0  # ops with a work formula whose shapes are PyTorch 1.8's "Input dims" (no types)
        self.other_devices: dict[str, int] = {}  # category of a device not modelled -> events
        # CPU->GPU flow events: (is start, pid, tid, id) four int64 apiece, and ts µs
        self.flow_ints, self.flow_ts = array("q"), array("d")
        # events seen, kept or not: complete ("X") ones and the rest (metadata, instants, flows), so a
        # trace that keeps nothing is told apart as empty, untimed or CPU-only
        self.timed = self.untimed = 0

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
            self.untimed += 1
            if ph == "s" or ph == "f":
                self.add_flow(e)
            return
        self.timed += 1
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
                self.py_events += 1
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
        c = a.get("Collective name")
        self.call_name.append(self.call_names.setdefault(c, len(self.call_names)) if type(c) is str and len(c) < 256 else -1)
        message = collective_message(a) if type(c) is str else None
        self.call_msg.append(-1 if message is None else self.messages.setdefault(message, len(self.messages)))
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
        if name == "record_param_comms":
            message, ext = collective_message(a), a.get("External id")
            if message is not None and type(ext) is int:
                self.op_messages[ext] = message
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
                                                           categories=pd.Index(list(self.launch_kernels), dtype=object)),
                "collective_name": pd.Categorical.from_codes(np.frombuffer(self.call_name, np.int32),
                                                             categories=pd.Index(list(self.call_names), dtype=object)),
                "collective_msg": np.frombuffer(self.call_msg, np.int32)}
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
