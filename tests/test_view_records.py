"""The typed records the report's view is built from (tracetriage/records/) against the analysis
contract (reports/analysis.schema.json), and their generic loader (tracetriage/contract.py).

* Every property of every schema object a record types has a field, and every field is a property
  (or matches the object's ``patternProperties``); a difference is declared, with its reason, in the
  record's ``UNTYPED`` or in MAP_ENTRIES_NOT_TYPED below.
* The loader reads every value of a real analysis as the contract holds it (a number stays the same
  type), leaves the default for a key an older analysis lacks, and ignores keys it does not declare.
* The view's modules read fields, not string keys.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import re
import typing
from pathlib import Path

import pytest
from conftest import BUNDLES, ROOT

from tracetriage.contract import contract_key, field_keys, load
from tracetriage.records import AnalysisRecord, read
from tracetriage.records.efficiency import KernelClass
from tracetriage.records.serving import LengthStats, Replica, TpotFit
from tracetriage.records.trace import Device, Gaps, Window

SCHEMA = json.loads((ROOT / "reports" / "analysis.schema.json").read_text())

# Entries of a fixed-key object the records read as a map (dict[str, X]) that are not an X.
MAP_ENTRIES_NOT_TYPED = {
    "serving.latency.client.record": "the benchmark's record line (rate, concurrency, throughput), not a latency: "
                                     "the client latency table skips it",
}


def _resolve(node: dict) -> dict:
    """The object schema behind a $ref, or the object branch of a oneOf/anyOf."""
    if "$ref" in node:
        return _resolve(SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[-1]])
    for keyword in ("oneOf", "anyOf"):
        for branch in node.get(keyword, ()):
            resolved = _resolve(branch)
            if resolved.get("properties") or resolved.get("items") or resolved.get("additionalProperties"):
                return resolved
    return node


def _record_of(hint) -> tuple[str, type] | None:
    """('record' | 'items' | 'map', the record type) of a field's type hint, or None for a plain value."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, __import__("types").UnionType) and len(args) == 1:
        hint, args = args[0], list(typing.get_args(args[0]))
    if dataclasses.is_dataclass(hint):
        return "record", hint
    origin = typing.get_origin(hint)
    if origin is tuple and args and dataclasses.is_dataclass(args[0]):
        return "items", args[0]
    if origin is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):
        return "map", args[1]
    return None


def _differences(cls: type, node: dict, path: str, out: list[str], seen: set) -> None:
    """Every schema property of ``node`` without a field of ``cls`` and every field without a
    property, not declared; then the same for each nested record."""
    if (cls, path) in seen:
        return
    seen.add((cls, path))
    node = _resolve(node)
    properties = node.get("properties", {})
    patterns = [re.compile(p) for p in node.get("patternProperties", {})]
    untyped = getattr(cls, "UNTYPED", {})
    keys = field_keys(cls)
    out += [f"{path}.{name}: no field in {cls.__name__}" for name in properties
            if name not in keys and name not in untyped and "*" not in untyped]
    out += [f"{path}.{name}: {cls.__name__} field not in the schema" for name in keys
            if name not in properties and not any(p.match(name) for p in patterns)]
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        nested = _record_of(hints[field.name])
        name = contract_key(field)
        if not nested or name not in properties:
            continue
        how, record = nested
        sub = _resolve(properties[name])
        if how == "record":
            _differences(record, sub, f"{path}.{name}", out, seen)
        elif how == "items":
            _differences(record, sub["items"], f"{path}.{name}[]", out, seen)
        elif isinstance(sub.get("additionalProperties"), dict):
            _differences(record, sub["additionalProperties"], f"{path}.{name}{{}}", out, seen)
        else:  # a fixed-key object read as a map: each entry is one record
            for entry, entry_schema in sub.get("properties", {}).items():
                if f"{path}.{name}.{entry}".lstrip(".") not in MAP_ENTRIES_NOT_TYPED:
                    _differences(record, entry_schema, f"{path}.{name}.{entry}", out, seen)


def test_every_schema_property_has_a_field_and_every_field_a_property():
    out: list[str] = []
    _differences(AnalysisRecord, SCHEMA, "", out, set())
    assert out == []


def test_the_check_sees_a_missing_field():
    """A record without a field for a schema property fails the check (it cannot pass by not looking)."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class ShortWindow:
        start_ns: int | None = None

    out: list[str] = []
    _differences(ShortWindow, SCHEMA["properties"]["window"], ".window", out, set())
    assert ".window.end_ns: no field in ShortWindow" in out and ".window.source: no field in ShortWindow" in out


def _leaves(value, path=""):
    """(path, value) of every scalar of a contract dict."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _record_leaf(record, path: str):
    """The value at a contract path, read through the records' fields (and maps and tuples)."""
    node = record
    for step in re.findall(r"\.([^.\[]+)|\[(\d+)\]", path):
        name, index = step
        if index:
            node = node[int(index)]
        elif dataclasses.is_dataclass(node):
            node = getattr(node, field_keys(type(node))[name])
        else:
            node = node[name]
    return node


@pytest.mark.parametrize("bundle", ["eager_decode_pyspy", "tp8_cross_island", "serving_at_capacity", "graph_decode_rocpd"])
def test_the_loader_reads_every_value_as_the_contract_holds_it(bundle):
    import tracetriage
    from tracetriage.reports.jsonout import to_dict

    if not (BUNDLES / bundle).exists():
        pytest.skip(f"no bundle {bundle}")
    data = to_dict(tracetriage.analyze(f"samples/bundles/{bundle}"))
    record = read(data)
    checked = 0
    for path, value in _leaves(data):
        head = path.split(".")[1].split("[")[0]
        if head not in field_keys(AnalysisRecord):
            continue
        try:
            got = _record_leaf(record, path)
        except (AttributeError, KeyError):  # a key no record declares (a capture's printed engine settings)
            continue
        if value is None and got in ((), {}):  # a null list or map reads as an empty one
            continue
        assert got == value and type(got) is type(value), (path, got, value)
        checked += 1
    assert checked > 100


def test_an_older_analysis_reads_with_defaults_and_unknown_keys_are_ignored():
    record = read({"headline": "h", "devices": [{"id": "gpu0", "gaps": {"count": 3, "new_key": 1}}],
                   "efficiency": {"classes": [{"class": "gemm", "time_ns": 5}]}, "a_future_block": {"x": 1}})
    device = record.devices[0]
    assert device.gaps == Gaps(count=3) and device.accounting is None and device.copies is None
    assert record.window is None and record.findings == () and record.capture_kind.vendor is None
    assert record.efficiency.classes == (KernelClass(kernel_class="gemm", time_ns=5),)
    assert load(TpotFit, {}).model is True  # a fit saved before ``model`` was written is a model
    assert load(Replica, {"replica": "r"}).kv_usage_pct == ""  # a gauge the row does not hold prints empty
    assert load(Window, None) is None
    window = Window(start_ns=1)
    assert load(Window, window) is window  # a record passes as it is


def test_a_null_list_or_map_reads_as_an_empty_one():
    record = read({"nccl": None, "devices": [{"id": "gpu0", "collectives_by_op": None}]})
    assert record.nccl == () and record.devices[0].collectives_by_op == {}
    assert load(LengthStats, {"n": 2, "mean": 1.5, "lengths": None}).lengths == ()


def _string_key_lookups(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            found += 1
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            found += 1
    return found


@pytest.mark.parametrize("module", ["view.py", "device_view.py", "efficiency_view.py", "side_views.py", "roofline.py"])
def test_the_view_reads_fields_not_string_keys(module):
    """The view's modules read the records' fields; only the charts and the Perfetto hints still read the
    series (the timeline, busy and step data beside the contract) by key."""
    assert _string_key_lookups(ROOT / "reports" / module) == 0


def test_a_device_record_is_keyed_in_the_chart_cache():
    """The charts memoise on their arguments: a record is keyed by its fields, as its dict was."""
    from tracetriage.reports.chart_cache import _plain

    assert json.dumps(Device(id="gpu0"), default=_plain) == json.dumps(dataclasses.asdict(Device(id="gpu0")))


@pytest.mark.parametrize("bundle", ["eager_decode", "graph_decode", "dp2_late_rank"])
def test_the_timeline_names_the_median_step_by_the_tables_p50(bundle):
    """Trial item #18: the timeline's "median step" label and the process table print the steps' p50 by one
    rounding path; where the step drawn (with an even count, the upper of the two middle ones) reads
    otherwise, the label says both, each by its name."""
    import tracetriage
    from tracetriage.records.series import AnalysisSeries
    from tracetriage.reports.view import report_view
    from tracetriage.wording import fmt_ns

    analysis = tracetriage.analyze(f"samples/bundles/{bundle}")
    series = load(AnalysisSeries, analysis.series)
    label = series.timeline.windows[0].label
    match = re.fullmatch(r"median step \(pid (.+?), (.+?)(?:; p50 (.+))?\)", label)
    assert match, label
    rows = {row.pid.rsplit(":", 1)[-1]: row for row in report_view(analysis).processes}
    drawn, p50 = match.group(2), match.group(3) or match.group(2)  # the step drawn, the steps' p50 where it differs
    assert p50 == rows[match.group(1).rsplit(":", 1)[-1]].step_p50
    window = series.timeline.windows[0]
    assert drawn == fmt_ns(window.end - window.start)  # the step drawn, by its own length
