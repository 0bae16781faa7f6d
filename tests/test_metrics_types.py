"""The typed metrics (analyzers/metrics.py) and findings (analyzers/findings.py) against the JSON
contract (reports/analysis.schema.json): every key a type's to_contract() can write is declared in
the schema at that place, every property the schema declares there is written by the type, and the
types are frozen and survive the analysis cache's pickle."""

import dataclasses
import json
import pickle

import numpy as np
import pytest
from conftest import BUNDLES, ROOT

from tracetriage import open_case
from tracetriage.analyzers import metrics
from tracetriage.analyzers.analysis import analyze_trace

SCHEMA = json.loads((ROOT / "reports" / "analysis.schema.json").read_text())
DEVICE = SCHEMA["properties"]["devices"]["items"]
PROCESS = SCHEMA["properties"]["processes"]["items"]

# each contract type -> the schema object it writes
PLACES = {
    metrics.Window: SCHEMA["$defs"]["window"],
    metrics.DeviceMetrics: DEVICE,
    metrics.Gaps: DEVICE["properties"]["gaps"],
    metrics.Copies: DEVICE["properties"]["copies"],
    metrics.IdleByHost: DEVICE["properties"]["idle_by_host"],
    metrics.ProcessMetrics: PROCESS,
    metrics.StepStats: PROCESS["properties"]["steps"],
    metrics.CollectiveSkew: SCHEMA["properties"]["collective_skew"],
    metrics.LateRank: SCHEMA["properties"]["collective_skew"]["properties"]["late_rank"],
    metrics.Phases: SCHEMA["$defs"]["phases"],
    metrics.Phase: SCHEMA["$defs"]["phase"],
}


def test_every_contract_type_has_its_place_in_the_schema():
    types = {t for t in vars(metrics).values() if isinstance(t, type) and issubclass(t, metrics.Contract)
             and t is not metrics.Contract}
    assert types == set(PLACES)


@pytest.mark.parametrize("kind", list(PLACES), ids=lambda t: t.__name__)
def test_contract_keys_are_the_schema_properties(kind):
    place = PLACES[kind]
    keys = kind.contract_keys()
    declared = list(place["properties"])
    assert set(keys) - set(declared) == set(), f"{kind.__name__} writes keys the schema does not declare"
    assert set(declared) - set(keys) == set(), f"the schema declares keys {kind.__name__} never writes"
    assert set(place.get("required", [])) <= set(keys)
    assert place.get("additionalProperties") is False
    assert all(not k.startswith("_") for k in keys)


@pytest.fixture(scope="module")
def trace_metrics():
    case = open_case([BUNDLES / "tp4_island"])
    return analyze_trace(case.traces[0], 0, False, None)


def test_to_contract_writes_the_contract_keys_in_order(trace_metrics):
    device = trace_metrics.devices[0]
    assert list(device.to_contract()) == metrics.DeviceMetrics.contract_keys()
    assert list(device.gaps.to_contract()) == metrics.Gaps.contract_keys()
    process = trace_metrics.processes[0]
    assert list(process.to_contract()) == metrics.ProcessMetrics.contract_keys()
    window = trace_metrics.window.to_contract()
    assert list(window) == [k for k in metrics.Window.contract_keys() if k != "setup_cause" or window.get(k)]
    assert "slices" not in device.to_contract() and "long_steps" not in process.to_contract()


def test_the_metrics_are_frozen(trace_metrics):
    device = trace_metrics.devices[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        device.busy_pct = 0.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace_metrics.odd = []
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace_metrics.processes[0].long_steps = metrics.LongSteps()
    with pytest.raises(TypeError):  # no key look-ups: the rules and renderers read fields
        device["accounting"]
    assert not hasattr(device, "__dict__")  # slotted


def test_the_metrics_pickle(trace_metrics):
    again = pickle.loads(pickle.dumps(trace_metrics, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(again) is metrics.TraceMetrics
    assert [d.to_contract() for d in again.devices] == [d.to_contract() for d in trace_metrics.devices]
    assert [d.slices for d in again.devices] == [d.slices for d in trace_metrics.devices]
    assert all(np.array_equal(a.starts, b.starts) and np.array_equal(a.ends, b.ends)
               for a, b in zip(again.coll_calls, trace_metrics.coll_calls))
    assert again.processes == trace_metrics.processes and again.window == trace_metrics.window
    assert again.efficiency == trace_metrics.efficiency and again.odd == trace_metrics.odd


def test_finding_contract_is_the_schema_finding():
    """A Finding writes the schema's finding properties in order (``falsified`` only when ruled out), its
    Evidence the schema's evidence item, and both are frozen."""
    from tracetriage.analyzers.evidence import ev
    from tracetriage.analyzers.findings import Evidence, Finding

    place = SCHEMA["properties"]["findings"]["items"]
    row = ev("busy_pct", 12.5, "%", "window")
    finding = Finding(id="gpu_starved", axis="throughput", answers=("throughput",), severity="low", impact_pct=1.0,
                      impact_denominator="window", title="t", mechanism="m", fix="f", confirm="c", falsifier="x",
                      evidence=(row,))
    optional = ("falsified", "explains_pct")  # written only when set: ruled out; a share other than the impact
    assert list(finding.to_contract()) == [k for k in place["properties"] if k not in optional]
    ruled_out = dataclasses.replace(finding, falsified="why", explains_pct=2.0)
    assert list(ruled_out.to_contract()) == list(place["properties"])
    assert set(place["required"]) <= set(finding.to_contract())
    evidence_place = place["properties"]["evidence"]["items"]
    assert list(row.to_contract()) == list(evidence_place["properties"])
    assert isinstance(row, Evidence)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.severity = "high"
