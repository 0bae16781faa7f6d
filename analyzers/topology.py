"""Topology analysis: NVLink/XGMI islands, the worst link inside a GPU group, re-layout.

* island = connected component of GPUs over GPU-fabric links (NV#, XGMI, MX);
* worst link of a group = the slowest link type between any two of its GPUs, in
  the order NV# < XGMI < MX < PIX < PXB < PHB < NODE < SYS;
* a group crosses a slow link when that worst link is PHB, NODE, SYS (or SOC).
"""

from __future__ import annotations

import networkx as nx

from tracetriage.parsers.topology import FAST, LINK_RANK, SLOW, Topology, link_class


def islands(topo: Topology) -> list[list[int]]:
    """Connected components of GPUs over GPU fabric links (NV#, XGMI, MX)."""
    h = nx.Graph()
    h.add_nodes_from(topo.gpus)
    for a, b, data in topo.graph.edges(data=True):
        if a.startswith("GPU") and b.startswith("GPU") and data["link_class"] in FAST:
            h.add_edge(int(a[3:]), int(b[3:]))
    return sorted((sorted(c) for c in nx.connected_components(h)), key=lambda c: c[0])


def worst_link(topo: Topology, group: list[int]) -> str | None:
    worst, rank = None, -1
    for i, a in enumerate(group):
        for b in group[i + 1:]:
            if not topo.graph.has_edge(f"GPU{a}", f"GPU{b}"):
                continue
            link = topo.link(a, b)
            r = LINK_RANK.index(link_class(link))
            if r > rank:
                worst, rank = link, r
    return worst


def summary(topo: Topology, groups: list[list[int]] | None = None) -> dict:
    isl = islands(topo)
    out = {
        "path": topo.path,
        "kind": topo.kind,
        "gpus": topo.gpus,
        "nics": len([n for n in topo.graph.nodes if n.startswith("NIC")]),
        "islands": isl,
        "numa": {str(k): topo.numa[k] for k in sorted(topo.numa)},
        "cpu_affinity": {str(k): v for k, v in topo.cpu_affinity.items()},
        "links": {f"GPU{gpu}": {f"GPU{peer}": topo.link(gpu, peer) for peer in topo.gpus
                                if peer != gpu and topo.graph.has_edge(f"GPU{gpu}", f"GPU{peer}")}
                  for gpu in topo.gpus},
        "crossing_groups": [],
        "recommendation": recommendation(topo, isl),
    }
    for group in groups or []:
        spanned = [i for i in isl if set(i) & set(group)]
        wl = worst_link(topo, group)
        out["crossing_groups"].append({
            "group": sorted(group),
            "islands_spanned": len(spanned),
            "worst_link": wl,
            "crosses_slow_link": bool(wl and link_class(wl) in SLOW),
        })
    return out


def recommendation(topo: Topology, isl: list[list[int]]) -> str | None:
    if len(isl) < 2 or min(len(i) for i in isl) < 2:
        return None  # one fabric, or no GPU fabric at all (PCIe-only): nothing to split
    sizes = {len(i) for i in isl}
    parts = []
    for group in isl:
        nodes = {topo.numa.get(g) for g in group}
        node = next(iter(nodes)) if len(nodes) == 1 else None
        # The environment assignment comes first: "numactl ... VAR=x cmd" would make numactl run "VAR=x" as a program.
        pin = f" numactl --cpunodebind={node} --membind={node}" if node is not None else ""
        visible = ",".join(map(str, group))
        parts.append(f"CUDA_VISIBLE_DEVICES={visible}{pin} <server command> --tensor-parallel-size {len(group)}")
    tp = f"TP={len(isl[0])}" if len(sizes) == 1 else "one TP group"
    return f"run {len(isl)} instances of {tp}, one per NVLink/fabric island, each pinned to its NUMA node: " + "; ".join(parts)
