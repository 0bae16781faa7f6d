"""``analyze(case)``: every analyzer over a case, assembled into one :class:`Analysis`.

The Analysis's ``data`` is exactly the JSON contract of DESIGN.md ("JSON output");
the HTML, Markdown and text reports are views of it. ``series`` holds the arrays
only charts need (busy over time, step durations), kept out of the JSON.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from tracetriage.analyzers import accounting, efficiency, host_activity, lanes, math_precision, phases, queued, rules
from tracetriage.analyzers import collectives as coll
from tracetriage.analyzers import kernels as kern
from tracetriage.analyzers import steps as st
from tracetriage.analyzers import timeline as tl
from tracetriage.analyzers.capture_kind import runtime_of
from tracetriage.analyzers.case_blocks import CaseInputs, HostProfile
from tracetriage.analyzers.metrics import (
    LONG_STEP_FACTOR,
    CollectiveSkew,
    DeviceMetrics,
    DeviceTimeline,
    LongSteps,
    Phases,
    ProcessMetrics,
    StepStats,
    TraceMetrics,
    TraceSeries,
    Window,
)
from tracetriage.analyzers.result import Analysis
from tracetriage.analyzers.wait_sources import measure as measure_waits
from tracetriage.memory import release_freed
from tracetriage.model import Trace, cat_mask, distinct, is_kind
from tracetriage.partition import held
from tracetriage.threads import thread_map

SYNC_SLACK_NS = 20_000  # a gap "follows" a sync that ended at most 20 us before it began


def _trace_pids(trace: Trace) -> list[int]:
    """The processes that ran GPU work (kernels, copies, memsets, graph replays)."""
    return sorted(int(pid) for pid in distinct(trace.gpu["pid"].to_numpy()).tolist())


def _row_counts(pids: np.ndarray, wanted: list[int]) -> dict[int, int]:
    """Rows of each wanted pid in a pid column (a compare per pid: processes are few)."""
    return {pid: int(np.count_nonzero(pids == pid)) for pid in wanted} if len(pids) else {pid: 0 for pid in wanted}


STEP_SAMPLE_MAX = 2000  # step durations kept in the JSON for compare/trend: enough for a bootstrap, bounded


def step_sample(durations: np.ndarray) -> list[int]:
    """The step durations (ns, in step order) that ``compare`` tests: all of them up to
    :data:`STEP_SAMPLE_MAX`, else that many evenly spaced over the run (every part of the
    capture represented; ``steps.count`` still says how many there were)."""
    if durations.size > STEP_SAMPLE_MAX:
        durations = durations[np.linspace(0, durations.size - 1, STEP_SAMPLE_MAX).astype(np.int64)]
    return [int(duration) for duration in durations]




MAX_TIMELINE_THREADS = 4


def _long(steps: st.Steps) -> np.ndarray:
    """Mask of the long steps (> LONG_STEP_FACTOR x p50)."""
    durations = steps.durations
    return durations > LONG_STEP_FACTOR * float(np.percentile(durations, 50)) if durations.size else np.zeros(0, bool)


def long_steps(steps: st.Steps, long: np.ndarray, devices: list[DeviceMetrics]) -> LongSteps:
    """The long steps of a process (> LONG_STEP_FACTOR x p50): how many, whether the
    annotations call them prefill, how busy its GPUs were during them (GPU work vs a
    host stall: each of its devices' busy ns inside them, summed by the device's
    timeline pass), and their time above p50 as a share of all step time.
    ``long`` is :func:`_long` of the steps."""
    durations = steps.durations
    if not long.any():
        return LongSteps()
    p50 = float(np.percentile(durations, 50))
    busy = [device.busy_in_long_steps_ns / max(1, durations[long].sum()) for device in devices if device.pid == steps.pid]
    return LongSteps(
        count=int(long.sum()),
        prefill_labelled=bool(steps.is_prefill[long].mean() >= 0.5) if steps.is_prefill.size else False,
        busy_pct=100.0 * float(np.mean(busy)) if busy else 0.0,
        excess_pct=100.0 * float((durations[long] - p50).sum()) / max(1, int(durations.sum())),
    )


def step_stats(steps: st.Steps) -> StepStats:
    """The contract's ``steps`` block of one process: durations p50 / p99 / max and :func:`step_sample`."""
    durations = steps.durations
    quantiles = ((int(np.percentile(durations, 50)), int(np.percentile(durations, 99)), int(durations.max()))
                 if durations.size else (None, None, None))
    return StepStats(source=steps.source, range_name=steps.range_name, count=steps.count,
                     warmup_dropped=steps.warmup_dropped, prefill_count=int(steps.is_prefill.sum()),
                     p50_ns=quantiles[0], p99_ns=quantiles[1], max_ns=quantiles[2], durations_ns=step_sample(durations))


def _window(trace: Trace, steps: dict[int, st.Steps], finder: phases.Finder) -> tuple[Window, Phases]:
    """The analysis window of a trace and its phases (phases.py): the steady phase — first step start
    to last step end of the processes with steps, else found from the GPU activity — with the set-up
    excluded before it (``setup_excluded_ns`` and the host call that filled it, for a window without
    steps) and the tear-down after it."""
    # a process's steps bound the window when there are enough of them: one or two annotated steps (an engine's
    # iteration, ProfilerStep#N) do not bound the GPU work they queued, which the GPU activity does, and no set-up
    # is cut out of them (phases.cover_steps: the window covers both)
    found, lo, hi = finder.phases(list(steps.values()))
    with_steps = [process_steps for process_steps in steps.values() if process_steps.count >= st.MIN_STEPS]
    if with_steps:
        source = "steps:" + "+".join(sorted({process_steps.source for process_steps in with_steps}))
        dropped = sum(process_steps.warmup_dropped for process_steps in with_steps)
    else:
        source = "gpu_activity"
        dropped = 0
    setup = max(0, lo - int(trace.gpu["start"].min())) if not with_steps else 0
    cause = None
    if setup:
        from tracetriage.analyzers.startup import setup_cause

        cause = setup_cause(trace, int(trace.gpu["start"].min()), lo)
    return Window(start_ns=lo, end_ns=hi, duration_ns=hi - lo, source=source, warmup_steps_excluded=dropped,
                  setup_excluded_ns=setup, setup_cause=cause), found


def _device_metrics(trace: Trace, device_index: int, label: str, measured: tuple, kernels: list[dict]) -> DeviceMetrics:
    """One device of a trace: ``measured`` (:func:`_measure_device`: its timeline, its idle time by host
    range (host_activity.py), collectives and copies in the window) with its kernels, and its decomposition
    of the window."""
    row = trace.devices.iloc[device_index]
    times, idle_by_host, collectives, copies = measured
    return DeviceMetrics(
        id=label, name=str(row["name"]), pid=int(row["pid"]), ordinal=int(row["ordinal"]),
        gpu_index=int(row["gpu_index"]), trace=trace.path,
        busy_ns=times.busy_ns, window_ns=times.window_ns, busy_pct=times.busy_pct, gaps=times.gaps,
        collective_ns=collectives.collective_ns, collective_share_pct=collectives.collective_share_pct,
        collective_exposed_pct=collectives.collective_exposed_pct, collectives_by_op=collectives.collectives_by_op,
        collective_count=collectives.collective_count, copies=copies, kernels=kernels, idle_by_host=idle_by_host,
        after_sync_ns=times.after_sync_ns, after_sync_count=times.after_sync_count,
        short_launch_host_ns=times.short_launch_host_ns, short_gap_count=times.short_gap_count,
        idle_by_class=times.idle_by_class,
        slices=accounting.decomposition(times.busy_ns, times.window_ns, copies.copy_only_ns, collectives.exposed_ns,
                                        times.idle_by_class),
        busy_in_long_steps_ns=times.busy_in_spans_ns, collective_exposed_ns=collectives.exposed_ns,
        idle_in_pageable_copies_ns=times.idle_in_pageable_copies_ns, idle_in_calls=times.idle_in_calls,
        collective_calls=collectives.calls, collective_bus=collectives.bus)


def _measure_device(trace: Trace, device: int, lo: int, hi: int, timeline, host_ranges: dict, steps: dict) -> tuple:
    """What a device's metrics need that reads the tables (each over the device's own rows): its timeline
    (``timeline(device)``), idle by host range, collectives and copies in [lo, hi). The devices are measured
    on parallel threads (numpy releases the GIL)."""
    pid = int(trace.devices.iloc[device]["pid"])
    with held(trace, device):  # the device's rows (tracetriage.partition), found once for all four passes
        times = timeline(device)
        # the idle ns and the idle inside calls are the timeline's (its sweep measured them on the same gaps)
        by_host = host_activity.idle_by_host(trace, device, lo, hi, host_ranges[pid], steps.get(pid),
                                             min_gap_ns=int(trace.meta.get("clock_resolution_ns") or 1), timeline=times)
        return times, by_host, coll.device_collectives(trace, device, lo, hi), accounting.copy_activity(trace, device, lo, hi)


def _table_counts(trace: Trace, lo: int, hi: int) -> dict:
    """The TraceMetrics counts read off the tables: GPU operations by kind starting in [lo, hi), graph
    replays, the CUDA-graph capture calls, launches (in the window and in all), executions in all."""
    gpu, api = trace.gpu, trace.api
    gpu_start = gpu["start"].to_numpy()
    gpu_in_window = (gpu_start >= lo) & (gpu_start < hi)
    ops = {kind: int((gpu_in_window & is_kind(gpu, kind)).sum()) for kind in ("kernel", "memcpy", "memset", "graph")}
    api_in_window = (api["start"].to_numpy() >= lo) & (api["start"].to_numpy() < hi)
    launch = cat_mask(api, "category", "launch")
    call_names = api["name"].cat.categories if isinstance(api["name"].dtype, pd.CategoricalDtype) else []
    capture_codes = [code for code, name in enumerate(call_names) if rules.CAPTURE_CALLS.search(str(name))]
    return {
        "kernels_in_window": ops["kernel"],
        "gpu_ops_in_window": ops,
        "capture_calls": int(np.isin(api["name"].cat.codes.to_numpy(), capture_codes).sum()) if capture_codes else 0,
        "launches_in_window": int((api_in_window & launch).sum()),
        "launches_total": int(launch.sum()),
        "executed_total": int((is_kind(gpu, "kernel") | is_kind(gpu, "graph")).sum()),
        "graph_replays_in_window": ops["graph"],
        "graph_launches_in_window": int((api_in_window & cat_mask(api, "category", "graph_launch")).sum()),
    }


def analyze_trace(trace: Trace, index: int, multi: bool, step_range: str | None) -> TraceMetrics:
    """Metrics of one trace (its own clock and window)."""
    pids = _trace_pids(trace)
    # A process that made runtime/driver calls but ran no GPU work (a helper that only queried the
    # device) is listed too, with its call count and no steps: it defines no window and no step.
    api_pids = set(distinct(trace.api["pid"].to_numpy()).tolist()) if len(trace.api) else set()
    api_only = sorted(int(pid) for pid in api_pids - set(pids))
    finder = phases.Finder(trace)  # the activity built once for the steps and the phases
    steps = finder.steps(pids, step_range)
    steps.update({pid: st.Steps(pid, "none") for pid in api_only})
    window, found_phases = _window(trace, steps, finder)
    lo, hi = window.start_ns, window.end_ns

    prefix = f"{index}:" if multi else ""
    api = trace.api
    blocking = api[cat_mask(api, "category", st.BLOCKING)]  # syncs are few
    hosts: dict = {}
    long_of = {pid: _long(process_steps) for pid, process_steps in steps.items()}  # masks of each process's long steps

    def timeline(device: int) -> DeviceTimeline:
        pid = int(trace.devices.iloc[device]["pid"])
        ends = np.sort(blocking.loc[blocking["pid"] == pid, "end"].to_numpy(np.int64))
        long = long_of.get(pid, np.zeros(0, bool))
        return tl.device_timeline(trace, device, lo, hi, hosts, sync_ends=ends, sync_slack_ns=SYNC_SLACK_NS,
                                  min_gap_ns=int(trace.meta.get("clock_resolution_ns") or 1),
                                  spans=(steps[pid].starts[long], steps[pid].ends[long]) if long.any() else None)

    device_count = len(trace.devices)
    # The kernel summaries and each process's per-step host activity only read the tables:
    # they run beside the timelines.
    from concurrent.futures import ThreadPoolExecutor

    side = ThreadPoolExecutor(1)
    kernel_summary = side.submit(kern.kernel_summary, trace, lo, hi)
    kernel_median = side.submit(kern.kernel_duration_median, trace, lo, hi)
    per_device_kernels = side.submit(kern.device_kernels, trace, lo, hi, call_samples=window.source == "gpu_activity")
    activity = {pid: side.submit(st.host_activity, trace, steps[pid]) for pid in pids + api_only}
    # and the window's table counts, copy checks and clock checks, which read only the tables: beside the device
    # threads too, not on one core after them (efficiency.measure stays after them: beside the timelines of the
    # 10M graph export it raised the peak from 854 to 992 MiB)
    labels = [prefix + trace.device_label(device_index) for device_index in range(device_count)]
    copies = side.submit(kern.copy_checks, trace, lo, hi, labels)
    counts = side.submit(_table_counts, trace, lo, hi)
    clock_checks = side.submit(lambda: [queued.process_clock_check(trace, int(pid))
                                        for pid in trace.devices["pid"].unique().tolist()])
    side.shutdown(wait=False)
    host_ranges: dict[int, host_activity.HostRanges] = {}
    for pid in trace.devices["pid"].unique().tolist():  # built once per process, before any thread reads them
        hosts[int(pid)] = tl._HostSlicer(trace, int(pid))
        host_ranges[int(pid)] = host_activity.HostRanges(trace, int(pid))
    # devices measured on parallel threads (numpy releases the GIL); a lone device's timeline halves itself
    measured = thread_map(lambda device: _measure_device(trace, device, lo, hi, timeline, host_ranges, steps),
                          range(device_count), MAX_TIMELINE_THREADS)
    release_freed()  # the device threads' slice temporaries, freed into per-thread arenas glibc does not trim itself
    kernel_rows = per_device_kernels.result()
    devices: list[DeviceMetrics] = []
    series_busy = {}
    for device_index, label in enumerate(labels):
        series_busy[label] = measured[device_index][0].busy_timeline
        devices.append(_device_metrics(trace, device_index, label, measured[device_index],
                                       kernel_rows.get(device_index, [])))
        measured[device_index] = None

    processes = []
    process_names = dict(zip(trace.processes["pid"].tolist(), trace.processes["name"].tolist()))
    step_series = {}
    all_pids = sorted(pids + api_only)
    api_calls = _row_counts(trace.api["pid"].to_numpy(), all_pids)
    gpu_ops = _row_counts(trace.gpu["pid"].to_numpy(), all_pids)
    for pid in all_pids:
        process_steps = steps[pid]
        step_series[f"{prefix}{pid}"] = {"durations": process_steps.durations.tolist(),
                                         "is_prefill": process_steps.is_prefill.tolist()}
        host = activity[pid].result()
        processes.append(ProcessMetrics(
            pid=pid, name=str(process_names.get(pid, f"pid {pid}")), trace=trace.path, steps=step_stats(process_steps),
            launches_per_step=host.launches_per_step, graph_launches_per_step=host.graph_launches_per_step,
            syncs_per_step=host.syncs_per_step, dtoh_copies_per_step=host.dtoh_copies_per_step,
            dtoh_bytes_per_step=host.dtoh_bytes_per_step, api_calls=api_calls[pid], gpu_ops=gpu_ops[pid],
            long_steps=long_steps(process_steps, long_of[pid], devices)))

    lanes_of = lanes.lanes(trace, lanes.windows(list(steps.values()), lo, hi), labels, hosts)
    kept_meta = ("version", "graph_trace_mode", "started_utc_ns", "python_events")
    metrics = TraceMetrics(
        window=window,
        devices=tuple(devices),
        processes=tuple(processes),
        kernels=kernel_summary.result(),
        kernel_median_ns=kernel_median.result(),
        copies=copies.result(),
        coll_calls=tuple(device.collective_calls for device in devices if device.collective_calls is not None),
        has_api=bool(len(api)),
        meta={"format": trace.format, "path": trace.path, "runtime": runtime_of(trace), "step_range": step_range,
              **{key: value for key, value in trace.meta.items() if key in kept_meta}},
        series=TraceSeries(busy=series_busy, steps=step_series, timeline=lanes_of),
        efficiency=efficiency.measure(trace, lo, hi, list(steps.values())),
        precision=math_precision.measure(trace, lo, hi),
        phases=found_phases,
        clock_offsets=tuple(check for check in clock_checks.result() if check.offset),
        waits=measure_waits(trace, lo, hi, devices),
        **counts.result(),
    )
    return replace(metrics, odd=rules.oddities(metrics))


def _tp_groups(devices: list[DeviceMetrics]) -> list[list[int]]:
    """The GPU set that runs collectives together (one communicator per trace file)."""
    gpus = sorted({device.gpu_index for device in devices if device.collective_count})
    return [gpus] if len(gpus) > 1 else []


def _skew_ranks(per_trace: list[TraceMetrics]) -> tuple[list[tuple[int, TraceMetrics, object]], bool, bool]:
    """The ranks to compare, (trace index, its metrics, its calls) for each device with collective calls,
    whether the traces share one clock (their windows overlap pairwise) and whether the ranks are several
    files. Without one clock only the first trace's ranks are kept."""
    ranks = [(index, trace, calls) for index, trace in enumerate(per_trace) for calls in trace.coll_calls if calls.starts.size]
    spans = [(trace.window.start_ns, trace.window.end_ns) for trace in per_trace if any(c.starts.size for c in trace.coll_calls)]
    one_clock = all(start < other_end and other_start < end for (start, end) in spans for (other_start, other_end) in spans)
    files = len({index for index, _, _ in ranks}) > 1
    if ranks and not one_clock:
        ranks = [rank for rank in ranks if rank[0] == ranks[0][0]]
    return ranks, one_clock, files


def _idle_under_range(trace, trace_metrics: TraceMetrics, calls, device: DeviceMetrics, before: str) -> int:
    """The GPU idle under the host range ``before`` on ``device``: the idle-by-host table's figure when the range
    is listed there, else measured over the window."""
    name = host_activity.range_name(before)
    listed = [row for row in (device.idle_by_host.ranges if device.idle_by_host else []) if row["name"] == name]
    if listed:
        return int(listed[0]["idle_ns"])
    return host_activity.idle_under(trace, calls.device, trace_metrics.window.start_ns, trace_metrics.window.end_ns,
                                    device.pid, name, int(trace.meta.get("clock_resolution_ns") or 1))


def _world_size(case) -> int | None:
    """The ranks the case's collectives span: the largest world size its traces record (Kineto distributedInfo),
    or the largest group its collectives record (``Group size``) where that is smaller (a TP group inside a larger
    job); None where no trace records either."""
    sizes = [trace.meta.get("world_size") for trace in case.traces]
    sizes = [size for size in sizes if isinstance(size, int) and not isinstance(size, bool) and size > 0]
    groups = [group for trace in case.traces for group in (trace.meta.get("collective_messages") or {}).get("group", [])]
    if groups and sizes:
        return min(max(sizes), max(groups))
    return max(sizes or groups) if sizes or groups else None


def _partial_words(skew: CollectiveSkew) -> str:
    """Why a skew over fewer ranks than the world names no late rank."""
    missing = skew.world_size - skew.ranks_captured
    return (f"{skew.ranks_captured} of {skew.world_size} ranks captured: the late rank is not named (in a "
            f"{skew.world_size}-way job it is most likely one of the {missing} not captured); the waiting measured is "
            "between the captured ranks only")


def _skew(case, per_trace: list[TraceMetrics]) -> CollectiveSkew | None:
    """Collective skew over every device of the case (collectives.rank_skew), with what the late
    rank did before its calls. Devices of different traces are compared only when the traces'
    windows overlap (their clocks then agree to within the matched calls' end spread); otherwise
    inside the first trace."""
    ranks, one_clock, files = _skew_ranks(per_trace)
    if not ranks:
        return None
    labels = [trace.devices[calls.device].id if calls.device < len(trace.devices) else str(calls.device)
              for _, trace, calls in ranks]
    skew = coll.rank_skew([calls for _, _, calls in ranks], labels)
    world = _world_size(case)
    skew = replace(skew, world_size=world)
    if skew.partial and skew.matched:  # the late rank is most likely one not captured: not named
        skew = replace(skew, late_rank=None, reason=_partial_words(skew))
    if not one_clock:
        reason = "the traces' windows do not overlap (different clocks): skew measured inside each trace only"
        return replace(skew, reason=reason + (f"; {skew.reason}" if skew.reason else ""))
    if skew.late_rank is None:  # unmeasured, or no late rank named (fewer ranks than the world)
        return replace(skew, clock="files" if files else "one trace") if skew.matched else skew
    index, trace_metrics, calls = ranks[labels.index(skew.late_rank.device)]
    trace = case.traces[index]
    device = trace_metrics.devices[calls.device] if calls.device < len(trace_metrics.devices) else None
    where, before, before_ns = coll.what_came_before(trace, calls.device, device.pid if device else -1, skew.late_intervals)
    if where == "host" and before and device:  # the GPU idle under the range: the idle-by-host table's figure
        before_ns = _idle_under_range(trace, trace_metrics, calls, device, before)
    late = replace(skew.late_rank, rank=trace.meta.get("rank") if files else None, before_where=where, before=before,
                   before_ns=before_ns)
    return replace(skew, late_rank=late, clock="files" if files else "one trace")


def _case_kernels(case, per_trace: list[TraceMetrics]) -> list[dict]:
    """The case's kernel summary: one trace's own (no second pass over its tables); several merged exactly."""
    if len(per_trace) == 1:
        return per_trace[0].kernels
    if not per_trace:
        return []
    return kern.kernel_summary_multi([(trace, metrics.window.start_ns, metrics.window.end_ns)
                                      for trace, metrics in zip(case.traces, per_trace)])


def _topology(case, devices: list[DeviceMetrics]):
    """The first topology's summary, judged against the GPU groups that ran collectives on it."""
    if not case.topologies:
        return None
    from tracetriage.analyzers import topology as topo_mod

    topology = case.topologies[0]
    return topo_mod.topology_summary(topology, [group for group in _tp_groups(devices) if set(group) <= set(topology.gpus)])


def _nccl(case) -> list | None:
    """One summary per NCCL log, None without logs."""
    if not case.nccl_logs:
        return None
    from tracetriage.analyzers import nccl as nccl_mod

    return [nccl_mod.summarize(log) for log in case.nccl_logs]


def _serving(case, slo: dict | None) -> dict | None:
    """The serving summary, with each SLO budget given checked against what was measured (the headline
    names the broken ones); None without serving captures."""
    if not getattr(case, "serving", None):
        return None
    from tracetriage.analyzers import serving as serving_mod
    from tracetriage.analyzers.rules.serving_signals import fit_rejected

    summary = serving_mod.summary(case.serving)
    if summary.tpot_fit:  # judged here, once: no rule writes into the serving block
        summary = replace(summary, tpot_fit=summary.tpot_fit.judged(fit_rejected(summary.tpot_fit)))
    contract = summary.to_contract()
    if not slo:
        return contract
    from tracetriage.analyzers.rules.slo import slo_checks

    return {**contract, "slo_checks": slo_checks(contract, slo)}


def _startup_stall_words(window: Window | None) -> str:
    """The headline's clause for a start-up stall longer than the work (the set-up excluded before
    the window, with the call the host was blocked in), else empty."""
    stall = window.setup_cause if window else None
    if not stall or window.setup_excluded_ns < window.duration_ns:
        return ""
    return (f"; before the window the GPU waited {window.setup_excluded_ns / 1e6:,.1f} ms at start-up "
            f"while the host was blocked in {stall['call']}" + (f" ({stall['caller']})" if stall.get("caller") else ""))


def _series(case, per_trace: list[TraceMetrics], devices: list[DeviceMetrics], claims: dict,
            step_range: str | None) -> dict:
    """The arrays only charts and the Perfetto export need, kept out of the JSON."""
    from tracetriage.analyzers import serving as serving_mod

    return {
        "serving": serving_mod.series(case.serving) if case.serving else None,
        "busy": {label: busy for trace in per_trace for label, busy in trace.series.busy.items()},
        "steps": {label: steps for trace in per_trace for label, steps in trace.series.steps.items()},
        "timeline": next((trace.series.timeline for trace in per_trace if trace.devices), None),
        # device -> finding -> accounting slice -> ns claimed: the Perfetto export's findings tracks
        "claims": claims,
        "slices": {device.id: dict(device.slices) for device in devices},  # the decomposition in ns (Perfetto export)
        "step_range": step_range,
    }


def _contract(data: dict, devices: list[DeviceMetrics], processes: list, evaluation, efficiency_block: dict,
              headline: str) -> dict:
    """The analysis contract: ``data``'s keys in their order, each typed part the rules read (devices,
    processes, skew, topology, NCCL logs, hot frames, host profile) as its contract, then the verdict's
    findings and abstentions, the capture kind, the efficiency block and the headlines."""
    skew, topology, nccl_logs, host_profile = data["collective_skew"], data["topology"], data["nccl"], data.get("host_profile")
    return {
        **data,
        "devices": [device.to_contract() for device in devices],
        "processes": [process.to_contract() for process in processes],
        "collective_skew": skew.to_contract() if skew else None,
        "topology": topology.to_contract() if topology else None,
        "nccl": [log.to_contract() for log in nccl_logs] if nccl_logs is not None else None,
        "hot_frames": [frame.to_contract() for frame in data["hot_frames"]],
        "findings": [finding.to_contract() for finding in evaluation.findings],
        "abstentions": [abstention.to_contract() for abstention in evaluation.abstentions],
        **({"host_profile": host_profile.to_contract()} if host_profile else {}),
        "capture_kind": evaluation.kind,  # the evidence the catalog's texts selected their variant on
        "efficiency": efficiency_block,
        "headline": headline,
        "headline_by_axis": rules.headline_by_axis(evaluation.findings),
    }


def analyze(case, step_range: str | None = None, symptom: str | None = None, slo: dict | None = None,
            metrics=None) -> Analysis:
    """Every analyzer over a case; ``symptom`` ranks its axis first, ``slo`` holds the
    user's budgets (``ttft_p95_ms``, ``tpot_p95_ms``, ``itl_p99_ms``); ``metrics(trace, index,
    multi, step_range)`` gives each trace's metrics (default :func:`analyze_trace`; the API
    passes its Runtime's memoised one)."""
    multi = len(case.traces) > 1
    measure = metrics or analyze_trace  # the caller's memoised analyze_trace, when it has one
    per_trace = [measure(trace, index, multi, step_range) for index, trace in enumerate(case.traces)]
    devices = [device for trace in per_trace for device in trace.devices]
    processes = [process for trace in per_trace for process in trace.processes]
    host_profile = HostProfile.of(case.pyspy) if case.pyspy else None
    first_phases = per_trace[0].phases if per_trace else None
    serving = _serving(case, slo)
    skew, topology, nccl_logs = _skew(case, per_trace), _topology(case, devices), _nccl(case)
    hot_frames = host_profile.hot_frames if host_profile else []
    data = {  # typed parts while the rules read them (their contracts below)
        **CaseInputs.of(case, per_trace, symptom, slo).to_contract(),
        # the first trace's phases (as its window), written only when it holds more than a steady one
        **({"phases": first_phases.to_contract()} if first_phases and first_phases.reported else {}),
        "devices": devices,  # the metrics while the rules run (they read them), the contract after
        "processes": processes,
        "kernels": _case_kernels(case, per_trace),
        "copies": kern.merge_copy_checks([trace.copies for trace in per_trace]),
        "collective_skew": skew,
        "topology": topology,
        "nccl": nccl_logs,
        "serving": serving,
        "hot_frames": hot_frames,
        "findings": [],
        "abstentions": [],
        **({"host_profile": host_profile} if host_profile else {}),
    }
    ctx = rules.Context(case=case, data=data, per_trace=per_trace, symptom=symptom, slo=dict(slo or {}))
    evaluation = rules.evaluate(ctx)
    findings = evaluation.findings
    # the accounting is known once the findings took their claims; the headline reads it
    devices = [replace(device, accounting=evaluation.accounting[device.id]) for device in devices]
    efficiency_block = efficiency.block(per_trace, serving)
    headline = rules.headline(findings, evaluation.abstentions, {**data, "devices": devices}, symptom)
    headline += _startup_stall_words(per_trace[0].window if per_trace else None)
    contract = _contract(data, devices, processes, evaluation, efficiency_block, headline)
    return Analysis(data=contract, series=_series(case, per_trace, devices, ctx.ledger.by_slice, step_range))
