"""Issue 25 item 2: a finding answers every symptom it explains (``answers`` in the catalog and
the JSON, the axis first); ``--symptom utilization`` ranks the launch/host findings that are
one of the two mechanisms of "GPU at 30% utilization"; accounting still claims once."""

import json

import pytest
from conftest import BUNDLES, ROOT, run_cli
from conftest import REAL as REAL_ALL

from tracetriage import analyze
from tracetriage.analyzers.catalog import AXES, CATALOG

REAL = REAL_ALL / "nsys"  # the repository's real captures, then ../shared's
BOTH = {"launch_bound", "gpu_starved", "host_sync_per_step", "copy_bound", "python_host_overhead"}


def test_every_catalog_entry_lists_what_it_answers_axis_first():
    for fid, entry in CATALOG.items():
        assert entry["answers"][0] == entry["axis"], fid
        assert set(entry["answers"]) <= set(AXES) | {"all"}, fid
    for fid in BOTH:
        assert CATALOG[fid]["answers"] == ["throughput", "utilization"], fid
    for fid in ("over_replicated", "admission_blocked"):
        assert CATALOG[fid]["answers"] == ["utilization"], fid


def _json(*args):
    p = run_cli("analyze", *args, "-f", "json", "--no-cache")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_symptom_utilization_is_answered_by_launch_bound_and_claims_do_not_move():
    plain = _json(BUNDLES / "eager_decode")
    util = _json(BUNDLES / "eager_decode", "--symptom", "utilization")
    assert util["headline"].startswith("utilization: [launch_bound]"), util["headline"]
    assert "no finding on this axis" not in util["headline"]
    lb = next(f for f in util["findings"] if f["id"] == "launch_bound")
    assert lb["axis"] == "throughput" and lb["answers"] == ["throughput", "utilization"]
    # the slice is claimed once, on the primary axis, whatever the symptom
    assert [d["accounting"] for d in plain["devices"]] == [d["accounting"] for d in util["devices"]]
    assert sum(f["impact_pct"] for f in util["findings"] if f["axis"] == "throughput") <= 100.0
    assert plain["headline"] == analyze([BUNDLES / "eager_decode"]).headline  # no symptom: unchanged


def test_a_utilization_finding_on_its_own_axis_stays_first():
    d = _json(BUNDLES / "serving_admission_blocked", "--symptom", "utilization")
    assert d["findings"][0]["id"] == "admission_blocked", [f["id"] for f in d["findings"]]
    assert d["findings"][0]["answers"] == ["utilization"]


@pytest.mark.parametrize("name", ["kineto/hta_critical_path_alexnet.json.gz", "kineto/hta_critical_path_simple_add.json.gz"])
def test_real_idle_gpus_answer_utilization(name):
    """Real captures whose steady phase leaves the GPU idle (AlexNet benchmarks, GPU busy under 10%) answer
    utilization with a finding, never 'no finding on this axis'."""
    if not (REAL_ALL / name).exists():
        pytest.skip("real capture not present")
    d = _json(REAL_ALL / name, "--symptom", "utilization")
    assert d["findings"] and "utilization" in d["findings"][0]["answers"]
    assert d["headline"].startswith(f"utilization: [{d['findings'][0]['id']}]"), d["headline"]


@pytest.mark.parametrize("name", ["nsys2024.6_1xH200_nvfuser_matmul.sqlite",
                                  "nsys2025.1_1xH200_nvfuser_pytorch_crossentropy.sqlite"])
def test_start_up_only_captures_say_why_they_cannot_answer(name):
    """The NVIDIA Fuser captures are fusion compilation between a handful of kernels: no steady phase
    (analyzers/phases.py). Asked about utilization, the verdict says it cannot judge and why; it claims
    no idle share of start-up."""
    if not (REAL / name).exists():
        pytest.skip("real capture not present")
    d = _json(REAL / name, "--symptom", "utilization")
    assert "too odd to judge: no steady phase" in d["headline"], d["headline"]
    assert not d["findings"]


def test_answers_in_the_schema():
    schema = json.loads((ROOT / "reports" / "analysis.schema.json").read_text())
    answers = schema["properties"]["findings"]["items"]["properties"]["answers"]
    assert answers["type"] == "array" and "utilization" in answers["items"]["enum"]
