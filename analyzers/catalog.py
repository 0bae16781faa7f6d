"""The findings catalog (``findings.toml``) and the capture commands (``capture_hints.toml``):
the prose of each finding and of each capture hint, read once at import.

Rules compute metrics and evidence; :func:`make` turns them into a finding by filling
the catalog's texts with the rule's fields. The axis of a finding comes from the
catalog too, so a finding's id, axis and words are kept in one reviewable place.
"""

from __future__ import annotations

from pathlib import Path

from tracetriage.analyzers.findings import Finding
from tracetriage.analyzers.tomlfiles import read_toml

AXES = ("throughput", "utilization", "tail", "ttft", "tpot", "oom", "cost", "quality")
SEVERITIES = ["info", "low", "medium", "high"]
TEXTS = ("title", "mechanism", "fix", "confirm", "falsifier")

CATALOG: dict[str, dict] = read_toml(Path(__file__).with_name("findings.toml"))
CAPTURE_HINTS: dict[str, dict] = read_toml(Path(__file__).with_name("capture_hints.toml"))


def axis_of(finding_id: str) -> str:
    return CATALOG[finding_id]["axis"]


def answers_of(finding_id: str) -> list[str]:
    """The symptoms a finding explains, its primary axis first (``answers`` in the catalog)."""
    entry = CATALOG[finding_id]
    return list(entry.get("answers") or [entry["axis"]])


def answers(finding: Finding, symptom: str) -> bool:
    """Whether a finding explains the symptom the user named (its axis or a further answer)."""
    return symptom in (finding.answers or [finding.axis])


for _id, _entry in CATALOG.items():  # a catalog mistake fails at import, in every test
    if "axis" in _entry and _entry.get("answers") and _entry["answers"][0] != _entry["axis"]:
        raise ValueError(f"findings.toml [{_id}]: answers must list the axis ({_entry['axis']}) first")
    if _entry.get("falsified_when"):
        from tracetriage.analyzers.conditions import parse as _parse

        _parse(_entry["falsified_when"])


def capture_text(table: str, key: str) -> str:
    """The capture hint ``key`` of ``table`` in capture_hints.toml, on one line."""
    return " ".join(CAPTURE_HINTS[table][key].split())


def variant_order(variant: str | None, kind: dict) -> list[str]:
    """The variant names a text is looked up by, most specific first: the rule's own (the
    evidence called for it: --enforce-eager, a blocking copy), then the capture's kind
    (training_rocm, training, python_rocm, native, rocm ...), then default."""
    vendor, workload, language = kind.get("vendor"), kind.get("workload"), kind.get("language")
    names = [variant, workload and vendor and f"{workload}_{vendor}", workload, language and vendor and f"{language}_{vendor}",
             language, vendor, "default"]
    return [name for name in names if name]


def _text(entry: dict, key: str, variant: str | None, kind: dict) -> str:
    """The text ``key`` of a catalog entry; of a text with variants, the first of variant_order."""
    value = entry[key]
    if isinstance(value, dict):
        value = next(value[name] for name in variant_order(variant, kind) if name in value)
    return value


def falsified(finding: dict, facts: dict) -> str | None:
    """Why the capture already meets this finding's falsifier (``falsified_when`` in the catalog,
    a condition over ``ev`` — the finding's evidence by name — and the ``facts`` of the capture:
    ``config``, ``trace``, ``serving``, ``threshold``, ``kind``: rules/falsify.py facts), or None. Evaluated
    by analyzers/conditions.py; a figure nobody measured never meets a condition."""
    from tracetriage.analyzers import conditions

    entry = CATALOG.get(finding.id) or {}
    cond = entry.get("falsified_when")
    if not cond:
        return None
    names = {"ev": {row.name: row.value for row in finding.evidence}, **facts}
    if conditions.holds(cond, names):
        why = str(entry.get("falsified_why") or f"its falsifier holds: {cond}")
        try:  # a reason may quote the finding's evidence: {ev[name]} is that row's value
            why = why.format_map({"ev": {row.name: row.value for row in finding.evidence}})
        except (KeyError, IndexError, ValueError):
            pass
        return " ".join(why.split())
    return None


def make(finding_id: str, impact: float, fields: dict, evidence: list[dict], *, severity: str,
         denominator: str, kind: dict, variant: str | None = None, entry: str | None = None,
         explains: float | None = None) -> Finding:
    """One finding: the catalog's texts for ``entry`` (default: the id) filled with ``fields``, each
    text's variant chosen for the rule's ``variant`` and the capture's ``kind`` (variant_order);
    ``explains`` the measured share it explains when more than its ``impact`` (Finding.explains_pct)."""
    texts = CATALOG[entry or finding_id]
    words = {key: " ".join(_text(texts, key, variant, kind).format_map(fields).split()) for key in TEXTS}
    return Finding(id=finding_id, axis=texts["axis"], answers=tuple(texts.get("answers") or [texts["axis"]]),
                   severity=severity, impact_pct=round(float(max(0.0, min(100.0, impact))), 2),
                   impact_denominator=denominator, evidence=tuple(evidence),
                   explains_pct=round(float(max(0.0, min(100.0, explains))), 2) if explains is not None else None, **words)
