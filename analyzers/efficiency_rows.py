"""The typed rows of the efficiency block (analyzers/efficiency.py): a set of op calls' rates, its
roofline, a class row, a top op, the decode bandwidth floor, and the judgement the rules read.
Each row's ``to_contract()`` writes the analysis contract's keys in the contract's order
(reports/analysis.schema.json, ``efficiency``); downstream code reads the fields.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rates:
    """Time, work and the achieved rates of a set of op calls: achieved_tflops = FLOPs / time,
    achieved_gbps = bytes / time, intensity = FLOPs / bytes (None where the divisor is 0)."""

    time_ns: int
    flops: float
    bytes: float
    achieved_tflops: float | None
    achieved_gbps: float | None
    intensity: float | None

    @classmethod
    def of(cls, time_ns: float, flops: float, nbytes: float) -> Rates:
        """The rates of ``flops`` and ``nbytes`` done in ``time_ns``."""
        return cls(time_ns=int(time_ns), flops=float(flops), bytes=float(nbytes),
                   achieved_tflops=round(flops / time_ns / 1e3, 3) if time_ns else None,
                   achieved_gbps=round(nbytes / time_ns, 2) if time_ns else None,
                   intensity=round(flops / nbytes, 3) if nbytes else None)

    def to_contract(self) -> dict:
        return {"time_ns": self.time_ns, "flops": self.flops, "bytes": self.bytes, "achieved_tflops": self.achieved_tflops,
                "achieved_gbps": self.achieved_gbps, "intensity": self.intensity}


@dataclass(frozen=True, slots=True)
class Roofline:
    """A set of op calls against the device's roofs (peaks.roofline): the bound, the % of roofline,
    the peak held against (dtype, datasheet TFLOP/s), the % of the achievable roofs and the vendor's
    measured achievable peak; every field None when the device is unknown."""

    bound: str | None = None
    pct_of_roofline: float | None = None
    peak_dtype: str | None = None
    peak_tflops: float | None = None
    pct_of_achievable: float | None = None
    achievable_tflops: float | None = None

    def to_contract(self) -> dict:
        return {"bound": self.bound, "pct_of_roofline": self.pct_of_roofline, "peak_dtype": self.peak_dtype,
                "peak_tflops": self.peak_tflops, "pct_of_achievable": self.pct_of_achievable,
                "achievable_tflops": self.achievable_tflops}


@dataclass(frozen=True, slots=True)
class ClassRow:
    """One op class (gemm, attention, memory_bound) of the measured op calls: its rates, roofline,
    the share of the class's kernel time whose work was measured, and its op calls."""

    name: str
    rates: Rates
    roofline: Roofline
    measured_share_pct: float | None
    ops: int

    def to_contract(self) -> dict:
        return {"class": self.name, **self.rates.to_contract(), **self.roofline.to_contract(),
                "measured_share_pct": self.measured_share_pct, "ops": self.ops}


@dataclass(frozen=True, slots=True)
class TopOp:
    """The op calls of one (name, shape): class, input dims, dtype, calls, rates and roofline."""

    name: str
    kind: str
    input_dims: list
    dtype: str
    count: int
    rates: Rates
    roofline: Roofline

    def to_contract(self) -> dict:
        return {"name": self.name, "class": self.kind, "input_dims": self.input_dims, "dtype": self.dtype,
                "count": self.count, **self.rates.to_contract(), **self.roofline.to_contract()}


@dataclass(frozen=True, slots=True)
class DecodeFloor:
    """The decode bandwidth floor (efficiency module docstring): bytes a step must read, the floor
    (those bytes at the datasheet bandwidth), the measured step, the floor's share of it, the steps
    and median GEMM rows it came from (None from a serving log), and where the bytes come from."""

    bytes_per_step: float
    floor_ns: int
    measured_ns: int
    pct_of_floor: float | None
    steps: int | None
    median_gemm_tokens: int | None
    source: str

    def to_contract(self) -> dict:
        return {"bytes_per_step": self.bytes_per_step, "floor_ns": self.floor_ns, "measured_ns": self.measured_ns,
                "pct_of_floor": self.pct_of_floor, "steps": self.steps, "median_gemm_tokens": self.median_gemm_tokens,
                "source": self.source}


@dataclass(frozen=True, slots=True)
class Judgement:
    """What the efficiency says about the dominant class (efficiency.judgement): the class, its row
    (None when no op of it was measured), whether it is measured, whether it runs below its threshold,
    the side that bounds it (compute, memory; None unmeasured), the decode floor it was judged on
    (None when judged on its roofline), and the words."""

    kind: str
    entry: ClassRow | None
    measured: bool
    below: bool
    side: str | None
    decode: DecodeFloor | None
    text: str


@dataclass(frozen=True, slots=True)
class NotMeasured:
    """One thing the efficiency figures do not speak for: what, its kernel ns (None: not a time), why,
    and the capture that would measure it; the per-class and graph-replay entries also carry the
    share of the class's kernel time (``share_pct``, None where it is not a class's), the others no
    such key (``has_share`` False)."""

    what: str
    time_ns: int | None
    reason: str
    capture_hint: str
    share_pct: float | None = None
    has_share: bool = False

    def to_contract(self) -> dict:
        share = {"share_pct": self.share_pct} if self.has_share else {}
        return {"what": self.what, "time_ns": self.time_ns, **share, "reason": self.reason, "capture_hint": self.capture_hint}
