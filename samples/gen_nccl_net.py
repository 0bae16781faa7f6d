#!/usr/bin/env python3
"""Generate an NCCL_DEBUG=INFO init log of one communicator over ``nodes`` x ``gpus`` ranks whose network is
``net`` (IB or Socket), with the truth of what was written.

Every line is composed from NCCL's documented INFO formats (init.cc, net.cc, transport/net_ib.cc,
transport/net_socket.cc; the real logs of shared/samples/real/nccl): ``Bootstrap : Using``, the plugin probe
(``NET/Plugin : No plugin found (libnccl-net.so), using internal implementation``), the environment
overrides (``NCCL_IB_DISABLE set by environment to 1.``), the IB probe (``NET/IB : Using [0]mlx5_0:1/IB ..``
or ``NET/IB : No device found.``), the socket transport (``NET/Socket : Using [0]eth0:..``), ``Using network
<net>``, ``ncclCommInitRank comm .. - Init START``, ``comm .. nRanks .. nNodes .. localRanks ..``, one ring
whose hops inside a node go ``via P2P/CUMEM`` and between nodes ``via NET/<net>/0`` (``/GDRDMA`` on IB), and
``Init COMPLETE``. The truth is the parameters: the network, the ranks and nodes, whether the communicator
spans nodes, the environment set, and whether inter-node traffic goes over sockets.

    .venv/bin/python samples/gen_nccl_net.py --out /tmp/net --nodes 2 --net Socket
    .venv/bin/python samples/gen_nccl_net.py --out /tmp/net --nodes 2 --net IB
    .venv/bin/python samples/gen_nccl_net.py --out /tmp/net --nodes 2 --env NCCL_IB_DISABLE=1
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

COMM_ID = "0x3c5a1f0e9d8b7a61"


def _line(host: str, pid: int, tid: int, dev: int, msg: str) -> str:
    return f"{host}:{pid}:{tid} [{dev}] NCCL INFO {msg}"


def nccl_net_log(nodes: int = 2, gpus: int = 2, net: str = "Socket", env: dict | None = None,
                 mnnvl: int = 0) -> tuple[str, dict]:
    """The log text and its truth. ``env`` NCCL_IB_DISABLE=1 or NCCL_NET=Socket makes the network Socket
    whatever ``net`` says (that is what the variables do); ``mnnvl`` 1: the nodes share one NVLink domain, so the
    inter-node hops go ``via P2P/MNNVL`` and nothing goes over the network."""
    env = dict(env or {})
    if env.get("NCCL_IB_DISABLE", "0") != "0" or env.get("NCCL_NET", "").lower() == "socket":
        net = "Socket"
    n = nodes * gpus
    ranks = [(f"node{r // gpus + 1:02d}", 7000 + r, r % gpus) for r in range(n)]  # host, pid, local device
    out = []
    for rank, (host, pid, dev) in enumerate(ranks):
        ip = f"10.1.{rank // gpus}.{10 + dev}"
        out.append(_line(host, pid, pid, dev, f"Bootstrap : Using eth0:{ip}<0>"))
        out.append(_line(host, pid, pid, dev, "NET/Plugin : No plugin found (libnccl-net.so), using internal implementation"))
        if rank == 0:
            out.append(_line(host, pid, pid, dev, "cudaDriverVersion 12040"))
            out.append("NCCL version 2.21.5+cuda12.4")
        tid = pid + 500
        for name, value in env.items():
            out.append(_line(host, pid, tid, dev, f"{name} set by environment to {value}."))
        if net == "IB":
            out.append(_line(host, pid, tid, dev, f"NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:{ip}<0>"))
        else:
            if "NCCL_IB_DISABLE" not in env and "NCCL_NET" not in env:
                out.append(_line(host, pid, tid, dev, "NET/IB : No device found."))
            out.append(_line(host, pid, tid, dev, f"NET/Socket : Using [0]eth0:{ip}<0>"))
        out.append(_line(host, pid, tid, dev, f"Using network {net}"))
        out.append(_line(host, pid, tid, dev, f"ncclCommInitRank comm 0x7f00{rank:04x}0 rank {rank} nranks {n} cudaDev {dev} "
                                              f"nvmlDev {dev} busId {dev + 1}8000 commId {COMM_ID} - Init START"))
    for rank, (host, pid, dev) in enumerate(ranks):
        out.append(_line(host, pid, pid + 500, dev, f"comm 0x7f00{rank:04x}0 rank {rank} nRanks {n} nNodes {nodes} "
                                                    f"localRanks {gpus} localRank {dev} MNNVL {mnnvl}"))
    out.append(_line(*ranks[0][:2], ranks[0][1] + 500, 0, "Channel 00/02 : " + " ".join(str(r) for r in range(n))))
    ring, inter = _ring(ranks, net, mnnvl)
    out += ring
    for rank, (host, pid, dev) in enumerate(ranks):
        out.append(_line(host, pid, pid + 500, dev, f"ncclCommInitRank comm 0x7f00{rank:04x}0 rank {rank} nranks {n} "
                                                    f"cudaDev {dev} nvmlDev {dev} busId {dev + 1}8000 commId {COMM_ID} "
                                                    "- Init COMPLETE"))
    truth = {"net": net, "nranks": n, "nnodes": nodes, "spans_nodes": nodes > 1, "env": env, "comm": COMM_ID,
             "processes": n, "inter_node_connections": inter, "hosts": sorted({host for host, _, _ in ranks}),
             "mnnvl": bool(mnnvl), "sockets_between_nodes": net == "Socket" and nodes > 1 and not mnnvl}
    return "\n".join(out) + "\n", truth


def _ring(ranks: list[tuple[str, int, int]], net: str, mnnvl: int = 0) -> tuple[list[str], int]:
    """The connection lines of one ring over the ranks in order (P2P inside a node; between nodes a [send] line on
    the sender and a [receive] line on the receiver through NET/<net>/0) and the count of the inter-node lines."""
    out, inter, n = [], 0, len(ranks)
    for rank, (host, pid, dev) in enumerate(ranks):
        nxt = (rank + 1) % n
        if nxt == rank:
            continue
        same_node = ranks[nxt][0] == host or bool(mnnvl)
        via = ("P2P/MNNVL" if ranks[nxt][0] != host else "P2P/CUMEM") if same_node else \
            f"NET/{net}/0" + ("/GDRDMA" if net == "IB" else "")
        inter += 0 if same_node else 2
        out.append(_line(host, pid, pid + 501, dev, f"Channel 00/0 : {rank}[{dev}] -> {nxt}[{ranks[nxt][2]}] "
                                                    + ("" if same_node else "[send] ") + f"via {via}"))
        if not same_node:
            host2, pid2, dev2 = ranks[nxt]
            out.append(_line(host2, pid2, pid2 + 501, dev2, f"Channel 00/0 : {rank}[{dev}] -> {nxt}[{dev2}] [receive] via {via}"))
    return out, inter


def write(out: Path, name: str = "nccl.log", **kwargs) -> tuple[Path, dict]:
    """Write the log (and its truth beside it as ``<name>.truth.json``); returns the log's path and the truth."""
    out.mkdir(parents=True, exist_ok=True)
    text, truth = nccl_net_log(**kwargs)
    path = out / name
    path.write_text(text)
    (out / f"{name}.truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return path, truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--net", choices=("IB", "Socket"), default="Socket")
    ap.add_argument("--env", action="append", default=[], help="NAME=VALUE logged as set by environment")
    args = ap.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    path, truth = write(args.out, nodes=args.nodes, gpus=args.gpus, net=args.net, env=env)
    print(path, json.dumps(truth))


if __name__ == "__main__":
    main()
