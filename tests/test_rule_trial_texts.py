"""Two items of the merged branch's trial, on generated traces (samples/gen_efficiency.py: kernel speeds chosen
from their work, the truth computed there).

#4: below_roofline's confirm target sat exactly at the rule's line (a fix that just reaches 50% of the roofline,
where the finding stops firing, "confirmed"), and its texts said "per step" on a capture with no steps.
#9: a not-measured efficiency row whose share rounds to 0% of its class's time ("0% ... not measured").
"""

import gzip
import json
import re
import sys

import numpy as np
from conftest import ROOT

from tracetriage import analyze, open_case
from tracetriage.analyzers import efficiency, opwork
from tracetriage.analyzers.efficiency_rows import ClassRow, Judgement, Rates, Roofline
from tracetriage.analyzers.op_kernels import KernelTime
from tracetriage.analyzers.rules import efficiency as rule_efficiency
from tracetriage.analyzers.rules.thresholds import THRESHOLDS

sys.path.insert(0, str(ROOT / "samples"))
import gen_efficiency  # noqa: E402


def _trace(tmp_path, scenario: str, steps: bool):
    doc, truth = gen_efficiency.build(gen_efficiency.scenarios()[scenario])
    if not steps:
        doc["traceEvents"] = [event for event in doc["traceEvents"] if not event["name"].startswith("ProfilerStep#")]
    path = tmp_path / f"{scenario}_{'steps' if steps else 'nosteps'}.pt.trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return analyze(str(path)), truth, path


def _below(result):
    return next(found for found in result.findings if found["id"] == "below_roofline")


def test_the_confirm_target_is_above_the_line_by_the_margin(tmp_path):
    result, truth, _ = _trace(tmp_path, "gemm_slow", steps=True)
    found = _below(result)
    line, margin = THRESHOLDS["roofline_min_pct"][0], THRESHOLDS["roofline_confirm_margin_pct"][0]
    target = float(re.search(r"rises to (\d+)% of its roofline or more", found["confirm"]).group(1))
    assert target == line + margin and margin > 0
    assert f"the finding's line is {line:.0f}%" in found["confirm"]
    assert "per step" in found["confirm"]  # the generated trace has ProfilerStep ranges
    assert truth["steps"] > 0


def test_the_decode_target_is_above_the_floor_line(tmp_path):
    result, _, _ = _trace(tmp_path, "decode_slow", steps=True)
    found = _below(result)
    line, margin = THRESHOLDS["decode_floor_min_pct"][0], THRESHOLDS["roofline_confirm_margin_pct"][0]
    assert f"({line + margin:.0f}% of it or more" in found["confirm"]


def test_a_capture_without_steps_is_told_per_call_not_per_step(tmp_path):
    result, _, _ = _trace(tmp_path, "gemm_slow", steps=False)
    assert all(process["steps"]["count"] == 0 for process in json.loads(result.to_json())["processes"])
    found = _below(result)
    texts = " ".join(found[key] for key in ("title", "mechanism", "fix", "confirm", "falsifier"))
    assert "per step" not in texts and "per call of the same ops" in found["confirm"]


def _kernels(untyped: dict[str, float]) -> KernelTime:
    by_class = np.array([untyped.get(name, 0.0) for name in opwork.CLASSES])
    return KernelTime(ns_by_device=np.array([1.0]), unmeasured_by_class=by_class, untyped_by_class=by_class,
                      no_lengths_by_class=np.zeros(len(opwork.CLASSES)), kernel_ns=1.0,
                      op_of_kernel=np.empty(0, np.int64), kernel_dur=np.empty(0, np.int64))


def test_a_share_the_report_prints_as_zero_is_not_listed(tmp_path, monkeypatch):
    """A class whose unmeasured ns exceed its untyped ns by a few stray kernels (1 µs of 1 s) left a 'kernels
    without shapes' row the report printed as 0% of the class's time; a 2% row stays."""
    _, _, path = _trace(tmp_path, "gemm_slow", steps=True)
    trace = open_case([path]).traces[0]
    kernels = _kernels({"gemm": 0.3e9, "attention": 2e6})
    unmeasured = {name: float(kernels.unmeasured_by_class[code]) for code, name in enumerate(opwork.CLASSES)}
    unmeasured["gemm"] += 1_000.0
    total = {name: 100e6 if name == "attention" else 1e9 for name in opwork.CLASSES}
    with monkeypatch.context() as patched:  # without the floor, the residue is a row of 0.0% of its class
        patched.setattr(efficiency, "LISTED_MIN_SHARE_PCT", 0.0)
        every = efficiency._unmeasured_rows(trace, kernels, unmeasured, total)
    assert any(row.what == "gemm kernels without shapes" and row.share_pct == 0.0 for row in every)
    shown = {row.what: row.share_pct for row in efficiency._unmeasured_rows(trace, kernels, unmeasured, total)}
    assert "gemm kernels without shapes" not in shown
    assert shown["attention kernels without dtype"] == 2.0
    assert all(share is None or share >= efficiency.LISTED_MIN_SHARE_PCT for share in shown.values())


def _judged(pct_of_roofline: float) -> Judgement:
    row = ClassRow(name="gemm", rates=Rates.of(1e6, 4e11, 1e9), ops=10, measured_share_pct=100.0,
                   roofline=Roofline(bound="compute", pct_of_roofline=pct_of_roofline, peak_dtype="bf16", peak_tflops=989.0))
    return Judgement(kind="gemm", entry=row, measured=True, below=pct_of_roofline < 50, side="compute", decode=None,
                     text="GEMMs")


def test_the_confirm_target_follows_the_measured_share():
    """Trial: 'rises to 50% of its roofline or more' on a class already at 49.9%. The target lies the margin above
    the line, and never at or under the measured share: a class at 49.9% is told 60%, one at 57% 67%."""
    margin = THRESHOLDS["roofline_confirm_margin_pct"][0]
    peaks = {"model": "NVIDIA H100 SXM"}
    for measured, expected in ((49.9, 60.0), (12.0, 60.0), (57.0, 67.0)):
        fields = rule_efficiency._roofline_fields(_judged(measured), peaks, 90.0, 20.0, stepped=True)
        target = float(fields["target"].rstrip("%"))
        assert target == expected and target >= measured + margin - 0.5
        assert fields["threshold"] == "50%"
