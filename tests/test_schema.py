"""The JSON contract (reports/analysis.schema.json) is closed and describes what is emitted (issue 26 item 9).

* The schema is closed: every object schema has ``additionalProperties`` false (or a typed value
  schema, for maps keyed by names), and every declared property has a description (its unit
  and denominator).
* Every output validates against it: every bundle (each --symptom on a trace and a serving
  bundle, the serving bundles with their --slo), every real capture of samples/real and of the
  project's ../shared/samples/real when it is there (each file alone; the serving and rocprof
  folders whole), the H200 samples with their topology, and a case of several traces. An input
  that is not analyzable alone must say so with a one-line error, not write a JSON.
* A valid output with one unknown key added anywhere nested fails.

Beside these, tests/conftest.py checks every analysis any test makes in-process and every
analysis JSON the CLI writes through ``run_cli``.
"""

import copy
import json

import pytest
from conftest import BUNDLES, REAL, REAL_SHARED, REAL_SKIP, ROOT, TRUTH, assert_valid_analysis, schema_errors

from tracetriage.errors import TraceTriageError
from tracetriage.reports.jsonout import to_dict

SCHEMA = json.loads((ROOT / "reports" / "analysis.schema.json").read_text())
AXES = ("throughput", "utilization", "tail", "ttft", "tpot", "oom", "cost", "quality")
H200 = ROOT / "samples" / "h200"


def _is_object_schema(node: dict) -> bool:
    t = node.get("type")
    return t == "object" or (isinstance(t, list) and "object" in t) or "properties" in node or "patternProperties" in node


def _walk(node, path, visit):
    """Every subschema with its path (keywords that hold no schema are not entered)."""
    if isinstance(node, list):
        for i, x in enumerate(node):
            _walk(x, f"{path}[{i}]", visit)
        return
    if not isinstance(node, dict):
        return
    visit(node, path)
    for key, value in node.items():
        if key in ("properties", "$defs", "patternProperties"):
            for name, sub in value.items():
                _walk(sub, f"{path}.{name}", visit)
        elif key not in ("enum", "const", "required", "description", "examples", "default"):
            _walk(value, f"{path}/{key}", visit)


def test_the_schema_is_closed_and_every_key_described():
    import jsonschema

    jsonschema.validators.validator_for(SCHEMA).check_schema(SCHEMA)
    open_objects, undescribed, counts = [], [], {"objects": 0, "properties": 0}

    def visit(node, path):
        if _is_object_schema(node):
            counts["objects"] += 1
            extra = node.get("additionalProperties")
            if not (extra is False or isinstance(extra, dict)):
                open_objects.append(path)
        for name, sub in (node.get("properties") or {}).items():
            counts["properties"] += 1
            if not (isinstance(sub, dict) and len(sub.get("description", "")) >= 8):
                undescribed.append(f"{path}.{name}")

    _walk(SCHEMA, "$", visit)
    assert not open_objects, f"object schemas without additionalProperties (false or a typed value): {open_objects}"
    assert not undescribed, f"properties without a description (unit and denominator): {undescribed}"
    assert counts["objects"] > 60 and counts["properties"] > 400, counts  # the whole contract, not a stub


def test_every_finding_id_of_the_catalog_is_in_the_schema():
    from tracetriage.analyzers.catalog import CATALOG

    ids = set(SCHEMA["properties"]["findings"]["items"]["properties"]["id"]["enum"])
    variants = ("_nccl", "_itl", "_serving", "_late_rank", "_caveat")  # entries that emit their base id
    emitted = {k for k in CATALOG if not k.endswith(variants)}
    assert emitted <= ids, emitted - ids


# --- every output of the suite's inputs ------------------------------------------------------

def _cases():
    cases = [pytest.param([BUNDLES / n], {}, id=f"bundle-{n}") for n in sorted(p.name for p in BUNDLES.iterdir() if p.is_dir())]
    cases += [pytest.param([BUNDLES / "eager_decode_pyspy"], {"symptom": s}, id=f"symptom-{s}-eager_decode_pyspy") for s in AXES]
    cases += [pytest.param([BUNDLES / "serving_at_capacity"], {"symptom": s}, id=f"symptom-{s}-serving_at_capacity")
              for s in AXES]
    for t in sorted(TRUTH.glob("serving_*.json")):
        slo = json.loads(t.read_text()).get("slo")
        if slo and (BUNDLES / t.stem).is_dir():
            cases.append(pytest.param([BUNDLES / t.stem], {"slo": slo}, id=f"slo-{t.stem}"))
    cases.append(pytest.param([BUNDLES / "tp8_cross_island", BUNDLES / "eager_decode_pyspy"], {}, id="several-traces"))
    cases += [pytest.param([f, H200 / "topo_h200.txt"], {}, id=f"h200-{f.name}") for f in sorted(H200.glob("*.json.gz"))]
    for fmt in sorted(p for p in REAL.iterdir() if p.is_dir()):
        cases += [pytest.param([f], {}, id=f"real-{fmt.name}-{f.name}") for f in sorted(fmt.iterdir()) if f.name != "SOURCES.md"]
        if fmt.name in ("serving", "rocprof"):
            cases.append(pytest.param([fmt], {}, id=f"real-{fmt.name}-folder"))
    if not REAL_SHARED.is_dir():
        cases.append(pytest.param(None, {}, id="real-shared-collection"))
    return cases


@pytest.mark.parametrize("paths, options", _cases())
def test_every_output_validates_against_the_closed_schema(paths, options):
    if paths is None:
        pytest.skip(f"{REAL_SKIP}: the outputs of the rest of the collection are checked where it is present")
    from tracetriage.api import analyze

    try:
        a = analyze(paths, **options)
    except TraceTriageError as exc:  # not analyzable alone (a statistics CSV, a CPU-only trace): one line, no JSON
        assert str(exc) and "\n" not in str(exc).strip(), exc
        return
    doc = json.loads(a.to_json())
    assert_valid_analysis(doc, ", ".join(p.name for p in paths))
    assert doc == to_dict(a)  # the text written is the contract checked


# --- an unknown key anywhere fails ----------------------------------------------------------

def _places(doc):
    """Objects of a valid output where an unknown key must be refused: the top level, a device, its
    gaps and by_cause, its accounting, a process and its steps, a finding and its evidence, an
    abstention, the efficiency block, an input and its counts."""
    out = [("top level", doc), ("devices[0]", doc["devices"][0]), ("devices[0].gaps", doc["devices"][0]["gaps"]),
           ("devices[0].gaps.by_cause", doc["devices"][0]["gaps"]["by_cause"]),
           ("devices[0].gaps.top[0]", doc["devices"][0]["gaps"]["top"][0]),
           ("devices[0].copies", doc["devices"][0]["copies"]), ("devices[0].accounting", doc["devices"][0]["accounting"]),
           ("processes[0]", doc["processes"][0]), ("processes[0].steps", doc["processes"][0]["steps"]),
           ("findings[0]", doc["findings"][0]) if doc["findings"] else None,
           ("findings[0].evidence[0]", doc["findings"][0]["evidence"][0]) if doc["findings"] else None,
           ("abstentions[0]", doc["abstentions"][0]) if doc["abstentions"] else None,
           ("window", doc["window"]), ("windows[0]", doc["windows"][0]), ("copies", doc["copies"]),
           ("inputs[0]", doc["inputs"][0]),
           ("inputs[].counts", next(i["counts"] for i in doc["inputs"] if i["counts"])),
           ("capture_kind", doc["capture_kind"]),
           ("efficiency", doc["efficiency"]) if doc.get("efficiency") else None]
    return [p for p in out if p is not None and isinstance(p[1], dict)]


@pytest.mark.parametrize("bundle", ["eager_decode_pyspy", "tp4_island", "serving_at_capacity"])
def test_an_unknown_key_nested_anywhere_fails(bundle, analyses):
    from tracetriage.api import analyze

    doc = to_dict(analyses[bundle]) if bundle in analyses else to_dict(analyze(BUNDLES / bundle))
    assert not schema_errors(doc)
    places = {"eager_decode_pyspy": lambda d: _places(d) + [("host_profile", d["host_profile"]),
                                                            ("hot_frames[0]", d["hot_frames"][0])],
              "tp4_island": lambda d: _places(d) + [("topology", d["topology"]), ("nccl[0]", d["nccl"][0]),
                                                    ("topology.crossing_groups[0]", d["topology"]["crossing_groups"][0])],
              "serving_at_capacity": lambda d: [("top level", d), ("serving", d["serving"]),
                                                ("serving.latency.client", d["serving"]["latency"]["client"]),
                                                ("serving.littles_law", d["serving"]["littles_law"]),
                                                ("serving.bench[0]", d["serving"]["bench"][0]),
                                                ("serving.config", d["serving"]["config"]),
                                                ("findings[0]", d["findings"][0])]}[bundle]
    n = len(places(doc))
    for i in range(n):
        bad = copy.deepcopy(doc)
        where, target = places(bad)[i]
        target["not_in_the_contract"] = 1
        errors = schema_errors(bad)
        assert errors and any("not_in_the_contract" in e for e in errors), f"an unknown key in {where} passed"


def test_a_wrong_type_or_unknown_map_key_fails(analyses):
    doc = to_dict(analyses["eager_decode"])
    for mutate in (lambda d: d["devices"][0]["gaps"].__setitem__("count", "many"),
                   lambda d: d["devices"][0]["gaps"]["by_cause"].__setitem__("gremlins", 5),
                   lambda d: d["devices"][0]["accounting"]["slices_pct"].__setitem__("idle:odd:host", 1.0),
                   lambda d: d["processes"][0]["steps"].__setitem__("source", "guess"),
                   lambda d: d.__setitem__("slo", {"ttft_p42_ms": 5.0}),
                   lambda d: d.__setitem__("headline_by_axis", {"speed": "x"})):
        bad = copy.deepcopy(doc)
        mutate(bad)
        assert schema_errors(bad), mutate
