"""Which traces of a case are one run: the rule batch uses to group loose files, applied to
the traces ``analyze`` was given together.

A verdict's denominators (the window, the devices) only mean something over one run: two
unrelated programs merged give "explains 47% of the window, mean over 9 devices" for no
program at all. Traces are one run when what each format records says so:

* nsys exports: their capture sessions (``utcEpochNs`` + duration, wall clock) overlap — one
  export per rank of a job — and no two are the same session to the nanosecond (those are copies
  of one capture: a folder of nightly exports copied from one night, or one export twice);
* Kineto traces: ``distributedInfo`` names one job (same world size and backend, distinct
  ranks);
* rocpd files of one folder are merged by the parser when their dispatches overlap on their
  shared clock (parsers/rocpd.py); rocprofv3 CSV files of one folder are one run;
* different formats, or anything else that cannot be shown to belong together, are not.

Side artifacts (topology, NCCL log, py-spy, serving logs) describe the run and never split it.
"""

from __future__ import annotations

from tracetriage.errors import UsageError
from tracetriage.parsers.head import same_content


def _overlaps(spans: list[tuple[int, int]]) -> bool:
    """The spans form one chain of overlapping intervals."""
    spans = sorted(spans)
    end = spans[0][1]
    for lo, hi in spans[1:]:
        if lo > end:
            return False
        end = max(end, hi)
    return True


def why_not_one_run(traces) -> str | None:
    """None when the traces are one run; else the reason, naming the files."""
    if len(traces) < 2:
        return None
    names = ", ".join(str(t.path) for t in traces[:4]) + (" ..." if len(traces) > 4 else "")
    same = same_content([str(t.path) for t in traces])
    if same:
        return f"{same[0]} and {same[1]} are not one run: they are copies of one file (the same bytes)"
    formats = sorted({t.format for t in traces})
    if len(formats) > 1:
        return f"{names} are not one run: captures of different profilers ({', '.join(formats)})"
    fmt = formats[0]
    if fmt == "nsys":
        return _nsys_not_one_run(traces, names)
    if fmt == "kineto":
        return _kineto_not_one_run(traces, names)
    return f"{names} are not one run: separate {fmt} captures"


def _nsys_not_one_run(traces, names: str) -> str | None:
    """Exports are one run when each records its capture session, no two sessions are equal to the
    nanosecond (copies), and the sessions overlap in time."""
    spans = [t.meta.get("session_utc_ns") for t in traces]
    missing = [t.path for t, s in zip(traces, spans) if not s]
    if missing:
        return (f"{names} are not one run as far as they show: {missing[0]} records no capture session time "
                "(TARGET_INFO_SESSION_START_TIME / ANALYSIS_DETAILS) to match with the others")
    copies = same_span_copies([(str(t.path), s) for t, s in zip(traces, spans)])
    if copies:
        first, second, (lo, hi) = copies
        return (f"{first} and {second} are not one run: they are copies of one capture (the same capture "
                f"session to the nanosecond: utcEpochNs {lo}, {(hi - lo) / 1e9:.3f} s; one rank's nsys never "
                "starts at the same nanosecond as another's)")
    if not _overlaps([tuple(s) for s in spans]):
        return f"{names} are not one run: their capture sessions do not overlap in time"
    return None


def _kineto_not_one_run(traces, names: str) -> str | None:
    """Traces are one run when their distributedInfo names distinct ranks of one job (world size, backend)."""
    jobs = {(t.meta.get("world_size"), str(t.meta.get("backend"))) for t in traces}
    ranks = [t.meta.get("rank") for t in traces]
    size = next(iter(jobs))[0] if len(jobs) == 1 else None
    if (len(jobs) == 1 and isinstance(size, int) and size > 1 and all(isinstance(r, int) and 0 <= r < size for r in ranks)
            and len(set(ranks)) == len(ranks)):
        return None
    return f"{names} are not one run: their distributedInfo does not name distinct ranks of one job"


def same_span_copies(named_spans: list[tuple[str, tuple[int, int] | None]]) -> tuple[str, str, tuple[int, int]] | None:
    """The first two names whose spans are equal to the nanosecond (copies of one capture) and
    that span, or None (batch keeps such files apart: parsers/common.overlapping_groups)."""
    seen: dict[tuple[int, int], str] = {}
    for name, span in named_spans:
        if span is not None:
            span = tuple(span)
            if span in seen:
                return seen[span], name, span
            seen[span] = name
    return None


def check_one_run(case) -> None:
    """Raise a UsageError (one line) when the case's traces are not one run."""
    why = why_not_one_run(case.traces)
    if why:
        raise UsageError(None, f"{why}: analyze each on its own, or all of them with tracetriage batch")
