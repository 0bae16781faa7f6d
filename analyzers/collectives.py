"""Collective communication (NCCL/RCCL and custom all-reduce kernels) per device.

* ``collective_share_pct`` = measure of the union of collective kernels of the
  device in the window / window_ns x 100.
* ``collective_exposed_pct`` = measure of (collective union minus the union of the
  device's compute kernels) / window_ns x 100: communication time that no compute
  kernel on another stream hides.
* ``collectives_by_op[op]`` = union of that op's kernels / window_ns x 100.
* Skew (several ranks in one trace): the k-th collective of every device is taken
  to be the same call when all devices ran the same number of collectives in the
  window; skew_k = latest start - earliest start. p50 and max are reported, with
  the number of collectives matched (0 when they cannot be aligned).
"""

from __future__ import annotations

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers.metrics import DeviceCollectives
from tracetriage.model import Trace, is_kind


def device_collectives(trace: Trace, device: int, lo: int, hi: int) -> DeviceCollectives:
    g = trace.gpu
    window = hi - lo
    mine = (g["device"].to_numpy() == device) & is_kind(g, "kernel")
    coll_codes = g["collective"].cat.codes.to_numpy()
    is_coll = mine & (coll_codes >= 0)
    if not is_coll.any():  # most single-GPU captures: no compute union to build
        return DeviceCollectives(collective_ns=0, collective_share_pct=0.0, collective_exposed_pct=0.0, collectives_by_op={},
                                 collective_count=0, starts=np.empty(0, np.int64), exposed_ns=0)
    starts, ends = g["start"].to_numpy(), g["end"].to_numpy()
    cs, ce = iv.clip(*iv.union(starts[is_coll], ends[is_coll]), lo, hi)
    comp = mine & (coll_codes < 0)
    ps, pe = iv.clip(*iv.union(starts[comp], ends[comp]), lo, hi)
    coll = g[is_coll]  # collectives are few: a real frame is fine
    # exposed = collective time not covered by compute: |C| - |C ∩ P|, via P's coverage function
    hidden = int(iv.Coverage(ps, pe).overlap(cs, ce).sum()) if cs.size else 0
    exposed_ns = iv.measure(cs, ce) - hidden
    by_op = {}
    for op, grp in coll.groupby("collective", observed=True):
        s, e = iv.clip(*iv.union(grp["start"].to_numpy(), grp["end"].to_numpy()), lo, hi)
        by_op[str(op)] = round(100.0 * iv.measure(s, e) / window, 3) if window else 0.0
    in_window = coll[(coll["start"] >= lo) & (coll["start"] < hi)]
    return DeviceCollectives(
        collective_ns=iv.measure(cs, ce),
        collective_share_pct=round(100.0 * iv.measure(cs, ce) / window, 3) if window else 0.0,
        collective_exposed_pct=round(100.0 * exposed_ns / window, 3) if window else 0.0,
        collectives_by_op=by_op,
        collective_count=int(len(in_window)),
        starts=np.sort(in_window["start"].to_numpy(np.int64)),
        exposed_ns=int(exposed_ns),
    )


def rank_skew(per_device_starts: list[np.ndarray]) -> dict:
    """Start-time spread of the same collective across devices (see module docstring)."""
    if len(per_device_starts) < 2:
        return {"matched": 0, "p50_ns": None, "max_ns": None, "reason": "fewer than two devices"}
    counts = {a.size for a in per_device_starts}
    if len(counts) != 1 or 0 in counts:
        return {
            "matched": 0,
            "p50_ns": None,
            "max_ns": None,
            "reason": "devices ran different numbers of collectives in the window; calls cannot be aligned",
        }
    m = np.stack(per_device_starts)
    spread = m.max(axis=0) - m.min(axis=0)
    return {"matched": int(m.shape[1]), "p50_ns": int(np.median(spread)), "max_ns": int(spread.max()), "reason": None}
