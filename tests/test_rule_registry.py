"""The rule registry: every catalog entry has its rule, every declared threshold is in the table,
and every registered rule fires on one sample and not on another (so dropping one fails here)."""

import json
import sys

import pytest
from conftest import BUNDLES, ROOT, TRUTH

from tracetriage import analyze, open_case
from tracetriage.analyzers import catalog
from tracetriage.analyzers.rules import REGISTRY, THRESHOLDS

sys.path.insert(0, str(ROOT / "samples"))
import gen_dependency
import gen_deploy
import gen_efficiency
import gen_nccl_net

# Catalog entries no rule makes: none. (Every entry, variants such as cross_island_collective_nccl
# and healthy_serving included, is the id or an entry of one registered rule.)
PRODUCED_ELSEWHERE: set[str] = set()

# rule id: (sample where it fires, sample where it does not). A sample is a bundle name, a path
# under samples/, or "efficiency:SCENARIO" (samples/gen_efficiency.py), "dependency:WAIT_US" (samples/gen_dependency.py)
# or "nccl_warn" (built below), "nccl_net:NODES:NET" (samples/gen_nccl_net.py), or for
# a compare-stage rule "deploy:SCENARIO" (samples/gen_deploy.py: a before/after pair, compared).
FIRES = {
    "cross_island_collective": ("tp8_cross_island", "tp4_island"),
    "collective_dominant": ("tp8_cross_island/trace.sqlite", "tp8_cross_island"),  # suppressed where the cause is named
    "launch_bound": ("eager_decode", "graph_decode"),
    "python_host_overhead": ("eager_decode_pyspy", "eager_decode"),
    "host_sync_per_step": ("graph_decode", "healthy"),
    "pageable_memcpy": ("h200/offload_copy.json.gz", "healthy"),
    "dependency_wait": ("dependency:10000", "dependency:0"),  # samples/gen_dependency.py: a 10 ms wait a step, none
    "copy_bound": ("offload_copy_bound", "graph_decode"),
    "below_roofline": ("efficiency:gemm_slow", "healthy"),
    "fp32_math": ("real/kineto/hta_ns_resolution_rank0.json.gz", "efficiency:gemm_fast"),  # a V100 training in FP32
    "gpu_starved": ("host_starved", "healthy"),
    "nccl_errors": ("nccl_warn", "tp8_cross_island"),
    "nccl_socket_transport": ("nccl_net:2:Socket", "nccl_net:2:IB"),  # samples/gen_nccl_net.py: nodes, network
    "nccl_socket_transport_caveat": ("nccl_net:1:Socket", "nccl_net:2:IB"),
    "prefill_stall": ("prefill_stall", "healthy"),
    "at_capacity": ("serving_at_capacity", "serving_healthy"),
    "batch_past_knee": ("serving_batch_past_knee", "serving_healthy"),
    "prefill_stall_itl": ("serving_prefill_stall", "serving_healthy"),
    "memory_pressure": ("serving_memory_pressure", "serving_healthy"),
    "prefix_cache_miss": ("serving_prefix_cache_miss", "serving_healthy"),
    "proxy_buffering": ("serving_proxy_buffering", "serving_healthy"),
    "over_replicated": ("serving_over_replicated", "serving_healthy"),
    "admission_blocked": ("serving_admission_blocked", "serving_healthy"),
    "healthy": ("efficiency:gemm_fast", "healthy"),  # the healthy bundle's efficiency is not measured (graph replays)
    "healthy_serving": ("serving_healthy", "serving_at_capacity"),
    "quality_regression": ("deploy:deploy_int4", "deploy:deploy_fp8"),
}


def test_every_catalog_entry_has_exactly_one_registered_rule():
    claimed: dict[str, list[str]] = {}
    for rule in REGISTRY:
        for entry in {rule.id, *rule.entries}:
            claimed.setdefault(entry, []).append(rule.id)
    assert {e: ids for e, ids in claimed.items() if len(ids) > 1} == {}
    entries = {name for name, entry in catalog.CATALOG.items() if "axis" in entry}
    assert entries - PRODUCED_ELSEWHERE == set(claimed)
    assert all(rule.axis == catalog.axis_of(rule.finding_id) for rule in REGISTRY)


def test_every_declared_threshold_is_in_the_table():
    for rule in REGISTRY:
        assert set(rule.thresholds) <= set(THRESHOLDS), rule.id
    assert all(isinstance(v, tuple) and len(v) == 2 and v[1] for v in THRESHOLDS.values())


def test_dependencies_name_registered_rules_that_run_before():
    order = [rule.id for rule in REGISTRY]
    for rule in REGISTRY:
        for other in (*rule.suppressed_by, *rule.depends_on):
            assert other in order and order.index(other) < order.index(rule.id), (rule.id, other)


def test_every_registered_rule_has_a_sample():
    assert set(FIRES) == {rule.id for rule in REGISTRY}


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    cache: dict[str, object] = {}
    out = tmp_path_factory.mktemp("registry")

    def get(sample: str):
        if sample not in cache:
            cache[sample] = _analyze(sample, out)
        return cache[sample]

    return get


def _analyze(sample: str, out):
    if sample.startswith("deploy:"):  # a compare-stage rule: the pair's comparison holds its findings
        from types import SimpleNamespace

        from tracetriage.analyzers.compare import compare

        name = sample.split(":", 1)[1]
        gen_deploy.generate_deploy(out / "deploy", only=[name], truth_dir=out / "deploy_truth")
        sides = [analyze(open_case([out / "deploy" / name / side])).data for side in ("before", "after")]
        return SimpleNamespace(findings=compare(*sides)["findings"])
    if sample.startswith("efficiency:"):
        (folder,) = gen_efficiency.write(out / "eff", only=[sample.split(":", 1)[1]])
        return analyze(open_case([folder / "trace.pt.trace.json.gz"]))
    if sample.startswith("dependency:"):  # samples/gen_dependency.py with that wait (µs) per step
        wait_us = float(sample.split(":", 1)[1])
        gen_dependency.write_bundle(out / sample.replace(":", "_"), sample, wait_us)
        return analyze(open_case([out / sample.replace(":", "_")]))
    if sample.startswith("nccl_net:"):  # samples/gen_nccl_net.py: an init log over that many nodes on that network
        _, nodes, net = sample.split(":")
        path, _ = gen_nccl_net.write(out / sample.replace(":", "_"), nodes=int(nodes), net=net)
        return analyze(open_case([path]))
    if sample == "nccl_warn":
        log = out / "nccl.log"
        log.write_text((BUNDLES / "tp8_cross_island" / "nccl.log").read_text() + "gpu-node-01:5003:5103 [3] "
                       "transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer with error 12\n")
        return analyze(open_case([log]))
    path = BUNDLES / sample if (BUNDLES / sample.split("/")[0]).is_dir() else ROOT / "samples" / sample
    truth = TRUTH / f"{sample}.json"
    slo = json.loads(truth.read_text()).get("slo") if truth.exists() else None
    return analyze(open_case([path]), slo=slo)


@pytest.mark.parametrize("rule", REGISTRY, ids=lambda rule: rule.id)
def test_each_registered_rule_fires_on_one_sample_and_not_another(rule, analyzed):
    yes, no = FIRES[rule.id]
    assert rule.finding_id in [f["id"] for f in analyzed(yes).findings], (rule.id, yes)
    assert rule.finding_id not in [f["id"] for f in analyzed(no).findings], (rule.id, no)
