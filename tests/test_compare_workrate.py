"""compare and trend of captures without steps judge work rate (kernel time per call, calls per
second), never busy %; compare's one-line summary names the per-step components that moved
(issue 32, items 7 and 9).

Generated: samples/generate.py's micro-benchmark pair (generate_microbench_pair), whose GEMM runs 2x
faster after; the truth (each kernel's ns per call, each side's busy %) is computed from the
generated calls. Real: an eager and a CUDA-graph decode on an H200 (samples/h200); the two halves
of one real step-less capture (the same program, the same GPU), as is and with one kernel's calls
made 2x shorter in the second half; a cross-device pair and two different programs, which must be
refused; the nsys 2xH100 before/after pair for the movers."""

from __future__ import annotations

import copy
import gzip
import json
import shutil
from pathlib import Path

import pytest
from conftest import BUNDLES, ROOT, chromium_page, compare_contract, real, run_cli, samples_generate

import tracetriage
from tracetriage.analyzers.compare import compare
from tracetriage.analyzers.compare_metrics import GROWTH_PCT

SCHEMA = json.loads((ROOT / "reports" / "compare.schema.json").read_text())
GEMM = "gemm_bf16_tn_kernel"




def compare_json(before, after, *extra, codes=(0, 8, 9)):
    """compare with --gate: its exit status is one of ``codes`` (0 improved/unchanged, 8 regressed, 9 inconclusive)."""
    return compare_contract(before, after, "--gate", *extra, codes=codes)


@pytest.fixture(scope="module")
def microbench(tmp_path_factory):
    """(before, after, truth) of the generated micro-benchmark pair."""
    out = tmp_path_factory.mktemp("microbench")
    before, after = samples_generate().generate_microbench_pair(out)
    return before, after, json.loads((out / "microbench_truth.json").read_text())


def _device_rate(result):
    return result["work_rate"]["devices"][0]


def _kernel_rate(result, fragment):
    return next(row for row in result["work_rate"]["kernels"] if fragment in row["name"])


# ---------------------------------------------------------------------------
# Generated: a kernel 2x faster is improved, though busy % falls


def test_generated_2x_faster_kernel_is_improved_while_busy_falls(microbench):
    before, after, truth = microbench
    assert truth["after"]["busy_pct"] < truth["before"]["busy_pct"] - 20  # the trap: busy % falls
    proc = run_cli("compare", before, after, "-f", "json", "--gate")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    pytest.importorskip("jsonschema").validate(result, SCHEMA)
    assert result["verdict"] == "improved" and result["comparable"]["ok"], result["summary"]
    assert result["budgets"]["kernel time per call"] == "improved"
    assert result["budgets"]["step p50"] == "not measured"
    gemm = _kernel_rate(result, GEMM)
    truth_ratio = truth["after"]["ns_per_call"][GEMM] / truth["before"]["ns_per_call"][GEMM]
    assert gemm["ratio"] == pytest.approx(truth_ratio, abs=0.005) and gemm["status"] == "improved"
    assert gemm["ci95"][0] <= gemm["ratio"] <= gemm["ci95"][1] < 1.0
    for name in ("softmax_warp_kernel", "layer_norm_fwd_kernel"):  # untouched kernels: within noise
        assert _kernel_rate(result, name)["status"] == "unchanged"
    assert gemm["before_ns_per_call"] == pytest.approx(truth["before"]["ns_per_call"][GEMM], rel=1e-3)
    busy = next(metric for metric in result["metrics"] if metric["name"] == "busy_pct")
    assert busy["direction"] == "not judged" and busy["after"] < busy["before"]
    assert busy["before"] == pytest.approx(truth["before"]["busy_pct"], abs=1.0)
    assert "regressed" not in result["summary"] and "kernel time per call" in result["summary"]
    # the lower busy % makes a window-share finding appear: named as not judged, never "new" in the summary
    assert "new:" not in result["summary"]
    # the host paces the loop: as many calls per second, each faster
    assert _device_rate(result)["rate_status"] == "unchanged" and result["budgets"]["kernel calls per second"] == "unchanged"


def test_generated_2x_slower_kernel_is_regressed_and_fails_the_gate(microbench):
    before, after, _truth = microbench
    proc = run_cli("compare", after, before, "-f", "json", "--gate")
    assert proc.returncode == 8, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "regressed" and _kernel_rate(result, GEMM)["status"] == "regressed"


def test_generated_same_loop_other_seed_is_unchanged(microbench, tmp_path):
    before, _after, _truth = microbench
    again, _ = samples_generate().generate_microbench_pair(tmp_path, seed=8)
    result = compare_json(before, again)
    assert result["verdict"] == "unchanged", result["summary"]
    assert all(row["status"] == "unchanged" for row in result["work_rate"]["kernels"])


def test_too_few_calls_is_refused_with_why():
    """One kernel call on each side: no per-call distribution, the pair is not judged."""
    result = compare_json(BUNDLES / "single_kernel", BUNDLES / "single_kernel", codes=(9,))
    assert result["verdict"] == "inconclusive" and not result["comparable"]["ok"]
    assert result["comparable"]["reasons"][0].startswith("too few calls")
    assert "vector_add_kernel" in result["summary"]


def test_stepless_against_stepped_is_refused(microbench):
    before, _after, _truth = microbench
    result = compare_json(before, BUNDLES / "healthy", codes=(9,))
    assert result["verdict"] == "inconclusive"
    assert any("has no steps" in reason for reason in result["comparable"]["reasons"])


def test_saved_analysis_without_call_samples_is_refused(microbench, tmp_path):
    before, after, _truth = microbench
    saved = []
    for index, side in enumerate((before, after)):
        data = tracetriage.analyze(side).data
        for device in data["devices"]:
            for kernel in device["kernels"]:
                kernel.pop("durations_ns", None)
        path = tmp_path / f"side{index}.json"
        path.write_text(json.dumps(data))
        saved.append(path)
    result = compare_json(*saved, codes=(9,))
    assert result["verdict"] == "inconclusive" and "without per-call durations" in result["comparable"]["reasons"][0]


# ---------------------------------------------------------------------------
# Real: halves of one real step-less capture


def _halves(source: Path, out: Path, faster: str | None = None, factor: float = 2.0) -> tuple[Path, Path]:
    """The first and the second half of a Kineto trace, cut at the middle of its GPU activity (an
    event belongs to the half its start lies in; metadata to both). With ``faster``, the second
    half's calls of the kernels whose name contains it last ``factor`` times less."""
    data = json.loads(gzip.open(source).read())
    events = data["traceEvents"]
    kernels = [event for event in events if event.get("cat") == "kernel"]
    middle = (min(event["ts"] for event in kernels) + max(event["ts"] + event.get("dur", 0) for event in kernels)) / 2
    paths = []
    for half in (0, 1):
        kept = []
        for event in events:
            if "ts" in event and event.get("ph") != "M" and (float(event["ts"]) >= middle) != bool(half):
                continue
            if half and faster and event.get("cat") == "kernel" and faster in event.get("name", ""):
                event = {**event, "dur": event["dur"] / factor}
            kept.append(event)
        path = out / f"half{half}.json"
        path.write_text(json.dumps({**data, "traceEvents": kept}))
        paths.append(path)
    return paths[0], paths[1]


REAL_STEPLESS = "tracelens_h100_qwen1.5-0.5b_chat.json.gz"  # eager inference, no steps, 1,465 kernels, H100


def test_real_halves_of_one_capture_are_unchanged(tmp_path):
    first, second = _halves(real("kineto", REAL_STEPLESS), tmp_path)
    result = compare_json(first, second)
    assert result["comparable"]["ok"] and result["verdict"] == "unchanged", result["summary"]
    device = _device_rate(result)
    assert device["kernels"] >= 10 and device["before_covered_pct"] > 90
    assert device["ci95"][0] < 1.0 < device["ci95"][1]


def test_real_halves_with_a_gemm_2x_faster_is_improved(tmp_path):
    first, second = _halves(real("kineto", REAL_STEPLESS), tmp_path, faster="sm90_xmma_gemm")
    result = compare_json(first, second)
    assert result["verdict"] == "improved", result["summary"]
    gemm = _kernel_rate(result, "sm90_xmma_gemm")
    assert gemm["status"] == "improved" and 0.45 < gemm["ratio"] < 0.55
    busy = next(metric for metric in result["metrics"] if metric["name"] == "busy_pct")
    assert busy["after"] < busy["before"] and busy["direction"] == "not judged"


def test_real_h200_eager_to_cuda_graphs_is_improved_on_calls_per_second():
    """samples/h200 (this project's H200 captures, no steps): the same decode eager, then in CUDA
    graphs. Every kernel keeps its speed; the launch gaps go, so the loop runs its kernels twice
    as often and busy % doubles. Time per call unchanged, calls per second improved."""
    result = compare_json(ROOT / "samples" / "h200" / "eager_decode.json.gz", ROOT / "samples" / "h200" / "graph_decode.json.gz")
    assert result["verdict"] == "improved", result["summary"]
    device = _device_rate(result)
    assert device["status"] == "unchanged" and device["ci95"][0] < 1.0 < device["ci95"][1]
    assert device["rate_status"] == "improved" and device["rate_ratio"] > 1.8 and device["rate_ci95"][0] > 1.0
    assert result["budgets"] == {"step p50": "not measured", "step p99": "not measured",
                                 "kernel time per call": "unchanged", "kernel calls per second": "improved"}


def test_real_cross_device_pair_is_refused():
    """The same model on an H100 and an MI300X: another device, no work rate compares."""
    result = compare_json(real("kineto", REAL_STEPLESS), real("kineto", "tracelens_mi300_qwen1.5-0.5b_chat.json.gz"),
                          codes=(9,))
    assert result["verdict"] == "inconclusive"
    assert result["comparable"]["reasons"][0].startswith("devices differ")


def test_real_other_programs_without_common_kernels_are_refused():
    result = compare_json(real("rocprof", "rocprofv3_rocpd_v3_bmm_trace_mi300x.db"),
                          real("rocprof", "rocprofv3_rocpd_v3_ck_batched_gemm_mi300x.db"), codes=(9,))
    assert result["verdict"] == "inconclusive"
    assert "no kernel in common" in _device_rate(result)["reason"]


# ---------------------------------------------------------------------------
# Trend of step-less captures: time per call, not busy %


def test_trend_of_stepless_runs_finds_the_faster_kernel_not_a_busy_regression(tmp_path):
    generate = samples_generate()
    archive = tmp_path / "archive"
    for index in range(6):
        before, after = generate.generate_microbench_pair(tmp_path / f"src{index}", seed=100 + index)
        run = archive / f"run-{index + 1:02d}"
        run.mkdir(parents=True)
        shutil.copy((before if index < 3 else after) / "trace.sqlite", run / "trace.sqlite")
    proc = run_cli("trend", archive, "-j", "1", "--order-by", "name", "-f", "json", "--gate",
                   "--batch-dir", tmp_path / "batch")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    changes = {change["metric"]: change for change in result["changes"]}
    gemm = changes[f"kernel_call:{GEMM}"]
    assert gemm["direction"] == "improved" and gemm["first_bad"] == "run-04"
    assert gemm["change_pct"] == pytest.approx(-50, abs=2)
    assert changes.get("busy_pct", {"direction": "changed"})["direction"] == "changed"
    assert "time per call" in result["groups"][0]["verdict"] and "regressed" not in result["groups"][0]["verdict"]


# ---------------------------------------------------------------------------
# Item 9: the summary names what moved


def test_real_summary_names_the_largest_per_step_movers_across_ranks():
    pair = ROOT / "samples" / "real" / "nsys"  # nsys-ai's 2xH100 before/after fixtures, in the repository (MIT)
    before, after = pair / "nsys2026.2_2xH100_mfu_before.sqlite", pair / "nsys2026.2_2xH100_mfu_after.sqlite"
    result = compare_json(before, after)
    assert result["verdict"] == "regressed"
    movers = result["movers"]
    assert [abs(mover["change_ms"]) for mover in movers] == sorted((abs(mover["change_ms"]) for mover in movers), reverse=True)
    top = movers[0]
    # the step grew ~2.1 ms; the host code between launches is most of it, on rank 0
    assert top["component"] == "idle_host_ms" and top["rank"] == 0 and top["change_ms"] > 1.0
    # rank 1 waits longer in its SendRecv (rank 0's fell): named by rank, not averaged away
    sendrecv = next(mover for mover in movers if mover["component"] == "collective_ms")
    assert sendrecv["label"] == "exposed SendRecv" and sendrecv["rank"] == 1 and sendrecv["change_ms"] > 0.5
    summary = result["summary"]
    assert "moved (mean per step): host idle (no CUDA call) +" in summary
    assert "exposed SendRecv +" in summary and "on rank1" in summary
    assert "persists" not in summary
    grown = [mover for mover in movers if mover["grown"] and not mover["beyond_noise"]]
    assert grown and all(mover["change_pct"] >= GROWTH_PCT for mover in grown)


def test_generated_component_grown_under_the_threshold_is_reported():
    """The graph decode bundle against itself with 2% of its window moved from compute into the
    launch idle after each sync (0.77% of it before: grown 3.6x): about 2% of the step, under the
    5%-of-step threshold, but grown by far more than 25% of itself."""
    before = tracetriage.analyze(BUNDLES / "graph_decode").data
    after = copy.deepcopy(before)
    after["inputs"] = [{**source, "path": str(source.get("path")) + "#after"} for source in after.get("inputs") or []]
    moved_pct = 2.0
    for device in after["devices"]:
        slices = device["accounting"]["slices_pct"]
        slices["compute"] -= moved_pct
        slices["idle:after_sync:launch"] += moved_pct
    result = compare(before, after)
    assert result["verdict"] == "unchanged"
    mover = next(mover for mover in result["movers"] if mover["component"] == "idle_launch_ms")
    assert mover["grown"] and not mover["beyond_noise"] and mover["change_pct"] >= GROWTH_PCT
    assert "idle in launch calls +" in result["summary"] and "below the 5%-of-step threshold" in result["summary"]


def test_shown_in_every_format(microbench):
    before, after, _truth = microbench
    for fmt in ("text", "md", "html"):
        proc = run_cli("compare", before, after, "-f", fmt)
        assert proc.returncode == 0, proc.stderr
        assert GEMM in proc.stdout and "0.50" in proc.stdout, fmt  # the gemm's ratio, printed x0.50 (test_trial43)


def test_every_field_of_the_work_rate_view_is_in_every_format(microbench):
    """The view parity of tests/test_view_parity_compare_trend.py on a pair without steps (its
    pairs have steps), with the same declared omissions and the kernel names cut as there."""
    from test_view_parity import missing_fields
    from test_view_parity_compare_trend import COMPARE_CUT_TO, COMPARE_OMITTED, COMPARE_SHOWN_FIRST

    from tracetriage.reports.compare import render_compare
    from tracetriage.reports.compare_view import compare_view

    before, after, _truth = microbench
    comparison = compare(tracetriage.analyze(before).data, tracetriage.analyze(after).data, str(before), str(after))
    cut = "the kernel name is cut at its end (rate_kernels.name), as the per-step kernels are"
    omitted = {fmt: {**fields, **({"rate_kernels.short_name": cut} if fmt != "html" else {})}
               for fmt, fields in COMPARE_OMITTED.items()}
    cut_to = {fmt: {**fields, "rate_kernels.name": fields["kernels.name"]} for fmt, fields in COMPARE_CUT_TO.items()}
    view = compare_view(comparison)
    assert view.work_rate and view.rate_kernels and not view.step_time
    for fmt in ("text", "md", "html"):
        missing = missing_fields(view, fmt, render_compare(comparison, fmt), omitted, COMPARE_SHOWN_FIRST, cut_to)
        assert not missing, (fmt, sorted(missing))


def test_stepless_pair_says_per_call_never_per_step(microbench, tmp_path):
    """Captures without steps have no per-step figure: the metrics table's heading says per call, in every
    format, and the page's note under it does not define ms per step (trial item #12)."""
    before, after, _truth = microbench
    outputs = {}
    for fmt in ("text", "md", "html"):
        proc = run_cli("compare", before, after, "-f", fmt)
        assert proc.returncode == 0, proc.stderr
        outputs[fmt] = proc.stdout
    assert "\nper call, absolute" in outputs["text"] and "\n## Per call, absolute" in outputs["md"]
    assert "<h2>Per call, absolute</h2>" in outputs["html"]
    for fmt, out in outputs.items():
        assert "per step, absolute" not in out.lower(), fmt
    assert "ms per step = " not in outputs["html"]


def test_work_rate_tables_fit_their_box_in_chromium(microbench, tmp_path):
    """The work-rate tables of the compare page stay inside the page's box at 1,400 px (trial item #7:
    their headings did not wrap, so the first ran 250 px past the page): each fits, or scrolls in its box."""
    before, after, _truth = microbench
    page_path = tmp_path / "rate.html"
    assert run_cli("compare", before, after, "-o", page_path).returncode == 0
    with chromium_page(page_path, width=1400) as (page, _, _):
        boxes = page.evaluate("""() => {
          const body = document.body, style = getComputedStyle(body);
          const right = body.getBoundingClientRect().right - parseFloat(style.paddingRight);
          const heading = [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith('Work rate'));
          const out = [];
          for (let el = heading.nextElementSibling; el && el.tagName !== 'H2'; el = el.nextElementSibling) {
            const table = el.tagName === 'TABLE' ? el : el.querySelector('table');
            if (table) out.push({box: el.getBoundingClientRect().right - right, scroll: getComputedStyle(el).overflowX,
                                 table: table.getBoundingClientRect().right - right});
          }
          return {tables: out, page: document.documentElement.scrollWidth - innerWidth};
        }""")
    assert len(boxes["tables"]) == 2 and boxes["page"] <= 0, boxes
    for table in boxes["tables"]:
        assert table["box"] <= 1 and (table["table"] <= 1 or table["scroll"] == "auto"), boxes
