"""Issue 32, class 8: serving config is what the engine ran, not only the non-default args it
printed. vLLM V1 (>= 0.8) turns prefix caching and chunked prefill on unless disabled, SGLang's
radix cache is on unless --disable-radix-cache (docs/analysis.md, "Engine defaults", cites the
engines' source). Real logs from ../shared/samples/real/serving (skipped when absent) and the
generated bundle serving_prefix_unshared, whose truth says what was generated."""

import json
import shutil

from conftest import BUNDLES, TRUTH, real

from tracetriage import analyze, open_case
from tracetriage.analyzers import serving as serving_analysis
from tracetriage.parsers import serving

PROMPT_HEAVY = "".join(  # V1 stats lines (loggers.py form): 30 prompt tokens per output token, 0% prefix hits
    f"(APIServer pid=1) INFO 06-18 15:{50 + i // 6:02d}:{i % 6 * 10:02d} [loggers.py:118] Engine 000: Avg prompt throughput: "
    f"12000.0 tokens/s, Avg generation throughput: 400.0 tokens/s, Running: 30 reqs, Waiting: 0 reqs, GPU KV cache "
    f"usage: 30.0%, Prefix cache hit rate: 0.0%\n" for i in range(12))


def _defaults(path):
    return serving_analysis.summary([serving.parse(str(path))]).engine_defaults.to_contract()


def _feature(defaults, key):
    return defaults["features"][key]


def _case(tmp_path, text, name="vllm.log"):
    case = tmp_path / "case"
    case.mkdir()
    (case / name).write_text(text)
    return analyze(open_case([case])).data


def _prefix_finding(data):
    return next(f for f in data["findings"] if f["id"] == "prefix_cache_miss")


def test_v1_startup_log_named_v1_and_defaults_on():
    """vLLM 0.9.2 printed only {'model': ...} as non-default args: prefix caching is on because V1
    turns it on, chunked prefill is stated by its own log line (2048 tokens)."""
    defaults = _defaults(real("serving", "vllm_log_v1_0.9.2dev_issue19810_startup.log"))
    assert defaults["engine"] == "vllm" and defaults["generation"] == "V1"
    assert "Initializing a V1 LLM engine" in defaults["basis"]
    caching = _feature(defaults, "enable_prefix_caching")
    assert caching["value"] is True and caching["source"] == "default"
    assert "--no-enable-prefix-caching not in the capture" in caching["text"]
    chunked = _feature(defaults, "enable_chunked_prefill")
    assert chunked["value"] is True and chunked["source"] == "printed"


def test_v1_stats_lines_alone_name_v1():
    """The 0.20 boot excerpt has no version or start-up line; its stats lines are V1's form
    (Running / Waiting, 'Prefix cache hit rate: 0.0%'), so V1's defaults apply."""
    defaults = _defaults(real("serving", "vllm_log_v1_0.20_club3090_issue46_boot_and_stats.log"))
    assert defaults["generation"] == "V1" and "stats lines' V1 form" in defaults["basis"]
    assert _feature(defaults, "enable_prefix_caching")["value"] is True


def test_printed_args_win_over_defaults():
    defaults = _defaults(real("serving", "vllm_log_v1_0.20.2_club3090_issue104_engine_config.log"))
    assert defaults["generation"] == "V1"
    assert {key: feature["source"] for key, feature in defaults["features"].items()} == {
        "enable_prefix_caching": "printed", "enable_chunked_prefill": "printed"}


def test_v0_logs_read_v0_defaults_and_the_v0_prefix_line():
    """V0's metrics.py stats form (Swapped / Pending): caching off by default; V0's own
    'Prefix cache hit rate: GPU: ..' line is printed only when caching is on, so it says on."""
    plain = _defaults(real("serving", "vllm_log_v0_mooncake269_stats.log"))
    assert plain["generation"] == "V0"
    assert _feature(plain, "enable_prefix_caching")["value"] is False
    assert _feature(plain, "enable_chunked_prefill")["value"] is False
    with_line = _defaults(real("serving", "vllm_log_v0_issue17954_stats_prefix.log"))
    assert with_line["generation"] == "V0"
    assert _feature(with_line, "enable_prefix_caching")["value"] is True


def test_sglang_radix_cache_on_by_default_and_chunk_size_not_known():
    defaults = _defaults(real("serving", "sglang_log_prefill_decode_issue1612_excerpt.log"))
    assert defaults["engine"] == "sglang" and defaults["generation"] is None
    radix = _feature(defaults, "disable_radix_cache")
    assert radix["value"] is False and radix["source"] == "default" and "radix (prefix) cache on" in radix["text"]
    chunk = _feature(defaults, "chunked_prefill_size")
    assert chunk["value"] is None and chunk["source"] == "not known" and "GPU memory" in chunk["text"]


def test_v1_metrics_scrape_names_v1():
    defaults = _defaults(real("serving", "vllm_metrics_v1_0.10.0_glm45_excerpt.prom"))
    assert defaults["generation"] == "V1" and _feature(defaults, "enable_prefix_caching")["value"] is True


def test_zero_hits_with_v1_default_caching_is_ruled_out_on_real_startup_lines(tmp_path):
    """The real 0.9.2 start-up (no --enable-prefix-caching printed) with prompt-heavy V1 stats
    lines at 0% hits: caching ran (V1 default), so the reading is 'the prompts share no prefix',
    not 'turn prefix caching on'."""
    startup = real("serving", "vllm_log_v1_0.9.2dev_issue19810_startup.log").read_text()
    data = _case(tmp_path, startup + PROMPT_HEAVY)
    finding = _prefix_finding(data)
    assert finding["severity"] == "info" and finding["falsified"]
    assert finding["falsified"].startswith("prefix caching is already on (the vLLM V1 default, V1 named by the "
                                           "start-up line 'Initializing a V1 LLM engine'")
    assert "the prompts share no prefix" in finding["falsified"]
    assert "Turn prefix caching on" not in finding["fix"]
    assert "[prefix_cache_miss]" not in data["headline"]


def test_version_alone_assumes_the_generation(tmp_path):
    """A version line and non-default args, no start-up or stats form: V1 assumed from 0.9.2,
    V0 assumed from 0.6.3 (where caching is off unless --enable-prefix-caching)."""
    def log(version):
        return (f"INFO 06-18 15:48:39 [api_server.py:1287] vLLM API server version {version}\n"
                "INFO 06-18 15:48:40 [cli_args.py:309] non-default args: {'model': 'm'}\n")
    (tmp_path / "new.log").write_text(log("0.9.2"))
    (tmp_path / "old.log").write_text(log("0.6.3"))
    new, old = _defaults(tmp_path / "new.log"), _defaults(tmp_path / "old.log")
    assert new["generation"] == "V1" and _feature(new, "enable_prefix_caching")["source"] == "assumed"
    assert "V1 assumed from version 0.9.2" in _feature(new, "enable_prefix_caching")["text"]
    assert old["generation"] == "V0" and _feature(old, "enable_prefix_caching")["value"] is False


def test_unknown_version_says_the_default_is_not_known(tmp_path):
    """No version, no start-up line, no stats form (a benchmark and the args line only): the
    default is not known, so the 0% hit rate is not ruled out and the evidence says why."""
    (tmp_path / "case").mkdir()
    shutil.copy(BUNDLES / "serving_prefix_unshared" / "bench.json", tmp_path / "case" / "bench.json")
    (tmp_path / "case" / "vllm.log").write_text("INFO 06-18 15:48:40 [cli_args.py:309] non-default args: {'model': 'm'}\n"
                                                + PROMPT_HEAVY.replace("Waiting: 0 reqs, ", ""))
    data = analyze(open_case([tmp_path / "case"])).data
    feature = data["serving"]["engine_defaults"]["features"]["enable_prefix_caching"]
    assert feature["value"] is None and feature["source"] == "not known"
    assert "on" in feature["text"] and "V1: on; V0: off" in feature["text"]
    finding = _prefix_finding(data)
    assert not finding.get("falsified")
    row = next(row for row in finding["evidence"] if row["name"] == "prefix_caching")
    assert row["text"].startswith("prefix caching not known")


def test_caching_on_with_few_hits_keeps_the_finding_with_the_prompt_fix(tmp_path):
    """Caching on (V1 default) with a 5% hit rate: some prefixes repeat, most prompts differ before
    the shared part; the fix is about the prompts, not a flag."""
    startup = real("serving", "vllm_log_v1_0.9.2dev_issue19810_startup.log").read_text()
    data = _case(tmp_path, startup + PROMPT_HEAVY.replace("Prefix cache hit rate: 0.0%", "Prefix cache hit rate: 5.0%"))
    finding = _prefix_finding(data)
    assert not finding.get("falsified") and finding["fix"].startswith("Prefix caching is already on")
    assert "--enable-prefix-caching" not in finding["fix"]


def test_generated_bundle_matches_its_truth():
    """samples/bundles/serving_prefix_unshared: vLLM 0.10.1 (V1) started without the flag, 0% hits."""
    truth = json.loads((TRUTH / "serving_prefix_unshared.json").read_text())
    data = analyze(open_case([BUNDLES / "serving_prefix_unshared"])).data
    defaults = data["serving"]["engine_defaults"]
    caching = defaults["features"]["enable_prefix_caching"]
    assert defaults["generation"] == truth["numbers"]["generation"]
    assert caching["source"] == truth["numbers"]["prefix_caching_source"] and caching["value"] is True
    finding = _prefix_finding(data)
    assert [f["id"] for f in data["findings"] if f["falsified"]] == truth["falsified"]
    assert abs(next(r["value"] for r in finding["evidence"] if r["name"] == "prompt_per_output")
               - truth["numbers"]["prompt_per_output"]) < 0.05
    assert "the prompts share no prefix" in finding["falsified"]


def test_printed_off_is_still_the_fix(tmp_path):
    """The generated prefix_cache_miss bundle prints enable_prefix_caching False: the fix stands."""
    data = analyze(open_case([BUNDLES / "serving_prefix_cache_miss"])).data
    finding = _prefix_finding(data)
    assert not finding.get("falsified") and finding["fix"].startswith("Turn prefix caching on")
    assert data["serving"]["engine_defaults"]["features"]["enable_prefix_caching"]["source"] == "printed"
