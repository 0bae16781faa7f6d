"""NCCL log analysis: communicators, transports per hop, slow intra-node paths, warnings.

An intra-node slow path is a connection between two ranks on the same node that
goes through SHM or the network instead of P2P (NVLink or PCIe peer access): the
signature of a communicator laid across a CPU socket boundary or with P2P disabled.
The parser's rows (parsers/nccl.py: connections, communicators, the nccl-tests table) are read
once into the typed records below (tracetriage.contract.load, by field name).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers.metrics import Contract
from tracetriage.analyzers.nccl_net import Network, comm_network, network, spans_nodes
from tracetriage.contract import load, load_all
from tracetriage.parsers.nccl import NcclLog


@dataclass(frozen=True, slots=True)
class Connection:
    """One connection line of the log: the ranks and CUDA devices at either end, the path NCCL printed
    (``via``), its transport class (P2P, SHM, NET ...) and whether it uses GPUDirect RDMA."""

    from_rank: int
    to_rank: int
    from_dev: str
    to_dev: str
    via: str
    transport: str
    gdrdma: bool


@dataclass(frozen=True, slots=True)
class RankInfo:
    """One rank of a communicator as its Init lines give it: the host, process and CUDA device (None: not logged)."""

    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None


@dataclass(frozen=True, slots=True)
class CommunicatorInfo:
    """One comm pointer's Init lines: its ranks, how many finished init, the ranks and nodes it spans and
    the commId shared by the pointers of one communicator, its ranks on the node of this pointer (``localRanks``)
    and the networks its init threads logged just before (None or empty: not logged)."""

    ranks: dict[int, RankInfo]
    init_complete: int = 0
    nranks: int | None = None
    nnodes: int | None = None
    comm_id: str | None = None
    local_ranks: int | None = None
    nets: tuple[str, ...] = ()
    mnnvl: int | None = None


@dataclass(frozen=True, slots=True)
class BusBandwidthRow:
    """One row of an nccl-tests table: the out-of-place bus bandwidth (GB/s) is what is kept."""

    oop_busbw: float


@dataclass(frozen=True, slots=True)
class TestsTable:
    """An nccl-tests run in the log: the test's name, its size rows, the ranks it printed, the average bus bandwidth."""

    name: str | None = None
    rows: tuple[BusBandwidthRow, ...] = ()
    ranks: tuple = ()
    avg_busbw: float | None = None


@dataclass(frozen=True, slots=True)
class Communicator(Contract):
    """The contract's row of one communicator: its id (commId, or the pointer when none is logged), ranks
    and nodes it spans, the ranks seen, the Init lines completed, its hosts and CUDA devices, the network
    it uses (nccl_net.comm_network; None: not logged), whether its ranks span nodes (nccl_net.spans_nodes) and
    whether its nodes share one NVLink domain (``MNNVL 1``: NVLink, not the network, carries traffic inside it)."""

    comm: str
    nranks: int | None
    nnodes: int | None
    ranks_seen: int
    init_complete: int
    hosts: list[str]
    cuda_devs: list[int]
    network: str | None = None
    spans_nodes: bool | None = None
    mnnvl: bool | None = None


def _transports(connections: tuple[Connection, ...]) -> dict[str, int]:
    """Connections per transport (P2P, SHM, NET ...), in the order first seen."""
    transports: dict[str, int] = {}
    for connection in connections:
        transports[connection.transport] = transports.get(connection.transport, 0) + 1
    return transports


def _slow_paths(connections: tuple[Connection, ...], communicators: list[CommunicatorInfo]) -> list[SlowPath]:
    """The intra-node slow paths (module docstring): distinct (from_dev, to_dev, via) of the connections
    between ranks on one node through SHM or NET. Ranks are on one node when every communicator has
    one node, else when the Init lines give both the same host."""
    single_node = all(info.nnodes in (None, 1) for info in communicators) if communicators else None
    hosts_by_rank: dict[int, str] = {}
    for info in communicators:
        for rank, rank_info in info.ranks.items():
            if rank_info.host:
                hosts_by_rank.setdefault(rank, rank_info.host)
    slow = []
    for connection in connections:
        same_node = single_node or (
            connection.from_rank in hosts_by_rank
            and hosts_by_rank.get(connection.from_rank) == hosts_by_rank.get(connection.to_rank)
        )
        if same_node and connection.transport in ("SHM", "NET"):
            slow.append(connection)
    pairs = sorted({(connection.from_dev, connection.to_dev, connection.via) for connection in slow})
    return [SlowPath(from_dev, to_dev, via) for from_dev, to_dev, via in pairs]


def _communicators(log: NcclLog, net: Network) -> list[Communicator]:
    """One row per communicator. One communicator spans many processes, each with its own comm pointer:
    the pointers are grouped by the commId their Init lines carry (pointer alone when none is logged)."""
    groups: dict[str, list[CommunicatorInfo]] = {}
    for comm, block in log.communicators.items():
        info = load(CommunicatorInfo, block)
        groups.setdefault(info.comm_id or comm, []).append(info)
    return [_communicator(key, infos, net) for key, infos in groups.items()]


def _communicator(key: str, infos: list[CommunicatorInfo], net: Network) -> Communicator:
    """The row of one communicator from its pointers' Init lines (a later pointer's rank counts win)."""
    ranks: dict[int, RankInfo] = {}
    for info in infos:
        ranks.update(info.ranks)
    nranks = next((info.nranks for info in reversed(infos) if info.nranks is not None), None)
    nnodes = next((info.nnodes for info in reversed(infos) if info.nnodes is not None), None)
    local = next((info.local_ranks for info in reversed(infos) if info.local_ranks is not None), None)
    hosts = sorted({rank.host for rank in ranks.values() if rank.host})
    processes = list(dict.fromkeys((rank.host, rank.pid) for rank in ranks.values()))
    return Communicator(
        comm=key, nranks=nranks, nnodes=nnodes,
        ranks_seen=len(ranks), init_complete=sum(info.init_complete for info in infos),
        hosts=hosts, cuda_devs=sorted({rank.cuda_dev for rank in ranks.values() if rank.cuda_dev is not None}),
        network=comm_network([name for info in infos for name in info.nets], processes, net),
        spans_nodes=spans_nodes(nranks, nnodes, local, len(ranks), hosts),
        mnnvl=next((bool(info.mnnvl) for info in reversed(infos) if info.mnnvl is not None), None))


@dataclass(frozen=True, slots=True)
class SlowPath(Contract):
    """One intra-node hop through SHM or the network (module docstring): from and to CUDA device, and how."""

    from_dev: int
    to_dev: int
    via: str


@dataclass(frozen=True, slots=True)
class NcclWarning(Contract):
    """A WARN/ERROR line of the log: where it came from, its source location, message and timestamp."""

    host: str
    pid: int
    cuda_dev: int
    location: str | None
    message: str
    time: str | None


@dataclass(frozen=True, slots=True)
class NcclSummary(Contract):
    """One log as the contract's ``nccl`` row: library and version, communicators, transports per hop, the
    intra-node slow paths, rings and trees, the warnings, an nccl-tests table's figures, and the network
    transport (nccl_net.Network)."""

    path: str
    library: str
    version: str | None
    lines: int
    nccl_lines: int
    communicators: list[Communicator]
    transports: dict[str, int]
    gdrdma_connections: int
    intra_node_slow_paths: list[SlowPath]
    rings: int
    ring_orders: dict[str, list]
    trees: int
    warnings: list[NcclWarning]
    colls: int
    tests: dict
    network: Network


def summarize(log: NcclLog) -> NcclSummary:
    """Communicators, transports per hop, intra-node slow paths, warnings, nccl-tests."""
    connections = load_all(Connection, log.connections)
    tests = load(TestsTable, log.tests)
    net = network(log)
    return NcclSummary(
        path=log.path,
        library=log.library,
        version=log.version,
        lines=log.lines,
        nccl_lines=log.parsed_lines,
        communicators=_communicators(log, net),
        transports=_transports(connections),
        gdrdma_connections=sum(1 for connection in connections if connection.gdrdma),
        intra_node_slow_paths=_slow_paths(connections, [load(CommunicatorInfo, block) for block in log.communicators.values()]),
        rings=len(log.rings),
        ring_orders={f"{host}:{pid}:{channel}": order for (host, pid, channel), order in list(log.rings.items())[:32]},
        trees=sum(len(tree) for tree in log.trees.values()),
        warnings=[NcclWarning(**warning) for warning in log.warnings],
        colls=len(log.colls),
        tests={"name": tests.name, "rows": len(tests.rows), "ranks": len(tests.ranks), "avg_busbw": tests.avg_busbw,
               "max_busbw": max((row.oop_busbw for row in tests.rows), default=None)},
        network=net,
    )


def summary(log: NcclLog) -> dict:
    """:func:`summarize` as its contract row."""
    return summarize(log).to_contract()
