"""NCCL log analysis: communicators, transports per hop, slow intra-node paths, warnings.

An intra-node slow path is a connection between two ranks on the same node that
goes through SHM or the network instead of P2P (NVLink or PCIe peer access): the
signature of a communicator laid across a CPU socket boundary or with P2P disabled.
"""

from __future__ import annotations

from tracetriage.parsers.nccl import NcclLog


def _transports(log: NcclLog) -> dict[str, int]:
    """Connections per transport (P2P, SHM, NET ...), in the order first seen."""
    transports: dict[str, int] = {}
    for connection in log.connections:
        transports[connection["transport"]] = transports.get(connection["transport"], 0) + 1
    return transports


def _slow_paths(log: NcclLog) -> list[dict]:
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
    return [{"from_dev": from_dev, "to_dev": to_dev, "via": via} for from_dev, to_dev, via in pairs]


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


def summary(log: NcclLog) -> dict:
    """Communicators, transports per hop, intra-node slow paths, warnings, nccl-tests."""
    return {
        "path": log.path,
        "library": log.library,
        "version": log.version,
        "lines": log.lines,
        "nccl_lines": log.parsed_lines,
        "communicators": _communicators(log),
        "transports": _transports(log),
        "gdrdma_connections": sum(1 for connection in log.connections if connection["gdrdma"]),
        "intra_node_slow_paths": _slow_paths(log),
        "rings": len(log.rings),
        "ring_orders": {f"{host}:{pid}:{channel}": order for (host, pid, channel), order in list(log.rings.items())[:32]},
        "trees": sum(len(tree) for tree in log.trees.values()),
        "warnings": log.warnings,
        "colls": len(log.colls),
        "tests": {"name": log.tests["name"], "rows": len(log.tests["rows"]), "ranks": len(log.tests["ranks"]),
                  "avg_busbw": log.tests["avg_busbw"],
                  "max_busbw": max((row["oop_busbw"] for row in log.tests["rows"]), default=None)},
    }
