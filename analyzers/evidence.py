"""Evidence items and the number formats findings use (shared by the trace and serving rules)."""

from __future__ import annotations

from tracetriage.analyzers.findings import Evidence


def us(ns) -> str:
    if ns is None:
        return "n/a"
    if ns >= 1_000_000:
        return f"{ns / 1e6:,.2f} ms"
    return f"{ns / 1e3:,.1f} µs"


def pct(x: float) -> str:
    """A percentage to one decimal that never rounds a value below 100 up to 100.0."""
    shown = f"{x:.1f}"
    if shown == "100.0" and x < 100.0:
        return "99.9%"
    return shown + "%"


def ms(x) -> str:
    """Milliseconds as serving figures are read: ``812.4 ms``, ``12.35 s`` from 10 s on."""
    if x is None:
        return "n/a"
    return f"{x / 1000:,.2f} s" if x >= 10_000 else f"{x:,.1f} ms"


def plural(n, word: str, words: str | None = None) -> str:
    return f"{n:,} {word if n == 1 else (words or word + 's')}"


def nbytes(n: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{int(n):,} B"


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
