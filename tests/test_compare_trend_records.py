"""The typed records of the comparison and trend contracts (tracetriage/records/compare.py, trend.py)
against their schemas (reports/compare.schema.json, reports/trend.schema.json), as
tests/test_view_records.py checks the analysis records:

* every property of every schema object a record types has a field, and every field is a property; a
  difference is declared, with its reason, below;
* the loader reads every value of a real comparison and of a trend as the contract holds it;
* the compare and trend views and the trend charts read fields, not string keys.
"""

from __future__ import annotations

import dataclasses
import json
import re
import typing

import pytest
from conftest import BUNDLES, ROOT
from test_view_records import _leaves, _record_of, _string_key_lookups

from tracetriage.contract import contract_key, field_keys
from tracetriage.records import compare as compare_records
from tracetriage.records import trend as trend_records

SCHEMAS = {name: json.loads((ROOT / "reports" / f"{name}.schema.json").read_text()) for name in ("compare", "trend")}

# Objects of a schema whose record is checked elsewhere: path -> reason.
CHECKED_ELSEWHERE = {
    ".serving.quality": "the analysis contract's finding (records.findings.Finding), checked against "
                        "analysis.schema.json by tests/test_view_records.py",
}
# Fields of a record that are no property of the object read: (record, contract key) -> reason.
FIELDS_NOT_IN_SCHEMA = {
    ("ComparisonRecord", "_series"): "each side's step durations, kept beside the contract for the HTML chart, never written",
    ("LengthStats", "max"): "the analysis's length record; compare writes five of its keys per side",
    ("LengthStats", "lengths"): "the analysis's length record; compare writes five of its keys per side",
}


def _resolve(schema: dict, node: dict) -> dict:
    """The object schema behind a $ref, or the object branch of a oneOf/anyOf."""
    if "$ref" in node:
        return _resolve(schema, schema["$defs"][node["$ref"].rsplit("/", 1)[-1]])
    for keyword in ("oneOf", "anyOf"):
        for branch in node.get(keyword, ()):
            resolved = _resolve(schema, branch)
            if resolved.get("properties") or resolved.get("items") or resolved.get("additionalProperties"):
                return resolved
    return node


def _differences(schema: dict, cls: type, node: dict, path: str, out: list[str]) -> None:
    """Every schema property of ``node`` without a field of ``cls`` and every field without a property,
    not declared; then the same for each nested record."""
    if path in CHECKED_ELSEWHERE:
        return
    node = _resolve(schema, node)
    properties = node.get("properties", {})
    keys = field_keys(cls)
    out += [f"{path}.{name}: no field in {cls.__name__}" for name in properties if name not in keys]
    out += [f"{path}.{name}: {cls.__name__} field not in the schema" for name in keys
            if name not in properties and (cls.__name__, name) not in FIELDS_NOT_IN_SCHEMA]
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        nested, name = _record_of(hints[field.name]), contract_key(field)
        if not nested or name not in properties:
            continue
        how, record = nested
        sub = _resolve(schema, properties[name])
        if how == "record":
            _differences(schema, record, sub, f"{path}.{name}", out)
        elif how == "items":
            _differences(schema, record, sub["items"], f"{path}.{name}[]", out)
        else:
            _differences(schema, record, sub["additionalProperties"], f"{path}.{name}{{}}", out)


@pytest.mark.parametrize("name, record", [("compare", compare_records.ComparisonRecord), ("trend", trend_records.TrendRecord)])
def test_every_schema_property_has_a_field_and_every_field_a_property(name, record):
    out: list[str] = []
    _differences(SCHEMAS[name], record, SCHEMAS[name], "", out)
    assert out == []


def test_the_check_sees_a_missing_and_an_extra_field():
    """A record without a field for a schema property, or with one the schema lacks, fails the check."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class ShortGate:
        regressed: bool = False
        verdict: str = ""

    out: list[str] = []
    _differences(SCHEMAS["trend"], ShortGate, SCHEMAS["trend"]["properties"]["gate"], ".gate", out)
    assert ".gate.groups: no field in ShortGate" in out and ".gate.verdict: ShortGate field not in the schema" in out


def _record_leaf(record, path: str):
    """The value at a contract path, read through the records' fields (and maps and tuples)."""
    node = record
    for name, index in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        if index:
            node = node[int(index)]
        elif dataclasses.is_dataclass(node):
            node = getattr(node, field_keys(type(node))[name])
        else:
            node = node[name]
    return node


def _check_leaves(data: dict, record) -> int:
    checked = 0
    for path, value in _leaves(data):
        got = _record_leaf(record, path)
        if value is None and got in ((), {}):  # a null list or map reads as an empty one
            continue
        assert got == value and type(got) is type(value), (path, got, value)
        checked += 1
    return checked


@pytest.mark.parametrize("before, after", [("eager_decode", "graph_decode"), ("serving_at_capacity", "serving_healthy")])
def test_the_loader_reads_every_value_of_a_comparison_as_the_contract_holds_it(before, after):
    import tracetriage
    from tracetriage.analyzers.compare import compare

    if not (BUNDLES / before).exists() or not (BUNDLES / after).exists():
        pytest.skip(f"no bundle {before} or {after}")
    paths = f"samples/bundles/{before}", f"samples/bundles/{after}"
    data = compare(tracetriage.analyze(paths[0]).data, tracetriage.analyze(paths[1]).data, *paths)
    record = compare_records.read(data)
    assert record.step_series is not None and record.step_series.before == data["_series"]["before"]
    public = {key: value for key, value in data.items() if not key.startswith("_")}
    assert _check_leaves(public, record) > 50


def test_the_loader_reads_every_value_of_a_trend_as_the_contract_holds_it():
    from test_view_parity_compare_trend import trend_contract

    data = trend_contract()
    record = trend_records.read(data)
    assert _check_leaves(data, record) > 50
    assert [change.metric for change in record.changes_of(record.groups[0])] == [
        change["metric"] for change in data["changes"] if change["group"] == data["groups"][0]["key"]]


def test_a_saved_comparison_reads_without_the_private_series_and_with_defaults():
    record = compare_records.read({"verdict": "improved", "work_rate": None, "serving": {"engines": "vllm"}})
    assert record.step_series is None and record.work_rate is None and record.step_time == ()
    assert record.serving.quality is None and record.serving.load.before.request_rate is None


def test_a_kernel_not_measured_on_a_side_grows_from_zero():
    kernel = trend_records.MovedKernel(name="gemm", after_ms_per_step=0.5)
    assert kernel.growth_ms_per_step == 0.5


@pytest.mark.parametrize("module", ["compare_view.py", "compare_deploy_view.py", "compare.py", "trend_view.py", "trend.py"])
def test_the_compare_and_trend_reports_read_fields_not_string_keys(module):
    assert _string_key_lookups(ROOT / "reports" / module) == 0


def test_a_null_interval_stays_not_measured():
    """An interval the contract writes null is None in the record (not the empty list a null list reads as),
    so the view says it was not measured."""
    from tracetriage.reports.compare_across_view import _across_row
    from tracetriage.reports.compare_view import _device_rate

    row = compare_records.read({"across_devices": {"classes": [{"what": "gemm", "ratio": 1.2, "ci95": None,
                                                                "normalised_ci95": None}]}}).across_devices.classes[0]
    assert row.ci95 is None and _across_row(row, "step").interval == "noise not measured"
    device = compare_records.DeviceRate(device="gpu0", ratio=1.1, ci95=[1.0, 1.2], rate_ci95=None)
    view = _device_rate(device)
    # ratios print to two decimals (test_trial43)
    assert (view.ci_low, view.ci_high, view.rate_ci_low, view.rate_ci_high) == ("1.00", "1.20", None, None)
