"""Evidence items and the severity of an impact (the number formats are tracetriage.wording's)."""

from __future__ import annotations

from tracetriage.analyzers.findings import Evidence


def ev(name, value, unit="", denominator=None, text=None) -> Evidence:
    """One evidence item: value with unit and denominator (None where none applies), and a sentence."""
    shown = f"{value:,.1f}".rstrip("0").rstrip(".") if isinstance(value, float) else value
    return Evidence(
        name=name,
        value=value,
        unit=unit,
        denominator=denominator,
        text=text or f"{name.replace('_', ' ')}: {shown}{'%' if unit == '%' else (' ' + unit) if unit else ''}"
        + (f" (of {denominator})" if denominator else ""),
    )


def severity_for(impact: float) -> str:
    if impact >= 25:
        return "high"
    if impact >= 10:
        return "medium"
    if impact >= 2:
        return "low"
    return "info"
