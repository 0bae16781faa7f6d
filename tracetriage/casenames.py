"""How a case is named by the user: one rule for trend's --baseline, shared by the trend analyzer,
the API's checks of the option and the trend view's gate line. Depends on no layer."""

from __future__ import annotations


def matches_baseline(name: str, baseline: str) -> bool:
    """A case named by --baseline: the name itself, or a folder above it (``nightly-2026-11-02``
    for ``nightly-2026-11-02/trace.sqlite``); ``run-1`` never matches ``run-10``."""
    return name == baseline or name.startswith(baseline.rstrip("/") + "/")
