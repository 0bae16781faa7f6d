"""Real captures from an H200 made by samples/h200/capture.py: each workload's mechanism is known by
construction (SOURCES.md there), so the verdict is checked against the workload, and the counts against
a plain json pass over the same file."""

import gzip
import json
from pathlib import Path

import pytest
from conftest import ROOT, real, run_cli

from tracetriage import analyze, open_case
from tracetriage.case import detect
from tracetriage.parsers import topology

H200 = ROOT / "samples" / "h200"
TRACES = sorted(p.name for p in H200.glob("*.json.gz"))


def plain_counts(path: Path) -> dict:
    events = json.load(gzip.open(path))["traceEvents"]
    cats = [e.get("cat") for e in events if e.get("ph") == "X"]
    return {c: cats.count(c) for c in ("kernel", "gpu_memcpy", "gpu_memset")}


@pytest.fixture(scope="module")
def results():
    return {name: analyze(open_case([H200 / name])) for name in TRACES}


def test_all_five_workloads_present():
    assert TRACES == ["eager_decode.json.gz", "gemm_bf16.json.gz", "graph_decode.json.gz",
                      "host_sync_decode.json.gz", "offload_copy.json.gz"]


@pytest.mark.parametrize("name", TRACES)
def test_counts_equal_plain_json(name):
    path = H200 / name
    assert detect(path) == "kineto"
    t = open_case([path]).traces[0]
    kinds = t.gpu["kind"].value_counts().to_dict()
    truth = plain_counts(path)
    assert kinds.get("kernel", 0) == truth["kernel"]
    assert kinds.get("memcpy", 0) == truth["gpu_memcpy"]
    assert kinds.get("memset", 0) == truth["gpu_memset"]


def _compute_pct(a):
    return a.data["devices"][0]["busy_pct"]


def test_eager_decode_is_launch_bound(results):
    a = results["eager_decode.json.gz"]
    assert a.findings[0]["id"] == "launch_bound"
    assert _compute_pct(a) < 60


def test_graph_replay_is_not_launch_bound(results):
    """The same kernels replayed as a CUDA graph: the launch problem is gone."""
    a = results["graph_decode.json.gz"]
    assert "launch_bound" not in {f["id"] for f in a.findings}
    assert _compute_pct(a) > 90
    eager = results["eager_decode.json.gz"]
    # same kernels, other launch path
    assert a.data["inputs"][0]["counts"]["kernels"] == eager.data["inputs"][0]["counts"]["kernels"]


def test_offload_is_a_copy_problem(results):
    a = results["offload_copy.json.gz"]
    assert a.findings[0]["id"] in ("pageable_memcpy", "copy_bound")
    assert a.findings[0]["axis"] == "throughput"


def test_gemm_is_gpu_bound_but_not_called_steady_without_steps(results):
    """Compute-bound by construction, but the trace records no steps (no ProfilerStep ranges, no
    periodic sync): no problem is found, and 'healthy and steady' is not claimed (issue 25, item 4)."""
    a = results["gemm_bf16.json.gz"]
    assert [f["id"] for f in a.findings] == []
    assert _compute_pct(a) > 95
    assert a.headline.startswith("No problem found in what was measured") and "steps" in a.headline


def test_ansi_underlined_one_gpu_topology():
    path = H200 / "topo_h200.txt"
    assert "\x1b[4m" in path.read_text()
    assert detect(path) == "topology"
    t = topology.parse(str(path))
    assert t.gpus == [0] and t.numa == {0: 0} and t.cpu_affinity == {0: "0-15"}
    r = run_cli("analyze", path, "--format", "text", "--no-cache")
    assert r.returncode == 0 and "one GPU" in r.stdout


def test_ansi_underlined_eight_gpu_topology(tmp_path):
    """Driver 580's underline escapes on an 8-GPU header: parsed exactly as the plain matrix."""
    src = real("topo", "nvidia-smi_topo_h100_8gpu_nv18_ml-engineering.txt")  # in samples/real (trial item 10)
    lines = src.read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("GPU0") and "GPU1" in ln)
    lines[i] = "\t\x1b[4m" + lines[i].strip() + "\x1b[0m"
    dst = tmp_path / "topo.txt"
    dst.write_text("\n".join(lines) + "\n")
    assert detect(dst) == "topology"
    a, b = topology.parse(str(src)), topology.parse(str(dst))
    assert a.gpus == b.gpus and sorted(a.graph.edges(data=True)) == sorted(b.graph.edges(data=True))


def test_folder_of_unrelated_captures_is_refused(tmp_path):
    """Five captures one after another are five cases, not one: analyze says to use batch."""
    for name in ("eager_decode.json.gz", "gemm_bf16.json.gz"):
        (tmp_path / name).write_bytes((H200 / name).read_bytes())
    r = run_cli("analyze", tmp_path, "--no-cache")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "not one run" in r.stderr and "tracetriage batch" in r.stderr


def test_reports_validate_against_the_schema(results):
    import jsonschema

    from tracetriage.reports import render
    schema = json.loads((ROOT / "reports" / "analysis.schema.json").read_text())
    for a in results.values():
        jsonschema.validate(json.loads(render(a, "json")), schema)
