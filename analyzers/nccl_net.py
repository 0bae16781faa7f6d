"""The network transport of an NCCL/RCCL log: which network each process and communicator uses, the net
plugin asked for and whether it loaded, and why the internal IB transport did not run.

NCCL (and RCCL, its fork) picks one network per process at init, in order: an external net plugin
(``NCCL_NET_PLUGIN``, default ``libnccl-net.so``; RCCL ``librccl-net.so``: aws-ofi-nccl / aws-ofi-rccl over
libfabric, HPC-X's IBext), then its internal IB verbs transport (InfiniBand and RoCE; needs libibverbs and a
device, off with ``NCCL_IB_DISABLE=1``), then its internal TCP socket transport; ``NCCL_NET`` forces one by
name. The choice is logged as ``Using network <name>``; the inter-node connection lines name it too
(``via NET/IB/0/GDRDMA``, ``via NET/AWS Libfabric/0``, ``via NET/Socket/1``). Only the internal ``Socket``
network is read as sockets: a plugin whose transport is TCP underneath (GPUDirect-TCPX) is a plugin.

Whether a communicator spans nodes is read from its Init lines (``nNodes``, ``localRanks`` of ``nRanks``, the
hosts its ranks logged from); intra-node traffic goes over P2P/SHM whatever the network, so a single-node
communicator on sockets moves nothing over them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers.metrics import Contract

SOCKET = "socket"


@dataclass(frozen=True, slots=True)
class ProcessNet(Contract):
    """One process's network: its host and pid, the network's name and where the log says it
    (``Using network``, the ``via NET/..`` connection lines, or a net's own init line ``NET/IB|Socket : Using``)."""

    host: str
    pid: int
    net: str
    source: str


@dataclass(frozen=True, slots=True)
class NetPlugin(Contract):
    """The net plugin: the library asked for (``NCCL_NET_PLUGIN`` when ``by_env``, else the default NCCL tried),
    whether it loaded (None: the log does not say), the network it registered, and the load error logged."""

    asked: str | None = None
    by_env: bool = False
    loaded: bool | None = None
    name: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Network(Contract):
    """The log's network transport: processes per network, each process's network, the net plugin, the
    network's environment overrides (``NCCL_IB_DISABLE``, ``NCCL_NET``, ``NCCL_NET_PLUGIN``, ``NCCL_SOCKET_IFNAME``
    ...), the IB probe's failures (``NET/IB : No device found`` and ``Failed to open libibverbs`` lines), the
    interfaces the socket transport uses, and the connection lines per network (``via NET/<name>/..``)."""

    nets: dict[str, int]
    processes: list[ProcessNet]
    plugin: NetPlugin
    env: dict[str, str]
    ib_no_device: int
    verbs_missing: int
    socket_interfaces: list[str]
    connection_nets: dict[str, int]


def is_socket(net: str | None) -> bool:
    """Whether a network name is NCCL's internal TCP socket transport."""
    return bool(net) and net.strip().lower() == SOCKET


def _process_nets(log) -> dict[tuple[str, int], tuple[str, str]]:
    """(host, pid) -> (network, source): ``Using network`` first (its last line), else the network most of the
    process's NET connection lines use, else the net that logged its own init (IB before Socket: NCCL tries
    IB first and initializes Socket only when IB did not come up)."""
    out: dict[tuple[str, int], tuple[str, str]] = {}
    for row in log.nets:
        out[(row["host"], row["pid"])] = (row["net"], "Using network")
    by_conn: dict[tuple[str, int], dict[str, int]] = {}
    for conn in log.connections:
        if conn.get("net"):
            counts = by_conn.setdefault((conn["host"], conn["pid"]), {})
            counts[conn["net"]] = counts.get(conn["net"], 0) + 1
    for key, counts in by_conn.items():
        out.setdefault(key, (max(counts, key=counts.get), "connections"))
    inits: dict[tuple[str, int], set[str]] = {}
    for row in log.net_inits:
        inits.setdefault((row["host"], row["pid"]), set()).add(row["net"])
    for key, nets in inits.items():
        out.setdefault(key, ("IB" if "IB" in nets else sorted(nets)[0], "net init"))
    return out


def network(log) -> Network:
    """The :class:`Network` of one parsed log (parsers/nccl.py NcclLog)."""
    processes = _process_nets(log)
    nets: dict[str, int] = {}
    for net, _source in processes.values():
        nets[net] = nets.get(net, 0) + 1
    connections: dict[str, int] = {}
    for conn in log.connections:
        if conn.get("net"):
            connections[conn["net"]] = connections.get(conn["net"], 0) + 1
    interfaces = []
    for row in log.net_inits:
        if row["net"] == "Socket":
            interfaces += [name for name in row["interfaces"] if name not in interfaces]
    return Network(
        nets=nets,
        processes=[ProcessNet(host, pid, net, source) for (host, pid), (net, source) in processes.items()],
        plugin=NetPlugin(**log.plugin), env=dict(log.net_env), ib_no_device=log.ib_no_device,
        verbs_missing=log.verbs_missing, socket_interfaces=interfaces, connection_nets=connections)


def comm_network(attached: list[str], ranks: list, net: Network) -> str | None:
    """A communicator's network: the one its init threads logged just before its Init lines (``attached``),
    else the one of the processes its ranks live in (``ranks``: host, pid), else the log's only network."""
    names = list(dict.fromkeys(attached))
    if not names:
        by_process = {(row.host, row.pid): row.net for row in net.processes}
        names = list(dict.fromkeys(by_process[key] for key in ranks if key in by_process))
    if not names and len(net.nets) == 1:
        names = list(net.nets)
    return " + ".join(names) if names else None


def spans_nodes(nranks: int | None, nnodes: int | None, local_ranks: int | None, ranks_seen: int,
                hosts: list[str]) -> bool | None:
    """Whether a communicator's ranks are on more than one node: False for 1 rank, 1 node, or every rank local
    (``localRanks`` = ``nRanks``, or all its ranks seen on one host); True for more nodes, fewer local ranks
    than ranks, or ranks logged from two hosts; None when the log does not say."""
    if nranks == 1:
        return False
    if nnodes is not None:
        return nnodes > 1
    if len(hosts) > 1:
        return True
    if local_ranks is not None and nranks is not None:
        return local_ranks < nranks
    if nranks is not None and ranks_seen >= nranks and len(hosts) == 1:
        return False
    return None
