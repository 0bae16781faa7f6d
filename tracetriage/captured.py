"""When a capture was taken, as the capture itself records it (one function for the report's
header and batch's capture_start_ns, which trend orders by).

nsys: the session's start (``TARGET_INFO_SESSION_START_TIME``); Kineto: ``baseTimeNanoseconds``
(in the file's head or tail). rocprof and RPD times are on a boot-time clock: no date. A date
before 2001 is a clock that was not the wall clock. A missing date never stops a report."""

from __future__ import annotations

WALL_CLOCK_MIN_NS = 978_307_200 * 10**9  # 2001-01-01


def capture_start_ns(inputs: list[dict]) -> int | None:
    """The earliest wall-clock start (UTC ns) among the analysis' inputs, or None."""
    starts = []
    for item in inputs:
        path, kind = str(item.get("path") or ""), item.get("kind")
        try:
            if kind == "nsys":
                from tracetriage.parsers.nsys import session_span

                span = session_span(path)
                starts.append(span[0] if span else None)
            elif kind == "kineto":
                from tracetriage.parsers.kineto import base_time_ns

                starts.append(base_time_ns(path))
        except Exception:  # noqa: BLE001 - an input gone since the analysis (an archive's temporary copy)
            continue
    starts = [s for s in starts if isinstance(s, int) and s > WALL_CLOCK_MIN_NS]
    return min(starts) if starts else None


def capture_start_utc(inputs: list[dict]) -> str | None:
    import datetime

    start = capture_start_ns(inputs)
    if start is None:
        return None
    return datetime.datetime.fromtimestamp(start / 1e9, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
