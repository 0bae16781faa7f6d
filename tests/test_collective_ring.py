"""cross_island_collective claims what the re-layout removes (issue 38, item 30), not all the collective time.

A ring collective's time is set by its slowest hop, so the same collectives inside one island take the
measured time x (the ring's slowest link's bandwidth / the island's link's). The generated topology
matrices below put a known link class between islands of a known NVLink width; the expected share is
computed here from the generator's truth (samples/truth: each rank's collective share) and the link
classes written into the matrix, not read back from the analysis.
"""

import json
import shutil

import numpy as np
import pytest
from conftest import BUNDLES, truth

from tracetriage import analyze
from tracetriage.analyzers import topology as analysis
from tracetriage.parsers import topology

LEGEND = ["", "Legend:", "", "  X    = Self", "  NV#  = Connection traversing a bonded set of # NVLinks", ""]


def matrix(n: int, island: int, inside: str, between: str, odd: dict | None = None) -> str:
    """An ``nvidia-smi topo -m`` of ``n`` GPUs in islands of ``island`` GPUs: ``inside`` between GPUs of one island,
    ``between`` across islands; ``odd`` overrides single pairs ({(a, b): cell})."""
    odd = odd or {}
    lines = ["\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    for a in range(n):
        cells = [" X " if a == b else odd.get((min(a, b), max(a, b)), inside if a // island == b // island else between)
                 for b in range(n)]
        node = a // island
        lines.append(f"GPU{a}\t" + "\t".join(cells) + f"\t{node * 8}-{node * 8 + 7}\t{node}\t\tN/A")
    return "\n".join(lines + LEGEND)


def _model(text: str, group: list[int]):
    topo = topology.parse("<generated>", text)
    summary = analysis.summary(topo, [group])
    return analysis.ring_model(summary["links"], summary["islands"], group)


def _nominal(cell: str) -> float:
    """The generated cell's bandwidth from its class: NV# links at the per-link figure, PCIe classes at the PCIe one."""
    if cell.startswith("NV"):
        return int(cell[2:]) * analysis.NVLINK_GBPS_PER_LINK
    return analysis.LINK_GBPS[cell]


@pytest.mark.parametrize(("inside", "between"), [("NV18", "SYS"), ("NV4", "PIX"), ("NV12", "NODE"), ("NV2", "PHB")])
def test_a_ring_over_islands_runs_at_the_slow_link(inside, between):
    model = _model(matrix(8, 4, inside, between), list(range(8)))
    assert (model.ring_link, model.island_link) == (between, inside)
    assert model.island_fraction == pytest.approx(_nominal(between) / _nominal(inside))


def test_a_group_inside_one_island_costs_nothing():
    model = _model(matrix(8, 4, "NV18", "SYS"), [0, 1, 2, 3])
    assert model.ring_link == model.island_link == "NV18" and model.island_fraction == 1.0


def test_one_slow_pair_a_ring_can_avoid_is_not_the_bottleneck():
    """GPU0-GPU3 over PIX inside an otherwise NV4 island: the ring 0-1-3-2-0 uses no PIX hop, so the group's
    slowest needed link stays NV4 and the finding would claim nothing."""
    model = _model(matrix(4, 4, "NV4", "SYS", odd={(0, 3): "PIX"}), [0, 1, 2, 3])
    assert model.ring_link == "NV4" and model.island_fraction == 1.0


def test_a_link_without_a_bandwidth_figure_leaves_the_model_unknown():
    assert _model(matrix(8, 4, "MX", "NODE"), list(range(8))) is None


def _finding(result, finding_id):
    return next(found for found in result.findings if found["id"] == finding_id)


def _evidence(found, name):
    return next(row for row in found["evidence"] if row["name"] == name)


@pytest.mark.parametrize(("inside", "between"), [("NV18", "SYS"), ("NV4", "PXB")])
def test_the_impact_is_the_excess_over_one_island(tmp_path, inside, between):
    """The tp8 bundle's trace and NCCL log on a generated node: the claim is each rank's collective share times
    (1 - slow/fast), the headline still says the measured collective share."""
    case = tmp_path / "tp8"
    shutil.copytree(BUNDLES / "tp8_cross_island", case)
    (case / "topo.txt").write_text(matrix(8, 4, inside, between))
    result = analyze([str(case / name) for name in ("trace.sqlite", "topo.txt", "nccl.log")])
    found = _finding(result, "cross_island_collective")
    shares = [device["collective_share_pct"] for device in truth("tp8_cross_island")["devices"]]
    removable = float(np.mean(shares)) * (1.0 - _nominal(between) / _nominal(inside))
    assert found["impact_pct"] == pytest.approx(removable, abs=0.1)
    assert found["impact_pct"] < float(np.mean(shares)) - 1.0
    assert _evidence(found, "recoverable_pct")["value"] == pytest.approx(found["impact_pct"], abs=0.01)
    # the measured share and the removable part, named apart (test_trial43 item 2)
    assert found["explains_pct"] == pytest.approx(float(np.mean(shares)), abs=0.1)
    assert f"takes {found['explains_pct']:.1f}% of the window" in result.headline
    assert f"of which the fix removes about {found['impact_pct']:.1f}%" in result.headline
    model_text = _evidence(found, "recoverable_pct")["text"]
    assert between in model_text and inside in model_text and "slowest hop" in model_text
    assert f"removes about {found['impact_pct']:.1f}%" in found["title"]


def test_the_bundle_claims_less_than_its_collective_time_and_tp4_is_the_yardstick():
    """tp8 over two islands: impact below its collective share, the rest left unclaimed; tp4 in one island has no
    cross-island finding at all."""
    tp8 = analyze(str(BUNDLES / "tp8_cross_island"))
    found = _finding(tp8, "cross_island_collective")
    data = json.loads(tp8.to_json())
    for device in data["devices"]:
        claims = device["accounting"]["claims_pct"]
        assert claims["cross_island_collective"] < device["collective_share_pct"]
        assert "collective" in device["accounting"]["unclaimed_pct"]
    assert found["severity"] == "high"
    tp4 = analyze(str(BUNDLES / "tp4_island"))
    assert all(found["id"] != "cross_island_collective" for found in tp4.findings)
