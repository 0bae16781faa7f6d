"""One palette for every chart and table of a report.

A colour means one thing on the whole page, and the same thing on every report: an idle
cause (what the host was doing while the GPU waited), an activity on the GPU (kernels,
collectives, copies, graph replays), or a finding, keyed by its stable id. The three
families share no colour, so a finding is never read as an idle cause in the next chart.
Everything else (step histograms, serving lines, host frames) is drawn in the neutral greys.
"""

from __future__ import annotations

import hashlib

from tracetriage.contract import load_all
from tracetriage.records.trace import Device
from tracetriage.wording import for_vendor

# idle causes, in the order the analysis attributes them (analyzers/timeline.py); the host calls of the
# timeline take the colour of the cause they are
SYNC_COLOR, LAUNCH_COLOR, OTHER_CALL_COLOR, UNKNOWN_COLOR = "#7b2cbf", "#e4572e", "#f3a712", "#aaaaaa"
CAUSE_COLORS = {
    "sync": SYNC_COLOR, "memcpy_sync": "#c77dff", "launch": LAUNCH_COLOR, "other_cuda": OTHER_CALL_COLOR,
    "host": "#29335c", "unknown": UNKNOWN_COLOR, "dependency": "#5e548e",
}
CAUSE_LABELS = {
    "sync": "inside a sync", "memcpy_sync": "in a synchronous copy", "launch": "in a launch call",
    "other_cuda": "in another CUDA call", "host": "host code (no CUDA call)", "unknown": "unknown",
    "dependency": "work queued, waiting on a dependency",
}

# what the GPU is doing (timeline lanes, the accounting bar's unclaimed busy time)
KERNELS_COLOR, COLLECTIVES_COLOR, UNCLAIMED_COLOR = "#2a9d8f", "#588157", "#d9d9d9"
ACTIVITY_COLORS = {
    "kernels": KERNELS_COLOR, "collectives": COLLECTIVES_COLOR, "copies": "#a23b72", "graphs": "#3f88c5",
    "unclaimed": UNCLAIMED_COLOR,
}

# findings, keyed by id: fixed, so a finding keeps its colour from one report to the next
FINDING_COLORS = {
    "launch_bound": "#d00000", "host_sync_per_step": "#ff70a6", "python_host_overhead": "#8d6346",
    "gpu_starved": "#ffd166", "copy_bound": "#06d6a0", "pageable_memcpy": "#118ab2",
    "collective_dominant": "#073b4c", "cross_island_collective": "#9e2a2b", "below_roofline": "#606c38",
    "nccl_errors": "#bc6c25", "prefill_stall": "#0077b6", "healthy": "#52b788", "dependency_wait": "#9d4edd",
}
_SPARE = ("#e9c46a", "#264653", "#b5179e", "#6a994e", "#fb8500", "#3a0ca3")

NEUTRAL = ("#4a4e69", "#8d99ae", "#1d1d1f")


def finding_color(finding_id: str) -> str:
    """The colour of a finding id; an id without a fixed colour gets a spare one chosen by its
    name (stable across reports, never one of the cause or activity colours)."""
    if finding_id in FINDING_COLORS:
        return FINDING_COLORS[finding_id]
    return _SPARE[int(hashlib.sha1(finding_id.encode()).hexdigest(), 16) % len(_SPARE)]


def cause_color(cause: str) -> str:
    return CAUSE_COLORS.get(cause, UNKNOWN_COLOR)


def cause_label(cause: str, vendor: str | None = None) -> str:
    """What an idle cause means, for a legend or a table, in the capture's vendor's words (an AMD
    capture's other calls are HIP calls; the key ``other_cuda`` stays the contract's)."""
    return for_vendor(CAUSE_LABELS.get(cause, cause), vendor)




def claim_columns(devices: tuple[Device, ...] | list[Device] | list[dict]) -> dict[str, str]:
    """The findings that claim a slice of some device's window, each with its colour, in one order for
    the accounting table and its bar chart: device by device, each device's claims largest first, a
    finding placed where it first claims (device records, or their contract dicts)."""
    columns: dict[str, str] = {}
    for device in load_all(Device, devices):
        claims = device.accounting.claims_pct if device.accounting else {}
        for finding_id, _ in sorted(claims.items(), key=lambda item: -item[1]):
            columns.setdefault(finding_id, finding_color(finding_id))
    return columns
