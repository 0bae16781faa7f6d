"""Headline metrics of one analysis, flat: the columns of a batch summary and the rows of a
before/after comparison. Pure functions of the analysis data (the JSON contract).

* ``busy_pct`` = mean over devices of busy_pct; ``busy_pct_min`` the least busy device.
* ``idle_<cause>_pct`` = idle ns with that cause summed over devices / window ns summed
  over devices x 100 (every cause of timeline.CAUSES: ``dependency`` is 0 where no device had it, None where
  dependency_wait abstained: the host and GPU clocks offset).
* ``launches_per_step``, ``graph_launches_per_step``, ``syncs_per_step``,
  ``step_p50_ns``, ``step_p99_ns`` = median over processes that have steps.
* ``steps`` = steps of one rank: the median over processes that have steps of their step
  count (summed over 8 TP ranks it read 192 beside a median step of 24).
* ``collective_share_pct`` / ``collective_exposed_pct`` = mean over devices that ran
  collectives (0 when none did).
"""

from __future__ import annotations

import statistics

from tracetriage import records
from tracetriage.analyzers.timeline import CAUSES  # the host's causes, then the GPU's dependency waits
from tracetriage.records.analysis import AnalysisRecord
from tracetriage.records.trace import Device, Process

SEVERITY_ORDER = ["info", "low", "medium", "high"]


def _median(values):
    vals = [v for v in values if v is not None]
    return float(statistics.median(vals)) if vals else None


def _mean(values):
    vals = [v for v in values if v is not None]
    return float(sum(vals) / len(vals)) if vals else None


def headline_metrics(data: dict | AnalysisRecord) -> dict:
    """The batch summary's columns of one analysis, floats to 4 decimals (definitions above)."""
    analysis = records.read(data)
    devices = analysis.devices
    metrics = {
        "devices": len(devices),
        "processes": len(analysis.processes),
        "window_ns": analysis.window.duration_ns if analysis.window else None,
        "busy_pct": _mean([device.busy_pct for device in devices]),
        "busy_pct_min": min((device.busy_pct for device in devices), default=None),
        **_step_metrics([process for process in analysis.processes if process.steps.count]),
        **_collective_metrics(devices),
        **_idle_metrics(devices, not any(row.analysis == "dependency_wait" for row in analysis.abstentions)),
        **_finding_metrics(analysis),
    }
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in metrics.items()}


def _step_metrics(processes: list[Process]) -> dict:
    """Per-step counts and step percentiles: medians over the processes that have steps."""
    return {
        "launches_per_step": _median([process.launches_per_step for process in processes]),
        "graph_launches_per_step": _median([process.graph_launches_per_step for process in processes]),
        "syncs_per_step": _median([process.syncs_per_step for process in processes]),
        "step_p50_ns": _median([process.steps.p50_ns for process in processes]),
        "step_p99_ns": _median([process.steps.p99_ns for process in processes]),
        "steps": int(statistics.median([process.steps.count for process in processes])) if processes else 0,
    }


def _collective_metrics(devices: tuple[Device, ...]) -> dict:
    """Collective share and exposed share: means over the devices that ran collectives (0 when none did)."""
    with_collectives = [device for device in devices if device.collective_count]
    if not with_collectives:
        none_ran = 0.0 if devices else None
        return {"collective_share_pct": none_ran, "collective_exposed_pct": none_ran}
    return {"collective_share_pct": _mean([device.collective_share_pct for device in with_collectives]),
            "collective_exposed_pct": _mean([device.collective_exposed_pct for device in with_collectives])}


def _idle_metrics(devices: tuple[Device, ...], dependency_measured: bool) -> dict:
    """Idle % by cause: idle ns of that cause over all devices / their window ns x 100; dependency waits None
    where dependency_wait abstained (the host and GPU clocks offset: not measured, not 0)."""
    window_ns = sum(device.window_ns for device in devices)
    return {f"idle_{cause}_pct": (100.0 * sum(device.gaps.by_cause.get(cause, 0) for device in devices) / window_ns)
            if window_ns and (cause != "dependency" or dependency_measured) else None for cause in CAUSES}


def _finding_metrics(analysis: AnalysisRecord) -> dict:
    """The headline, the top finding (the first: findings are ranked) and the counts of findings and abstentions."""
    findings = analysis.findings
    top = findings[0] if findings else None
    return {
        "headline": analysis.headline,
        "top_finding": top.id if top else None,
        "top_impact_pct": top.impact_pct if top else None,
        "top_severity": top.severity if top else None,
        "max_severity": max((finding.severity for finding in findings), key=SEVERITY_ORDER.index, default=None),
        "findings": len(findings),
        "abstentions": len(analysis.abstentions),
    }
