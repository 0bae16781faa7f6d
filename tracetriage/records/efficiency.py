"""Records of the ``efficiency`` block of the analysis contract: the device's roofs, each kernel class
and top operator against them, the decode floor, what was not measured and the classes' coverage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tracetriage.contract import key


@dataclass(frozen=True, slots=True)
class PeakDevice:
    """The device in the peaks table: datasheet dense TFLOP/s per data type, bandwidth (GB/s), and
    the vendor's measured max-achievable TFLOP/s where published."""
    model: str = ""
    source: str | None = None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    bandwidth_gbps: float = 0.0
    matched_name: str | None = None
    note: str | None = None
    achievable_tflops: dict[str, float] = field(default_factory=dict)
    achievable_source: str | None = None


@dataclass(frozen=True, slots=True)
class KernelClass:
    """One kernel class against the roofline: time, work, achieved rates, intensity, bound, the roof held against."""
    kernel_class: str = key("class", "")
    time_ns: int = 0
    flops: float | None = None
    bytes: float | None = None
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    intensity: float | None = None
    bound: str | None = None
    pct_of_roofline: float | None = None
    peak_dtype: str | None = None
    measured_share_pct: float | None = None
    ops: int | None = None
    peak_tflops: float | None = None
    pct_of_achievable: float | None = None
    achievable_tflops: float | None = None


@dataclass(frozen=True, slots=True)
class TopOp:
    """One operator at one shape against the roofline."""
    name: str = ""
    kernel_class: str = key("class", "")
    input_dims: list[Any] = field(default_factory=list)  # a list of shapes, printed as the contract holds it
    dtype: str | None = None
    count: int = 0
    time_ns: int = 0
    flops: float | None = None
    bytes: float | None = None
    achieved_tflops: float | None = None
    achieved_gbps: float | None = None
    intensity: float | None = None
    bound: str | None = None
    pct_of_roofline: float | None = None
    peak_dtype: str | None = None
    peak_tflops: float | None = None
    pct_of_achievable: float | None = None
    achievable_tflops: float | None = None


@dataclass(frozen=True, slots=True)
class DecodeFloor:
    """The bytes a decode step reads, the time they take at the datasheet bandwidth, the measured step."""
    bytes_per_step: float = 0.0
    floor_ns: int = 0
    measured_ns: int = 0
    pct_of_floor: float | None = None
    steps: int | None = None
    median_gemm_tokens: int | None = None
    source: str | None = None


@dataclass(frozen=True, slots=True)
class NotMeasured:
    """A kernel class whose efficiency was not measured (its time and share), and how to capture it."""
    what: str = ""
    reason: str = ""
    capture_hint: str = ""
    time_ns: int | None = None
    share_pct: float | None = None


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of one kernel class's time the efficiency figures speak for."""
    kernel_class: str = key("class", "")
    time_ns: int = 0
    measured_ns: int = 0
    measured_share_pct: float | None = None


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Efficiency against the roofline on one trace's device (``device`` None when it is not in the table)."""
    trace: str | None = None
    device_name: str | None = None
    dominant_class: str | None = None
    device: PeakDevice | None = None
    classes: tuple[KernelClass, ...] = ()
    top_ops: tuple[TopOp, ...] = ()
    decode_floor: DecodeFloor | None = None
    not_measured: tuple[NotMeasured, ...] = ()
    coverage: tuple[Coverage, ...] = ()
