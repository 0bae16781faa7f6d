"""NCCL log analysis: communicators, transports per hop, slow intra-node paths, warnings.

An intra-node slow path is a connection between two ranks on the same node that
goes through SHM or the network instead of P2P (NVLink or PCIe peer access): the
signature of a communicator laid across a CPU socket boundary or with P2P disabled.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers.metrics import Contract
from tracetriage.parsers.nccl import NcclLog


def _transports(log: NcclLog) -> dict[str, int]:
    """Connections per transport (P2P, SHM, NET ...), in the order first seen."""
    transports: dict[str, int] = {}
    for connection in log.connections:
        transports[connection["transport"]] = transports.get(connection["transport"], 0) + 1
    return transports


def _slow_paths(log: NcclLog) -> list[SlowPath]:
    """The intra-node slow paths (module docstring): distinct (from_dev, to_dev, via) of the connections
    between ranks on one node through SHM or NET. Ranks are on one node when every communicator has
    one node, else when the Init lines give both the same host."""
    single_node = all(info.get("nnodes", 1) == 1 for info in log.communicators.values()) if log.communicators else None
    hosts_by_rank: dict[int, str] = {}
    for info in log.communicators.values():
        for rank, rank_info in info["ranks"].items():
            if rank_info.get("host"):
                hosts_by_rank.setdefault(rank, rank_info["host"])
    slow = []
    for connection in log.connections:
        same_node = single_node or (
            connection["from_rank"] in hosts_by_rank
            and hosts_by_rank.get(connection["from_rank"]) == hosts_by_rank.get(connection["to_rank"])
        )
        if same_node and connection["transport"] in ("SHM", "NET"):
            slow.append(connection)
    pairs = sorted({(connection["from_dev"], connection["to_dev"], connection["via"]) for connection in slow})
    return [SlowPath(from_dev, to_dev, via) for from_dev, to_dev, via in pairs]


def _communicators(log: NcclLog) -> list[dict]:
    """One row per communicator. One communicator spans many processes, each with its own comm pointer:
    the pointers are grouped by the commId their Init lines carry (pointer alone when none is logged)."""
    groups: dict[str, dict] = {}
    for comm, info in log.communicators.items():
        key = info.get("comm_id") or comm
        group = groups.setdefault(key, {"comm": key, "nranks": None, "nnodes": None, "ranks": {}, "init_complete": 0})
        group["nranks"] = info.get("nranks", group["nranks"])
        group["nnodes"] = info.get("nnodes", group["nnodes"])
        group["ranks"].update(info["ranks"])
        group["init_complete"] += info["init_complete"]
    return [
        {"comm": group["comm"], "nranks": group["nranks"], "nnodes": group["nnodes"],
         "ranks_seen": len(group["ranks"]), "init_complete": group["init_complete"],
         "hosts": sorted({rank["host"] for rank in group["ranks"].values() if rank.get("host")}),
         "cuda_devs": sorted({rank["cuda_dev"] for rank in group["ranks"].values() if "cuda_dev" in rank})}
        for group in groups.values()
    ]


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
    intra-node slow paths, rings and trees, the warnings, and an nccl-tests table's figures."""

    path: str
    library: str
    version: str | None
    lines: int
    nccl_lines: int
    communicators: list[dict]
    transports: dict[str, int]
    gdrdma_connections: int
    intra_node_slow_paths: list[SlowPath]
    rings: int
    ring_orders: dict[str, list]
    trees: int
    warnings: list[NcclWarning]
    colls: int
    tests: dict


def summarize(log: NcclLog) -> NcclSummary:
    """Communicators, transports per hop, intra-node slow paths, warnings, nccl-tests."""
    return NcclSummary(
        path=log.path,
        library=log.library,
        version=log.version,
        lines=log.lines,
        nccl_lines=log.parsed_lines,
        communicators=_communicators(log),
        transports=_transports(log),
        gdrdma_connections=sum(1 for connection in log.connections if connection["gdrdma"]),
        intra_node_slow_paths=_slow_paths(log),
        rings=len(log.rings),
        ring_orders={f"{host}:{pid}:{channel}": order for (host, pid, channel), order in list(log.rings.items())[:32]},
        trees=sum(len(tree) for tree in log.trees.values()),
        warnings=[NcclWarning(**warning) for warning in log.warnings],
        colls=len(log.colls),
        tests={"name": log.tests["name"], "rows": len(log.tests["rows"]), "ranks": len(log.tests["ranks"]),
               "avg_busbw": log.tests["avg_busbw"],
               "max_busbw": max((row["oop_busbw"] for row in log.tests["rows"]), default=None)},
    )


def summary(log: NcclLog) -> dict:
    """:func:`summarize` as its contract row."""
    return summarize(log).to_contract()
