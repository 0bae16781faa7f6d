"""Device peaks and the roofline: what a device can do, and how close a set of op calls came to it.

* **device**: the capture's device name (Kineto ``deviceProperties``, nsys ``TARGET_INFO_GPU``,
  rocpd agents) matched against ``devices.toml`` (peak dense FLOP/s per data type, memory
  bandwidth, each with its datasheet); :func:`match_device` says None for a device it does not know.
* **rates**: achieved_tflops = FLOPs / time; achieved_gbps = bytes / time; intensity = FLOPs / bytes.
* **roofline**: the roofline time of an op is max(FLOPs / peak(dtype), bytes / bandwidth); the
  ``pct_of_roofline`` of a set of ops = sum of their roofline times / their measured time x 100
  (100% = at the datasheet bound); ``bound`` is compute when their compute times outweigh their
  memory times, else memory. A dtype the device has no peak for is held against
  :data:`DTYPE_FALLBACK`'s. The peak is named: its dtype and datasheet TFLOP/s (``peak_dtype``,
  ``peak_tflops``), and where the vendor publishes a measured max-achievable peak (AMD's MAF,
  devices.toml ``achievable_tflops``) the same roofline against it (``pct_of_achievable``); a
  bandwidth-bound set has no ``pct_of_achievable`` (no measured achievable bandwidth is published: :func:`roofline`).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from tracetriage.analyzers.efficiency_rows import NotMeasured, Roofline
from tracetriage.analyzers.tomlfiles import read_toml

DEVICES: dict[str, dict] = read_toml(Path(__file__).with_name("devices.toml"))

# the peak an op is held against when the device lacks its own dtype's (fp8 on an A100 runs as bf16)
DTYPE_FALLBACK = {"fp4": "fp8", "fp8": "bf16", "int8": "bf16", "bf16": "fp16", "fp16": "bf16", "tf32": "fp32", "fp64": "fp32",
                  "uint8": "int8", "int16": "fp32", "int32": "fp32", "int64": "fp32", "bool": "fp32"}


def match_device(name: str, memory_bytes: int = -1, sm_count: int = -1) -> tuple[str, dict] | None:
    """(key, entry) of devices.toml for a capture's device, or None when the table does not know it."""
    gib = memory_bytes / 2**30 if memory_bytes and memory_bytes > 0 else None
    name = (name or "").strip()
    generic = not name or name.lower() in ("unknown gpu", "amd radeon graphics")
    for key, entry in DEVICES.items():
        if not generic and any(re.search(pattern, name, re.I) for pattern in entry["names"]):
            lo, hi = entry.get("memory_gib", [None, None])
            if lo is None or (gib is not None and lo <= gib <= hi):
                return key, entry
        props = entry.get("props")
        if generic and props and sm_count == props["sm_count"] and gib is not None \
                and props["memory_gib"][0] <= gib <= props["memory_gib"][1]:
            return key, entry
    return None


def peak_tflops(entry: dict, dtype: str, table: str = "peak_tflops") -> tuple[str, float] | None:
    """(dtype whose peak applies, TFLOP/s) on a device: the datasheet's dense peak (``table``
    ``peak_tflops``) or the vendor's measured max-achievable one (``achievable_tflops``)."""
    peaks, seen = entry.get(table) or {}, set()
    while dtype and dtype not in seen:
        if dtype in peaks:
            return dtype, float(peaks[dtype])
        seen.add(dtype)
        dtype = DTYPE_FALLBACK.get(dtype)
    return None


def device_block(entry: dict, matched_name: str) -> dict:
    """The contract's ``efficiency.device``: the table entry's model, datasheet, peaks and bandwidth."""
    device = {"model": entry["model"], "source": entry["source"], "peak_tflops": dict(entry["peak_tflops"]),
              "bandwidth_gbps": float(entry["bandwidth_gbps"]), "matched_name": matched_name}
    if entry.get("note"):
        device["note"] = entry["note"]
    if entry.get("achievable_tflops"):
        device["achievable_tflops"] = dict(entry["achievable_tflops"])
        device["achievable_source"] = entry["achievable_source"]
    return device


def _compute_ns(entry: dict, flops: np.ndarray, dtypes: np.ndarray, table: str) -> np.ndarray:
    """Per op, its FLOPs at the ``table``'s peak of its dtype (the datasheet's where ``table`` lacks it)."""
    compute_ns = np.zeros(len(flops))
    for dtype in pd.unique(dtypes):
        peak = peak_tflops(entry, dtype, table) or peak_tflops(entry, dtype)
        selected = dtypes == dtype
        compute_ns[selected] = flops[selected] / (peak[1] * 1e3) if peak else 0.0  # TFLOP/s = 1e3 FLOP/ns
    return compute_ns


def roofline(entry: dict | None, flops: np.ndarray, nbytes: np.ndarray, dtypes: np.ndarray, time_ns: float) -> Roofline:
    """bound, pct_of_roofline and the peak held against (its dtype and datasheet TFLOP/s), for a set of
    op calls; where the vendor publishes a measured max-achievable peak for that dtype, that peak
    (``achievable_tflops``). ``pct_of_achievable``: for a compute-bound set, the same roofline with the
    compute roofs at the achievable peaks (the bandwidth roof unchanged; None where the vendor
    publishes none); None for a memory-bound set: no vendor in devices.toml publishes a measured
    achievable bandwidth (AMD's MAF measures FLOP/s only), and the datasheet bandwidth is already
    ``pct_of_roofline``'s, so a bandwidth-bound row is neither judged against a compute peak nor
    given the same figure twice."""
    if entry is None or not time_ns:
        return Roofline()
    bandwidth = float(entry["bandwidth_gbps"])
    compute_ns = _compute_ns(entry, flops, dtypes, "peak_tflops")
    memory_ns = nbytes / bandwidth
    main_dtype = pd.Series(flops).groupby(dtypes).sum().idxmax() if len(flops) else None
    main_peak = peak_tflops(entry, main_dtype) if main_dtype else None
    achievable = peak_tflops(entry, main_dtype, "achievable_tflops") if main_dtype else None
    bound = "compute" if compute_ns.sum() >= memory_ns.sum() else "memory"
    achievable_tflops = achievable[1] if achievable and main_peak and achievable[0] == main_peak[0] else None
    if bound == "memory":  # bandwidth-bound: no vendor publishes a measured achievable bandwidth
        pct_of_achievable = None
    elif achievable_tflops is not None:
        reachable_ns = np.maximum(_compute_ns(entry, flops, dtypes, "achievable_tflops"), memory_ns)
        pct_of_achievable = round(100.0 * float(reachable_ns.sum()) / time_ns, 2)
    else:
        pct_of_achievable = None
    return Roofline(bound=bound, pct_of_roofline=round(100.0 * float(np.maximum(compute_ns, memory_ns).sum()) / time_ns, 2),
                    peak_dtype=main_peak[0] if main_peak else None, peak_tflops=main_peak[1] if main_peak else None,
                    pct_of_achievable=pct_of_achievable, achievable_tflops=achievable_tflops)


def device_peaks(row) -> tuple[dict | None, dict | None, NotMeasured | None]:
    """(devices.toml entry, the contract's device block, the not-measured entry when the table does
    not know the device) of the device that ran the most kernel time."""
    name = str(row["name"])
    found = match_device(name, int(row["memory_bytes"]), int(row["sm_count"]))
    if found:
        return found[1], device_block(found[1], name), None
    if _generic_name(name):  # the capture does not say which model ran: no table entry could answer
        return None, None, NotMeasured(
            what="device peaks", time_ns=None,
            reason=f"the capture does not name the GPU model ({name or 'no name'!r}): achieved rates are reported, "
                   "the % of roofline is not",
            capture_hint="capture with a profiler version that records the device properties (the model's name; "
                         "the PyTorch profiler writes them as deviceProperties), or add the model's datasheet peaks to "
                         "analyzers/devices.toml under the name the capture gives")
    return None, None, NotMeasured(
        what="device peaks", time_ns=None,
        reason=f"device {name!r} is not in the device table: achieved rates are reported, the % of roofline is not",
        capture_hint="add the device's datasheet peaks (dense FLOP/s per data type, memory bandwidth) to "
                     "analyzers/devices.toml")


def _generic_name(name: str) -> bool:
    """A device name that names no model: empty, or a vendor's or a placeholder's word only ("AMD GPU", "unknown GPU")."""
    words = re.sub(r"(?i)\b(amd|nvidia|intel|gpu|device|unknown|generic|\d+)\b", "", name)
    return not words.strip(" -_:#()[]")
