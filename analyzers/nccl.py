"""NCCL log analysis: communicators, transports per hop, slow intra-node paths, warnings.

An intra-node slow path is a connection between two ranks on the same node that
goes through SHM or the network instead of P2P (NVLink or PCIe peer access): the
signature of a communicator laid across a CPU socket boundary or with P2P disabled.
"""

from __future__ import annotations

from tracetriage.parsers.nccl import NcclLog


def summary(log: NcclLog) -> dict:
    """Communicators, transports per hop, intra-node slow paths, warnings, nccl-tests."""
    transports: dict[str, int] = {}
    for c in log.connections:
        transports[c["transport"]] = transports.get(c["transport"], 0) + 1
    single_node = all(info.get("nnodes", 1) == 1 for info in log.communicators.values()) if log.communicators else None
    hosts_by_rank: dict[int, str] = {}
    for info in log.communicators.values():
        for rank, r in info["ranks"].items():
            if r.get("host"):
                hosts_by_rank.setdefault(rank, r["host"])
    slow = []
    for c in log.connections:
        same_node = single_node or (
            c["from_rank"] in hosts_by_rank and hosts_by_rank.get(c["from_rank"]) == hosts_by_rank.get(c["to_rank"])
        )
        if same_node and c["transport"] in ("SHM", "NET"):
            slow.append(c)
    pairs = sorted({(c["from_dev"], c["to_dev"], c["via"]) for c in slow})
    # One communicator spans many processes, each with its own comm pointer: group the
    # pointers by the commId their Init lines carry (pointer alone when none is logged).
    groups: dict[str, dict] = {}
    for comm, info in log.communicators.items():
        key = info.get("comm_id") or comm
        g = groups.setdefault(key, {"comm": key, "nranks": None, "nnodes": None, "ranks": {}, "init_complete": 0})
        g["nranks"] = info.get("nranks", g["nranks"])
        g["nnodes"] = info.get("nnodes", g["nnodes"])
        g["ranks"].update(info["ranks"])
        g["init_complete"] += info["init_complete"]
    return {
        "path": log.path,
        "library": log.library,
        "version": log.version,
        "lines": log.lines,
        "nccl_lines": log.parsed_lines,
        "communicators": [
            {"comm": g["comm"], "nranks": g["nranks"], "nnodes": g["nnodes"],
             "ranks_seen": len(g["ranks"]), "init_complete": g["init_complete"],
             "hosts": sorted({r["host"] for r in g["ranks"].values() if r.get("host")}),
             "cuda_devs": sorted({r["cuda_dev"] for r in g["ranks"].values() if "cuda_dev" in r})}
            for g in groups.values()
        ],
        "transports": transports,
        "gdrdma_connections": sum(1 for c in log.connections if c["gdrdma"]),
        "intra_node_slow_paths": [{"from_dev": a, "to_dev": b, "via": v} for a, b, v in pairs],
        "rings": len(log.rings),
        "ring_orders": {f"{h}:{p}:{ch}": order for (h, p, ch), order in list(log.rings.items())[:32]},
        "trees": sum(len(v) for v in log.trees.values()),
        "warnings": log.warnings,
        "colls": len(log.colls),
        "tests": {"name": log.tests["name"], "rows": len(log.tests["rows"]), "ranks": len(log.tests["ranks"]),
                  "avg_busbw": log.tests["avg_busbw"],
                  "max_busbw": max((r["oop_busbw"] for r in log.tests["rows"]), default=None)},
    }
