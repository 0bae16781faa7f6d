"""A host/GPU clock offset makes "queued before the gap" unanswerable: dependency_wait abstains, saying why
(analyzers/queued.py: clock_check; analyzers/rules/waits.py: clock_abstentions).

The captures are samples/gen_dependency.py's with the GPU's timestamps written ``gpu_offset_us`` off the host's
(its truth keeps the waits on the one clock they were generated on, and the offset)."""

import sys

import pytest
from conftest import ROOT, real

from tracetriage import analyze, open_case
from tracetriage.analyzers import queued

sys.path.insert(0, str(ROOT / "samples"))
import gen_dependency  # noqa: E402

PID = 4601  # the generator's process


def _case(folder, offset_us, seed="clock"):
    truth = gen_dependency.write_bundle(folder, f"dependency:{seed}", 10_000, gpu_offset_us=offset_us)
    case = open_case([folder])
    return case, analyze(case), truth, folder


@pytest.fixture(scope="module")
def shifted(tmp_path_factory):
    out = tmp_path_factory.mktemp("dependency_clock")
    return {offset: _case(out / f"offset_{offset}", offset) for offset in (5_000, -5_000, 20)}


def _abstention(data):
    return next((row for row in data["abstentions"] if row["analysis"] == "dependency_wait"), None)


@pytest.mark.parametrize("offset_us,direction", [(5_000, "ahead"), (-5_000, "behind")])
def test_an_offset_clock_abstains_from_dependency_wait_and_says_why(shifted, offset_us, direction):
    case, analysis, truth, _ = shifted[offset_us]
    data = analysis.data
    assert truth["gpu_offset_ns"] == offset_us * 1000 and truth["dependency"]["waits"] == 30
    device = data["devices"][0]
    assert "dependency" not in device["gaps"]["by_cause"]  # no idle is called a dependency wait
    assert not any(finding["id"] == "dependency_wait" for finding in data["findings"])
    row = _abstention(data)
    assert row is not None and row["scope"] == f"pid {PID}" and "clocks are offset" in row["reason"]
    assert f"run{' at least that far' if direction == 'behind' else ''} " in row["reason"]
    assert direction in row["reason"] and "one clock" in row["capture_hint"]
    check = queued.process_clock_check(case.traces[0], PID)
    assert check.offset == direction and check.words() in row["reason"]
    offset_ns = abs(truth["gpu_offset_ns"])
    if direction == "ahead":  # the host's launches onto an idle GPU: the generator's 2 µs latency plus the offset
        assert offset_ns <= check.floor_ns <= offset_ns + queued.DEPENDENCY_LATENCY_NS
        assert check.at_floor >= 29  # one a step at least: the first forward kernel, launched after the host's work
    else:  # an operation launched onto an idle GPU started the offset, less its call and latency, before its call
        assert offset_ns - queued.DEPENDENCY_LATENCY_NS < check.before_call_ns <= offset_ns
    # the lanes draw no dependency band either
    for window in analysis.series["timeline"]["windows"]:
        assert not any(cause == "dependency" for lane in window["devices"] for _, _, cause in lane["gaps"])


def test_without_the_check_the_offset_clock_misfires(tmp_path, monkeypatch):
    """What the check prevents: with the GPU clock 5 ms ahead and the check made to pass, the host's own gaps
    between steps become dependency waits, more than the generator built."""
    monkeypatch.setattr(queued, "clock_check", lambda trace, pid, mine=None, pairs=None: queued.ClockCheck(pid))
    _, analysis, truth, _ = _case(tmp_path / "unchecked", 5_000, seed="unchecked")
    claimed = analysis.data["devices"][0]["gaps"]["by_cause"].get("dependency", 0)
    assert claimed > truth["dependency"]["wait_ns"] + 29 * 200_000  # each step's >= 250 µs of host work taken too


def test_a_small_offset_under_the_latency_keeps_the_waits_exact(shifted):
    """20 µs: the host's launches still reach the idle GPU within 50 µs, so the test stands, and the waits
    (between two GPU times, both shifted alike) are the generator's to the nanosecond."""
    case, analysis, truth, _ = shifted[20]
    data = analysis.data
    assert _abstention(data) is None and queued.process_clock_check(case.traces[0], PID).offset is None
    assert data["devices"][0]["gaps"]["by_cause"]["dependency"] == truth["dependency"]["wait_ns"]
    assert data["findings"][0]["id"] == "dependency_wait"


def test_aligned_clocks_read_no_offset(tmp_path):
    case, analysis, _, _ = _case(tmp_path / "aligned", 0, seed="aligned")
    check = queued.process_clock_check(case.traces[0], PID)
    assert check.offset is None and check.before_call == 0 and check.floor_ns <= 2_000 and check.words() == ""
    assert _abstention(analysis.data) is None


def test_the_real_torchrec_clocks_agree():
    """HTA's TorchRec rank 0 (Kineto): no operation starts before its launch call, and long gaps end within the
    launch latency of their call: its dependency waits stand (test_real_distributed holds their size)."""
    path = real("kineto", "hta_torchrec_16rank_train_rank0.json.gz")
    trace = open_case([path]).traces[0]
    pid = int(trace.devices["pid"].iloc[0])
    check = queued.process_clock_check(trace, pid)
    assert check.pairs > 6000 and check.before_call == 0 and check.floor_ns < queued.DEPENDENCY_LATENCY_NS
    assert check.offset is None



def test_compare_and_batch_say_not_measured_for_the_offset_side(shifted, tmp_path):
    """Compare of aligned clocks against an offset capture: the dependency figure is n/a (not a fall to 0) and no
    mover; batch's summary share is None there."""
    from conftest import compare_contract

    from tracetriage.analyzers.compare import trend_record
    from tracetriage.analyzers.summary import headline_metrics

    gen_dependency.write_bundle(tmp_path / "aligned", "dependency:clock", 10_000)
    result = compare_contract(tmp_path / "aligned", shifted[5_000][3])
    dependency = next(metric for metric in result["metrics"] if metric["name"] == "idle_dependency_ms")
    assert dependency["before"] > 9 and dependency["after"] is None and dependency["direction"] == "n/a"
    assert not any(mover["component"] == "idle_dependency_ms" for mover in result["movers"])
    data = shifted[5_000][1].data
    assert headline_metrics(data)["idle_dependency_pct"] is None
    assert trend_record(data)["figures"]["idle_dependency_ms"] is None


@pytest.mark.parametrize("slice_rows", [1, 3, 64])
def test_the_check_and_the_queued_rows_do_not_depend_on_the_slices(shifted, slice_rows, monkeypatch):
    """The scan reads the GPU rows a slice at a time (queued.SLICE_ROWS: a 10M-row graph capture's temporaries
    are a slice's): the running end per device carried across slices gives every offset verdict, count, floor and
    queued row of one pass over the whole table (the default slice holds these captures whole)."""
    real_trace = open_case([real("kineto", "hta_torchrec_16rank_train_rank0.json.gz")]).traces[0]
    cases = [(shifted[offset][0].traces[0], PID) for offset in (5_000, -5_000, 20)]
    cases.append((real_trace, int(real_trace.devices["pid"].iloc[0])))
    for trace, pid in cases:
        queued._CHECKED.clear()
        whole = queued.process_clock_check(trace, pid), queued.queued_early(trace, pid)
        queued._CHECKED.clear()
        monkeypatch.setattr(queued, "SLICE_ROWS", slice_rows)
        sliced = queued.process_clock_check(trace, pid), queued.queued_early(trace, pid)
        monkeypatch.undo()
        queued._CHECKED.clear()
        assert sliced[0] == whole[0]
        assert all(a.tolist() == b.tolist() for a, b in zip(sliced[1], whole[1]))
    assert any(queued.queued_early(trace, pid)[0].size for trace, pid in cases)  # rows were there to compare
