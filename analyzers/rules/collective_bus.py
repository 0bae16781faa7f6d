"""The bus bandwidth reading of collective_dominant: is the collective time data moving, or ranks waiting?

The devices' calls that record their message are pooled (analyzers/busbw.py: nccl-tests' busbw over the
calls of at least 4 MB, against the device's fabric, devices.toml + topology.link_gbps). The collective time
is read as a rank waiting for a late peer (the ``waiting`` variant) when that busbw is under
``busbw_waiting_max_pct`` of the fabric's bandwidth each way per GPU, over calls holding at least
``busbw_min_coverage_pct`` of the collective time, in a group no larger than a node's fabric joins, and no
capture of every rank of the group shows them starting together. Otherwise the busbw is evidence only (or
said not measured, with why) and the finding reads as before."""

from __future__ import annotations

from dataclasses import dataclass, field

from tracetriage.analyzers.busbw import BUSBW_MIN_BYTES, BusBandwidth, pooled
from tracetriage.analyzers.evidence import ev
from tracetriage.analyzers.metrics import CollectiveSkew
from tracetriage.analyzers.rules.context import t
from tracetriage.wording import nbytes, pct, plural

# name: (value, why)
THRESHOLDS = {
    "busbw_waiting_max_pct": (10.0, ("a bandwidth-bound collective of 4 MB or more reaches a third of its link's "
                                     "bandwidth or more (nccl-tests/rccl-tests all_reduce_perf on 8 NVLink or XGMI "
                                     "GPUs); under a tenth of it the kernel spends most of its time waiting for its "
                                     "peers, not moving data")),
    "busbw_min_coverage_pct": (25.0, ("the calls whose message is recorded must hold at least a quarter of the "
                                      "collective time for their bandwidth to speak for it")),
}


@dataclass(frozen=True, slots=True)
class BusReading:
    """What the busbw says: ``waiting`` (the variant applies), the evidence rows and the texts' fields."""

    waiting: bool
    evidence: list = field(default_factory=list)
    fields: dict = field(default_factory=dict)


def gbps(value: float) -> str:
    """A bandwidth in GB/s, to a tenth under 100."""
    return f"{value:,.1f} GB/s" if value < 100 else f"{value:,.0f} GB/s"


def _factor_words(bus: BusBandwidth) -> str:
    """The busbw factor of the judged ops, in nccl-tests' words."""
    if set(bus.ops) == {"AllReduce"}:
        return "2(n-1)/n"
    if set(bus.ops) <= {"AllGather", "ReduceScatter", "AllToAll"}:
        return "(n-1)/n"
    if set(bus.ops) <= {"Broadcast", "Reduce", "SendRecv"}:
        return "1"
    return "the op's factor: all-reduce 2(n-1)/n, all-gather, reduce-scatter and all-to-all (n-1)/n, broadcast 1"


def _measured_words(bus: BusBandwidth, words: dict) -> str:
    """The busbw measured, with its definition and the calls it is over."""
    ops = " and ".join(bus.ops)
    sizes = nbytes(bus.message_min) if bus.message_min == bus.message_max else \
        f"{nbytes(bus.message_min)} to {nbytes(bus.message_max)}"
    return (f"bus bandwidth reached: {gbps(bus.busbw_gbps)} (message bytes / time = {gbps(bus.algbw_gbps)} algbw, x "
            f"{_factor_words(bus)} for a group of n = {bus.group}, as {words['bench']} defines busbw) over "
            f"{plural(bus.judged, f'{ops} call')} of {sizes} whose message the trace records, "
            f"{pct(bus.coverage_pct)} of the collective calls' time")


def _not_measured(bus: BusBandwidth | None) -> list:
    """The busbw row when no call can be judged: why."""
    if bus is None or not bus.sized:
        why = ("the trace records no message size beside its collective kernels (a recent PyTorch profiler "
               "writes In msg nelems, dtype and Group size on them)")
    else:
        why = (f"of the {plural(bus.sized, 'call')} that record their message none moves {nbytes(BUSBW_MIN_BYTES)} "
               "or more in a group of two or more ranks (smaller calls are set by latency, not by the link)")
    return [ev("busbw_gbps", None, "GB/s", None, text=f"bus bandwidth: not measured: {why}")]


def bus_reading(devices: list, skew: CollectiveSkew | None, words: dict) -> BusReading:
    """The busbw reading of the devices' collectives (module docstring); ``words`` the vendor's."""
    bus = pooled([device.collective_bus for device in devices if device.collective_bus is not None])
    if bus is None or not bus.judged:
        return BusReading(False, _not_measured(bus))
    measured = _measured_words(bus, words)
    fabric = bus.fabric
    if fabric is None:
        return BusReading(False, [ev("busbw_gbps", round(bus.busbw_gbps, 2), "GB/s", None,
                                     text=f"{measured}; not judged: the device table holds no GPU fabric for "
                                          f"{devices[0].name}")])
    share = 100.0 * bus.busbw_gbps / fabric.gbps
    link = f"{fabric.links} links x {gbps(fabric.gbps / fabric.links)}" if fabric.links > 1 else fabric.cell
    against = (f"{pct(share)} of the {gbps(fabric.gbps)} each way per GPU that {words['fabric']} gives the {fabric.model} "
               f"({link}{'; ' + fabric.note if fabric.note else ''})")
    rows = [ev("busbw_gbps", round(bus.busbw_gbps, 2), "GB/s", None, text=measured),
            ev("busbw_pct_of_fabric", round(share, 2), "%", f"the {words['fabric']} bandwidth each way per GPU",
               text=f"that is {against}")]
    why_not = _why_not_waiting(bus, fabric.gpus, skew, len(devices), share, words)
    if why_not:
        rows.append(ev("busbw_reading", "not judged", text=why_not))
        return BusReading(False, rows)
    rows.append(ev("busbw_reading", "waiting",
                   text=f"under {t('busbw_waiting_max_pct'):g}% of the link: the kernels spend most of their time "
                        "waiting for their peers to join, not moving data"))
    return BusReading(True, rows, {"busbw": gbps(bus.busbw_gbps), "busbw_pct": pct(share),
                                   "fabric_gbps": gbps(fabric.gbps), "model": fabric.model, "group": bus.group,
                                   "judged_calls": plural(bus.judged, "call"), "factor": _factor_words(bus),
                                   "captured": _captured_words(len(devices), bus.group)})


def _why_not_waiting(bus: BusBandwidth, node_gpus: int, skew: CollectiveSkew | None, ranks: int, share: float,
                     words: dict) -> str | None:
    """Why a busbw reading does not call the time waiting (None when it does)."""
    if bus.group > node_gpus:
        return (f"not judged against {words['fabric']}: a group of {bus.group} ranks is more than the {node_gpus} GPUs "
                "one node's fabric joins, so the network sets its ceiling, and a trace does not record the network's "
                "bandwidth")
    if bus.coverage_pct < t("busbw_min_coverage_pct"):
        return (f"not judged: the calls with a measured message hold {pct(bus.coverage_pct)} of the collective time, "
                f"under the {t('busbw_min_coverage_pct'):g}% that would speak for the rest")
    if share >= t("busbw_waiting_max_pct"):
        return (f"at or above {t('busbw_waiting_max_pct'):g}% of the link: the calls move data for a good part of "
                "their time")
    if isinstance(skew, CollectiveSkew) and skew.matched and ranks >= bus.group \
            and (skew.wait_share_pct or 0.0) < t("skew_wait_share_min_pct"):
        return (f"every rank of the group is captured and they start the matched calls together (waiting "
                f"{pct(skew.wait_share_pct or 0.0)} of their time), so the calls are slow in themselves: check the "
                f"transport {words['lib']} picked (NCCL_DEBUG=INFO: P2P/{words['fabric']}, SHM or a network socket)")
    return None


def _captured_words(ranks: int, group: int | None) -> str:
    """Which ranks the capture holds, against the group's."""
    if ranks <= 1:
        return f"This capture holds one rank of the {group}, so the late peer is not in it."
    return f"The capture holds {ranks} of the group's {group} ranks: the late peer is one not captured."
