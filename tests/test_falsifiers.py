"""Issue 25 item 3: no finding whose own falsifier the evidence already meets.

Every catalog entry either states its falsifier as a condition over the capture in hand
(``falsified_when``) or says in a ``# no falsified_when`` comment why one capture cannot meet it
(an after-capture or a second measurement is needed, or the rule already excludes it). Each
condition is tested here on a bundle or real capture modified as little as the falsifier needs
(a copy in tmp_path): the finding is kept, downgraded to info with the reason, and never named
as the verdict; the unmodified input still fires it. launch_bound, prefill_stall and
prefix_cache_miss are tested in test_verdict_claims.py.
"""

import ast
import json
import re
import shutil
import sqlite3

import pytest
from conftest import BUNDLES, ROOT, run_cli

from tracetriage import analyze, open_case
from tracetriage.analyzers import catalog
from tracetriage.analyzers.rules import THRESHOLDS
from tracetriage.analyzers.rules.falsify import serving_facts

TORCHRUN = "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite"


def _run(path, **kw):
    return analyze(open_case([path]), **kw).data


def _finding(data, fid):
    return next(f for f in data["findings"] if f["id"] == fid)


def _falsified(data, fid, says):
    f = _finding(data, fid)
    assert f["severity"] == "info" and says in f["falsified"], f.get("falsified")
    assert any(e["name"] == "falsifier_met" for e in f["evidence"])
    assert f["impact_pct"] == 0.0 and f["fix"] == f["falsified"]  # explains nothing; no fix, the reason instead
    assert not any(e["text"].startswith("mechanism the evidence supports") for e in f["evidence"])
    assert f"[{fid}]" not in data["headline"] and f"{fid}" not in "".join(data["headline_by_axis"].values())
    return f


def _standing(data, fid):
    f = _finding(data, fid)
    assert f["severity"] != "info" and not f.get("falsified")
    return f


def _copy(src, tmp_path, name=None):
    dst = tmp_path / (name or src.name)
    (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    if dst.is_file():
        dst.chmod(0o644)
    return dst


# --- the catalog: a condition or a documented reason for every entry ---------------------------------

def _sections(text: str) -> dict[str, str]:
    """Each top-level [entry] of findings.toml with the text up to the next top-level entry."""
    heads = list(re.finditer(r"(?m)^\[([a-z0-9_]+)\]$", text))
    return {m.group(1): text[m.end():(heads[i + 1].start() if i + 1 < len(heads) else len(text))] for i, m in enumerate(heads)}


def test_every_catalog_entry_has_a_falsifier_condition_or_says_why_not():
    sections = _sections((ROOT / "analyzers" / "findings.toml").read_text())
    assert set(sections) == set(catalog.CATALOG)
    missing = [fid for fid, body in sections.items()
               if not catalog.CATALOG[fid].get("falsified_when") and "# no falsified_when" not in body]
    assert not missing, f"no falsified_when and no '# no falsified_when' reason: {missing}"
    both = [fid for fid, body in sections.items() if catalog.CATALOG[fid].get("falsified_when") and "# no falsified_when" in body]
    assert not both
    assert all(catalog.CATALOG[fid].get("falsified_why") for fid in catalog.CATALOG if catalog.CATALOG[fid].get("falsified_when"))


def _names(cond: str) -> set[tuple[str, str]]:
    return {(n.value.id, n.attr) for n in ast.walk(ast.parse(cond, mode="eval"))
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}


def test_every_condition_names_figures_the_analysis_has():
    """A misspelt name would leave a condition forever unknown (never met): each one is checked
    against what rules/falsify.py facts and the rules' evidence provide."""
    sources = "".join(f.read_text() for f in sorted((ROOT / "analyzers" / "rules").glob("*.py")))
    serving_keys = set(serving_facts({"stats": {}, "memory": {}, "captures": [], "metrics": {}}, {}))
    trace_keys = {"graph_replays", "graph_launches_per_step", "collective_share_pct", "collective_exposed_pct"}
    for fid, entry in catalog.CATALOG.items():
        cond = entry.get("falsified_when")
        if not cond:
            continue
        for space, name in _names(cond):
            ok = {"threshold": name in THRESHOLDS, "serving": name in serving_keys, "trace": name in trace_keys,
                  "ev": f'ev("{name}"' in sources, "config": True, "kind": name in ("vendor", "workload", "language")}[space]
            assert ok, f"[{fid}] falsified_when names {space}.{name}, which the analysis does not provide"


def test_rules_facts_trace_keys_are_the_ones_checked():
    from tracetriage.analyzers.rules import Context
    from tracetriage.analyzers.rules.falsify import facts

    ctx = Context(case=None, data={"serving": None}, per_trace=[])
    assert set(facts(ctx)["trace"]) == {"graph_replays", "graph_launches_per_step", "collective_share_pct",
                                                "collective_exposed_pct"}


# --- throughput: pageable copies hidden under kernels -------------------------------------------------

def _cover(path, source_sql: str, fraction: float) -> int:
    """Insert, for each interval (start, end, deviceId, globalPid) that ``source_sql`` selects, a
    kernel of the same device and process on a stream of its own (the export's first kernel row,
    moved) running from the interval's start for ``fraction`` of it: compute that overlaps it."""
    con = sqlite3.connect(path)
    # a graph-trace export records its work as graph replays: one of those, moved, is the compute then
    table = ("CUPTI_ACTIVITY_KIND_KERNEL" if con.execute("SELECT 1 FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()
             else "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
    cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
    over = {"start": "c.cs", "end": f"c.cs + CAST((c.ce - c.cs) * {fraction} AS INTEGER)", "streamId": "9999",
            "correlationId": "2000000000 + c.n", "deviceId": "c.dev", "globalPid": "c.gpid"}
    picked = ", ".join(f"{over[c]}" if c in over else f"k.{c}" for c in cols)
    n = con.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {picked} FROM "
                    f"(SELECT * FROM {table} ORDER BY rowid LIMIT 1) AS k, "
                    f"(SELECT s.start AS cs, s.end AS ce, s.deviceId AS dev, s.globalPid AS gpid, "
                    f"row_number() OVER (ORDER BY s.start) AS n FROM ({source_sql}) AS s) AS c").rowcount
    con.commit()
    con.close()
    return n


PAGEABLE = "SELECT start, end, deviceId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = 0 OR dstKind = 0"


def test_pageable_memcpy_hidden_under_kernels_is_falsified_on_an_export(tmp_path):
    """The pageable_readback export's pageable copies run while the GPU is otherwise idle: on the critical
    path. With a kernel of the same GPU running through each of them (another stream), the GPU computes
    while they are staged: off the critical path, the falsifier met. (The real exports this test used
    before no longer qualify: the nvFuser one is start-up only, its 394 MB pageable upload set-up, and the
    torchrun one's pageable copies are scalars too small to be a finding, tests/test_syncs.py.)"""
    src = BUNDLES / "pageable_readback" / "trace.sqlite"
    plain = _finding(_run(src), "pageable_memcpy")
    assert not plain.get("falsified")
    assert next(e["value"] for e in plain["evidence"] if e["name"] == "pageable_hidden_pct") < 1
    half = _copy(src, tmp_path, "half.sqlite")
    assert _cover(half, PAGEABLE, 0.5) > 0
    f = _finding(_run(half), "pageable_memcpy")
    assert not f.get("falsified") and 45 < next(e["value"] for e in f["evidence"] if e["name"] == "pageable_hidden_pct") < 55
    hidden = _copy(src, tmp_path, "hidden.sqlite")
    assert _cover(hidden, PAGEABLE, 1.0) > 0
    f = _falsified(_run(hidden), "pageable_memcpy", "off the critical path")
    assert next(e["value"] for e in f["evidence"] if e["name"] == "pageable_hidden_pct") == 100.0


# --- throughput: collectives overlapped with compute -----------------------------------------------------

COLLECTIVES = ("SELECT k.start, k.end, k.deviceId, k.globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL k "
               "JOIN StringIds s ON s.id = k.demangledName WHERE s.value LIKE 'ncclDevKernel%'")


def _tp8(tmp_path, fraction, with_topology=True):
    d = _copy(BUNDLES / "tp8_cross_island", tmp_path, f"tp8_{fraction}")
    assert _cover(d / "trace.sqlite", COLLECTIVES, fraction) > 0
    return d if with_topology else d / "trace.sqlite"


def test_collective_dominant_with_collectives_hidden_under_compute_is_falsified(tmp_path):
    """The TP=8 trace alone (no topology): AllReduce 53% of the window, all of it exposed. With
    compute on another stream through 95% of each AllReduce, the step no longer waits for them."""
    _standing(_run(BUNDLES / "tp8_cross_island" / "trace.sqlite"), "collective_dominant")
    _standing(_run(_tp8(tmp_path, 0.5, with_topology=False)), "collective_dominant")  # half hidden: it still costs
    data = _run(_tp8(tmp_path, 0.95, with_topology=False))
    f = _falsified(data, "collective_dominant", "does not wait for the collectives")
    assert f["impact_pct"] < 5  # the share stays in the title, the exposed part is what it claims
    assert all(d["collective_share_pct"] > 50 and d["collective_exposed_pct"] < 0.1 * d["collective_share_pct"]
               for d in data["devices"])


def test_cross_island_collective_with_collectives_hidden_under_compute_is_falsified(tmp_path):
    _standing(_run(BUNDLES / "tp8_cross_island"), "cross_island_collective")
    _standing(_run(_tp8(tmp_path, 0.5)), "cross_island_collective")
    data = _run(_tp8(tmp_path, 0.95))
    _falsified(data, "cross_island_collective", "does not wait for the slow link")
    assert not data["headline"].startswith("Healthy")


# --- serving: at capacity, admission, memory, replicas ------------------------------------------------

def _with(tmp_path, bundle, **files):
    d = _copy(BUNDLES / bundle, tmp_path, bundle)
    for name, text in files.items():
        (d / name.replace("_", ".")).write_text(text)
    return d


def test_at_capacity_with_the_batch_far_below_its_cap_and_kv_free_is_falsified(tmp_path):
    """The benchmark sweep shows arrivals above completions; the engine log beside it shows the
    queue standing while 11 of 128 slots run and KV is at most 22% used: not capacity."""
    _standing(_run(BUNDLES / "serving_at_capacity"), "at_capacity")
    data = _run(_with(tmp_path, "serving_at_capacity", vllm_log=(BUNDLES / "serving_admission_blocked" / "vllm.log").read_text()))
    _falsified(data, "at_capacity", "the host is not admitting work")
    assert data["findings"][0]["id"] == "admission_blocked" and "[admission_blocked]" in data["headline"]


PREEMPTION = ("(EngineCore_0 pid=90) WARNING 07-28 09:00:12 [scheduler.py:1754] Sequence group 41 is preempted by "
              "PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end "
              "performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
              "total_num_cumulative_preemption=1\n")


def test_admission_blocked_with_kv_blocks_exhausted_is_falsified(tmp_path):
    """Free KV in every sampled stats line, but the engine preempted sequences for want of KV
    blocks again and again (the warning vLLM prints at the 1st and the 51st): the blocks do run
    out, so the queue waits for capacity, not for the host."""
    _standing(_run(BUNDLES / "serving_admission_blocked"), "admission_blocked")
    log = (BUNDLES / "serving_admission_blocked" / "vllm.log").read_text().splitlines(keepends=True)
    again = PREEMPTION.replace("Sequence group 41", "Sequence group 97").replace("preemption=1", "preemption=51")
    log = log[:5] + [PREEMPTION] + log[5:9] + [again] + log[9:]
    data = _run(_with(tmp_path, "serving_admission_blocked", vllm_log="".join(log)))
    _falsified(data, "admission_blocked", "server is at capacity instead")
    assert _finding(data, "memory_pressure")["severity"] != "info"  # the preemptions themselves stand as the oom-axis finding


def test_one_preemption_with_the_kv_cache_mostly_free_does_not_overturn_admission_blocked(tmp_path):
    """One vLLM preemption warning in serving_admission_blocked's log (KV at most 21.9% in all 24
    stats lines) turned admission_blocked (HIGH, 91%) into INFO and headlined 'Memory pressure: 1
    preemption — explains 4% of the stats samples'. A lone preemption with the pool mostly free does
    not show a pool that runs out: admission_blocked stands, says the preemption, and
    memory_pressure does not fire."""
    log = (BUNDLES / "serving_admission_blocked" / "vllm.log").read_text().splitlines(keepends=True)
    data = _run(_with(tmp_path, "serving_admission_blocked", vllm_log="".join(log[:5] + [PREEMPTION] + log[5:])))
    f = _standing(data, "admission_blocked")
    assert f["severity"] == "high" and data["headline"].startswith("[admission_blocked]")
    assert "a lone shortfall" in next(e for e in f["evidence"] if e["name"] == "preemptions")["text"]
    assert all(x["id"] != "memory_pressure" for x in data["findings"])


def test_memory_pressure_oom_with_chunked_prefill_on_keeps_the_crash_and_rules_out_its_kv_cause(tmp_path):
    """An OOM (3.5 GiB asked, 8.6% of reserved memory free in pieces), KV at most 69% used, no
    preemption: with chunked prefill off the unchunked prefill explains it (the finding stands);
    with it on, neither the prefill peak, the KV pool nor fragmentation does. The OOM that killed
    the engine is a fact, not a hypothesis: it was turned into INFO under 'No serving finding ...
    ruled out by its own falsifier: memory_pressure'; now the finding stands at HIGH and leads the
    headline, and only its cause changes (mechanism 'not KV pressure', fix: find where memory goes)."""
    plain = _run(BUNDLES / "serving_memory_pressure")
    assert _standing(plain, "memory_pressure")["severity"] == "high"
    log = (BUNDLES / "serving_memory_pressure" / "vllm.log").read_text()
    assert "'enable_chunked_prefill': False" in log
    data = _run(_with(tmp_path, "serving_memory_pressure",
                      vllm_log=log.replace("'enable_chunked_prefill': False", "'enable_chunked_prefill': True")))
    f = _standing(data, "memory_pressure")
    assert f["severity"] == "high" and f["impact_pct"] == 100.0
    assert data["headline"].startswith("[memory_pressure] Memory pressure: 1 CUDA out-of-memory error")
    assert "No serving finding" not in data["headline"] and "ruled out by its own falsifier" not in data["headline"]
    assert f["mechanism"].startswith("Not KV pressure: memory goes elsewhere (a leak, another process, activation peaks)")
    assert "Admit by tokens" not in f["fix"] and "nvidia-smi" in f["fix"]
    assert next(e for e in f["evidence"] if e["name"] == "mechanism")["value"] == "elsewhere"
    assert "the memory goes elsewhere" in next(e for e in f["evidence"] if e["name"] == "cause_ruled_out")["text"]


def test_over_replicated_with_a_budget_already_exceeded_is_falsified():
    """16 replicas... here 8, each decoding ~7 sequences with an empty queue; TTFT p99 69 ms. A TTFT
    p99 budget of 30 ms is already exceeded at this light load: consolidating cannot meet it."""
    d = BUNDLES / "serving_over_replicated"
    _standing(_run(d), "over_replicated")
    _standing(_run(d, slo={"ttft_p99_ms": 500.0}), "over_replicated")  # budgets met: the headroom is waste
    _falsified(_run(d, slo={"ttft_p99_ms": 30.0}), "over_replicated", "headroom is not the waste")
    # TTFT p50 52.5 ms, p99 69 ms, no p95: a 30 ms p95 budget is broken (the p50 is over it, trial item 28),
    # a 60 ms one lies between the two and is undecided, not met
    _falsified(_run(d, slo={"ttft_p95_ms": 30.0}), "over_replicated", "headroom is not the waste")
    _standing(_run(d, slo={"ttft_p95_ms": 60.0}), "over_replicated")


# --- entries whose falsifier the rule itself excludes: met, the finding does not fire -----------------

def test_proxy_buffering_does_not_fire_when_the_server_ttft_equals_the_client_ttft(tmp_path):
    """The falsifier (the delay is in the server) cannot be met by one capture in a finding that
    fired: the rule needs server TTFT under 30% of the client's. With the server's histogram
    showing the client's 2.57 s, it does not fire."""
    _standing(_run(BUNDLES / "serving_proxy_buffering"), "proxy_buffering")
    prom = (BUNDLES / "serving_proxy_buffering" / "metrics.prom").read_text()
    out = []
    for line in prom.splitlines(keepends=True):
        m = re.match(r'vllm:time_to_first_token_seconds_bucket\{le="([^"]+)"', line)
        if m and m.group(1) != "+Inf":
            le = float(m.group(1))
            count = "0.0" if le < 2.5 else "150.0" if le < 5.0 else "300.0"
            line = re.sub(r"\} [\d.]+$", "} " + count, line.rstrip("\n")) + "\n"
        elif line.startswith("vllm:time_to_first_token_seconds_sum"):
            line = re.sub(r"\} [\d.]+$", "} 769.96", line.rstrip("\n")) + "\n"
        out.append(line)
    data = _run(_with(tmp_path, "serving_proxy_buffering", metrics_prom="".join(out)))
    assert data["serving"]["latency"]["server"]["ttft"]["mean_ms"] == pytest.approx(2566.5, rel=0.01)
    assert all(f["id"] != "proxy_buffering" for f in data["findings"])


def test_batch_past_knee_does_not_fire_when_tpot_does_not_follow_the_batch(tmp_path):
    """Its falsifier (p95 TPOT high but not explained by the running batch, r² low) is the rule's
    own condition: the same sweep with the TPOTs of the three largest batches rotated (TPOT peaks
    at 128 and falls at 256; r² 0.13) is no model, and the finding does not fire."""
    src = BUNDLES / "serving_batch_past_knee"
    _standing(_run(src, slo={"tpot_p95_ms": 10.0}), "batch_past_knee")
    bench = json.loads((src / "bench.json").read_text())
    assert [b["max_concurrency"] for b in bench] == [8, 16, 32, 64, 128, 256]
    latency = [{k: v for k, v in b.items() if "tpot" in k or "itl" in k} for b in bench]
    for i, j in ((3, 4), (4, 5), (5, 3)):
        bench[i].update(latency[j])
    data = _run(_with(tmp_path, "serving_batch_past_knee", bench_json=json.dumps(bench)), slo={"tpot_p95_ms": 10.0})
    fit = data["serving"]["tpot_fit"]
    assert fit["source"].startswith("benchmark sweep") and fit["r2"] < 0.3 and fit["model"] is False
    assert all(f["id"] != "batch_past_knee" for f in data["findings"])


# --- an ITL tail whose prefill-chunk cause is ruled out (new-user trial, item 2) ----------------------

def test_itl_tail_with_chunked_prefill_on_is_prefill_stall_falsified_not_healthy(tmp_path):
    """serving_prefill_stall with chunked prefill on and a 2048-token budget: the ITL p99 612.7 ms
    (29x the median) still stands. The verdict was 'Healthy: Serving looks healthy' (the rule
    returned early, so the falsifier never ran); now prefill_stall fires, its falsifier marks it
    ruled out, and the headline says the tail is there with its cause not found."""
    log = (BUNDLES / "serving_prefill_stall" / "vllm.log").read_text()
    data = _run(_with(tmp_path, "serving_prefill_stall", vllm_log=log.replace(
        "'enable_chunked_prefill': False", "'enable_chunked_prefill': True, 'max_num_batched_tokens': 2048")))
    _falsified(data, "prefill_stall", "chunked prefill is already on")
    h = data["headline"]
    assert not h.startswith("Healthy") and "healthy" not in h.replace("not called healthy", "")
    assert all(f["id"] != "healthy" for f in data["findings"])
    # the benchmark's stated p99_itl_ms (612.98 ms), not the per-request arrays' nearest rank (trial item 37)
    assert h.startswith("Inter-token tail not explained: ITL p99 613.0 ms is 29.1x the median")
    assert "not the prefill-chunk mechanism (prefill_stall ruled out by its own falsifier)" in h
    tail = next(a for a in data["abstentions"] if a["analysis"] == "itl_tail")
    assert "preemption" in tail["capture_hint"] and "prefill_stall ruled out" in tail["reason"]


# --- a falsified finding reads as ruled out everywhere (new-user trial, item 3) -----------------------

def test_a_falsified_finding_claims_no_impact_gives_no_fix_and_is_marked_in_every_format(tmp_path):
    """prefix_cache_miss with prefix caching already on (0% hits): it said 'explains 96.9% of the
    tokens processed' and 'Turn prefix caching on', with no mark in HTML. Now it claims 0%, its
    falsified_why stands in place of the fix, and text, markdown and HTML mark it falsified."""
    log = (BUNDLES / "serving_prefix_cache_miss" / "vllm.log").read_text()
    d = _with(tmp_path, "serving_prefix_cache_miss", vllm_log=log.replace("'enable_prefix_caching': False",
                                                                          "'enable_prefix_caching': True"))
    f = _falsified(_run(d), "prefix_cache_miss", "prompts share no prefix")
    assert "Turn prefix caching on" not in f["fix"]
    text = run_cli("analyze", d).stdout
    assert "INFO FALSIFIED prefix_cache_miss (cost) — ruled out by its own falsifier, claims no impact" in text
    assert "ruled out: prefix caching is already on" in text and "Turn prefix caching on" not in text
    run_cli("analyze", d, "--format", "md", "-o", tmp_path / "r.md")
    md = (tmp_path / "r.md").read_text()
    assert "[INFO · FALSIFIED]" in md and "**Ruled out:** prefix caching is already on" in md and "explains 96" not in md
    run_cli("analyze", d, "--format", "html", "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert '<span class="sev sev-falsified">falsified</span>' in page and "claims no impact" in page
    assert "Turn prefix caching on" not in page
