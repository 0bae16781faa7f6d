"""Rules that no committed bundle exercises on both sides, on traces built in the test."""

import random
import sys

from conftest import ROOT
from tracetriage import analyze, open_case
from tracetriage.analyzers.rules import RULES, THRESHOLDS

sys.path.insert(0, str(ROOT / "samples"))
import generate  # noqa: E402


def test_pageable_memcpy_fires_on_pageable_readback(tmp_path):
    rng = random.Random(3)
    r = generate.Rank(pid=77, device=0)
    for _ in range(20):
        r.host(50 * generate.US)
        r.graph_launch(2_000 * generate.US)
        r.dtoh_sync(nbytes=4096, pageable=True)  # .cpu() into pageable memory
        r.host(int(rng.uniform(40, 60) * generate.US))
    generate.write_nsys(tmp_path / "t.sqlite", [r], "pageable")
    a = analyze(open_case([tmp_path / "t.sqlite"]))
    f = next(f for f in a.findings if f["id"] == "pageable_memcpy")
    assert "20 async copies" in f["title"] or f["evidence"][0]["value"] >= 19


def test_pageable_memcpy_does_not_fire_on_pinned(analyses):
    assert "pageable_memcpy" not in [f["id"] for f in analyses["eager_decode"].findings]
    assert "pageable_memcpy" not in [f["id"] for f in analyses["healthy"].findings]


def test_every_threshold_has_a_reason():
    assert all(isinstance(v, tuple) and len(v) == 2 and v[1] for v in THRESHOLDS.values())
    assert [name for name, _ in RULES] == [
        "launch_bound", "host_sync_per_step", "pageable_memcpy", "collective_dominant",
        "cross_island_collective", "python_host_overhead", "nccl_errors", "prefill_stall",
    ]
