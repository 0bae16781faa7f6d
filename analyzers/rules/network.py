"""The network transport rule: inter-node collectives carried by TCP sockets (analyzers/nccl_net.py).

NCCL/RCCL use their internal ``Socket`` network only when neither a net plugin nor the IB verbs transport
came up (or the environment forced it: ``NCCL_IB_DISABLE=1``, ``NCCL_NET=Socket``). Between nodes that moves
every collective step through the kernel's TCP stack and host memory, without RDMA or GPUDirect: an order
of magnitude below InfiniBand, RoCE, EFA or Slingshot. A communicator on Socket whose ranks span nodes is
the finding (``nccl_socket_transport``): of a trace with collective kernels it claims their time no compute
hides (an upper bound: the trace does not tie a kernel to its communicator), so a collective-heavy trace
makes it high; without a trace the time is not measured. A communicator on Socket on one node (1 rank,
``nNodes 1``) moves nothing over the network (P2P/SHM carry intra-node traffic): that is only a caveat for
a multi-node run with the same environment (``nccl_socket_transport_caveat``, info; low where the log does
not say whether it spans nodes, or where its nodes share one NVLink domain, ``MNNVL 1``: NVLink carries the
traffic inside the domain). The cause is read off
the log: the environment override, the plugin asked for that did not load, libibverbs missing, no IB device.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers import catalog
from tracetriage.analyzers.evidence import ev
from tracetriage.analyzers.nccl_net import is_socket
from tracetriage.analyzers.rules.collective import collective_op_evidence
from tracetriage.analyzers.rules.context import Context, Rule, window_denominator
from tracetriage.wording import pct, plural

# the words of the library's ecosystem: the benchmark, the libfabric plugin project and its default library
LIB_WORDS = {
    "NCCL": {"bench": "nccl-tests", "plugin_project": "aws-ofi-nccl", "plugin_default": "libnccl-net.so"},
    "RCCL": {"bench": "rccl-tests", "plugin_project": "aws-ofi-rccl", "plugin_default": "librccl-net.so"},
}


@dataclass(frozen=True, slots=True)
class SocketComm:
    """A communicator of a log on the Socket network (``comm`` None: the log shows processes on Socket but
    no communicator Init lines), and whether its ranks span nodes (None: not logged)."""

    log: object
    comm: object | None
    spans: bool | None

    @property
    def nvlink_domain(self) -> bool:
        """Its nodes share one NVLink domain (``MNNVL 1``): NVLink carries the traffic inside it, not the network."""
        return bool(self.comm is not None and self.comm.mnnvl)

    @property
    def over_sockets(self) -> bool:
        """Its inter-node traffic goes over the sockets: it spans nodes outside one NVLink domain."""
        return bool(self.spans) and not self.nvlink_domain


def _on_socket(network: str | None) -> bool:
    return any(is_socket(part) for part in (network or "").split(" + "))


def socket_comms(ctx: Context) -> list[SocketComm]:
    """Every communicator of the case's NCCL logs on the Socket network; a log with processes on Socket and
    no communicator whose network is logged counts as one (spanning nodes when its socket processes are on
    two hosts or its connection lines go through NET/Socket)."""
    out = []
    for log in ctx.data.get("nccl") or []:
        comms = [comm for comm in log.communicators if _on_socket(comm.network)]
        out += [SocketComm(log, comm, comm.spans_nodes) for comm in comms]
        if comms or any(comm.network for comm in log.communicators):
            continue
        hosts = {row.host for row in log.network.processes if is_socket(row.net)}
        if hosts:
            spans = True if len(hosts) > 1 or any(is_socket(net) for net in log.network.connection_nets) else None
            out.append(SocketComm(log, None, spans))
    return out


def _comm_words(item: SocketComm) -> str:
    """A communicator in words: its id, ranks and nodes as logged."""
    comm = item.comm
    if comm is None:
        hosts = sorted({row.host for row in item.log.network.processes if is_socket(row.net)})
        return f"{plural(len(hosts), 'host')} ({', '.join(hosts[:4])}; no communicator Init lines)"
    ranks = "? ranks" if comm.nranks is None else plural(comm.nranks, "rank")
    if comm.nranks == 1:
        return f"communicator {comm.comm} (1 rank)"
    nodes = f"{plural(comm.nnodes, 'node')}" if comm.nnodes is not None else (
        plural(len(comm.hosts), "host") + " seen" if comm.hosts else "nodes not logged")
    return f"communicator {comm.comm} ({ranks}, {nodes})"


def _cause(log, lib: str) -> tuple[str, str, dict]:
    """Why the log's processes ended on Socket: the variant of the fix texts, the clause the title and
    mechanism say it with, and the fields they name (the variable's value, the plugin)."""
    net, plugin = log.network, log.network.plugin
    env = net.env
    if env.get("NCCL_IB_DISABLE", "0").strip() not in ("", "0"):
        return "ib_disabled", f"NCCL_IB_DISABLE={env['NCCL_IB_DISABLE']} set by the environment switches its IB transport off", \
            {"ib_disable": env["NCCL_IB_DISABLE"]}
    if is_socket(env.get("NCCL_NET")):
        return "net_forced", f"NCCL_NET={env['NCCL_NET']} set by the environment forces it", {"net_forced": env["NCCL_NET"]}
    words = {"plugin": plugin.asked or LIB_WORDS[lib]["plugin_default"]}
    if plugin.loaded is False and (plugin.by_env or not (net.verbs_missing or net.ib_no_device)):
        asked = "asked for by NCCL_NET_PLUGIN" if plugin.by_env else "tried"
        return "plugin_missing", f"the net plugin {words['plugin']} ({asked}) did not load", words
    if net.verbs_missing:
        return "no_verbs", "libibverbs could not be opened, so its IB transport cannot run", words
    if net.ib_no_device:
        return "no_ib_device", "its IB transport found no InfiniBand/RoCE device", words
    return "default", "neither a net plugin nor the IB transport came up (the log does not say why)", words


def _network_evidence(items: list[SocketComm]) -> list:
    """The facts of the logs: the communicators on Socket, the plugin, the IB probe, the overrides, the interfaces."""
    rows = [ev("socket_communicators", len(items), "communicators", None,
               text="on the Socket network ('Using network Socket'): " + "; ".join(_comm_words(item) for item in items[:6]))]
    for log in list({id(item.log): item.log for item in items}.values())[:3]:
        net, plugin = log.network, log.network.plugin
        if plugin.asked or plugin.loaded is not None:
            state = {True: "loaded", False: "did not load", None: "load not logged"}[plugin.loaded]
            rows.append(ev("net_plugin", plugin.asked, "", None,
                           text=f"net plugin {plugin.asked or '(name not logged)'}"
                                + (" asked for by NCCL_NET_PLUGIN" if plugin.by_env else "") + f": {state}"
                                + (f" ({plugin.error[:200]})" if plugin.error else "")))
        if net.verbs_missing:
            rows.append(ev("verbs_missing", net.verbs_missing, "lines", None,
                           text="'Failed to open libibverbs.so[.1]': no IB verbs library in the process's environment"))
        if net.ib_no_device:
            rows.append(ev("ib_no_device", net.ib_no_device, "lines", None,
                           text="'NET/IB : No device found': no InfiniBand/RoCE device visible to the process"))
        overrides = {name: value for name, value in net.env.items() if name in ("NCCL_IB_DISABLE", "NCCL_NET", "NCCL_NET_PLUGIN",
                                                                                 "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME")}
        if overrides:
            rows.append(ev("net_env", overrides, "", None, text="set by the environment: "
                           + ", ".join(f"{name}={value}" for name, value in overrides.items())))
        if net.socket_interfaces:
            rows.append(ev("socket_interfaces", list(net.socket_interfaces), "", None,
                           text="the socket transport runs over " + ", ".join(net.socket_interfaces)))
        if net.connection_nets:
            rows.append(ev("connection_nets", dict(net.connection_nets), "connections", None,
                           text="connection lines through the network: "
                                + ", ".join(f"NET/{name} {count}" for name, count in net.connection_nets.items())))
    return rows


def _fields(ctx: Context, items: list[SocketComm]) -> tuple[str, dict]:
    """The cause's variant and the catalog fields (library words, the communicators, the cause clause)."""
    log = items[0].log
    lib = "RCCL" if log.library == "RCCL" or ctx.kind.get("vendor") == "rocm" else "NCCL"
    variant, why, words = _cause(log, lib)
    comms = "; ".join(_comm_words(item) for item in items[:3]) + (f" and {len(items) - 3} more" if len(items) > 3 else "")
    return variant, {"lib": lib, **LIB_WORDS[lib], "comms": comms, "why": why, "plugin": words.get("plugin", ""),
                     "ib_disable": words.get("ib_disable", ""), "net_forced": words.get("net_forced", "")}


def rule_nccl_socket_transport(ctx: Context):
    """A communicator on Socket whose ranks span nodes: claims the collective time no compute hides of a
    trace's devices (module docstring); without a trace, or with one that runs no collective, it claims nothing."""
    items = [item for item in socket_comms(ctx) if item.over_sockets]
    if not items:
        return None
    variant, fields = _fields(ctx, items)
    evidence = _network_evidence(items)
    devices = [device for device in ctx.devices if device.collective_count]
    impact = 0.0
    if devices:
        taken = ctx.ledger.take("nccl_socket_transport", {device.id: (["collective"], None) for device in devices})
        impact = ctx.ledger.impact_pct(taken)
        evidence.append(ev("collective_claimed_pct", round(impact, 2), "%", window_denominator(ctx),
                           text=f"communication no compute hides: {pct(impact)} of the window (an upper bound: the trace "
                                "does not tie a collective kernel to its communicator)"))
        evidence += collective_op_evidence(ctx)
        severity = "high" if impact >= 25 else "medium" if impact >= 2 else "low"
    elif ctx.devices:
        evidence.append(ev("collective_claimed_pct", 0.0, "%", window_denominator(ctx),
                           text="the trace's window runs no collective kernel: sockets cost it nothing measured"))
        severity = "low"
    else:
        evidence.append(ev("trace", None, "", None, text="no GPU trace: the share of the step the collectives take "
                                                         "is not measured (a trace with collective kernels would size it)"))
        severity = "medium"
    denominator = window_denominator(ctx) if ctx.devices else "window (not measured: no GPU trace)"
    return catalog.make("nccl_socket_transport", impact, fields, evidence, severity=severity, denominator=denominator,
                        kind=ctx.kind, variant=variant)


def rule_nccl_socket_caveat(ctx: Context):
    """No communicator on Socket spans nodes outside one NVLink domain: on one node (1 rank, 1 node) nothing goes
    over the sockets, a caveat (info) for a multi-node run with the same environment; low where the node count is
    not logged or the nodes share one NVLink domain (MNNVL 1: only traffic leaving the domain uses the network)."""
    items = socket_comms(ctx)
    if not items or any(item.over_sockets for item in items):
        return None
    variant, fields = _fields(ctx, items)
    unknown = [item for item in items if item.spans is None or item.nvlink_domain]
    single = items[0].comm
    if any(item.nvlink_domain for item in items):
        fields["single"] = ("its nodes share one NVLink domain (MNNVL 1): NVLink carries its traffic inside the domain, "
                            "sockets only what leaves it")
    elif unknown:
        fields["single"] = "whether it spans nodes is not logged (no nNodes/localRanks line, ranks of one host only)"
    elif single is not None and single.nranks == 1:
        fields["single"] = "1 rank: no network traffic in this communicator"
    else:
        fields["single"] = "1 node: P2P/SHM carry its traffic, none goes over the network"
    evidence = _network_evidence(items)
    evidence.append(ev("spans_nodes", items[0].spans, "", None,
                       text=f"{fields['single']}; a multi-node run with this environment would use sockets"))
    return catalog.make("nccl_socket_transport", 0.0, fields, evidence, severity="low" if unknown else "info",
                        denominator="run (no traffic over the network measured in this log)", kind=ctx.kind,
                        variant=variant, entry="nccl_socket_transport_caveat")


RULES = [
    Rule("nccl_socket_transport", "throughput", rule_nccl_socket_transport, reads=("nccl", "devices", "kind")),
    Rule("nccl_socket_transport_caveat", "trace", rule_nccl_socket_caveat, reads=("nccl", "kind"),
         finding="nccl_socket_transport", suppressed_by=("nccl_socket_transport",)),
]
