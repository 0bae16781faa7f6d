"""Topology matrices: facts read off the real files by hand."""

import pytest
from conftest import real

from tracetriage import open_case
from tracetriage.analyzers import topology as analysis
from tracetriage.case import detect
from tracetriage.parsers import topology

# file: (gpus, islands, numa per GPU, NICs, worst link over all GPUs)
REAL = {
    "nvidia-smi_topo_a100_8gpu_nv12_ml-engineering.txt": (8, [[0, 1, 2, 3, 4, 5, 6, 7]], [0, 0, 0, 0, 1, 1, 1, 1], 0, "NV12"),
    "nvidia-smi_topo_h100_8gpu_nv18_ml-engineering.txt": (8, [[0, 1, 2, 3, 4, 5, 6, 7]], [0, 0, 0, 0, 1, 1, 1, 1], 0, "NV18"),
    "nvidia-smi_topo_h100_8gpu_nv18_ht_cpu_ranges_ml-engineering.txt": (8, [[0, 1, 2, 3, 4, 5, 6, 7]], [0, 0, 0, 0, 1, 1, 1, 1],
                                                                        0, "NV18"),
    "nvidia-smi_topo_8gpu_nv18_12nic_tabs_single_numa_with_prompt.txt": (8, [[0, 1, 2, 3, 4, 5, 6, 7]], [0] * 8, 12, "NV18"),
    "nvidia-smi_topo_rtx6000ada_4gpu_pcie_node_sys_4nic.txt": (4, [[0], [1], [2], [3]], [0, 0, 1, 1], 4, "SYS"),
    "nvidia-smi_topo_2gpu_phb_2nic_threadripper.txt": (2, [[0], [1]], [0, 0], 2, "PHB"),
    "mx-smi_topo_m_metax_8gpu_two_mx_islands_node_between.txt": (8, [[0, 1, 2, 3], [4, 5, 6, 7]], [0] * 8, 0, "NODE"),
    "mx-smi_topo_n_metax_8gpu_with_nic_columns.txt": (8, [[0, 1, 2, 3], [4, 5, 6, 7]], [0] * 8, 6, "NODE"),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_matrices(name):
    path = real("topo", name)
    assert detect(path) == "topology"
    n, isl, numa, nics, worst = REAL[name]
    t = topology.parse(str(path))
    s = analysis.summary(t, [t.gpus])
    assert t.gpus == list(range(n))
    assert s["islands"] == isl
    assert [t.numa[i] for i in t.gpus] == numa
    assert s["nics"] == nics
    assert s["crossing_groups"][0]["worst_link"] == worst


def test_cpu_ranges_with_hyperthreads():
    t = topology.parse(str(real("topo", "nvidia-smi_topo_h100_8gpu_nv18_ht_cpu_ranges_ml-engineering.txt")))
    assert t.cpu_affinity[0] == "0-51,104-155"


def test_two_islands_recommendation():
    t = topology.parse(str(real("topo", "mx-smi_topo_m_metax_8gpu_two_mx_islands_node_between.txt")))
    rec = analysis.recommendation(t, analysis.islands(t))
    assert "2 instances of TP=4" in rec and "CUDA_VISIBLE_DEVICES=4,5,6,7" in rec


def test_topology_alone_is_a_case(tmp_path):
    path = real("topo", "nvidia-smi_topo_rtx6000ada_4gpu_pcie_node_sys_4nic.txt")
    case = open_case([path])
    assert case.topology is not None and not case.traces


def test_ansi_and_garbage_lines():
    text = ("\x1b[1mGarbage line\x1b[0m\n\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV4\t0-7\t0\nGPU1\tNV4\t X \t0-7\t0\n")
    t = topology.parse("<inline>", text)
    assert analysis.islands(t) == [[0, 1]] and t.link(0, 1) == "NV4"


@pytest.mark.parametrize("name,numa", [
    ("rocm-smi_showtopo_8gpu_xgmi_2numa_ms-swift.txt", [0, 0, 0, 0, 1, 1, 1, 1]),
    ("rocm-smi_showtopo_mi300a_4apu_4numa.txt", [0, 1, 2, 3]),
])
def test_real_rocm_smi(name, numa):
    path = real("topo", name)
    assert detect(path) == "rocm_topology"
    t = topology.parse_rocm(str(path))
    assert t.gpus == list(range(len(numa)))
    assert analysis.islands(t) == [list(range(len(numa)))]
    assert [t.numa[i] for i in t.gpus] == numa
    assert t.link(0, 1) == "XGMI" and t.graph.edges["GPU0", "GPU1"]["weight"] == "15"
    case = open_case([path])
    assert case.topology.kind == "rocm-smi"
