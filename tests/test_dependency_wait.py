"""GPU idle with its next work queued is a dependency wait, not the host's (analyzers/timeline.py, the cause
``dependency``; analyzers/rules/waits.py, the dependency_wait finding).

On generated captures (samples/gen_dependency.py: each step a stream waits on another rank's event with the
backward already queued, while the host sits in a pageable read-back queued behind it) the truth is what the
generator built: the hidden waits and what the pageable copies themselves cost. The real TorchRec capture is
in tests/test_real_distributed.py."""

import sys

import numpy as np
import pytest
from conftest import ROOT

from tracetriage import analyze, open_case
from tracetriage.analyzers import timeline as tl
from tracetriage.reports import render

sys.path.insert(0, str(ROOT / "samples"))
import gen_dependency  # noqa: E402


def _finding(data, finding_id):
    return next((finding for finding in data["findings"] if finding["id"] == finding_id), None)


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("dependency")
    cases = {}
    for name, wait_us in (("wait", 10_000), ("short_wait", 1_000), ("no_wait", 0)):
        truth = gen_dependency.write_bundle(out / name, f"dependency:{name}", wait_us)
        cases[name] = (analyze(open_case([out / name])).data, truth)
    return cases


@pytest.mark.parametrize("name", ["wait", "short_wait"])
def test_a_stream_waiting_with_work_queued_is_a_dependency_wait(generated, name):
    data, truth = generated[name]
    dep = truth["dependency"]
    assert (data["window"]["start_ns"], data["window"]["end_ns"]) == (truth["window"]["start_ns"],
                                                                        truth["window"]["end_ns"])
    device = data["devices"][0]
    # every hidden wait, whole: from the later of the queue's end and the queued kernel's launch to its start
    assert device["gaps"]["by_cause"]["dependency"] == dep["wait_ns"] and dep["waits"] == 30
    found = _finding(data, "dependency_wait")
    assert found is not None and abs(found["impact_pct"] - dep["wait_pct"]) < 0.01
    assert data["findings"][0]["id"] == "dependency_wait"
    # the host sits in the pageable read-back during the waits: the copies claim only their own cost
    assert dep["idle_in_pageable_pct"] > dep["wait_pct"] - 0.01
    pageable = _finding(data, "pageable_memcpy")
    assert pageable is None or pageable["impact_pct"] <= dep["pageable_cost_pct"] + 0.01
    assert not any(f["id"] in ("gpu_starved", "host_sync_per_step") for f in data["findings"])
    # a single device that runs no collectives: the generic words, not a rank's
    assert "another rank" not in found["mechanism"] and "cudaStreamWaitEvent" in found["mechanism"]


def test_the_same_program_with_nothing_to_wait_for_has_no_dependency(generated):
    data, truth = generated["no_wait"]
    assert truth["dependency"]["wait_ns"] == 0
    device = data["devices"][0]
    assert "dependency" not in device["gaps"]["by_cause"]  # the optional key is written only when not 0
    assert not any(key.endswith(":dependency") for key in device["accounting"]["slices_pct"])
    assert _finding(data, "dependency_wait") is None


def _slicer_on(gs, ge, ready):
    """A host with no calls: attribute_queued's split alone."""
    host = tl._HostSlicer.__new__(tl._HostSlicer)
    host.empty = True
    return host.attribute_queued(np.array(gs, np.int64), np.array(ge, np.int64), np.array(ready, np.int64))


def test_a_hold_within_the_launch_latency_is_not_a_wait():
    lat = tl.DEPENDENCY_LATENCY_NS
    causes, cut = _slicer_on([0, 1_000_000, 2_000_000, 3_000_000], [lat, 1_000_000 + lat + 1, 2_900_000, 3_100_000],
                             [-5, 0, 2_500_000, tl.NEVER])
    # held exactly the latency: the host's; one ns longer: all of it; queued mid-gap: from then on; never queued
    assert causes["dependency"].tolist() == [0, lat + 1, 400_000, 0]
    assert cut.tolist() == [lat, 1_000_000, 2_500_000, 3_100_000]
    assert (causes["unknown"] + causes["dependency"]).tolist() == [lat, lat + 1, 900_000, 100_000]


# -- what the capture holds of the wait: checked, never assumed absent (analyzers/wait_sources.py) ----------------

RENDERED = ("text", "md", "html", "json")


def _texts(data, finding_id):
    found = _finding(data, finding_id)
    return found, " ".join(found[key] for key in ("title", "mechanism", "fix", "confirm", "falsifier"))


def test_the_generated_wait_says_the_capture_holds_the_wait_call_but_not_its_producer(generated):
    data, truth = generated["wait"]
    found, texts = _texts(data, "dependency_wait")
    waits, records = truth["calls"]["cudaStreamWaitEvent"], truth["calls"]["cudaEventRecord"]
    assert waits == 30 and records == 0
    assert "None of it is in this capture" not in texts
    assert f"holds the wait itself ({waits} cudaStreamWaitEvent calls in the capture)" in found["mechanism"]
    assert "no cudaEventRecord call" in found["mechanism"]
    assert "no other stream or device ran work" in found["mechanism"]  # one process, one stream
    assert found["title"].endswith("it waits on a dependency this trace does not show")


@pytest.fixture(scope="module")
def produced(tmp_path_factory):
    out = tmp_path_factory.mktemp("dependency_producer")
    truth = gen_dependency.write_bundle(out / "producer", "dependency:producer", 10_000, producer=True)
    return analyze(open_case([out / "producer"])), truth


def test_a_producer_in_the_capture_is_named_where_the_waits_end(produced):
    analysis, truth = produced
    found, texts = _texts(analysis.data, "dependency_wait")
    device = next(d for d in analysis.data["devices"] if d["id"] == found["evidence"][0]["denominator"].split(" on ")[-1])
    # the waits checked: the device's longest gaps with cause dependency; the truth: each ends where a producer ends
    tops = [gap for gap in device["gaps"]["top"] if gap["cause"] == "dependency"]
    ends = np.array(truth["producer_ends_ns"])
    met = sum(bool(((ends <= gap["start_ns"] + gap["length_ns"])
                    & (ends >= gap["start_ns"] + gap["length_ns"] - tl.DEPENDENCY_LATENCY_NS)).any()) for gap in tops)
    assert tops and met == len(tops)
    peer = next(d["id"] for d in analysis.data["devices"] if d["id"] != device["id"])
    assert f"for {met} of the {len(tops)} longest waits, an operation on {peer}" in found["mechanism"]
    assert f"{truth['calls']['cudaEventRecord']} cudaEventRecord calls" in found["mechanism"]
    assert found["title"].endswith(f"it waits on work that ends on {peer} of this trace")
    assert "does not show" not in found["title"] and "None of it" not in texts


def test_real_sglang_decode_says_its_wait_call_is_in_the_capture():
    """The SGLang Qwen3-8B decode capture (MI300X): one hipStreamWaitEvent call, no hipEventRecord, the queued
    stream held ~463 ms; its other stream ran two short kernels long before the wait ended."""
    import gzip
    import json

    from conftest import real

    path = real("kineto", "tracelens_sglang_qwen3-8b_decode.json.gz")
    events = json.load(gzip.open(path, "rt"))["traceEvents"]
    calls = [e["name"] for e in events if e.get("cat") == "cuda_runtime"]
    waits, records = calls.count("hipStreamWaitEvent"), sum("EventRecord" in name for name in calls)
    assert waits == 1 and records == 0
    analysis = analyze(open_case([path]))
    found, texts = _texts(analysis.data, "dependency_wait")
    assert analysis.data["findings"][0]["id"] == "dependency_wait" and found["severity"] == "high"
    sentence = "holds the wait itself (1 hipStreamWaitEvent call in the capture) but not what it waits on: no hipEventRecord call"
    assert sentence in found["mechanism"] and "None of it is in this capture" not in texts
    assert "cudaStreamWaitEvent" not in found["mechanism"]  # an AMD capture: HIP's words
    # every renderer prints the catalog's one text
    for fmt in RENDERED:
        rendered = render(analysis, fmt)
        assert "None of it is in this capture" not in rendered, fmt
        assert "1 hipStreamWaitEvent call in the capture" in rendered, fmt
