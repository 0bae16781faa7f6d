"""The benchmark series a serving summary reads: one deployment's sweep, never rows of several mixed.

A result file (or a case of several) may hold sweeps of different deployments, models or GPUs: the
parser keys each record by its metadata (``group``: backend, model, deployment, gpu, gateway, label).
Little's law, the client latencies, the token totals, the TPOT fit and the prompt lengths are
figures of one server, so they are computed over the records of one series only: the series of the
record the client latency reads (:func:`chosen_record`: the highest finite request rate, the first
such record on a tie). The other series are named as left out; the rules judge each series on its
own (rules/serving.py ``_capacity_from_bench``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tracetriage.analyzers.serving_inputs import BenchInput

UNNAMED = "(no metadata)"  # the name of a series whose records carry no metadata keys


def finite_rate(record: BenchInput) -> bool:
    """Whether a benchmark record has a finite request rate (``inf``: all requests sent at once)."""
    return isinstance(record.request_rate, (int, float)) and math.isfinite(record.request_rate)


def chosen_record(bench: list[BenchInput]) -> BenchInput | None:
    """The benchmark record the client latency reads: the highest finite request rate, else the last."""
    if not bench:
        return None
    finite = [record for record in bench if finite_rate(record)]
    return max(finite, key=lambda record: record.request_rate) if finite else bench[-1]


def group_of(record: BenchInput) -> str:
    """The series key of a record (its metadata joined by the parser), '' without metadata."""
    return str(record.record.get("group") or "")


def series_names(groups: list[str]) -> dict[str, str]:
    """A short name per series key: the metadata values that tell the series apart (``no-features``
    rather than ``vllm|model|model|no-features|4xL40S|gateway``); the whole key when the keys do not
    line up value by value."""
    parts = [group.split("|") if group else [] for group in groups]
    if len({len(values) for values in parts}) != 1:
        return {group: group or UNNAMED for group in groups}
    differing = [index for index in range(len(parts[0])) if len({values[index] for values in parts}) > 1]
    return {group: "/".join(values[index] for index in differing) or group or UNNAMED
            for group, values in zip(groups, parts)}


@dataclass(frozen=True, slots=True)
class BenchSeries:
    """The records of the series read (in file order), its short name ('' when the benchmark holds one
    series) and the names of the series left out."""

    records: list[BenchInput]
    name: str
    left_out: tuple[str, ...]

    def words(self) -> str:
        """' of series no-features (2 other series left out: base, kvcache)', '' for a single series."""
        if not self.left_out:
            return ""
        others = len(self.left_out)
        return f" of series {self.name} ({others} other series left out: {', '.join(self.left_out)})"


def measured_series(bench: list[BenchInput]) -> BenchSeries:
    """The series of the chosen record (module docstring) and the series left out."""
    chosen = chosen_record(bench)
    if chosen is None:
        return BenchSeries([], "", ())
    groups = list(dict.fromkeys(group_of(record) for record in bench))
    if len(groups) == 1:
        return BenchSeries(list(bench), "", ())
    names = series_names(groups)
    read = group_of(chosen)
    return BenchSeries([record for record in bench if group_of(record) == read], names[read],
                       tuple(names[group] for group in groups if group != read))
