"""Serving across a deploy (issue 35): the settings diff, the per-request shapes, quality_regression.

The generated pairs (samples/gen_deploy.py) are checked against the truth the generator computed
from what it wrote (samples/truth/deploy_*.json: the settings it changed, the length summaries, the
KS statistics, what each scenario was built to show); the parser against real engine logs and
/metrics scrapes; the rule against noise (other seeds of the same config and of an FP8 deploy)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT, TRUTH, real

import tracetriage
from tracetriage.analyzers.compare import compare, gate_exit
from tracetriage.analyzers.compare_serving import compare_serving, length_shape
from tracetriage.analyzers.rules.context import t
from tracetriage.analyzers.rules.quality import evaluate_pair
from tracetriage.analyzers.serving_metrics import LengthStats
from tracetriage.parsers import serving as serving_parser
from tracetriage.reports.compare import render_compare

sys.path.insert(0, str(ROOT / "samples"))
import gen_deploy  # noqa: E402

SCENARIOS = tuple(gen_deploy.SCENARIOS)


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    out = tmp_path_factory.mktemp("deploy")
    gen_deploy.generate_deploy(out, truth_dir=out / "truth")
    return out


@pytest.fixture(scope="module")
def comparisons(pairs):
    results = {}
    for name in SCENARIOS:
        before = tracetriage.analyze(str(pairs / name / "before")).data
        after = tracetriage.analyze(str(pairs / name / "after")).data
        results[name] = (before, after, compare(before, after))
    return results


def test_generator_is_deterministic_and_its_truth_is_the_committed_one(pairs):
    for name in SCENARIOS:
        assert json.loads((pairs / "truth" / f"{name}.json").read_text()) == json.loads((TRUTH / f"{name}.json").read_text())


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_requests_block_matches_the_generated_lengths(name, comparisons):
    truth = json.loads((TRUTH / f"{name}.json").read_text())
    before, after, _ = comparisons[name]
    for side, data in (("before", before), ("after", after)):
        requests = data["serving"]["requests"]
        for shape in ("input", "output"):
            measured, expected = requests[shape], truth[side][shape]
            assert {key: measured[key] for key in expected} == pytest.approx(expected), (side, shape)
        assert (requests["failed"], requests["sent"]) == (truth[side]["failed"], truth[side]["sent"])
        assert requests["finish_reasons"] == truth[side]["finish_reasons"]


@pytest.mark.parametrize("name", SCENARIOS)
def test_the_comparison_is_the_one_the_scenario_was_built_to_show(name, comparisons):
    truth = json.loads((TRUTH / f"{name}.json").read_text())
    expected = truth["expected"]
    _, _, result = comparisons[name]
    serving = result["serving"]
    assert sorted(setting["name"] for setting in serving["settings"] if setting["changed"]) == truth["changed"]
    shapes = {shape["name"]: shape for shape in serving["shapes"]}
    for shape in ("input", "output"):
        assert shapes[shape]["ks_statistic"] == pytest.approx(truth[f"{shape}_ks"]["statistic"], abs=1e-4)
        assert shapes[shape]["p_value"] == pytest.approx(truth[f"{shape}_ks"]["p_value"], rel=1e-6)
    assert serving["inputs_shifted"] is expected["inputs_shifted"]
    assert serving["outputs_shifted"] is expected["outputs_shifted"]
    assert serving["latency_comparable"] is expected["latency_comparable"]
    assert (serving["latency"] is not None) is expected["latency_from_output_length"]
    fired = [finding["id"] for finding in result["findings"] if finding["id"] == "quality_regression"]
    assert bool(fired) is expected["quality_regression"]
    assert (serving["quality"] is not None) is expected["quality_regression"]
    identity = [reason for reason in result["comparable"]["reasons"] if reason.startswith("a different model is served")]
    assert bool(identity) is bool(set(truth["changed"]) & {"model", "dtype", "quantization"})
    # a different model: still comparable, said so; other prompts: these serving-only pairs have nothing
    # else to judge, so not comparable (the trial of integ41 read "comparable: yes" beside "inconclusive")
    assert result["comparable"]["ok"] is expected["latency_comparable"]


def test_int4_deploy_regresses_quality_with_evidence_and_gates(comparisons):
    _, _, result = comparisons["deploy_int4"]
    assert result["verdict"] == "regressed" and result["budgets"]["output quality"] == "regressed"
    assert gate_exit(result) != 0
    quality = result["serving"]["quality"]
    assert quality["axis"] == "quality"
    texts = " ".join(row["text"] for row in quality["evidence"])
    assert "quantization: none -> gptq" in texts and "output length mean" in texts and "of 9" in texts  # with denominators
    e2e = next(metric for metric in result["metrics"] if metric["name"] == "e2el_p50_ms")
    assert e2e["direction"] == "changed"  # longer answers, per-token latency held: not a latency regression
    assert all(result["budgets"][name] == "unchanged" for name in ("tpot_p50_ms", "ttft_p50_ms"))
    assert "new: quality_regression" in result["summary"]


def test_fp8_deploy_improves_latency_and_keeps_quality(comparisons):
    _, _, result = comparisons["deploy_fp8"]
    assert result["verdict"] == "improved" and result["budgets"]["output quality"] == "unchanged"
    assert result["serving"]["quality"] is None


def test_changed_prompts_leave_latency_unjudged(comparisons):
    _, _, result = comparisons["deploy_prompts"]
    assert result["verdict"] == "inconclusive"
    assert result["comparable"]["reasons"][0].startswith("the traffic changed: input length mean")
    assert all(metric["direction"] == "not judged" for metric in result["metrics"] if metric["name"].startswith("ttft"))


@pytest.mark.parametrize("seed", [11, 12, 13, 14, 15])
def test_never_fires_on_noise_or_on_a_precision_change_that_kept_the_outputs(seed, tmp_path):
    gen_deploy.generate_deploy(tmp_path, only=["deploy_noise", "deploy_fp8"], seed=seed, truth_dir=tmp_path / "truth")
    for name in ("deploy_noise", "deploy_fp8"):
        before = tracetriage.analyze(str(tmp_path / name / "before")).data
        after = tracetriage.analyze(str(tmp_path / name / "after")).data
        result = compare(before, after)
        assert result["serving"]["quality"] is None, (seed, name, result["serving"]["shapes"])
        assert not result["serving"]["outputs_shifted"]


def _serving(config: dict, lengths_in, lengths_out, kind: str = "vllm_log") -> dict:
    def stats(lengths):
        if lengths is None:
            return None
        ordered = sorted(lengths)
        return {"n": len(ordered), "mean": sum(ordered) / len(ordered), "p50": ordered[len(ordered) // 2],
                "p90": ordered[int(0.9 * len(ordered))], "p99": ordered[-1], "max": ordered[-1], "lengths": ordered}

    return {"captures": [{"path": "x", "kind": kind, "version": "0.10.1"}], "engine": "vllm", "version": "0.10.1",
            "config": config, "engine_defaults": None,
            "requests": {"source": "test", "input": stats(lengths_in), "output": stats(lengths_out), "failed": None,
                         "sent": None, "finish_reasons": None, "request_rate": 4.0, "max_concurrency": None}}


def test_the_rule_needs_a_model_change_and_inputs_known_to_be_the_same():
    inputs, short, long = list(range(100, 400)), [100 + i % 50 for i in range(300)], [200 + i % 80 for i in range(300)]
    bf16 = {"model": "m", "quantization": None}
    int4 = {"model": "m-GPTQ-Int4", "quantization": "gptq"}
    fired = evaluate_pair(compare_serving(_serving(bf16, inputs, short), _serving(int4, inputs, long), {}, {}, 5.0))
    assert fired is not None and fired.id == "quality_regression"
    # the same model: longer outputs are the traffic's or the sampling's doing, not a deploy's
    assert evaluate_pair(compare_serving(_serving(bf16, inputs, short), _serving(bf16, inputs, long), {}, {}, 5.0)) is None
    # inputs not known: the prompts may have changed the answers
    assert evaluate_pair(compare_serving(_serving(bf16, None, short), _serving(int4, None, long), {}, {}, 5.0)) is None
    # the inputs changed too
    assert evaluate_pair(compare_serving(_serving(bf16, inputs, short), _serving(int4, [x * 3 for x in inputs], long),
                                         {}, {}, 5.0)) is None


def test_a_setting_absent_from_printed_arguments_is_the_engine_default_only_when_a_log_printed_them():
    logged = compare_serving(_serving({"model": "m"}, None, None), _serving({"model": "m", "quantization": "fp8"}, None, None),
                             {}, {}, 5.0)
    quantization = next(setting for setting in logged.settings if setting.name == "quantization")
    assert quantization.changed and quantization.before is None and quantization.before_source.startswith("default")
    scraped = compare_serving(_serving({"model": "m"}, None, None, kind="vllm_metrics"),
                              _serving({"model": "m", "quantization": "fp8"}, None, None), {}, {}, 5.0)
    quantization = next(setting for setting in scraped.settings if setting.name == "quantization")
    assert not quantization.changed and quantization.before_source == "not known"


def test_shape_thresholds_need_both_significance_and_size():
    # 5,000 requests a side, the mean 3% longer: significant (tiny p) but under the practical size -> within noise
    before = {"n": 5000, "mean": 200.0, "lengths": [150 + i % 100 for i in range(5000)]}
    after = {"n": 5000, "mean": 206.0, "lengths": [156 + i % 100 for i in range(5000)]}
    shape = length_shape("output", LengthStats.from_contract(before), LengthStats.from_contract(after))
    assert shape.p_value < t("shape_alpha") and shape.shifted is False


def test_engine_settings_are_read_from_real_vllm_logs_and_scrapes():
    cap = serving_parser.parse(str(real("serving", "vllm_log_v1_0.20.2_club3090_issue104_engine_config.log")))
    assert cap.config["quantization"] == "auto_round" and cap.config["kv_cache_dtype"] == "fp8_e5m2"
    assert cap.config["served_model_name"] == "qwen3.6-27b-autoround"
    assert cap.config["speculative_config"].startswith("SpeculativeConfig(method='mtp'")  # nested value kept whole
    cap = serving_parser.parse(str(real("serving", "vllm_log_v1_0.9.2dev_issue19810_startup.log")))
    assert (cap.config["model"], cap.config["dtype"], cap.config["quantization"]) == ("Qwen/Qwen3-0.6B", "torch.bfloat16", None)
    cap = serving_parser.parse(str(real("serving", "vllm_metrics_v0_qwenvl_excerpt.prom")))
    assert cap.config["cache_dtype"] == "auto" and cap.config["model_name"] == "qwenvl"


def test_sglang_server_args_and_finish_reasons(tmp_path):
    log = tmp_path / "sglang.log"
    log.write_text("[2025-06-01 10:00:00] server_args=ServerArgs(model_path='Qwen/Qwen2.5-7B-Instruct-AWQ', "
                   "tokenizer_path='Qwen/Qwen2.5-7B-Instruct-AWQ', dtype='auto', kv_cache_dtype='auto', quantization='awq', "
                   "tp_size=2, dp_size=1, max_running_requests=None, chunked_prefill_size=8192, disable_radix_cache=False, "
                   "speculative_algorithm=None)\n"
                   "[2025-06-01 10:00:10 TP0] Decode batch. #running-req: 4, #token: 900, token usage: 0.01, "
                   "gen throughput (token/s): 300.00, #queue-req: 0\n")
    cap = serving_parser.parse(str(log))
    assert cap.engine == "sglang"
    assert {key: cap.config[key] for key in ("model_path", "quantization", "tp_size", "chunked_prefill_size")} == {
        "model_path": "Qwen/Qwen2.5-7B-Instruct-AWQ", "quantization": "awq", "tp_size": 2, "chunked_prefill_size": 8192}
    prom = tmp_path / "metrics.prom"
    prom.write_text('vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 90.0\n'
                    'vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 10.0\n')
    assert serving_parser.parse(str(prom)).finish_reasons == {"stop": 90.0, "length": 10.0}


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_every_format_shows_the_serving_section(fmt, comparisons):
    _, _, result = comparisons["deploy_int4"]
    out = render_compare(result, fmt).replace("\\", "")  # Markdown escapes _ and >
    for words in ("quantization: none -&gt; gptq" if fmt == "html" else "quantization: none -> gptq", "quality_regression",
                  "KS D=", "moved with the output length"):
        assert words in out, (fmt, words)


def test_compare_contracts_validate(comparisons):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "reports" / "compare.schema.json").read_text())
    for name, (_, _, result) in comparisons.items():
        contract = {key: value for key, value in result.items() if not key.startswith("_")}
        jsonschema.validate(json.loads(json.dumps(contract)), schema)


def test_trend_names_the_first_capture_after_the_deploy(tmp_path):
    from tracetriage.cli import main

    gen_deploy.generate_deploy_series(tmp_path / "archive", nights=8, deploy_at=5)
    assert main(["batch", str(tmp_path / "archive"), "-o", str(tmp_path / "batch"), "--jobs", "1", "--no-progress",
                 "--no-cache"]) == 0
    out = tmp_path / "trend.json"
    main(["trend", str(tmp_path / "batch"), "--format", "json", "-o", str(out)])
    result = json.loads(Path(out).read_text())
    (group,) = result["groups"]
    assert "from night_05 on: quality_regression new" in group["verdict"] and group["latest_regressed"]
    e2e = [change for change in result["changes"] if change["metric"] == "e2el_p50_ms"]
    assert e2e and all(change["direction"] == "changed" and change["explained"] for change in e2e)


def test_the_quality_symptom_on_one_capture_names_the_comparison_that_would_decide():
    result = tracetriage.analyze(str(ROOT / "samples" / "bundles" / "serving_healthy"), symptom="quality")
    assert result.data["headline"].startswith("quality: not judged from one capture")
    assert "Healthy" not in result.data["headline"]


def test_the_generator_command_line_refuses_a_deploy_outside_the_series(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        gen_deploy.main(["--out", str(tmp_path), "--series", "4", "--deploy-at", "9"])
    assert exc.value.code == 2 and "--deploy-at 9" in capsys.readouterr().err.strip().splitlines()[-1]
    assert not list(tmp_path.iterdir())


def test_dtype_auto_against_the_dtype_it_resolves_to_is_no_change_but_fp8_kv_is():
    printed = _serving({"model": "m", "dtype": "torch.bfloat16", "kv_cache_dtype": "auto"}, None, None)
    defaulted = _serving({"model": "m", "kv_cache_dtype": "fp8"}, None, None)
    settings = {setting.name: setting for setting in compare_serving(printed, defaulted, {}, {}, 5.0).settings}
    assert settings["dtype"].after == "auto" and not settings["dtype"].changed and "resolved at load" in settings["dtype"].text
    assert settings["kv_cache_dtype"].changed  # auto -> fp8 is a precision change


def test_a_key_inside_a_nested_value_is_that_values_and_a_cut_dict_keeps_what_it_held():
    from tracetriage.parsers.serving_config import config_from

    config = {}
    config_from("model='a', speculative_config=SpeculativeConfig(method='eagle', model='draft', quantization=fp8), "
                "quantization=None, tensor_parallel_size=2", config)
    assert config["model"] == "a" and config["quantization"] is None and config["tensor_parallel_size"] == 2
    config = {}
    config_from("{'model': 'x', 'served_model_name': ['y'], 'max_num_seqs': 2, 'quantiz", config)
    assert config == {"model": "x", "served_model_name": "y", "max_num_seqs": 2}


def test_the_gate_line_names_the_budget_that_regressed(comparisons):
    """A deploy gate that fails on output quality says so, not 'the 5%-of-step threshold' of a capture
    without steps (a new-user trial of the deploy compare)."""
    from tracetriage.analyzers.compare import gate_text

    assert gate_text(comparisons["deploy_int4"][2]) == "gate: failed (exit 8): regressed: output quality"
