"""Rules that no committed bundle exercises on both sides, on traces built in the test."""

import random
import sys

from conftest import ROOT

from tracetriage import analyze, open_case
from tracetriage.analyzers.rules import THRESHOLDS
from tracetriage.analyzers.rules.registry import stage

sys.path.insert(0, str(ROOT / "samples"))
import generate  # noqa: E402


def test_pageable_memcpy_fires_on_pageable_readback(tmp_path):
    rng = random.Random(3)
    r = generate.Rank(pid=77, device=0)
    for _ in range(20):
        r.host(50 * generate.US)
        r.graph_launch(2_000 * generate.US)
        r.dtoh_sync(nbytes=4096, pageable=True)  # .cpu() into pageable memory
        r.host(int(rng.uniform(40, 60) * generate.US))
    generate.write_nsys(tmp_path / "t.sqlite", [r], "pageable")
    a = analyze(open_case([tmp_path / "t.sqlite"]))
    f = next(f for f in a.findings if f["id"] == "pageable_memcpy")
    assert "20 async copies" in f["title"] or f["evidence"][0]["value"] >= 19


def test_pageable_memcpy_does_not_fire_on_pinned(analyses):
    assert "pageable_memcpy" not in [f["id"] for f in analyses["eager_decode"].findings]
    assert "pageable_memcpy" not in [f["id"] for f in analyses["healthy"].findings]


def test_every_threshold_has_a_reason():
    assert all(isinstance(v, tuple) and len(v) == 2 and v[1] for v in THRESHOLDS.values())
    assert {rule.id for rule in stage("throughput") + stage("trace")} == {
        "launch_bound", "host_sync_per_step", "pageable_memcpy", "collective_dominant", "cross_island_collective",
        "python_host_overhead", "nccl_errors", "prefill_stall", "gpu_starved", "copy_bound", "below_roofline",
        "dependency_wait", "fp32_math", "nccl_socket_transport", "nccl_socket_transport_caveat",
    }


FIRES = {
    # rule id: (bundle where it fires, bundle where it does not)
    "launch_bound": ("eager_decode", "graph_decode"),
    "host_sync_per_step": ("graph_decode", "healthy"),
    "collective_dominant": ("tp8_cross_island/trace.sqlite", "tp4_island"),  # without topology: the share is the finding
    "cross_island_collective": ("tp8_cross_island", "tp4_island"),
    "python_host_overhead": ("eager_decode_pyspy", "eager_decode"),
    "prefill_stall": ("prefill_stall", "healthy"),
    # healthy needs a measured efficiency, which no committed bundle has: tests/test_rule_registry.py fires it on
    # samples/gen_efficiency.py's gemm_fast
    "gpu_starved": ("host_starved", "healthy"),
    "copy_bound": ("offload_copy_bound", "graph_decode"),
}


import pytest  # noqa: E402
from conftest import BUNDLES  # noqa: E402


@pytest.mark.parametrize("rule", sorted(FIRES))
def test_each_rule_fires_on_one_bundle_and_not_another(rule, analyses):
    yes, no = FIRES[rule]
    got = analyses[yes] if yes in analyses else analyze(open_case([BUNDLES / yes]))
    assert rule in [f["id"] for f in got.findings], (rule, yes)
    assert rule not in [f["id"] for f in analyses[no].findings], (rule, no)


def test_nccl_errors_fires_on_warn_lines_only(tmp_path):
    from conftest import BUNDLES

    log = (BUNDLES / "tp8_cross_island" / "nccl.log").read_text()
    assert "nccl_errors" not in [f["id"] for f in analyze(open_case([BUNDLES / "tp8_cross_island" / "nccl.log"])).findings]
    bad = tmp_path / "nccl.log"
    bad.write_text(log + "gpu-node-01:5003:5103 [3] transport/net_ib.cc:1296 NCCL WARN NET/IB : "
                   "Got completion from peer with error 12\n")
    f = analyze(open_case([bad])).findings
    assert f[0]["id"] == "nccl_errors" and "net_ib.cc:1296" in " ".join(e["text"] for e in f[0]["evidence"])
