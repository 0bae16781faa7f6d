"""What the host was doing while the GPU waited before the window: the set-up a window without
steps leaves out (copies before the first kernel, a start-up stall before the work).

A capture that opens with a 463 ms synchronous ``hipMemcpyWithStream`` and then ~10 ms of work
is not "idle 97.9%, no measured cause": the cause is measured — the blocking call — and, when
the trace records Python stacks (Kineto ``with_stack=True``), so is the line that made it.
"""

from __future__ import annotations

import re

import numpy as np

CAUSE_MIN_SHARE = 0.5  # a call covering at least half of the excluded span is its cause


def setup_cause(trace, start_ns: int, end_ns: int) -> dict | None:
    """The host call that covers most of [start_ns, end_ns) (None when none covers half of it),
    with the innermost Python frame around it on the same thread when the trace has frames."""
    span = end_ns - start_ns
    api = trace.api
    if span <= 0 or not len(api):
        return None
    s = api["start"].to_numpy(np.int64)
    e = api["end"].to_numpy(np.int64)
    overlap = np.minimum(e, end_ns) - np.maximum(s, start_ns)
    i = int(np.argmax(overlap))
    if overlap[i] < CAUSE_MIN_SHARE * span:
        return None
    row = api.iloc[i]
    tid = int(row["tid"]) if "tid" in api.columns else -1
    frames = [f for f in trace.meta.get("python_frames") or []
              if (f[0] == tid or f[0] == -1) and f[1] <= s[i] and f[2] >= e[i]]
    caller = _caller(sorted(frames, key=lambda f: f[2] - f[1]))
    return {"call": str(row["name"]), "category": str(row["category"]), "overlap_ns": int(overlap[i]),
            "call_ns": int(e[i] - s[i]), "caller": caller}


_SOURCE = re.compile(r"\.py\(\d+\)")
_LIBRARY = re.compile(r"(^|/)(torch|site-packages|dist-packages|threading|runpy)/|^<")


def _caller(frames: list) -> str | None:
    """The innermost frame of the program's own code (not torch's, not a builtin) around the call,
    with the innermost frame itself when that is a builtin (``copy_`` called from ...)."""
    if not frames:
        return None
    own = next((f[3] for f in frames if _SOURCE.search(f[3]) and not _LIBRARY.search(f[3])), None)
    inner = frames[0][3]
    if own is None:
        return inner
    if inner != own and inner.startswith("<built-in"):
        what = re.sub(r"^<built-in method (\w+) of (\w+) object.*", r"\2.\1", inner)
        return f"{what} in {own}"
    return own
