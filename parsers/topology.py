"""``nvidia-smi topo -m`` (and the same grammar from ``mx-smi topo``) -> a link graph.

Real shapes handled: tabs or spaces, a shell prompt line first, ANSI colour codes,
NIC columns and the NIC legend, the ``CPU Affinity`` / ``NUMA Affinity`` /
``GPU NUMA ID`` / ``Node Affinity`` columns in any order, ``N/A``, CPU ranges with
hyper-thread siblings (``0-51,104-155``), NIC rows without affinity cells.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tracetriage.errors import TraceFormatError
from tracetriage.parsers.common import read_text

if TYPE_CHECKING:
    import networkx as nx

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_DEV = re.compile(r"^(GPU|NIC)\d+$")
# Link types from fastest to slowest; NV#, XGMI and MX are GPU-to-GPU fabrics.
LINK_RANK = ["NV", "XGMI", "MX", "PIX", "PXB", "PHB", "PCIE", "NODE", "SYS", "SOC", "NA"]
FAST = ("NV", "XGMI", "MX")
SLOW = ("PHB", "PCIE", "NODE", "SYS", "SOC")


def link_class(link: str) -> str:
    if re.match(r"^NV\d+$", link) or link.startswith("NVL"):
        return "NV"
    return link if link in LINK_RANK else "NA"


@dataclass
class Topology:
    path: str
    kind: str
    graph: nx.Graph
    gpus: list[int]
    nics: dict[str, str] = field(default_factory=dict)
    cpu_affinity: dict[int, str] = field(default_factory=dict)
    numa: dict[int, int | None] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def link(self, a: int, b: int) -> str:
        return self.graph.edges[f"GPU{a}", f"GPU{b}"]["link"]


def _split_header(line: str) -> tuple[list[str], list[str]]:
    cells = [c for c in re.split(r"\t+|\s{2,}", line.strip()) if c]
    devs, extra = [], []
    for c in cells:
        toks = c.split()
        if all(_DEV.match(t) for t in toks):
            devs.extend(toks)
        else:
            extra.append(c.strip())
    return devs, extra


def parse(path: str, text: str | None = None) -> Topology:
    import networkx as nx  # imported by the topology readers only: a trace alone never pays it

    if text is None:
        text = read_text(path)
    lines = [_ANSI.sub("", ln).rstrip("\r\n") for ln in text.splitlines()]
    header_i = _header_row(lines)
    if header_i is None:
        raise TraceFormatError(path, "topology matrix without a GPU0 header row")
    devs, extra = _split_header(lines[header_i])
    if not devs:
        raise TraceFormatError(path, "topology header names no GPU columns")
    g = nx.Graph()
    for d in devs:
        g.add_node(d, kind=d[:3])
    topo = Topology(path=str(path), kind="nvidia-smi", graph=g, gpus=[])
    seen_rows = 0
    for ln in lines[header_i + 1:]:
        toks = ln.split()
        if not toks or not _DEV.match(toks[0]):
            if seen_rows and (not toks or toks[0].startswith("Legend")):
                break
            continue
        seen_rows += 1
        _matrix_row(topo, toks, devs, extra)
    for m in re.finditer(r"^\s*(NIC\d+):\s*(\S+)", "\n".join(lines), re.M):
        topo.nics[m.group(1)] = m.group(2)
    if not topo.gpus:
        raise TraceFormatError(path, "topology matrix without GPU rows")
    _rowless_gpus(topo, devs)
    return topo


def _rowless_gpus(topo: Topology, devs: list[str]) -> None:
    """A GPU the header names whose row is missing or unreadable (a damaged file): still a GPU of the
    matrix, as the other rows' links to it say, with its affinity unknown and a warning; the count,
    the islands and the NUMA list then name the same GPUs."""
    for name in devs:
        index = int(name[3:]) if re.fullmatch(r"GPU\d+", name) else None
        if index is not None and index not in topo.gpus:
            topo.gpus.append(index)
            topo.cpu_affinity[index], topo.numa[index] = "", None
            topo.warnings.append(f"row {name} is missing or unreadable: its links are read from the other rows, "
                                 "its CPU and NUMA affinity are unknown")
    topo.gpus.sort()


def _header_row(lines: list[str]) -> int | None:
    """The index of the matrix's header line (``GPU0 GPU1 ...``, or ``GPU0`` alone for one GPU)."""
    header_i = next((i for i, ln in enumerate(lines)
                     if re.match(r"^\s*GPU0\b", ln.strip()) and "GPU1" in ln or re.match(r"^\s+GPU0\s*$", ln)), None)
    if header_i is None:
        header_i = next((i for i, ln in enumerate(lines) if re.match(r"^\s+GPU0(\s|$)", ln)), None)
    return header_i


def _matrix_row(topo: Topology, toks: list[str], devs: list[str], extra: list[str]) -> None:
    """One device's row of the matrix: its links into ``topo.graph``; for a GPU, its index and CPU
    and NUMA affinity (the cells after the link cells, named by ``extra``)."""
    name = toks[0]
    cells = toks[1:1 + len(devs)]
    rest = toks[1 + len(devs):]
    if len(cells) < len(devs):
        topo.warnings.append(f"row {name} has {len(cells)} of {len(devs)} link cells")
    for other, cell in zip(devs, cells):
        if other != name and cell != "X":
            topo.graph.add_edge(name, other, link=cell, link_class=link_class(cell))
    if name.startswith("GPU"):
        idx = int(name[3:])
        topo.gpus.append(idx)
        values = dict(zip(extra, _affinity_values(rest, len(extra))))
        topo.cpu_affinity[idx] = values.get("CPU Affinity", "")
        numa = values.get("NUMA Affinity") or values.get("Node Affinity")
        topo.numa[idx] = int(numa) if numa and re.match(r"^\d+$", numa) else None


def _affinity_values(rest: list[str], n: int) -> list[str]:
    """Affinity cells: CPU lists never contain spaces, so one token per column."""
    return rest[:n] + [""] * max(0, n - len(rest))


_ROCM_SECTION = re.compile(r"^=+\s*(.*?)\s*=+\s*$")
_ROCM_NUMA = re.compile(r"^GPU\[(\d+)\]\s*:\s*\(Topology\)\s*Numa Node:\s*(-?\d+)")


def _rocm_sections(text: str) -> tuple[dict[str, dict[tuple[str, str], str]], dict[int, int | None]]:
    """The GPU-pair matrices of ``rocm-smi --showtopo`` (link type, weight, hops: cell by (row, column)
    GPU name) and each GPU's NUMA node (None where it reports -1)."""
    section = None
    header: list[str] = []
    matrices: dict[str, dict[tuple[str, str], str]] = {}
    numa: dict[int, int | None] = {}
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).rstrip()
        sec = _ROCM_SECTION.match(line)
        if sec:
            section, header = sec.group(1).lower(), []
            continue
        toks = line.split()
        if not toks:
            continue
        if section and "between two gpus" in section:
            if all(re.match(r"^GPU\d+$", t) for t in toks):
                header = toks
                continue
            if header and re.match(r"^GPU\d+$", toks[0]):
                kind = "link" if "link type" in section else "weight" if "weight" in section else "hops"
                for other, cell in zip(header, toks[1:]):
                    matrices.setdefault(kind, {})[(toks[0], other)] = cell
        m = _ROCM_NUMA.match(line.strip())
        if m:
            numa[int(m.group(1))] = int(m.group(2)) if int(m.group(2)) >= 0 else None
    return matrices, numa


def parse_rocm(path: str, text: str | None = None) -> Topology:
    """``rocm-smi --showtopo``: weight, hops and link-type matrices, then NUMA nodes."""
    import networkx as nx  # imported by the topology readers only: a trace alone never pays it

    if text is None:
        text = read_text(path)
    matrices, numa = _rocm_sections(text)
    links = matrices.get("link") or {}
    if not links:
        raise TraceFormatError(path, "rocm-smi output without a 'Link Type between two GPUs' matrix")
    g = nx.Graph()
    names = sorted({a for a, _ in links}, key=lambda n: int(n[3:]))
    for n in names:
        g.add_node(n, kind="GPU")
    for (a, b), cell in links.items():
        if a != b and cell not in ("0", "X"):
            link = cell.upper()
            g.add_edge(a, b, link=link, link_class=link_class(link),
                       weight=matrices.get("weight", {}).get((a, b)), hops=matrices.get("hops", {}).get((a, b)))
    topo = Topology(path=str(path), kind="rocm-smi", graph=g, gpus=[int(n[3:]) for n in names])
    topo.numa = {i: numa.get(i) for i in topo.gpus}
    return topo
