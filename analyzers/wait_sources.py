"""What a capture shows of the dependency its GPU waits on: the words of the dependency_wait finding (rules/waits.py).

An idle GPU holding queued work (the timeline's cause ``dependency``) waits on an event or a memory value that
something else signals. The finding says which parts of that chain the capture holds, each checked on the
device's trace, never assumed:

* **wait calls** (``wait_calls``): the stream-wait calls of the device's process in the capture (cudaStreamWaitEvent,
  hipStreamWaitEvent, cuStreamWaitValue32 ...; queued.WAIT_CALLS without the graph launches, counted apart in
  ``graph_launches``: a graph's event-wait nodes wait too), by name;
* **event records** (``record_calls``): the event-record calls (cudaEventRecord, hipEventRecord, ...WithFlags) of
  any process of the trace, by name. Both are counted over the whole capture, not the window: the wait that holds
  the window's first operation may be called before the window begins (a step range that starts after it);
* **the other work**: of the device's longest gaps whose cause is ``dependency`` (``gaps.top``, at most
  timeline.TOP_GAPS: ``waits_checked``), those that end within DEPENDENCY_LATENCY_NS after an operation ended on
  another stream of the device or on another device of the trace (``waits_met``, ``met_on`` naming where): a
  producer whose end is where the wait ended. ``other_stream_ops`` / ``other_devices``: the operations of the
  device's streams other than those the waits held (the streams of the operations ending the checked gaps), and
  the trace's other devices with work in the window [lo, hi).

Caveats: a record call is not tied to the wait it satisfies (the calls carry no event handle in every format), so
the records are counted, not matched; a producer that ends within the latency of a wait's end by chance reads as met.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from tracetriage.analyzers.metrics import DeviceMetrics
from tracetriage.analyzers.queued import DEPENDENCY_LATENCY_NS
from tracetriage.model import Trace, cat_codes
from tracetriage.wording import plural, us

STREAM_WAITS = re.compile(r"(?i)StreamWait(?:Event|Value)|WaitValue(?:32|64)")
RECORDS = re.compile(r"(?i)EventRecord")
GRAPH_LAUNCHES = re.compile(r"(?i)GraphLaunch")


@dataclass(frozen=True, slots=True)
class WaitSources:
    """What one device's trace holds of its dependency waits (module docstring)."""

    wait_calls: dict[str, int] = field(default_factory=dict)
    graph_launches: int = 0
    record_calls: dict[str, int] = field(default_factory=dict)
    waits_checked: int = 0
    waits_met: int = 0
    met_on: tuple[str, ...] = ()
    other_stream_ops: int = 0
    other_devices: int = 0

    def words(self, vendor: str | None) -> str:
        """The sentence that says what the capture holds of the wait and what it does not."""
        prefix = "hip" if vendor == "rocm" or any(name.startswith("hip") for name in self.wait_calls) else "cuda"
        if self.wait_calls:
            holds = "the wait itself (" + ", ".join(plural(n, f"{name} call") for name, n in self.wait_calls.items()) + \
                " in the capture)"
        elif self.graph_launches:
            launches = plural(self.graph_launches, "launch", "launches")
            holds = f"the graph launches whose event-wait nodes can hold the work ({launches})"
        else:
            holds = "no stream-wait call"
        records = ", ".join(plural(n, f"{name} call") for name, n in self.record_calls.items())
        if self.waits_met:
            where = " and ".join(self.met_on)
            return (f"This capture holds {holds}{', ' + records if records else ''} and, for {self.waits_met} of the "
                    f"{plural(self.waits_checked, 'longest wait')}, an operation on {where} that ends where the wait "
                    f"ends (within {us(DEPENDENCY_LATENCY_NS)}): the stream waits on that work.")
        elsewhere = []
        if self.other_stream_ops:
            elsewhere.append(f"{plural(self.other_stream_ops, 'operation')} on the device's other streams")
        if self.other_devices:
            elsewhere.append(f"{plural(self.other_devices, 'other device')} with work")
        ran = f" ({' and '.join(elsewhere)} in the window)" if elsewhere else " (no other stream or device ran work in it)"
        which = "the longest wait ends" if self.waits_checked == 1 else f"any of the {self.waits_checked} longest waits ends"
        checked = (f"no operation on another stream or device of the capture ends where {which}{ran}" if self.waits_checked
                   else f"what it waits on is not matched to the waits{ran}")
        if records:
            return f"This capture holds {holds} and {records}, but not the work they wait on: {checked}."
        return f"This capture holds {holds} but not what it waits on: no {prefix}EventRecord call, and {checked}."

    def title_words(self) -> str:
        """The title's clause on what the waits wait on."""
        if self.waits_met:
            return f"it waits on work that ends on {' and '.join(self.met_on)} of this trace"
        return "it waits on a dependency this trace does not show"


def _calls(trace: Trace, pattern: re.Pattern, pid: int | None) -> dict[str, int]:
    """The trace's API calls whose name matches (of process ``pid``; None: any), by name."""
    api = trace.api
    if not len(api):
        return {}
    codes, names = cat_codes(api["name"])
    wanted = np.array([bool(pattern.search(str(name))) for name in names] + [False], bool)
    rows = wanted[codes]
    if pid is not None:
        rows &= api["pid"].to_numpy() == pid
    counts = np.bincount(codes[rows], minlength=len(names)) if rows.any() else np.zeros(len(names), np.int64)
    return {str(names[code]): int(counts[code]) for code in np.flatnonzero(counts)}


def _device_sources(trace: Trace, index: int, device: DeviceMetrics, lo: int, hi: int, records: dict[str, int],
                    labels: list[str]) -> WaitSources:
    """The :class:`WaitSources` of the trace's device ``index`` (its metrics ``device``)."""
    gpu = trace.gpu
    start, end = gpu["start"].to_numpy(), gpu["end"].to_numpy()
    dev, stream = gpu["device"].to_numpy(), gpu["stream"].to_numpy()
    in_window = (end > lo) & (start < hi)
    waits = [(int(row["start_ns"]) + int(row["length_ns"])) for row in device.gaps.top if row.get("cause") == "dependency"]
    mine = np.flatnonzero(in_window & (dev == index))
    held_streams = {int(value) for value in stream[mine][np.isin(start[mine], waits)]} if waits else set()
    other_stream = mine[~np.isin(stream[mine], list(held_streams))] if held_streams else mine[:0]
    others = np.flatnonzero(in_window & (dev != index))
    met, where = 0, set()
    for wait_end in waits:
        candidates = [(other_stream, "another stream of the device"), (others, None)]
        hit = False
        for rows, label in candidates:
            near = rows[(end[rows] <= wait_end) & (end[rows] >= wait_end - DEPENDENCY_LATENCY_NS)]
            if near.size:
                hit = True
                where.update([label] if label else {labels[int(d)] for d in np.unique(dev[near]) if 0 <= d < len(labels)})
        met += hit
    return WaitSources(wait_calls=_calls(trace, STREAM_WAITS, device.pid),
                       graph_launches=sum(_calls(trace, GRAPH_LAUNCHES, device.pid).values()),
                       record_calls=records, waits_checked=len(waits), waits_met=met, met_on=tuple(sorted(where)),
                       other_stream_ops=int(other_stream.size), other_devices=int(np.unique(dev[others]).size))


def measure(trace: Trace, lo: int, hi: int, devices: list[DeviceMetrics]) -> tuple[WaitSources, ...]:
    """Per device of the trace (its order), what the trace holds of its dependency waits; an empty
    :class:`WaitSources` for a device without any (only those are read)."""
    if not any(device.gaps.by_cause.get("dependency") for device in devices):
        return tuple(WaitSources() for _ in devices)
    records = _calls(trace, RECORDS, None)
    labels = [device.id for device in devices]
    return tuple(_device_sources(trace, index, device, lo, hi, records, labels)
                 if device.gaps.by_cause.get("dependency") else WaitSources() for index, device in enumerate(devices))

