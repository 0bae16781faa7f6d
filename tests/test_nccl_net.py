"""The network transport of NCCL/RCCL logs (analyzers/nccl_net.py) and the finding when inter-node traffic goes
over TCP sockets (analyzers/rules/network.py: nccl_socket_transport): the real logs (facts read off the files by
hand), and logs built from the documented line formats (samples/gen_nccl_net.py, the truth from what was written)."""

import json
import re

import pytest
from conftest import BUNDLES, REAL, real, run_cli, script_module

from tracetriage import analyze, open_case
from tracetriage.analyzers import nccl as nccl_analysis
from tracetriage.parsers import nccl
from tracetriage.reports import render

gen = script_module("samples", "gen_nccl_net")
RCCL_SOCKET = "rccl_lumi_mi250x_2.20.5_socket_fallback_init_excerpt.txt"

# file: (processes per network, communicator networks, plugin asked/loaded) read off the files by hand:
# `Using network` lines per process, else the `via NET/<name>/..` lines of a process; the plugin lines.
REAL_NETS = {
    "deepspeed_2node_g5_efa_ofi_nccl_2.23.4_training_log_mixed_app_output.txt": (
        {"AWS Libfabric": 2}, ["AWS Libfabric"], (None, None)),  # the plugin's own load lines are not in this excerpt
    "nccl-tests_all_reduce_perf_h200_p5e_1node_8gpu_nccl_debug_info_2.27.7.txt": (
        {"Libfabric": 8}, ["Libfabric"], ("libnccl-net.so", True)),
    "nccl-tests_all_reduce_perf_h200_p5e_2node_16gpu_efa_nccl_debug_info_2.27.7.txt": (
        {"Libfabric": 16}, ["Libfabric"], ("libnccl-net.so", True)),
    "nccl_2.27.5_node8_of_2node_roce_ib_gdrdma_init_truncated_first_line.txt": (
        {"IB": 2}, ["IB"], (None, None)),  # RoCE through the IB verbs transport: `via NET/IB/0/GDRDMA` lines of 2 processes
    "nccl_2.27.5_node7_of_2node_tuning_matrix_p2p_ipc_warn_ib_vendor_err_81_truncated_first_line.txt": ({}, [None], (None, None)),
    "nccl_2.27.5_2node_roce_coll_tuning_lines_then_warn_ib_vendor_err_81.txt": ({}, [None], (None, None)),
    RCCL_SOCKET: ({"Socket": 1}, ["Socket"], ("librccl-net-ofi.so", False)),
}


def _ids(analysis):
    return [f["id"] for f in analysis.findings]


def _finding(analysis, fid="nccl_socket_transport"):
    return next(f for f in analysis.findings if f["id"] == fid)


def _texts(finding) -> str:
    return " ".join([finding[k] for k in ("title", "mechanism", "fix", "confirm", "falsifier")]
                    + [e["text"] for e in finding["evidence"]])


@pytest.mark.parametrize("name", sorted(REAL_NETS))
def test_real_log_networks(name):
    nets, comm_nets, (asked, loaded) = REAL_NETS[name]
    s = nccl_analysis.summary(nccl.parse(str(real("nccl", name))))
    assert s["network"]["nets"] == nets
    assert [c["network"] for c in s["communicators"]] == comm_nets
    assert (s["network"]["plugin"]["asked"], s["network"]["plugin"]["loaded"]) == (asked, loaded)


def test_every_real_nccl_log_fires_only_where_it_says_socket():
    """Every real log of the collection: the finding is there exactly where a `Using network Socket` line is (the
    truth by a plain search of the file); the IB, RoCE and EFA logs never fire."""
    names = sorted(p.name for p in (REAL / "nccl").iterdir() if p.suffix == ".txt") if (REAL / "nccl").is_dir() else []
    if len(names) < 2:
        pytest.skip("the real NCCL logs are in ../shared/samples/real only")
    for name in names:
        text = (REAL / "nccl" / name).read_text(errors="replace")
        socket = bool(re.search(r"NCCL INFO Using network Socket\s*$", text, re.M))
        fired = "nccl_socket_transport" in _ids(analyze(open_case([REAL / "nccl" / name])))
        assert fired == socket, name


def test_rccl_socket_fallback_is_a_caveat_in_rccl_words():
    a = analyze(open_case([real("nccl", RCCL_SOCKET)]))
    f = _finding(a)
    assert f["severity"] == "info" and f["impact_pct"] == 0.0
    text = _texts(f)
    assert "1 rank: no network traffic in this communicator" in f["title"]
    assert "a multi-node run with this environment would use sockets" in text
    assert "librccl-net-ofi.so" in f["title"] and "NCCL_NET_PLUGIN" in f["title"]
    assert all(word in f["fix"] for word in ("librccl-net-ofi.so", "aws-ofi-rccl", "LD_LIBRARY_PATH", "NCCL_NET_PLUGIN"))
    assert "rccl-tests" in f["confirm"]
    for word in ("nccl-tests", "aws-ofi-nccl", "libnccl-net.so", "nvidia-smi", "nsys"):
        assert word not in text, word
    ev = {e["name"]: e for e in f["evidence"]}
    assert "hsn0" in ev["socket_interfaces"]["value"] and ev["verbs_missing"]["value"] == 1
    assert ev["spans_nodes"]["value"] is False


@pytest.fixture
def built(tmp_path):
    def make(**kwargs):
        path, truth = gen.write(tmp_path / json.dumps(kwargs, sort_keys=True).replace('"', "").replace(" ", ""), **kwargs)
        return path, truth
    return make


def test_built_two_node_socket_fires_in_nccl_words(built):
    path, truth = built(nodes=2, gpus=2, net="Socket")
    a = analyze(open_case([path]))
    s = a.data["nccl"][0]
    (comm,) = s["communicators"]
    assert (comm["network"], comm["nranks"], comm["nnodes"], comm["spans_nodes"]) == (
        truth["net"], truth["nranks"], truth["nnodes"], truth["spans_nodes"])
    assert s["network"]["nets"] == {"Socket": truth["processes"]}
    assert s["network"]["connection_nets"] == {"Socket": truth["inter_node_connections"]}
    f = _finding(a)
    assert f["severity"] == "medium" and "not measured" in f["impact_denominator"]  # no trace: the time is not measured
    assert f"{truth['nranks']} ranks, {truth['nnodes']} nodes" in f["title"] and "No device found" in _texts(f)
    text = _texts(f)
    assert "nccl-tests" in f["confirm"] and "ibv_devinfo" in f["fix"] and "aws-ofi-nccl" in f["fix"]
    assert "Using network IB" in f["confirm"] and "all_reduce_perf" in f["confirm"]
    for word in ("rccl-tests", "aws-ofi-rccl", "librccl", "rocm-smi"):
        assert word not in text, word
    assert a.headline and "nccl_socket_transport" in a.headline


def test_built_two_node_ib_does_not_fire(built):
    path, truth = built(nodes=2, gpus=2, net="IB")
    a = analyze(open_case([path]))
    (comm,) = a.data["nccl"][0]["communicators"]
    assert (comm["network"], comm["spans_nodes"]) == ("IB", True)
    assert a.data["nccl"][0]["network"]["connection_nets"] == {"IB": truth["inter_node_connections"]}
    assert "nccl_socket_transport" not in _ids(a)


def test_built_ib_disabled_by_environment_fires_and_names_it(built):
    path, truth = built(nodes=2, gpus=4, net="IB", env={"NCCL_IB_DISABLE": "1"})
    assert truth["net"] == "Socket" and truth["sockets_between_nodes"]
    a = analyze(open_case([path]))
    f = _finding(a)
    assert f["severity"] == "medium"
    assert "NCCL_IB_DISABLE=1" in f["title"] and "NCCL_IB_DISABLE" in f["fix"] and "Unset" in f["fix"]
    assert a.data["nccl"][0]["network"]["env"] == {"NCCL_IB_DISABLE": "1"}


def test_built_single_node_socket_is_only_a_caveat(built):
    path, truth = built(nodes=1, gpus=4, net="Socket")
    assert not truth["sockets_between_nodes"]
    f = _finding(analyze(open_case([path])))
    assert f["severity"] == "info" and "1 node: P2P/SHM carry its traffic" in f["title"]


def test_built_nvlink_domain_on_sockets_is_not_called_sockets_between_nodes(built):
    """MNNVL 1: the nodes share one NVLink domain, whose traffic goes over NVLink (P2P/MNNVL), not the network."""
    path, truth = built(nodes=2, gpus=4, net="Socket", mnnvl=1)
    assert not truth["sockets_between_nodes"] and truth["inter_node_connections"] == 0
    a = analyze(open_case([path]))
    (comm,) = a.data["nccl"][0]["communicators"]
    assert (comm["network"], comm["spans_nodes"], comm["mnnvl"]) == ("Socket", True, True)
    f = _finding(a)
    assert f["severity"] == "low" and "NVLink domain (MNNVL 1)" in f["title"] and f["impact_pct"] == 0.0


def test_collective_heavy_trace_with_sockets_between_nodes_is_high(built):
    """With a trace whose collectives no compute hides, the finding claims that time (what collective_dominant
    claims of the same trace alone: the truth) and names the cause instead of collective_dominant."""
    path, _ = built(nodes=2, gpus=4, net="Socket")
    trace = BUNDLES / "tp8_cross_island" / "trace.sqlite"
    alone = analyze(open_case([trace]))
    dominant = _finding(alone, "collective_dominant")
    both = analyze(open_case([trace, path]))
    f = _finding(both)
    assert "collective_dominant" not in _ids(both)
    assert f["impact_pct"] == dominant["impact_pct"] and f["impact_pct"] >= 25 and f["severity"] == "high"
    assert both.headline.startswith("throughput: [nccl_socket_transport]") or "[nccl_socket_transport]" in both.headline


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_every_renderer_shows_the_network_and_the_finding(fmt, built):
    path, truth = built(nodes=2, gpus=2, net="Socket")
    a = analyze(open_case([path]))
    out = render(a, fmt)
    f = _finding(a)
    if fmt == "json":
        data = json.loads(out)
        assert "nccl_socket_transport" in [row["id"] for row in data["findings"]]
        assert data["nccl"][0]["network"]["nets"] == {"Socket": truth["processes"]}
        return
    title = f["title"] if fmt != "html" else f["title"].split("`")[0]
    assert title.replace("`", "")[:40] in out.replace("`", "").replace("&#39;", "'")
    assert "network Socket" in out and "Socket (4 processes)" in out


def test_cli_text_of_the_real_rccl_log():
    proc = run_cli("analyze", real("nccl", RCCL_SOCKET))
    assert proc.returncode == 0, proc.stderr
    assert "network Socket (1 rank" not in proc.stdout  # the communicator line says where it lives, not a count
    assert "network Socket (one node)" in proc.stdout
    assert "net plugin librccl-net-ofi.so asked for by NCCL_NET_PLUGIN: not loaded" in proc.stdout
    assert "nccl_socket_transport" in proc.stdout


def test_generator_cli_writes_its_truth(tmp_path):
    path, truth = gen.write(tmp_path, nodes=3, gpus=1, net="IB")
    assert json.loads((tmp_path / "nccl.log.truth.json").read_text()) == truth
    assert truth["hosts"] == ["node01", "node02", "node03"]
