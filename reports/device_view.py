"""The devices' sections of the report's view: each device's row (busy, compute, copies, gaps, idle
by cause, its window accounting), the longest idle gaps, the "GPU idle by host activity" table,
the gap histogram and the window's copies in one line. Built by
:func:`tracetriage.reports.view.report_view` from the device records; figures formatted once."""

from __future__ import annotations

from dataclasses import dataclass

from tracetriage.records.trace import Copies, Device, DirectionTotals, Window, merged_directions
from tracetriage.reports.palette import cause_label
from tracetriage.wording import as_text, cause_name, count, fixed, fmt_bytes, fmt_ns, pct, plural, short_middle


@dataclass(frozen=True, slots=True)
class DeviceView:
    """One device's row: busy, compute and copy-only shares of its window (%), idle gaps, collectives,
    its window accounting (each finding's claim, % of the window)."""
    id: str
    name: str
    busy_pct: str
    compute_pct: str
    copy_only_pct: str
    gaps: str
    gap_p50: str
    gap_p99: str
    gap_max: str
    collective_pct: str
    exposed_pct: str
    idle_by_cause: str
    accounting: str
    claim_cells: tuple[str | None, ...]
    unclaimed_pct: str


@dataclass(frozen=True, slots=True)
class ClaimColumn:
    """A finding that claims a slice of some device's window, with its colour on the charts."""
    id: str
    color: str


@dataclass(frozen=True, slots=True)
class GapView:
    """One of the longest idle gaps: where it starts from the window start, its length, the host's state."""
    device: str
    start: str
    length: str
    host: str


@dataclass(frozen=True, slots=True)
class HostIdleView:
    """One row of "GPU idle by host activity": a host range (name, what recorded it) and the device idle
    time it covers — ns, % of the window, gaps touched — with the part outside every runtime call."""
    device: str
    name: str
    source: str
    idle: str
    pct_of_window: str
    gaps: str
    host_code: str


def _claims(device: Device) -> list[tuple[str, float]]:
    """The findings' claims on a device's window (% of it), largest first."""
    claims = device.accounting.claims_pct if device.accounting else {}
    return sorted(claims.items(), key=lambda x: -x[1])


def _copy_kinds(device: Device) -> str:
    """What a device's copy slice holds, in words: a memset sets memory, it moves none."""
    kinds = device.copies.by_direction if device.copies else {}
    return "memsets" if set(kinds) == {"memset"} else "copies and memsets" if "memset" in kinds else "copies"


def device_view(device: Device, claim_columns: list[str], vendor: str | None) -> DeviceView:
    """One device's row of the Measurements table, with its window accounting in words."""
    window = device.window_ns or 1
    causes = [(c, n) for c, n in device.gaps.by_cause.items() if n]
    slices = device.accounting.slices_pct if device.accounting else {}
    claims = _claims(device)
    kernels, collectives, copies = (slices.get(name, 0.0) for name in ("compute", "collective", "copy"))
    compute = kernels + collectives  # kernels, collectives included: one definition
    unclaimed = max(0.0, 100.0 - sum(x for _, x in claims))
    # the claims and what is left sum to the window; then what the whole window holds (not the unclaimed part's):
    # compute named as defined everywhere in analyze, collectives included, and of it the collectives no kernel hides
    accounting = (", ".join([f"{k} {pct(x)}" for k, x in claims] + [f"unclaimed {pct(unclaimed)}"])
                  + f"; of the window in all: compute {pct(compute)} (collectives included"
                  + (f"; {pct(collectives)} collectives no compute hides" if collectives else "")
                  + f"), {_copy_kinds(device)} {pct(copies)}")
    mine = dict(claims)
    gaps = device.gaps
    return DeviceView(
        id=device.id, name=as_text(device.name), busy_pct=fixed(device.busy_pct, 1), compute_pct=fixed(compute, 1),
        copy_only_pct=fixed(copies, 1), gaps=count(gaps.count), gap_p50=fmt_ns(gaps.p50_ns),
        gap_p99=fmt_ns(gaps.p99_ns), gap_max=fmt_ns(gaps.max_ns),
        collective_pct=fixed(device.collective_share_pct, 1), exposed_pct=fixed(device.collective_exposed_pct, 1),
        idle_by_cause=", ".join(f"{cause_name(c, vendor)} {100 * n / window:.1f}%"
                                for c, n in sorted(causes, key=lambda x: -x[1])) or "-",
        accounting=accounting, claim_cells=tuple(fixed(mine.get(k), 1) for k in claim_columns), unclaimed_pct=fixed(unclaimed, 1))


def _with_host_ranges(devices: tuple[Device, ...]) -> list[Device]:
    """The first two devices that recorded idle time inside host ranges."""
    return [device for device in devices if device.idle_by_host and device.idle_by_host.ranges][:2]


def idle_by_host_rows(devices: tuple[Device, ...]) -> tuple[HostIdleView, ...]:
    """The top host ranges by the idle time they cover, on each of the first two devices that recorded any."""
    return tuple(HostIdleView(device.id, short_middle(as_text(row.name)), as_text(row.source), fmt_ns(row.idle_ns),
                              fixed(row.pct_of_window, 1), count(row.gaps), fmt_ns(row.host_code_ns))
                 for device in _with_host_ranges(devices) for row in device.idle_by_host.ranges)


def idle_by_host_scope(devices: tuple[Device, ...]) -> str:
    """What the host-activity table covers: each shown device's idle time inside some host range."""
    return "; ".join(f"{device.id}: {pct(100.0 * block.attributed_ns / block.idle_ns)} of its idle time "
                     f"inside a host range ({', '.join(block.sources)})"
                     for device in _with_host_ranges(devices) for block in [device.idle_by_host] if block.idle_ns)


def longest_gaps(devices: tuple[Device, ...], window: Window | None, vendor: str | None) -> tuple[GapView, ...]:
    """The five longest idle gaps of each of the first two devices (their causes in the vendor's words)."""
    start = (window.start_ns if window else 0) or 0
    return tuple(GapView(device.id, fmt_ns(gap.start_ns - start), fmt_ns(gap.length_ns), cause_label(gap.cause, vendor))
                 for device in devices[:2] for gap in device.gaps.top[:5])


def gap_histogram(devices: tuple[Device, ...]) -> str | None:
    """The first device's gaps by length, one count per bin."""
    if not devices:
        return None
    return f"Gap lengths on {devices[0].id}: " + ", ".join(f"{k} {count(n)}" for k, n in devices[0].gaps.histogram.items())


_DIRECTIONS = {"HtoD": "host-to-device", "DtoH": "device-to-host", "DtoD": "device-to-device", "PtoP": "peer-to-peer",
               "HtoH": "host-to-host"}


def _copies_words(direction: str, n: int) -> str:
    """'3 device-to-host copies', '151 memsets'."""
    if direction == "memset":
        return plural(n, "memset")
    return plural(n, _DIRECTIONS.get(direction, direction) + " copy", _DIRECTIONS.get(direction, direction) + " copies")


def _copy_bytes(totals: DirectionTotals) -> str:
    """The bytes of a direction's operations, 'size not recorded' for those whose format records
    none (rocprofv3 blit memsets: by_direction's bytes_unrecorded), never '0 B' for them."""
    missing = totals.bytes_unrecorded or 0
    if missing >= totals.count:
        return "size not recorded"
    return fmt_bytes(totals.bytes) + (f"; {missing:,} of them of unrecorded size" if missing else "")


def copies_text(copies: Copies | None, devices: tuple[Device, ...] = ()) -> str | None:
    """The window's copies in one line: each direction's count and bytes (all devices', said so), pageable, sync, UVM."""
    if not copies:
        return None
    # without per-device figures (an analysis saved before them), the device-to-host copies alone
    directions = merged_directions(devices) or (
        {"DtoH": DirectionTotals(copies.dtoh.count, copies.dtoh.bytes)} if copies.dtoh.count else {})
    moved = ", ".join(f"{_copies_words(k, totals.count)} ({_copy_bytes(totals)})"
                      for k, totals in sorted(directions.items(), key=lambda kv: -kv[1].bytes))
    together = f" ({len(devices)} devices together)" if len(devices) > 1 else ""  # not one device's figures
    migrations = copies.migrations
    return (f"copies in the window{together}: {moved or 'none'}; "
            f"{plural(copies.pageable_async.count, 'async copy', 'async copies')} "
            f"from/to pageable memory, {plural(copies.sync_copy_calls.count, 'synchronous copy call')}; "
            f"unified-memory migrations (page moves, not copies): {migrations.count:,} ({fmt_bytes(migrations.bytes)})")
