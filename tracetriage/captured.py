"""When a capture was taken, as the capture itself records it: ``captured_utc_ns`` of the
analysis (the nsys session start, Kineto's ``baseTimeNanoseconds``, read by the parsers while
they parse). rocprof and RPD times are on a boot-time clock: no date. A date before 2001 is a
clock that was not the wall clock. One reading for the report's header and batch's
``capture_start_ns`` (trend's order); neither opens a capture again."""

from __future__ import annotations

WALL_CLOCK_MIN_NS = 978_307_200 * 10**9  # 2001-01-01


def capture_start_ns(data: dict) -> int | None:
    """The capture's wall-clock start (UTC ns) from an analysis, or None."""
    start = data.get("captured_utc_ns")
    return start if isinstance(start, int) and not isinstance(start, bool) and start > WALL_CLOCK_MIN_NS else None


def capture_start_utc(data: dict) -> str | None:
    import datetime

    start = capture_start_ns(data)
    if start is None:
        return None
    return datetime.datetime.fromtimestamp(start / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
