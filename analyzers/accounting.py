"""The window of each device, decomposed once, and the ledger findings claim it through.

Decomposition of one device's window (every nanosecond in exactly one slice):

* ``compute``    — at least one kernel (or graph replay) runs, other than an exposed collective;
* ``collective`` — only collective kernels run: communication no compute kernel hides
  (``collective_exposed`` of collectives.py);
* ``copy``       — only copies or memsets run (no kernel at all);
* ``idle:<class>:<cause>`` — no GPU activity; ``class`` is the gap's kind
  (timeline.GAP_CLASSES: after a blocking sync, short, long) and ``cause`` what the
  host was doing (timeline.CAUSES).

So window_ns = compute + collective + copy + sum(idle). A throughput finding claims
nanoseconds from named slices through the :class:`Ledger`; what one finding took is
gone for the next, so the claims of one device never sum past its window, and a
finding's ``impact_pct`` (mean over the case's devices of claimed / window) adds up
with the others to at most 100%.
"""

from __future__ import annotations

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers.metrics import Copies, DeviceMetrics
from tracetriage.analyzers.timeline import CAUSES, GAP_CLASSES
from tracetriage.model import Trace, is_kind
from tracetriage.partition import device_rows, take

BUSY_SLICES = ("compute", "collective", "copy")
IDLE_SLICES = tuple(f"idle:{cls}:{cause}" for cls in GAP_CLASSES for cause in CAUSES)
SLICES = BUSY_SLICES + IDLE_SLICES


def copy_activity(trace: Trace, device: int, lo: int, hi: int) -> Copies:
    """Copies and memsets of one device in [lo, hi): their union, the part of it no
    kernel overlaps (``copy_only_ns``), count / bytes / summed duration by direction
    (HtoD, DtoH, ..., memset), pinned vs pageable. Bytes are those the format records: a direction
    with operations of unrecorded size says how many (``bytes_unrecorded``), never 0 B for them."""
    import pandas as pd

    g = trace.gpu
    rows = device_rows(trace, device)  # the device's rows (tracetriage.partition; None: every row), no mask over all
    memset = is_kind(g, "memset", rows)
    is_copy = is_kind(g, "memcpy", rows) | memset
    if is_copy.any():  # else no copy of the device at all: its times are not read
        start, end = take(g["start"].to_numpy(), rows), take(g["end"].to_numpy(), rows)
        inwin = (end > lo) & (start < hi)
        is_copy &= inwin
    if not is_copy.any():
        return Copies(count=0, busy_ns=0, copy_only_ns=0, bytes=0, by_direction={}, pageable=0, overlap_pct=0.0)
    cs, ce = iv.clip(*iv.union(start[is_copy], end[is_copy]), lo, hi)
    copy_busy = iv.measure(cs, ce)
    work = inwin & (is_kind(g, "kernel", rows) | is_kind(g, "graph", rows))
    hidden = 0
    if work.any() and cs.size:
        ks, ke = start[work], end[work]
        near = iv.Coverage(cs, ce).overlap(ks, ke) > 0  # only kernels that touch a copy matter
        if near.any():
            us, ue = iv.clip(*iv.union(ks[near], ke[near]), lo, hi)
            hidden = int(iv.Coverage(us, ue).overlap(cs, ce).sum())
    at = np.flatnonzero(is_copy) if rows is None else rows[is_copy]  # the copies' rows of the table
    nbytes = g["bytes"].to_numpy()[at]
    unrecorded = nbytes < 0  # the format does not record the size (parsers/common.py UNRECORDED_BYTES)
    nbytes = np.where(unrecorded, 0, nbytes)
    dur = np.minimum(end[is_copy], hi) - np.maximum(start[is_copy], lo)
    kinds = g["copy_kind"].iloc[at].astype(object).to_numpy()
    kinds = np.where(memset[is_copy], "memset", kinds)
    kinds = np.array(["other" if pd.isna(k) else str(k) for k in kinds], dtype=object)
    by_direction: dict[str, dict] = {}
    for k in np.unique(kinds):
        m = kinds == k
        by_direction[str(k)] = {"count": int(m.sum()), "bytes": int(nbytes[m].sum()), "time_ns": int(dur[m].sum())}
        if unrecorded[m].any():
            by_direction[str(k)]["bytes_unrecorded"] = int(unrecorded[m].sum())
    return Copies(
        count=int(is_copy.sum()),
        busy_ns=int(copy_busy),
        copy_only_ns=int(copy_busy - hidden),
        bytes=int(nbytes.sum()),
        by_direction=by_direction,
        pageable=int(g["pageable"].to_numpy()[at].sum()),
        overlap_pct=round(100.0 * hidden / copy_busy, 2) if copy_busy else 0.0,
    )


def decomposition(busy_ns: int, window_ns: int, copy_only_ns: int, collective_exposed_ns: int,
                  idle_by_class: dict) -> dict[str, int]:
    """The slices of one device's window (ns); they sum to window_ns."""
    coll = max(0, min(collective_exposed_ns, busy_ns - copy_only_ns))
    out = {"compute": max(0, busy_ns - copy_only_ns - coll), "collective": coll, "copy": copy_only_ns}
    for cls in GAP_CLASSES:
        for cause in CAUSES:
            out[f"idle:{cls}:{cause}"] = int(idle_by_class[cls][cause])
    return out


def matching(patterns) -> list[str]:
    """Slice names matching glob-like patterns (``idle:*:host``, ``idle:short:*``, ``copy``)."""
    out = []
    for pat in patterns:
        parts = pat.split(":")
        for name in SLICES:
            sp = name.split(":")
            if len(sp) == len(parts) and all(p in ("*", s) for p, s in zip(parts, sp)) and name not in out:
                out.append(name)
    return out


class Ledger:
    """Unclaimed nanoseconds of each device's slices; findings take from it in rule order."""

    def __init__(self, devices: list[DeviceMetrics]):
        self.window = {device.id: device.window_ns for device in devices}
        self.remaining = {device.id: dict(device.slices) for device in devices}
        self.claims: dict[str, dict[str, int]] = {device.id: {} for device in devices}
        # device -> finding -> slice -> ns: where each claim came from (the Perfetto export draws it)
        self.by_slice: dict[str, dict[str, dict[str, int]]] = {device.id: {} for device in devices}

    def available(self, device: str, patterns, limit_ns: float | None = None) -> int:
        got = sum(self.remaining[device][s] for s in matching(patterns))
        return int(got if limit_ns is None else min(got, max(0, limit_ns)))

    def take(self, finding_id: str, wants: dict[str, tuple]) -> dict[str, int]:
        """Claim for ``finding_id`` on each device ``(patterns, limit_ns or None)``; returns ns taken."""
        taken = {}
        for dev, (patterns, limit) in wants.items():
            left = float("inf") if limit is None else max(0, int(limit))
            got = 0
            for s in matching(patterns):
                if left <= 0:
                    break
                n = int(min(self.remaining[dev][s], left))
                self.remaining[dev][s] -= n
                if n:
                    mine = self.by_slice[dev].setdefault(finding_id, {})
                    mine[s] = mine.get(s, 0) + n
                left -= n
                got += n
            if got:
                self.claims[dev][finding_id] = self.claims[dev].get(finding_id, 0) + got
            taken[dev] = got
        return taken

    def impact_pct(self, taken: dict[str, int]) -> float:
        """Mean over all devices of the case of taken / window x 100."""
        if not self.window:
            return 0.0
        return float(np.mean([100.0 * taken.get(d, 0) / w if w else 0.0 for d, w in self.window.items()]))

    def unclaimed(self, device: str, patterns) -> dict[str, int]:
        return {s: self.remaining[device][s] for s in matching(patterns) if self.remaining[device][s]}


def device_accounting(device: DeviceMetrics, ledger: Ledger) -> dict:
    """The contract's ``accounting`` of one device: its slices, the findings' claims and what is left
    unclaimed, each as % of its window (3 decimals; zero slices left out)."""
    w = device.window_ns or 1
    return {
        "slices_pct": {k: round(100.0 * v / w, 3) for k, v in device.slices.items() if v},
        "claims_pct": {k: round(100.0 * v / w, 3) for k, v in ledger.claims[device.id].items()},
        "unclaimed_pct": {k: round(100.0 * v / w, 3) for k, v in ledger.remaining[device.id].items() if v},
    }
