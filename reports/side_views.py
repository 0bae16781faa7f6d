"""The sections of the side artifacts in the report's view: topology, NCCL logs, serving, and the
host profile (py-spy). Built by :func:`tracetriage.reports.view.report_view` like every other
section: figures formatted once, the templates compute nothing."""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.contract import load
from tracetriage.records.serving import BenchPoint, Latency, LengthStats, LittlesLaw, Requests, Serving, TpotFit
from tracetriage.records.side import HostProfile, NcclLog, Network, Topology
from tracetriage.wording import as_text, count, fabric_islands_word, fixed, ms, pct, plural, requests, rps, slo_text


@dataclass(frozen=True, slots=True)
class LinkCell:
    """One cell of the GPU-to-GPU link matrix; ``speed`` is ``fast``, ``slow`` or empty."""
    link: str
    speed: str


@dataclass(frozen=True, slots=True)
class TopologyRow:
    """One GPU of the topology matrix: its links to every GPU, its NUMA node, its CPU affinity."""
    gpu: str
    links: tuple[LinkCell, ...]
    numa: str
    cpu_affinity: str


@dataclass(frozen=True, slots=True)
class CrossingGroupView:
    """A process group and the NVLink islands it spans."""
    group: str
    islands_spanned: str
    worst_link: str


@dataclass(frozen=True, slots=True)
class TopologyView:
    """The node's topology: GPUs, NICs, NVLink/fabric islands, the recommended layout."""
    path: str
    fabric: str  # the GPU fabric by the matrix's tool: NVLink/fabric (nvidia-smi), XGMI/fabric (rocm-smi)
    gpu_labels: tuple[str, ...]
    gpus: str
    nics: str
    islands: str
    island_list: tuple[str, ...]
    numa: str
    crossing_groups: tuple[CrossingGroupView, ...]
    recommendation: str | None
    rows: tuple[TopologyRow, ...]


@dataclass(frozen=True, slots=True)
class CommunicatorView:
    """One NCCL communicator as its log shows it (``nodes`` ``?`` where it was not logged)."""
    comm: str
    ranks: str
    nodes: str
    ranks_seen: str
    init_complete: str
    cuda_devs: str
    network: str = "?"
    spans: str = "?"


@dataclass(frozen=True, slots=True)
class SlowPathView:
    """An intra-node hop that goes through the host."""
    from_dev: str
    to_dev: str
    via: str


@dataclass(frozen=True, slots=True)
class NcclWarningView:
    """One WARN line of an NCCL log."""
    time: str
    host: str
    pid: str
    cuda_dev: str
    location: str
    message: str


@dataclass(frozen=True, slots=True)
class NcclTestsView:
    """The nccl-tests table of a log: message sizes, ranks, bus bandwidth (GB/s; ``avg_measured`` false when
    the log gives no average)."""
    name: str
    sizes: str
    ranks: str
    max_busbw: str
    avg_busbw: str
    avg_measured: bool


@dataclass(frozen=True, slots=True)
class NcclLogView:
    """One NCCL log: library and version, communicators, transports per hop, slow hops, WARN lines."""
    path: str
    library: str
    version: str | None
    nccl_lines: str
    communicators: tuple[CommunicatorView, ...]
    transports: str
    transports_dict: str
    gdrdma: str
    slow_paths: tuple[SlowPathView, ...]
    warning_count: str
    warnings: tuple[NcclWarningView, ...]
    tests: NcclTestsView | None
    network: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LatencyRow:
    """One latency metric at one side (client benchmark or server histogram)."""
    metric: str
    side: str
    p50: str
    p99: str
    mean: str
    note: str


@dataclass(frozen=True, slots=True)
class SweepRow:
    """One point of a benchmark sweep (``concurrency`` None: no concurrency cap)."""
    rate: str
    concurrency: str | None
    throughput: str | None
    ttft: str
    tpot: str
    itl_p99: str
    group: str


@dataclass(frozen=True, slots=True)
class StatsView:
    """The engine's periodic stats lines, summarized."""
    samples: str
    running_mean: str
    running_max: str
    waiting_mean: str
    waiting_max: str
    waiting_share_pct: str
    kv_usage_p50: str
    kv_usage_max: str
    gen_tps_mean: str


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica's scheduler state."""
    replica: str
    running: str
    waiting: str
    kv_usage_pct: str


@dataclass(frozen=True, slots=True)
class ServingCaptureView:
    """One capture of the serving engine (a log, a /metrics scrape, a benchmark result) and its kind."""
    path: str
    kind: str


@dataclass(frozen=True, slots=True)
class ServingView:
    """The serving engine: its captures, version and config, stats, latency percentiles (client and server
    side), each --slo budget checked, Little's law, the TPOT fit, the sweep, the replicas, the
    features the engine ran with (``engine_defaults``: printed or its default, and where that comes
    from), the traffic's shape per request (``requests``: one line per shape), the figures that
    disagree (``cross_checks``) and the waiting queue as measured (``queue``: on every page, whichever
    finding fires)."""
    captures: tuple[ServingCaptureView, ...]
    engine: str | None
    version: str | None
    config: tuple[str, ...]
    stats: StatsView | None
    latency_rows: tuple[LatencyRow, ...]
    slo: tuple[str, ...]
    littles_law: str | None
    fit: str | None
    sweep: tuple[SweepRow, ...]
    replicas: tuple[ReplicaView, ...]
    warnings: tuple[str, ...]
    engine_defaults: tuple[str, ...]
    requests: tuple[str, ...]
    cross_checks: tuple[str, ...]
    queue: str | None


@dataclass(frozen=True, slots=True)
class ThreadView:
    """One thread of a py-spy dump: its innermost frame and that frame's caller."""
    pid: str
    process: str
    thread: str
    state: str
    frame: str
    caller: str


@dataclass(frozen=True, slots=True)
class HotFrameView:
    """A frame of the py-spy profile: inclusive and own share of the non-idle samples (%)."""
    frame: str
    share_pct: str
    self_pct: str
    calls_sync: bool


@dataclass(frozen=True, slots=True)
class ProfileCaptureView:
    """One py-spy capture."""
    path: str
    format: str
    threads: str
    idle_threads: str


@dataclass(frozen=True, slots=True)
class HostProfileView:
    """The host profile (py-spy): samples, captures, the threads of a dump."""
    samples: str
    idle_samples: str
    captures: tuple[ProfileCaptureView, ...]
    snapshot_summary: str | None
    threads: tuple[ThreadView, ...]


def _link_speed(link: str) -> str:
    """``fast`` for NVLink and fabric links, ``slow`` for hops through the host."""
    if link.startswith("NV") or link in ("XGMI", "MX"):
        return "fast"
    return "slow" if link in ("SYS", "NODE", "PHB") else ""


def _topology_row(topo: Topology, gpu: int) -> TopologyRow:
    """One GPU's row: its link to every GPU (``X`` to itself, ``?`` where the matrix has none), NUMA node, CPU affinity."""
    links, numa, index = topo.links[f"GPU{gpu}"], topo.numa, str(gpu)
    return TopologyRow(
        gpu=f"GPU{gpu}",
        links=tuple(LinkCell(link, _link_speed(link))
                    for link in (links.get(f"GPU{other}", "X" if gpu == other else "?") for other in topo.gpus)),
        numa=("N/A" if numa[index] is None else str(numa[index])) if index in numa else "",
        cpu_affinity=as_text(topo.cpu_affinity[index]) if index in topo.cpu_affinity else "")


def topology_view(topo: Topology | None) -> TopologyView | None:
    """The topology section's view (None without a matrix)."""
    if not topo:
        return None
    gpus = topo.gpus
    return TopologyView(
        path=as_text(topo.path), fabric=fabric_islands_word(topo.kind), gpu_labels=tuple(f"GPU{g}" for g in gpus),
        gpus=plural(len(gpus), "GPU"),
        nics=plural(topo.nics, "NIC"), islands=str(topo.islands), island_list=tuple(str(i) for i in topo.islands),
        numa=", ".join(f"GPU{g}:{'N/A' if n is None else n}" for g, n in topo.numa.items()),
        crossing_groups=tuple(CrossingGroupView(as_text(g.group), as_text(g.islands_spanned), as_text(g.worst_link))
                              for g in topo.crossing_groups),
        recommendation=topo.recommendation or None, rows=tuple(_topology_row(topo, gpu) for gpu in gpus))


_SPANS = {True: "spans nodes", False: "one node", None: "nodes not logged"}


def _network_lines(net: Network) -> tuple[str, ...]:
    """The network transport of a log in words, one line a fact (empty when the log says nothing of it)."""
    lines = []
    if net.nets:
        lines.append("network: " + ", ".join(f"{name} ({plural(n, 'process', 'processes')})" for name, n in net.nets.items()))
    plugin = net.plugin
    if plugin.asked or plugin.loaded is not None:
        asked = f"net plugin {plugin.asked or '(name not logged)'}" + (" asked for by NCCL_NET_PLUGIN" if plugin.by_env else "")
        state = {True: "loaded" + (f" ({plugin.name})" if plugin.name else ""), False: "not loaded",
                 None: "load not logged"}[plugin.loaded]
        lines.append(f"{asked}: {state}" + (f": {plugin.error}" if plugin.error else ""))
    if net.verbs_missing:
        lines.append("Failed to open libibverbs: no IB verbs library, the internal IB transport cannot run")
    if net.ib_no_device:
        lines.append("NET/IB : No device found: no InfiniBand/RoCE device visible")
    if net.socket_interfaces:
        lines.append("NET/Socket interfaces: " + ", ".join(net.socket_interfaces))
    if net.env:
        lines.append("set by environment: " + ", ".join(f"{name}={value}" for name, value in net.env.items()))
    return tuple(lines)


def nccl_view(log: NcclLog) -> NcclLogView:
    tests = log.tests
    return NcclLogView(
        path=as_text(log.path), library=as_text(log.library), version=log.version or None,
        nccl_lines=count(log.nccl_lines),
        communicators=tuple(CommunicatorView(as_text(c.comm), as_text(c.nranks),
                                             "?" if c.nnodes is None else str(c.nnodes), as_text(c.ranks_seen),
                                             as_text(c.init_complete), ", ".join(map(str, c.cuda_devs)),
                                             c.network or "not logged", _SPANS[c.spans_nodes])
                            for c in log.communicators),
        transports=", ".join(f"{k} {n}" for k, n in log.transports.items()),
        transports_dict=str(log.transports),  # as the Markdown page has always printed them
        gdrdma=as_text(log.gdrdma_connections),
        slow_paths=tuple(SlowPathView(as_text(hop.from_dev), as_text(hop.to_dev), as_text(hop.via))
                         for hop in log.intra_node_slow_paths),
        warning_count=str(len(log.warnings)),
        warnings=tuple(NcclWarningView(as_text(w.time or ""), as_text(w.host), as_text(w.pid), as_text(w.cuda_dev),
                                       as_text(w.location or ""), as_text(w.message)) for w in log.warnings),
        tests=NcclTestsView(as_text(tests.name or ""), as_text(tests.rows), as_text(tests.ranks), as_text(tests.max_busbw),
                            as_text(tests.avg_busbw), bool(tests.avg_busbw)) if tests.rows else None,
        network=_network_lines(log.network))


def _stats_view(srv: Serving) -> StatsView | None:
    stats = srv.stats
    if not stats:
        return None
    return StatsView(plural(stats.samples or 0, "stats sample"), requests(stats.running_mean), requests(stats.running_max),
                     requests(stats.waiting_mean), requests(stats.waiting_max), as_text(stats.waiting_share_pct),
                     as_text(stats.kv_usage_p50), as_text(stats.kv_usage_max),
                     as_text(stats.gen_tps_mean) if stats.gen_tps_mean is not None else "n/a")


def _count_cell(value) -> str:
    """A replica's running or waiting requests by the one rounding of request counts (wording.requests)."""
    return requests(value) if isinstance(value, (int, float)) else as_text(value)


def _kv_cell(value) -> str:
    """A replica's KV usage (%) at one decimal, as every percentage of the page."""
    return fixed(value, 1) if isinstance(value, (int, float)) else as_text(value)


def serving_view(srv: Serving | None) -> ServingView | None:
    """The serving section: latency percentiles (client and server side), Little's law, the sweep,
    each --slo budget checked."""
    if not srv:
        return None
    return ServingView(
        captures=tuple(ServingCaptureView(as_text(c.path), as_text(c.kind)) for c in srv.captures),
        engine=srv.engine or None,
        version=srv.version or None, config=tuple(f"{k}={value}" for k, value in srv.config.items()),
        stats=_stats_view(srv),
        latency_rows=_latency_rows(srv.latency), slo=tuple(slo_text(check) for check in srv.slo_checks),
        littles_law=_littles_law(srv.littles_law), fit=_tpot_fit(srv.tpot_fit),
        sweep=tuple(_sweep_row(point) for point in srv.bench[:30]),
        replicas=tuple(ReplicaView(as_text(r.replica), _count_cell(r.running), _count_cell(r.waiting),
                                   _kv_cell(r.kv_usage_pct))
                       for r in srv.replicas[:32]),
        warnings=tuple(as_text(w) for w in srv.warnings),
        engine_defaults=tuple(as_text(feature.text) for feature in srv.engine_defaults.features.values())
        if srv.engine_defaults else (),
        requests=_requests(srv.requests),
        cross_checks=tuple(as_text(sentence) for sentence in srv.cross_checks),
        queue=as_text(srv.queue) if srv.queue else None)


def length_summary(stats: LengthStats | dict, unit: str = "") -> str:
    """A per-request length distribution in words: ``mean 552.3, p50 494, p90 890, p99 1,451{unit} over
    998 requests`` (the percentiles it has). Takes the record or its contract dict."""
    stats = load(LengthStats, stats)
    figures = ", ".join(f"{name} {value:,.0f}" for name, value in (("p50", stats.p50), ("p90", stats.p90), ("p99", stats.p99))
                        if value is not None)
    return f"mean {stats.mean:,.1f}" + (f", {figures}" if figures else "") + f"{unit} over {stats.n:,} requests"


def _requests(block: Requests | None) -> tuple[str, ...]:
    """The traffic's shape per request: input and output tokens, failures and finish reasons, one line each."""
    if not block:
        return ()
    lines = [f"{name} tokens per request: {length_summary(stats)} ({as_text(block.source)})"
             for name, stats in (("input", block.input), ("output", block.output)) if stats]
    if block.failed is not None and block.sent:
        lines.append(f"failed requests: {block.failed:,} of {block.sent:,} sent")
    if block.finish_reasons:
        lines.append("finished by reason: " + ", ".join(f"{as_text(reason)} {n:,}" for reason, n in block.finish_reasons.items()))
    return tuple(lines)


def _quantile_text(quantile) -> str:
    """A server histogram's quantile: ``n/a`` when empty, ``>`` before a lower bound (the +Inf bucket)."""
    return "n/a" if not quantile else (">" if quantile.lower_bound else "") + ms(quantile.value_ms)


def _latency_rows(latency: Latency) -> tuple[LatencyRow, ...]:
    """The client benchmark's percentiles, then the server's /metrics histograms (``>`` a lower bound)."""
    rows = []
    for metric, client in latency.client.items():
        if metric == "record":
            continue
        rows.append(LatencyRow(metric.upper(), "client (benchmark)", ms(client.median or client.p50), ms(client.p99),
                               ms(client.mean), f"max {ms(client.max)}" if client.max else ""))
    for metric, histogram in latency.server.items():
        res = [f"{name} ±{quantile.resolution_ms:g} ms" for name, quantile in (("p50", histogram.p50), ("p99", histogram.p99))
               if quantile and quantile.resolution_ms]
        rows.append(LatencyRow(metric.upper(), "server (/metrics histogram)", _quantile_text(histogram.p50),
                               _quantile_text(histogram.p99), ms(histogram.mean_ms),
                               f"{histogram.count:,.0f} requests; bucket resolution " + (", ".join(res) if res else "n/a")))
    return tuple(rows)


LITTLE_APART = 0.10  # Little's bound C / W and a measured completion rate this far apart are not rounding


def _capacity_words(law: LittlesLaw) -> str:
    """The capacity with its run: measured where a run saturated the server, else a lower bound."""
    run = f" in {law.capacity_run}" if law.capacity_run else ""
    if law.capacity_saturated:
        share = (f"; arrivals at {pct(100.0 * law.arrival_rate_rps / law.capacity_rps)} of capacity"
                 if law.arrival_rate_rps is not None else "")
        return (f"capacity {rps(law.capacity_rps)} (the highest completion rate measured{run}: a run that saturated the "
                f"server){share}")
    return (f"capacity at least {rps(law.capacity_rps)} (the highest completion rate measured{run}; no run saturated "
            "the server, so its capacity was not reached)")


def _concurrency_words(law: LittlesLaw) -> str:
    """A closed-loop run's Little's bound C / W beside its measured completion rate, and why they differ."""
    bound, measured = law.concurrency_rps, law.capacity_rps
    words = (f"at max concurrency {law.concurrency:g}, Little's law bounds the completion rate by C / W = "
             f"{rps(bound)} (W its mean E2E latency); measured {rps(measured)} (completed / duration)")
    apart = abs(measured - bound) / bound if bound else 0.0
    if apart < LITTLE_APART:
        return words + f": they agree within {pct(100 * LITTLE_APART)}"
    if measured < bound:
        return words + (f", {pct(100 * apart)} below it: fewer than {law.concurrency:g} requests were in flight part of the "
                        "run (ramp-up, drain, a client that could not keep every slot busy)")
    return words + (f", {pct(100 * apart)} above the bound: the duration and the E2E latencies do not cover the same "
                    "requests (warm-up or failed requests counted in one only)")


def _drain_words(law: LittlesLaw) -> str:
    """Why a run completed well under its arrival rate without being saturated (its rate below the capacity
    measured): a finite run's duration includes the drain of its last requests, so completed / duration
    is below the rate it served; empty otherwise."""
    arrival, completed = law.arrival_rate_rps, law.throughput_rps
    if not (completed and law.capacity_rps and law.capacity_saturated) or arrival >= law.capacity_rps:
        return ""
    if completed * (1 + LITTLE_APART) >= arrival:
        return ""
    return (f" — {pct(100.0 * (1 - completed / arrival))} under its arrivals though below the capacity: the run's duration "
            "includes the drain of its last requests (and any start-up), so completed / duration undercounts the rate "
            "it kept up with")


def _littles_law(law: LittlesLaw) -> str | None:
    """Little's law on the serving figures, each rate named with its run: the arrival rate and the
    completion rate of that run, the capacity (measured, or a lower bound), a closed-loop run's bound
    C / W beside its measured rate, requests in the system."""
    parts = []
    if law.arrival_rate_rps is not None:
        completed = (f", completed {rps(law.throughput_rps)} in that run (completed / duration)"
                     if law.throughput_rps is not None else "")
        parts.append(f"arrival {rps(law.arrival_rate_rps)} (the configured rate of the busiest finite-rate run){completed}"
                     + _drain_words(law))
    if law.capacity_rps is not None:
        parts.append(_capacity_words(law))
    if law.concurrency_rps is not None and law.capacity_rps is not None:
        parts.append(_concurrency_words(law))
    if law.in_system is not None:
        parts.append(f"requests in the system L = {requests(law.in_system)}"
                     + (f" = the completion rate of that run x {law.time_in_system_s:g} s in the system (mean E2E "
                        "latency)" if law.time_in_system_s else ""))
    return "Little's law (L = λ·W): " + "; ".join(parts) + f" — {law.source}" if parts else None


def _tpot_fit(fit: TpotFit | None) -> str | None:
    """TPOT against the running batch: the line fitted, or why there is none."""
    if not fit:
        return None
    if fit.model:
        return (f"TPOT = {fit.a_ms:.2f} ms + {fit.b_ms_per_seq:.3f} ms x running (r² {fit.r2:.2f}, "
                f"{fit.points} points, {fit.source})")
    return f"TPOT against the running batch: no model ({fit.rejected}; {fit.points} points, {fit.source})"


def _sweep_row(point: BenchPoint) -> SweepRow:
    rate = point.request_rate
    return SweepRow(rate="inf" if isinstance(rate, float) and rate == float("inf") else as_text(rate),
                    concurrency=None if point.max_concurrency is None else as_text(point.max_concurrency),
                    throughput=fixed(point.request_throughput or None, 2), ttft=ms(point.mean_ttft_ms),
                    tpot=ms(point.mean_tpot_ms), itl_p99=ms(point.p99_itl_ms), group=point.group or "")


def host_profile_view(profile: HostProfile | None) -> HostProfileView | None:
    if not profile:
        return None
    active = [thread for thread in profile.snapshot if not thread.idle]
    frames: dict[str, int] = {}
    for thread in active:
        frames[thread.frame] = frames.get(thread.frame, 0) + 1
    summary = None
    if active:
        frame, n = max(frames.items(), key=lambda kv: kv[1])
        summary = f"{n} of {len(active)} active threads are in {frame}"
    return HostProfileView(
        samples=count(profile.total_samples), idle_samples=count(profile.idle_samples),
        captures=tuple(ProfileCaptureView(as_text(c.path), as_text(c.format), plural(c.threads, "thread"),
                                          as_text(c.idle_threads)) for c in profile.captures),
        snapshot_summary=summary,
        threads=tuple(ThreadView(as_text(x.pid or "?"), x.process[:40], as_text(x.thread), "idle" if x.idle else "active",
                                 as_text(x.frame), as_text(x.caller)) for x in profile.snapshot[:16]))
