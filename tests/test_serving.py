"""Serving-engine artifacts (vLLM logs, /metrics scrapes, benchmark results) and their use."""

import shutil

import pytest
from conftest import BUNDLES, real

from tracetriage import analyze, open_case
from tracetriage.analyzers import serving as serving_analysis
from tracetriage.case import detect
from tracetriage.parsers import serving

# file: (kind, stats samples, config subset, bench records)
SERVING = {
    "vllm_log_v1_pr21809_stats_queueing.log": ("vllm_log", 6, {}, 0),
    "vllm_log_v0_mooncake269_stats.log": ("vllm_log", 5, {}, 0),
    "vllm_log_v0_issue17954_stats_prefix.log": ("vllm_log", 1, {}, 0),
    "vllm_log_v1_0.9.2dev_issue19810_startup.log": (
        "vllm_log", 0, {"enable_chunked_prefill": True, "max_num_batched_tokens": 2048, "enforce_eager": False}, 0),
    "vllm_log_v1_0.20.2_club3090_issue104_engine_config.log": ("vllm_log", 0, {"tensor_parallel_size": 2, "max_num_seqs": 2}, 0),
    "vllm_bench_serving_llmd_l40s_results.jsonl": ("bench_result", 0, {}, 9),
    "vllm_bench_serving_llmd_l40s_base_rerun.jsonl": ("bench_result", 0, {}, 3),
    "vllm_metrics_v1_0.10.0_glm45_excerpt.prom": ("vllm_metrics", 0, {}, 0),
}


@pytest.mark.parametrize("name", sorted(SERVING))
def test_real_serving(name):
    path = real("serving", name)
    assert detect(path) == "serving"
    kind, samples, config, bench = SERVING[name]
    cap = serving.parse(str(path))
    assert cap.kind == kind and len(cap.stats) == samples and len(cap.bench) == bench
    for k, v in config.items():
        assert cap.config[k] == v


def test_queueing_log_summary():
    cap = serving.parse(str(real("serving", "vllm_log_v1_pr21809_stats_queueing.log")))
    st = serving_analysis.summary([cap]).stats
    assert st.waiting_max == 6 and st.kv_usage_max == 97.3 and st.waiting_share_pct == 83.3


def test_prometheus_last_values():
    cap = serving.parse(str(real("serving", "vllm_metrics_v1_0.10.0_glm45_excerpt.prom")))
    assert cap.metrics["vllm:prefix_cache_queries_total"] == 32.0


def test_enforce_eager_in_config_reaches_the_launch_bound_finding(tmp_path):
    b = tmp_path / "eager"
    shutil.copytree(BUNDLES / "eager_decode", b)
    (b / "vllm.log").write_text(
        "INFO 06-18 15:48:40 [cli_args.py:309] non-default args: {'model': 'm', 'enforce_eager': True}\n")
    a = analyze(open_case([b]))
    lb = next(f for f in a.findings if f["id"] == "launch_bound")
    assert any(e["name"] == "enforce_eager" for e in lb["evidence"])
    assert lb["fix"].startswith("Remove --enforce-eager")
    plain = analyze(open_case([BUNDLES / "eager_decode"]))
    assert not any(e["name"] == "enforce_eager" for e in plain.findings[0]["evidence"])


def test_healthy_gets_queue_evidence(tmp_path):
    """A healthy GPU trace (healthy needs a measured efficiency: gen_efficiency's gemm_fast, not the healthy bundle,
    whose graph replays hide their kernels) with a vLLM log of a standing queue: the queue is in its evidence."""
    from conftest import script_module

    (b,) = script_module("samples", "gen_efficiency").write(tmp_path / "eff", only=["gemm_fast"])
    shutil.copyfile(real("serving", "vllm_log_v1_pr21809_stats_queueing.log"), b / "vllm.log")
    a = analyze(open_case([b]))
    h = a.findings[0]
    assert h["id"] == "healthy" and any(e["name"] == "queue" for e in h["evidence"])


@pytest.mark.parametrize("name", sorted(SERVING))
def test_the_typed_summary_reads_back_its_own_contract(name):
    """A saved serving block (a compare side, an ``analyze --json`` file) read back by field names
    writes the same contract, key for key and in order: nothing the rules read is lost on the way."""
    import json

    from tracetriage.analyzers.serving_metrics import ServingSummary

    contract = serving_analysis.summary([serving.parse(str(real("serving", name)))]).to_contract()
    saved = json.loads(json.dumps(contract))
    assert json.dumps(ServingSummary.from_contract(saved).to_contract()) == json.dumps(contract)


def test_the_typed_summary_reads_a_block_that_lacks_keys():
    """A block from an older analysis without some keys reads as not measured, not as an error."""
    from tracetriage.analyzers.serving_metrics import ServingSummary

    summary = ServingSummary.from_contract({"engine": "vllm", "latency": {"client": {"ttft": {"mean": 12.5}}}})
    assert summary.latency.client.ttft.mean == 12.5 and summary.latency.client.ttft.p99 is None
    assert summary.latency.server.ttft is None and summary.stats is None and summary.bench == ()
    assert summary.effective_config() == {} and summary.prompts.longest() == 0
