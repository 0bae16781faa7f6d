"""One side of a before/after comparison: an analysis (the JSON contract) reduced to what
``tracetriage compare`` reads, and the check that a saved analysis.json is usable as a side.

* **Ranks**: the processes that drove a device, each with its devices (by GPU index) and its
  step durations; ranks are ordered by their lowest GPU index, then trace, then pid, which is
  the order the two sides are matched in.
* **ms per step** of accounting slices on a device = their share of the device's window x the
  window ns / the owning process's steps / 1e6; a side's figure is the mean over its devices.
* **Figures** (:meth:`Side.figures`): the medians over ranks with steps of the step
  percentiles and per-step counts, the mean busy %, the slices in ms per step, and the
  serving percentiles (:func:`serving_figures`).
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from dataclasses import dataclass

import numpy as np

from tracetriage import records
from tracetriage.analyzers.accounting import matching
from tracetriage.analyzers.catalog import CATALOG
from tracetriage.analyzers.findings import unmatched_step_range
from tracetriage.analyzers.metrics import LONG_STEP_FACTOR  # the long steps prefill_stall counts
from tracetriage.analyzers.timeline import CAUSES  # the host's causes, then the GPU's dependency waits
from tracetriage.contract import load
from tracetriage.records.trace import Accounting, Device, Process, Steps

SCHEMA_MESSAGE_CHARS = 200  # a one-line error: longer rule texts end at a word, with "..."


@functools.lru_cache(maxsize=512)
def _slice_names(patterns: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(matching(patterns))


def slice_names(patterns) -> tuple[str, ...]:
    """The accounting slices ``patterns`` match (accounting.matching, in its order), matched once per
    list of patterns: compare asks for the same few lists on every device of both sides."""
    return _slice_names(tuple(patterns))


def program_key(command: str) -> str:
    """The program a process runs, flags aside: the executable's base name and the script or
    ``-m`` module (``python3 -m vllm.worker rank0`` -> ``python3 vllm.worker``). Flags are what
    a fix changes (``--enforce-eager``), so they do not make another program."""
    tokens = str(command or "").split()
    if not tokens or re.fullmatch(r"pid \d+", " ".join(tokens)):  # a name made up from the pid: no program known
        return ""
    executable = tokens[0].rsplit("/", 1)[-1]
    executable = re.sub(r"\d+(\.\d+)*$", "", executable) or executable  # python3.11 -> python
    script = ""
    arguments = iter(tokens[1:])
    for token in arguments:
        if token == "-m":
            script = next(arguments, "")
            break
        if token.startswith("-"):
            continue
        script = token.rsplit("/", 1)[-1]
        break
    return f"{executable} {script}".strip()


def devices_text(models: Counter) -> str:
    """Device models with their counts, by model name: ``1x A100, 3x H100`` (``no GPU`` when none)."""
    return ", ".join(f"{count}x {model}" for model, count in sorted(models.items(), key=lambda kv: str(kv[0]))) or "no GPU"


def round4(value):
    """A figure as the compare contract writes it: a float to 4 decimals, None kept."""
    return None if value is None else round(float(value), 4)


@dataclass(frozen=True, slots=True)
class CompareCheck:
    """A finding's compare check (``[<id>.compare]`` in findings.toml): the accounting slices its time is
    measured on (``unexplained``: less what other findings claim of them), or the side's figure in ms per
    step that is its time (``measure``: a tail finding claims no slice of the window), the conditions that say its fix
    was ``applied``, that it is fixed (``confirm``, by default: no longer reported) or ``falsifier``, the
    words that say so, and the figures shown as its ``evidence``."""

    slices: tuple[str, ...] = ()
    measure: str | None = None
    unexplained: bool = False
    applied: str | None = None
    confirm: str = "not after.present"
    falsifier: str | None = None
    confirm_says: str | None = None
    falsifier_says: str | None = None
    evidence: tuple[str, ...] = ()


@functools.cache
def check_of(finding_id: str) -> CompareCheck:
    """The catalog's compare check of a finding (``[<id>.compare]``), or the default one."""
    entry = CATALOG.get(finding_id) or {}
    return load(CompareCheck, entry.get("compare") or {})


# ---------------------------------------------------------------------------
# A saved analysis.json is untrusted: the analysis schema is the check


@functools.lru_cache(maxsize=1)
def analysis_validator():
    """The analysis JSON schema's validator, built once per process."""
    import json
    from importlib.resources import files

    import jsonschema

    schema = json.loads((files("tracetriage.reports") / "analysis.schema.json").read_text(encoding="utf-8"))
    return jsonschema.validators.validator_for(schema)(schema)


def schema_problem(data: dict) -> str | None:
    """Where ``data`` breaks the analysis JSON schema (the contract) and which rule, or None.
    jsonschema's best match descends into oneOf/anyOf, so a bad leaf under a nullable object
    is named by its own path (``window/duration_ns: -5 is less than the minimum of 1``), not
    by the whole object; a long value is shown shortened, never the message cut mid-word."""
    import reprlib

    from jsonschema.exceptions import best_match

    error = best_match(analysis_validator().iter_errors(data))
    if error is None:
        return None
    while error.validator in ("oneOf", "anyOf") and error.context:
        # best_match stops where branches tie; a branch refused only for its type (null for an
        # object) says least, so the deepest error of the other branches names the place
        told = [branch for branch in error.context
                if not (branch.validator == "type" and not branch.relative_path)] or list(error.context)
        error = max(told, key=lambda branch: len(branch.absolute_path))
    where = "/".join(str(part) for part in error.absolute_path) or "the top level"
    message = error.message
    whole = repr(error.instance)
    if message.startswith(whole) and len(whole) > 60:
        short = reprlib.Repr()
        short.maxstring, short.maxother, short.maxdict, short.maxlist, short.maxlevel = 40, 40, 3, 3, 1
        message = short.repr(error.instance) + message[len(whole):]
    if len(message) > SCHEMA_MESSAGE_CHARS:
        message = message[:SCHEMA_MESSAGE_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"{where}: {message}"


def check_saved(data: dict) -> str | None:
    """What makes a saved analysis.json unusable as a side of a comparison (None: usable).
    The file is untrusted; the analysis schema is closed and types every key compare reads
    (step durations above 0 ns, kernels' kind, accounting values), so it is the whole check."""
    return schema_problem(data)


# ---------------------------------------------------------------------------
# One side


def _median_of(values) -> float | None:
    present = [value for value in values if value is not None]
    return float(statistics.median(present)) if present else None


@dataclass(frozen=True, slots=True, eq=False)  # eq by identity: the durations are an array
class Rank:
    """A process that drove devices, as a comparison reads it: its pid, name (command line) and trace, its
    contract record (``process``: its steps and per-step counts), its devices by GPU index, its steps
    (``steps``; read out of it, their count, p50 and p99, the NVTX range that delimits them and where
    they came from) and its step durations (ns; empty without them)."""

    pid: int
    name: str
    trace: str | None
    process: Process
    devices: tuple[Device, ...]
    steps: Steps
    step_count: int
    p50_ns: float | None
    p99_ns: float | None
    range_name: str | None
    step_source: str | None
    durations: np.ndarray

    @classmethod
    def of(cls, process: Process, trace, devices: list[Device]) -> Rank:
        """The rank of one process of the contract and its devices."""
        steps = process.steps
        return cls(process.pid, process.name or "", trace, process,
                   tuple(sorted(devices, key=_gpu_index)), steps, int(steps.count or 0),
                   steps.p50_ns, steps.p99_ns, steps.range_name, steps.source,
                   np.asarray(steps.durations_ns, np.int64))

    @property
    def measured_durations(self) -> bool:
        """Whether the contract carries this rank's step durations (a saved analysis may not)."""
        return len(self.durations) > 0


def _gpu_index(device: Device) -> int:
    """A device's GPU index, 0 when the contract has none (the order ranks and devices are matched in)."""
    return 0 if device.gpu_index is None else device.gpu_index


class Side:
    """The figures of one analysis that a comparison reads (all from the JSON contract, read once into
    its record: ``record``; ``serving`` stays the contract's block, which compare_serving reads)."""

    def __init__(self, data: dict, label: str):
        self.record = records.read(data)
        self.label = label
        self.devices = list(self.record.devices)
        self.ranks = self._ranks()
        self.steps_of = {(rank.trace, rank.pid): rank.step_count for rank in self.ranks}
        self.findings = {finding.id: finding for finding in self.record.findings if finding.id not in ("healthy",)}
        self.serving = data.get("serving") or None
        self.graph_level = any(kernel.kind == "graph" for device in self.devices for kernel in device.kernels)
        # the analyses this side abstained from (queued.clock_check: offset clocks), with why: a finding of that
        # name is not judged against this side, as analyze did not judge it here
        self.abstained = {row.analysis: row.reason for row in self.record.abstentions}
        # dependency waits are not measured where dependency_wait abstained (the host and GPU clocks offset):
        # their 0 there is no figure, and a change against it no change
        self.dependency_measured = "dependency_wait" not in self.abstained
        # the processes --step-range named no range of (their steps not measured as asked), with the abstention's words
        self.unmatched_step_range = tuple(unmatched_step_range(self.record.abstentions))

    def _ranks(self) -> list[Rank]:
        """The processes that drove a device, each with its devices and steps, in matching order."""
        processes = {(process.trace, process.pid): process for process in self.record.processes}
        devices_of: dict = {}
        for device in self.devices:
            devices_of.setdefault((device.trace, device.pid), []).append(device)
        ranks = []
        for key, devices in devices_of.items():
            process = processes.get(key)
            if process is None:
                continue
            ranks.append(Rank.of(process, key[0], devices))
        trace_order = {trace: i for i, trace in enumerate(dict.fromkeys(device.trace for device in self.devices))}
        ranks.sort(key=lambda rank: (min(_gpu_index(device) for device in rank.devices),
                                     trace_order.get(rank.trace, 0), rank.pid))
        return ranks

    def devices_in_rank_order(self) -> list[Device]:
        """The devices rank by rank (ranks in the order they are matched), each rank's by GPU index:
        what kernel_rows pairs and trend_record numbers."""
        return [device for rank in self.ranks for device in rank.devices]

    # -- per device, per step
    def device_steps(self, device: Device) -> int:
        return self.steps_of.get((device.trace, device.pid), 0)

    def slice_ms(self, device: Device, patterns) -> float | None:
        """ms per step on ``device`` of the accounting slices matching ``patterns``."""
        steps = self.device_steps(device)
        if not steps:
            return None
        slices_pct = device.accounting.slices_pct if device.accounting else {}
        share = sum(slices_pct.get(name, 0.0) for name in slice_names(patterns))
        return share / 100.0 * device.window_ns / steps / 1e6

    def rank_slice_ms(self, rank: Rank, patterns) -> float | None:
        """ms per step of the slices matching ``patterns``: the mean over one rank's devices."""
        per_device = [self.slice_ms(device, patterns) for device in rank.devices]
        per_device = [value for value in per_device if value is not None]
        return float(np.mean(per_device)) if per_device else None

    def mean_slice_ms(self, patterns) -> float | None:
        per_device = [self.slice_ms(device, patterns) for device in self.devices]
        per_device = [value for value in per_device if value is not None]
        return float(np.mean(per_device)) if per_device else None

    def finding_ms(self, finding_id: str, before: Side | None = None) -> float | None:
        """ms per step of the time a finding is about: its catalog ``measure`` (a figure of the side, measured
        against ``before`` where the figure has a cutoff: :meth:`figures`), or its catalog slices (the same
        measure on both sides, whether or not it fires there), less what other findings claim of them where
        the catalog says ``unexplained`` (:meth:`unexplained_ms`), else what it claimed here."""
        check = check_of(finding_id)
        slices = check.slices
        if check.measure:
            return self.figures(before).get(check.measure)
        if slices and check.unexplained:
            return self.unexplained_ms(finding_id, slices)
        return self.mean_slice_ms(slices) if slices else self.claim_ms(finding_id)

    def unexplained_ms(self, finding_id: str, patterns) -> float | None:
        """ms per step of the slices matching ``patterns`` that no other finding claims: the finding's own
        claim (taken from those slices) plus the matching slices no finding claims, mean over the devices
        with steps. The same measure whether or not the finding fires on this side (gpu_starved: the idle
        time no other finding explains, the share its headline states)."""
        names = slice_names(patterns)
        per_device = []
        for device in self.devices:
            steps = self.device_steps(device)
            if not steps:
                continue
            accounting = device.accounting or Accounting()
            unclaimed = accounting.unclaimed_pct or {}
            share = accounting.claims_pct.get(finding_id, 0.0) + sum(unclaimed.get(name, 0.0) for name in names)
            per_device.append(share / 100.0 * device.window_ns / steps / 1e6)
        return float(np.mean(per_device)) if per_device else None

    def finding_ns_per_op(self, finding_id: str) -> float | None:
        """ns per GPU op of the time a finding is about, on a side without steps: the share of each device's
        window that :meth:`finding_ms` would count (its slices; less what other findings claim where the catalog
        says ``unexplained``; else its claim) x the window, over the rank's GPU ops (its process's ``gpu_ops``);
        the mean over the ranks that ran any. A unit of work that a shorter window does not change."""
        check = check_of(finding_id)
        names = slice_names(check.slices) if check.slices else ()
        per_rank = []
        for rank in self.ranks:
            ops = rank.process.gpu_ops
            if not ops:
                continue
            total_ns = 0.0
            for device in rank.devices:
                accounting = device.accounting or Accounting()
                if check.slices and check.unexplained:
                    unclaimed = accounting.unclaimed_pct or {}
                    share = accounting.claims_pct.get(finding_id, 0.0) + sum(unclaimed.get(name, 0.0) for name in names)
                elif check.slices:
                    share = sum(accounting.slices_pct.get(name, 0.0) for name in names)
                else:
                    share = accounting.claims_pct.get(finding_id, 0.0)
                total_ns += share / 100.0 * device.window_ns
            per_rank.append(total_ns / ops)
        return float(np.mean(per_rank)) if per_rank else None

    def window_ns_per_op(self) -> float | None:
        """The window per GPU op (each rank's devices' windows over its GPU ops; mean over ranks): the
        unit a side without steps has in place of the step, which the noise threshold is a share of."""
        per_rank = [sum(device.window_ns for device in rank.devices) / rank.process.gpu_ops
                    for rank in self.ranks if rank.process.gpu_ops]
        return float(np.mean(per_rank)) if per_rank else None

    def host_calls_per_op(self) -> float | None:
        """Host runtime calls per GPU op (each rank's ``api_calls`` over its ``gpu_ops``; median over ranks):
        what a side without steps has in place of launches per step."""
        return _median_of([rank.process.api_calls / rank.process.gpu_ops for rank in self.ranks
                           if rank.process.gpu_ops and rank.process.api_calls is not None])

    def claim_ms(self, finding_id: str) -> float | None:
        per_device = []
        for device in self.devices:
            steps = self.device_steps(device)
            claims = device.accounting.claims_pct if device.accounting else {}
            if steps and finding_id in claims:
                per_device.append(claims[finding_id] / 100.0 * device.window_ns / steps / 1e6)
        return float(np.mean(per_device)) if per_device else None

    # -- the figures conditions and metrics read
    def figures(self, before: Side | None = None) -> dict:
        """The side's figures by the names the catalog's conditions and compare's metrics read (module docstring).
        ``before``: the other side of a comparison, whose p50s are the long steps' cutoff here
        (:meth:`long_step_excess_ms`); None: this side's own (a capture alone, or the before side itself)."""
        ranks = [rank for rank in self.ranks if rank.step_count]
        steps = sum(rank.step_count for rank in ranks) if ranks else 0
        p50_ms = _median_of([_ns_to_ms(rank.p50_ns) for rank in ranks])
        p99_ms = _median_of([_ns_to_ms(rank.p99_ns) for rank in ranks])
        busy_pct = float(np.mean([device.busy_pct for device in self.devices])) if self.devices else None
        pageable = self.record.copies.pageable_async.count if self.record.copies else None
        return {
            "steps": steps, "step_p50_ms": p50_ms, "step_p99_ms": p99_ms,
            "launches_per_step": _median_of([rank.process.launches_per_step for rank in ranks]),
            "graph_launches_per_step": _median_of([rank.process.graph_launches_per_step for rank in ranks]),
            "syncs_per_step": _median_of([rank.process.syncs_per_step for rank in ranks]),
            "dtoh_copies_per_step": _median_of([rank.process.dtoh_copies_per_step for rank in ranks]),
            "busy_pct": busy_pct,
            "compute_ms": self.mean_slice_ms(["compute"]),
            "collective_ms": self.mean_slice_ms(["collective"]),
            "copy_ms": self.mean_slice_ms(["copy"]),
            "idle_ms": self.mean_slice_ms(["idle:*:*"]),
            "idle_pct": None if busy_pct is None else 100.0 - busy_pct,
            "tail_ms": p99_ms - p50_ms if p99_ms is not None and p50_ms is not None else None,
            "long_step_excess_ms": self.long_step_excess_ms(before),
            **{f"idle_{cause}_ms": self.mean_slice_ms([f"idle:*:{cause}"]) for cause in CAUSES
               if cause != "dependency" or self.dependency_measured},
            "pageable_copies_per_step": (pageable / steps) if pageable is not None and steps else None,
            **serving_figures(self.serving),
        }

    def long_step_excess_ms(self, before: Side | None = None) -> float | None:
        """:func:`long_step_excess_ms` of each rank with steps, mean over the ranks; against the p50 of the
        matched rank of ``before`` (ranks matched in order, as compare's step test matches them) where given:
        the one cutoff of compare_steps.long_step_test, so a comparison states one figure for the long steps'
        time, not one per cutoff."""
        if before is None:
            return _mean_of([long_step_excess_ms(rank.durations) for rank in self.ranks if rank.step_count])
        return _mean_of([long_step_excess_ms(rank.durations, float(np.median(reference.durations)))
                         for rank, reference in zip(self.ranks, before.ranks)
                         if rank.step_count and reference.durations.size])


def long_step_excess_ms(durations: np.ndarray, p50: float | None = None) -> float | None:
    """The time above the p50 of the steps longer than :data:`LONG_STEP_FACTOR` x the p50, in ms per step:
    what the freezes cost, whether or not the rule fires (a p99 of 60 steps is one step; this counts them
    all). ``p50``: the cutoff's step (compare: the before p50, for both sides); None: these steps' own. None
    without step durations."""
    if not durations.size:
        return None
    p50 = float(np.median(durations)) if p50 is None else p50
    long = durations[durations > LONG_STEP_FACTOR * p50]
    return float((long - p50).sum()) / durations.size / 1e6


def _mean_of(values) -> float | None:
    present = [value for value in values if value is not None]
    return float(np.mean(present)) if present else None


def _ns_to_ms(ns) -> float | None:
    return ns / 1e6 if ns is not None else None


def serving_figures(serving: dict | None) -> dict:
    """Client-side latency percentiles (ms), throughput and mean input / output tokens per request
    of the serving artifacts, if any."""
    keys = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2el_p50_ms",
            "throughput_rps", "request_rate", "input_len_mean", "output_len_mean")
    figures = dict.fromkeys(keys)
    if not serving:
        return figures
    client = ((serving.get("latency") or {}).get("client")) or {}
    for metric in ("ttft", "tpot", "itl", "e2el"):
        block = client.get(metric) or {}
        figures[f"{metric}_p50_ms"] = _number(block.get("median"))
        if metric != "e2el":
            figures[f"{metric}_p99_ms"] = _number(block.get("p99"))
    record = client.get("record") or {}
    figures["throughput_rps"] = _number(record.get("request_throughput"))
    figures["request_rate"] = _number(record.get("request_rate"))
    for shape in ("input", "output"):  # mean tokens per request (serving.requests)
        figures[f"{shape}_len_mean"] = _number((((serving.get("requests") or {}).get(shape)) or {}).get("mean"))
    return figures


def _number(value):
    """An untrusted serving figure as a float (parsers/coerce.number decides what a number is)."""
    from tracetriage.parsers.coerce import number

    parsed = number(value)
    return None if parsed is None else float(parsed)
