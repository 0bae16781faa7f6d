"""Per-device and case-wide copy figures say which they are (trial #20): the report's copies line sums
every device's copies, a finding's copy evidence is one device's; with several devices each says so."""

from __future__ import annotations

from conftest import real

import tracetriage
from tracetriage.reports import render


def _copies_line(analysis) -> str:
    return next(line for line in render(analysis, "text").splitlines() if line.startswith("copies in the window"))


def _device_bytes(device: dict, direction: str) -> int:
    return device["copies"]["by_direction"].get(direction, {}).get("bytes", 0)


def test_real_two_device_copy_figures_name_their_scope():
    """fastvideo sp2 on 2xH100: the copies line is both devices together; copy_bound's bytes are GPU0's."""
    analysis = tracetriage.analyze(str(real("nsys", "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite")))
    devices = analysis.data["devices"]
    assert len(devices) == 2
    line = _copies_line(analysis)
    assert line.startswith("copies in the window (2 devices together): ")
    total_htod = sum(_device_bytes(device, "HtoD") for device in devices)
    assert f"({total_htod / 1e9:.1f} GB)" in line  # the case-wide sum, as printed
    finding = next(f for f in analysis.data["findings"] if f["id"] == "copy_bound")
    row = next(e for e in finding["evidence"] if e["name"] == "bytes")
    named = next(device for device in devices if row["text"].startswith(f"on {device['id']}: "))
    assert row["value"] == named["copies"]["bytes"] and row["value"] < sum(device["copies"]["bytes"] for device in devices)


def test_generated_two_ranks_copies_line_is_both_together_and_one_rank_unmarked(analyses):
    """dp2_late_rank: 23 loss read-backs per rank, 46 in the line, said to be both devices'; a one-device
    bundle's line carries no such mark."""
    two = analyses["dp2_late_rank"]
    line = _copies_line(two)
    per_device = [device["copies"]["by_direction"]["DtoH"]["count"] for device in two.data["devices"]]
    assert line.startswith(f"copies in the window (2 devices together): {sum(per_device)} device-to-host copies")
    assert _copies_line(analyses["pageable_readback"]).startswith("copies in the window: ")
