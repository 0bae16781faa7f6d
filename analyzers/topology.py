"""Topology analysis: NVLink/XGMI islands, the worst link inside a GPU group, re-layout.

* island = connected component of GPUs over GPU-fabric links (NV#, XGMI, MX);
* worst link of a group = the slowest link type between any two of its GPUs, in
  the order NV# < XGMI < MX < PIX < PXB < PHB < NODE < SYS;
* a group crosses a slow link when that worst link is PHB, NODE, SYS (or SOC).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from tracetriage.analyzers.metrics import Contract
from tracetriage.parsers.topology import FAST, LINK_RANK, SLOW, Topology, link_class
from tracetriage.wording import fabric_islands_word


def islands(topo: Topology) -> list[list[int]]:
    """Connected components of GPUs over GPU fabric links (NV#, XGMI, MX)."""
    import networkx as nx  # imported by the topology readers only: a trace alone never pays it

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


@dataclass(frozen=True, slots=True)
class CrossingGroup(Contract):
    """A GPU group that runs collectives together, judged on the node: islands it spans, its worst link
    (LINK_RANK order) and whether that link is a slow one (PHB, NODE, SYS, SOC)."""

    group: list[int]
    islands_spanned: int
    worst_link: str | None
    crosses_slow_link: bool


@dataclass(frozen=True, slots=True)
class TopologySummary(Contract):
    """The node's topology as the contract's ``topology`` block: GPUs, NICs, islands, NUMA node and CPU
    affinity per GPU, the link to each other GPU, the collective groups judged on it, the re-layout."""

    path: str
    kind: str
    gpus: list[int]
    nics: int
    islands: list[list[int]]
    numa: dict[str, int | None]
    cpu_affinity: dict[str, str]
    links: dict[str, dict[str, str]]
    crossing_groups: list[CrossingGroup]
    recommendation: str | None


def topology_summary(topo: Topology, groups: list[list[int]] | None = None) -> TopologySummary:
    """The node's :class:`TopologySummary`, with each of ``groups`` judged on it."""
    isl = islands(topo)
    crossing = []
    for group in groups or []:
        wl = worst_link(topo, group)
        crossing.append(CrossingGroup(sorted(group), len([i for i in isl if set(i) & set(group)]), wl,
                                      bool(wl and link_class(wl) in SLOW)))
    return TopologySummary(
        path=topo.path, kind=topo.kind, gpus=topo.gpus, nics=len([n for n in topo.graph.nodes if n.startswith("NIC")]),
        islands=isl, numa={str(k): topo.numa[k] for k in sorted(topo.numa)},
        cpu_affinity={str(k): v for k, v in topo.cpu_affinity.items()},
        links={f"GPU{gpu}": {f"GPU{peer}": topo.link(gpu, peer) for peer in topo.gpus
                             if peer != gpu and topo.graph.has_edge(f"GPU{gpu}", f"GPU{peer}")}
               for gpu in topo.gpus},
        crossing_groups=crossing, recommendation=recommendation(topo, isl))


def summary(topo: Topology, groups: list[list[int]] | None = None) -> dict:
    """:func:`topology_summary` as its contract block."""
    return topology_summary(topo, groups).to_contract()


def recommendation(topo: Topology, isl: list[list[int]]) -> str | None:
    if len(isl) < 2 or min(len(i) for i in isl) < 2:
        return None  # one fabric, or no GPU fabric at all (PCIe-only): nothing to split
    sizes = {len(i) for i in isl}
    visible_var = "HIP_VISIBLE_DEVICES" if topo.kind == "rocm-smi" else "CUDA_VISIBLE_DEVICES"  # ROCm's own
    parts = []
    for group in isl:
        nodes = {topo.numa.get(g) for g in group}
        node = next(iter(nodes)) if len(nodes) == 1 else None
        # The environment assignment comes first: "numactl ... VAR=x cmd" would make numactl run "VAR=x" as a program.
        pin = f" numactl --cpunodebind={node} --membind={node}" if node is not None else ""
        visible = ",".join(map(str, group))
        parts.append(f"{visible_var}={visible}{pin} <server command> --tensor-parallel-size {len(group)}")
    tp = f"TP={len(isl[0])}" if len(sizes) == 1 else "one TP group"
    return (f"run {len(isl)} instances of {tp}, one per {fabric_islands_word(topo.kind)} island, each pinned to its NUMA "
            "node: " + "; ".join(parts))


# A bus-bandwidth model of the ring collectives, by link class: the nominal bandwidth each way of one hop
# between two GPUs, GB/s. NV#: # bonded NVLinks at 25 GB/s each way each (NVLink 2 to 4: V100's 6 links
# move 150 GB/s each way, A100's 12 300 GB/s, H100's 18 450 GB/s: half the datasheets' bidirectional
# totals). XGMI: one Infinity Fabric link, 50 GB/s each way (MI250X; MI300X 64). A hop over PCIe (through
# switches, the host bridge or the CPU interconnect) runs at most at the GPU's x16 link: 25 GB/s each way
# (PCIe 4.0 x16 after protocol overhead; the CPU interconnect of SYS and NODE hops is not faster). Classes
# with no figure here (MX, NA) leave the model unknown.
NVLINK_GBPS_PER_LINK = 25.0
LINK_GBPS = {"XGMI": 50.0, "PIX": 25.0, "PXB": 25.0, "PHB": 25.0, "PCIE": 25.0, "NODE": 25.0, "SYS": 25.0, "SOC": 25.0}


def link_gbps(link: str | None) -> float | None:
    """The nominal bandwidth each way of one hop of ``link`` (a topology matrix cell: NV18, XGMI, SYS ...),
    or None for a class with no figure (LINK_GBPS)."""
    if not link:
        return None
    if link_class(link) == "NV":
        count = link[2:]
        return NVLINK_GBPS_PER_LINK * int(count) if count.isdigit() and int(count) > 0 else None
    return LINK_GBPS.get(link_class(link))


@dataclass(frozen=True, slots=True)
class Fabric:
    """The GPU fabric of a device model (devices.toml ``fabric``): the link as a topology cell, the links per GPU,
    the GPUs it joins in a node and the bandwidth each way per GPU (``gbps``: the links x :func:`link_gbps`)."""

    model: str
    cell: str
    links: int
    gpus: int
    gbps: float
    note: str | None = None


def device_fabric(entry: dict | None) -> Fabric | None:
    """The fabric of a devices.toml entry, or None where the entry holds none (or its link has no figure)."""
    cell = (entry or {}).get("fabric")
    per_cell = link_gbps(cell)
    if not cell or per_cell is None:
        return None
    links = int(entry.get("fabric_links", 1))
    counted = link_class(cell) == "NV"  # NV18 counts its links: link_gbps gives all of them
    return Fabric(model=str(entry["model"]), cell=str(cell), links=int(cell[2:]) if counted else links,
                  gpus=int(entry.get("fabric_gpus", 8)), gbps=per_cell * (1 if counted else links),
                  note=entry.get("fabric_note"))


@dataclass(frozen=True, slots=True)
class RingModel:
    """The bus-bandwidth model of a group's ring collectives against the same collectives inside one island.

    A ring all-reduce over n GPUs moves 2(n-1)/n of the message through every hop, so its time is that
    over the ring's slowest hop's bandwidth (latency left out: the collectives are taken as bandwidth-bound,
    which makes the excess an upper estimate). ``ring_link`` / ``ring_gbps``: the slowest link the group
    needs to be connected at all (a ring over it cannot avoid that class); ``island_link`` / ``island_gbps``:
    the same inside the slowest of the islands the group spans. ``island_fraction`` = ring_gbps /
    island_gbps: the share of its collective time the same collectives would take at the island's speed."""

    ring_link: str
    ring_gbps: float
    island_link: str
    island_gbps: float

    @property
    def island_fraction(self) -> float:
        return min(1.0, self.ring_gbps / self.island_gbps)


def _bottleneck(links: dict[str, dict[str, str]], members: list[int]) -> tuple[str, float] | None:
    """The slowest link (its cell, its bandwidth) ``members`` need to be connected over the fastest links
    they have among themselves, or None when some needed link has no bandwidth figure."""
    import networkx as nx  # imported by the topology readers only: a trace alone never pays it

    cells = {(a, b): links.get(f"GPU{a}", {}).get(f"GPU{b}") for a, b in combinations(members, 2)}
    rates = {pair: link_gbps(cell) for pair, cell in cells.items()}
    for rate in sorted({rate for rate in rates.values() if rate is not None}, reverse=True):
        graph = nx.Graph()
        graph.add_nodes_from(members)
        graph.add_edges_from(pair for pair, got in rates.items() if got is not None and got >= rate)
        if nx.is_connected(graph):
            slowest = min((pair for pair, got in rates.items() if got == rate), key=lambda pair: pair)
            return cells[slowest], rate
    return None


def ring_model(links: dict[str, dict[str, str]], islands_of_node: list[list[int]], group: list[int]) -> RingModel | None:
    """The ring model of ``group`` (GPU indices) on a node with these ``links`` (topology summary's
    ``links``: GPU{a} -> GPU{b} -> cell) and islands, or None when a link has no bandwidth figure or no
    island the group spans has two GPUs."""
    if len(group) < 2:
        return None
    ring = _bottleneck(links, sorted(group))
    inside = [_bottleneck(links, island) for island in islands_of_node if len(island) > 1 and set(island) & set(group)]
    if ring is None or not inside or any(found is None for found in inside):
        return None
    island_link, island_gbps = min(inside, key=lambda found: found[1])
    return RingModel(ring[0], ring[1], island_link, island_gbps)
