"""A collective whose ranks mostly wait for a late one is headlined by the late rank and what it did
before, not by the op's share of the window (issue 32 item 5): the generated dp2_late_rank (rank 1 sits
in a 5 ms log_metrics host range before each all-reduce) and the real 2xH100 capture (mfu_before, whose
collectives are under the dominant line); a collective without skew keeps its share title (tp8_cross_island
is headlined by its island, tp4_island by nothing collective)."""

from __future__ import annotations

from conftest import BUNDLES, ROOT

import tracetriage

REAL_NSYS = ROOT / "samples" / "real" / "nsys"


def _collective(data: dict) -> dict:
    return next(finding for finding in data["findings"] if finding["id"] == "collective_dominant")


def test_the_late_rank_and_its_host_range_are_the_headline():
    data = tracetriage.analyze([str(BUNDLES / "dp2_late_rank")]).data
    skew = data["collective_skew"]
    assert skew["wait_share_pct"] >= 50 and skew["late_rank"]["device"] == "GPU1/pid5001"
    assert data["headline"].startswith("[collective_dominant] Ranks wait for GPU1/pid5001 in their AllReduce: 71.9% "
                                       "of the matched collective time is waiting for it to start")
    assert "(skew p50 2.01 ms against its call's 399.5 µs)" in data["headline"]  # large against the call itself
    assert "meanwhile its GPU idled while its host was in log_metrics" in data["headline"]
    assert "(AllReduce 25.1% of the window, 25.1% not hidden by compute)" in _collective(data)["title"]


def test_the_real_captures_late_rank_says_what_it_ran_before():
    data = tracetriage.analyze([str(REAL_NSYS / "nsys2026.2_2xH100_mfu_before.sqlite")]).data
    title = _collective(data)["title"]
    assert title.startswith("Ranks wait for GPU1/pid145 in their collectives: 53.0% of the matched collective time")
    assert "; meanwhile its GPU was still running elementwise_kernel (" in title


def test_a_collective_without_skew_keeps_its_share_title():
    data = tracetriage.analyze([str(BUNDLES / "tp8_cross_island")]).data
    assert not any(finding["title"].startswith("Ranks wait for") for finding in data["findings"])
