"""The analysis options a user gives, checked once for the CLI and the Python API alike:
the same rules, the same one-line messages (a :class:`~tracetriage.errors.UsageError`, which is
also a ``ValueError`` for code that catches that)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from tracetriage.analyzers.catalog import AXES

SLO_KEYS = [f"{m}_{q}_ms" for m in ("ttft", "tpot", "itl", "e2e") for q in ("p50", "p90", "p95", "p99")]


def check_symptom(symptom: str | None) -> str | None:
    """None, or one of the axes."""
    from tracetriage.errors import UsageError

    if symptom is None:
        return None
    if not isinstance(symptom, str) or symptom not in AXES:
        raise UsageError(None, f"--symptom: unknown symptom {symptom!r}; valid names: {', '.join(AXES)}")
    return symptom


def check_slo(slo) -> dict[str, float]:
    """Budgets in ms from ``"ttft_p95_ms=800,tpot_p95_ms=50"`` (the CLI's text) or a mapping
    ``{"tpot_p95_ms": 50}``; unknown names and non-positive or non-numeric values are refused."""
    from tracetriage.errors import UsageError

    if slo is None:
        return {}
    if isinstance(slo, str):
        pairs = []
        for part in filter(None, (p.strip() for p in slo.split(","))):
            key, sep, value = part.partition("=")
            pairs.append((key.strip(), value.strip() if sep else None))
    elif isinstance(slo, Mapping):
        pairs = list(slo.items())
    else:
        raise UsageError(None, f"--slo: budgets are 'name=ms,...' or a mapping of name to ms, not {type(slo).__name__}")
    out: dict[str, float] = {}
    for key, value in pairs:
        if key not in SLO_KEYS:
            raise UsageError(None, f"--slo: unknown budget {key!r}; valid names: {', '.join(SLO_KEYS)}")
        try:
            number = float(value) if not isinstance(value, bool) else math.nan
        except (TypeError, ValueError):
            number = math.nan
        if not number > 0 or math.isinf(number):
            shown = "" if value is None else str(value)  # one message whether it came as text or as a number
            raise UsageError(None, f"--slo: {key} needs a positive number of milliseconds (got {shown!r})")
        out[key] = number
    return out
