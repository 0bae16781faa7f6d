"""Kernels before -> after, per matched device: the largest movers in ms per step.

A kernel's ms per step = its total ns / the owning process's steps / 1e6; its share = its
total ns / the device's window ns x 100 (at most 100: kernels on several streams overlap).
A kernel missing from a side is 0 there, unless that side is a graph-level capture: its
graph replays were recorded without their kernels, so the kernel is not measured (None), never zero.
"""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.analyzers.compare_side import Side, round4
from tracetriage.records.trace import Device

TOP_KERNELS = 10  # kernels per device in the output: the largest movers in ms per step


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel on one matched device pair (``rank0: <before id> -> <after id>``): its ms per
    step and share of the device window on each side, and the change in ms per step."""

    device: str
    name: str
    kind: str
    before_ms_per_step: float | None
    after_ms_per_step: float | None
    change_ms_per_step: float | None
    before_share_pct: float | None
    after_share_pct: float | None

    def movement(self) -> float:
        """How far it moved: the change, else the ms per step of the side that measured it."""
        if self.change_ms_per_step is not None:
            return abs(self.change_ms_per_step)
        return abs(self.before_ms_per_step or self.after_ms_per_step or 0.0)

    def to_contract(self) -> dict:
        return {"device": self.device, "name": self.name, "kind": self.kind,
                "before_ms_per_step": self.before_ms_per_step, "after_ms_per_step": self.after_ms_per_step,
                "change_ms_per_step": self.change_ms_per_step,
                "before_share_pct": self.before_share_pct, "after_share_pct": self.after_share_pct}


def kernel_rows(before: Side, after: Side) -> list[KernelRow]:
    """Each matched device's :data:`TOP_KERNELS` largest movers (ties by name), ranked by size across
    the devices: rank1's SendRecv that grew 1 ms/step comes before rank0's kernels that moved less."""
    rows = []
    for rank, (device_before, device_after) in enumerate(zip(before.devices_in_rank_order(), after.devices_in_rank_order())):
        kernels_before = _DeviceKernels(device_before, before.device_steps(device_before))
        kernels_after = _DeviceKernels(device_after, after.device_steps(device_after))
        label = f"rank{rank}: {device_before.id} -> {device_after.id}"
        device_rows = []
        for name in dict.fromkeys([*kernels_before.kernels, *kernels_after.kernels]):
            before_ms, before_share = kernels_before.figures(name)
            after_ms, after_share = kernels_after.figures(name)
            kind = (kernels_before.kernels.get(name) or kernels_after.kernels.get(name)).kind
            change = round4(after_ms - before_ms) if after_ms is not None and before_ms is not None else None
            device_rows.append(KernelRow(label, name, kind, round4(before_ms), round4(after_ms), change,
                                         round4(before_share), round4(after_share)))
        device_rows.sort(key=lambda row: (-row.movement(), row.name))
        rows.extend(device_rows[:TOP_KERNELS])
    rows.sort(key=lambda row: -row.movement())  # ranked by size across ranks (stable: a device's own order on ties)
    return rows


class _DeviceKernels:
    """One device's kernels by name, with the steps and window their figures are per."""

    def __init__(self, device: Device, steps: int):
        self.kernels = {kernel.name: kernel for kernel in device.kernels}
        self.steps = steps
        self.window_ns = device.window_ns
        self.graph_level = any(kernel.kind == "graph" for kernel in self.kernels.values())

    def figures(self, name: str) -> tuple[float | None, float | None]:
        """(ms per step, share of the window %) of kernel ``name`` on this device."""
        kernel = self.kernels.get(name)
        if kernel is None:
            return (None, None) if self.graph_level else (0.0, 0.0)
        ms_per_step = kernel.total_ns / self.steps / 1e6 if self.steps else None
        share_pct = min(100.0, 100.0 * kernel.total_ns / self.window_ns) if self.window_ns else None
        return ms_per_step, share_pct
