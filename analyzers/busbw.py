"""The bus bandwidth collective calls reached, from the message each records, against the device's fabric.

Definitions (nccl-tests' and rccl-tests', doc/PERFORMANCE.md of nccl-tests):

* **message bytes** of a call: nccl-tests' *size* of the op, as the PyTorch profiler records it beside the
  kernel (``In msg nelems`` / ``Out msg nelems`` x the dtype's size, the larger: parsers/kineto.py
  ``meta["collective_messages"]``), with the group size n (``Group size``);
* **algbw** = message bytes / the call's duration (bytes per ns = GB/s);
* **busbw** = algbw x the op's factor for n ranks (:data:`BUS_FACTOR`): AllReduce 2(n-1)/n; AllGather,
  ReduceScatter and AllToAll (n-1)/n; Broadcast, Reduce and SendRecv 1. It is comparable across group
  sizes with the link's bandwidth, which a bandwidth-bound call approaches;
* a device's busbw = the judged calls' bus bytes / their summed duration (a time-weighted mean). Judged:
  the calls in the window with a recorded message of at least :data:`BUSBW_MIN_BYTES`, a group of two or
  more and a known op; ``coverage_pct`` = their summed duration / every collective call's in the window;
* the **fabric** is the device's (devices.toml ``fabric``, topology.device_fabric): the bandwidth each way
  per GPU of the links that join it to the node's other GPUs.

Caveat: a kernel's duration holds its wait for the peers (launched before they join, it spins until they
do), which is what a busbw far under the fabric reveals; the fabric is the node's, so a group that spans
nodes (more ranks than ``Fabric.gpus``) is not judged against it (the network's bandwidth is not in a trace).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetriage.analyzers.peaks import match_device
from tracetriage.analyzers.topology import Fabric, device_fabric
from tracetriage.model import Trace

# below ~4 MB a collective is latency-bound: nccl-tests' all_reduce_perf on 8 NVLink or XGMI GPUs reaches a
# third of its peak busbw or more from 4 MB up, well under a tenth of it only at tens of KB
BUSBW_MIN_BYTES = 4_000_000


def bus_factor(op: str, group: int) -> float | None:
    """busbw / algbw of ``op`` over ``group`` ranks (nccl-tests), None for an op it does not define."""
    if group < 2:
        return None
    if op == "AllReduce":
        return 2.0 * (group - 1) / group
    if op in ("AllGather", "ReduceScatter", "AllToAll"):
        return (group - 1) / group
    if op in ("Broadcast", "Reduce", "SendRecv"):
        return 1.0
    return None


@dataclass(frozen=True, slots=True)
class BusBandwidth:
    """The busbw of a device's collective calls in the window (module docstring): the calls, those with a
    recorded message (``sized``), those judged, their summed duration and bytes (bus and message), the group
    size most of their time ran in, their ops and message sizes, every call's summed duration and the
    device's fabric (None where the device table holds none)."""

    calls: int
    sized: int
    judged: int
    judged_ns: int
    call_ns: int
    bus_bytes: float
    message_bytes: int
    group: int | None
    ops: tuple[str, ...]
    message_min: int
    message_max: int
    fabric: Fabric | None

    @property
    def busbw_gbps(self) -> float | None:
        return self.bus_bytes / self.judged_ns if self.judged_ns else None

    @property
    def algbw_gbps(self) -> float | None:
        return self.message_bytes / self.judged_ns if self.judged_ns else None

    @property
    def coverage_pct(self) -> float:
        return 100.0 * self.judged_ns / self.call_ns if self.call_ns else 0.0


def call_messages(trace: Trace, pid: np.ndarray, correlation: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(message bytes, group size) of the collective calls keyed by ``pid``, ``correlation`` and ``start``
    (their rows of ``trace.gpu``), -1 where the trace records none."""
    nbytes, group = np.full(start.size, -1, np.int64), np.full(start.size, -1, np.int64)
    messages = trace.meta.get("collective_messages")
    if not messages or not start.size:
        return nbytes, group
    known = {(p, c, s): (b, g) for p, c, s, b, g in zip(messages["pid"], messages["correlation"], messages["start"],
                                                         messages["bytes"], messages["group"])}
    for index, key in enumerate(zip(pid.tolist(), correlation.tolist(), start.tolist())):
        found = known.get(key)
        if found is not None:
            nbytes[index], group[index] = found
    return nbytes, group


def trace_fabric(trace: Trace, device: int) -> Fabric | None:
    """The fabric of the trace's ``device`` (its devices.toml entry's), None when the table does not know it."""
    row = trace.devices.iloc[device]
    found = match_device(str(row["name"]), int(row["memory_bytes"]), int(row["sm_count"]))
    return device_fabric(found[1]) if found else None


def bus_bandwidth(ops: np.ndarray, durations: np.ndarray, nbytes: np.ndarray, group: np.ndarray,
                  fabric: Fabric | None) -> BusBandwidth:
    """The :class:`BusBandwidth` of calls (their ops, durations ns, message bytes and group sizes, -1 where
    not recorded) on a device with this ``fabric``."""
    factors = np.array([bus_factor(str(op), int(n)) or 0.0 for op, n in zip(ops.tolist(), group.tolist())], float)
    judged = (nbytes >= BUSBW_MIN_BYTES) & (factors > 0) & (durations > 0)
    times = durations[judged]
    groups = group[judged]
    main_group = None
    if groups.size:
        sizes, at = np.unique(groups, return_inverse=True)
        main_group = int(sizes[np.argmax(np.bincount(at, weights=times))])
    return BusBandwidth(
        calls=int(durations.size), sized=int((nbytes >= 0).sum()), judged=int(judged.sum()), judged_ns=int(times.sum()),
        call_ns=int(durations.sum()), bus_bytes=float((nbytes[judged] * factors[judged]).sum()),
        message_bytes=int(nbytes[judged].sum()), group=main_group,
        ops=tuple(dict.fromkeys(str(op) for op in ops[judged].tolist())),
        message_min=int(nbytes[judged].min()) if times.size else 0, message_max=int(nbytes[judged].max()) if times.size else 0,
        fabric=fabric)


def pooled(parts: list[BusBandwidth]) -> BusBandwidth | None:
    """The devices' busbw pooled (their judged bytes over their judged time); the first device's fabric."""
    if not parts:
        return None
    judged = [part for part in parts if part.judged]
    groups = [part.group for part in judged if part.group]
    return BusBandwidth(
        calls=sum(part.calls for part in parts), sized=sum(part.sized for part in parts),
        judged=sum(part.judged for part in parts), judged_ns=sum(part.judged_ns for part in parts),
        call_ns=sum(part.call_ns for part in parts), bus_bytes=sum(part.bus_bytes for part in parts),
        message_bytes=sum(part.message_bytes for part in parts), group=max(groups) if groups else None,
        ops=tuple(dict.fromkeys(op for part in judged for op in part.ops)),
        message_min=min((part.message_min for part in judged), default=0),
        message_max=max((part.message_max for part in judged), default=0),
        fabric=next((part.fabric for part in parts if part.fabric), None))
