"""Numbers and counts in words, as every output writes them: durations, percentages, serving
milliseconds, byte sizes, plurals, and one --slo budget check. The rules write evidence with these
and the reports show figures with them, so one figure reads the same everywhere; they depend on no
layer (plain values in, text out)."""

from __future__ import annotations


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


def slo_text(check: dict) -> str:
    """One budget in words: 'TTFT p95 249.3 ms > budget 100 ms: broken (benchmark (client))'."""
    what = f"{check['metric'].upper()} {check['percentile']}"
    if check["status"] == "not_measured":
        return f"{check['budget']}={check['limit_ms']:g}: unchecked ({check['source']})"
    sign = ">" if check["status"] == "broken" else "<="
    return f"{what} {ms(check['measured_ms'])} {sign} budget {check['limit_ms']:g} ms: {check['status']} ({check['source']})"
