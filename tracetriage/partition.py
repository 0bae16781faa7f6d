"""The GPU table's rows of one device, found once per device and shared by its passes.

The analyzers that read one device at a time (the device timeline, collectives, copies, the
idle-by-host pass, the Perfetto export's busy slices) each built a mask over every row of the
table for the device, on several columns: on an 8-device capture 8 full passes over a 10M-row
table per analyzer. :func:`device_rows` hands them the row numbers of the device instead, in
ascending order (the table's start order): one pass over the device column finds them, and
the gathers of a column at them read only the device's rows. Inside :func:`held` (the analysis
measures each device on one thread, every pass of it inside) the rows are found once on entry
and every pass of that device on that thread reads the same array; the next device's job finds
its own, so no more than one device's rows per thread are held (4 bytes a row of it, int32 while
the table has fewer than 2^31 rows).

Reading a device's rows through it gives exactly the rows the mask ``device == d`` picks, in the
same order: the numbers computed from them are the same.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

from tracetriage.model import Trace, is_one_value_view

_HELD = threading.local()  # (gpu table, device, rows) of the device job running on this thread


def _find(trace: Trace, device: int) -> np.ndarray | None:
    gpu = trace.gpu
    devs = gpu["device"].to_numpy() if len(gpu) else np.empty(0, np.int32)
    if not devs.size or (is_one_value_view(devs) and int(devs[0]) == device):
        return None
    rows = np.flatnonzero(devs == device) if not is_one_value_view(devs) else np.empty(0, np.int64)
    if rows.size == devs.size:
        return None
    rows = rows.astype(np.int32) if devs.size < (1 << 31) else rows
    rows.flags.writeable = False
    return rows


def device_rows(trace: Trace, device: int) -> np.ndarray | None:
    """Row numbers of the GPU table whose ``device`` is ``device``, ascending (read-only); None when
    every row is (the one-device capture: read the columns whole). Found once per :func:`held` block
    of the device on this thread; outside one, found on each call (one pass over the device column)."""
    kept = getattr(_HELD, "rows", None)
    if kept is not None and kept[0] is trace.gpu and kept[1] == device:
        return kept[2]
    return _find(trace, device)


@contextmanager
def held(trace: Trace, device: int):
    """Within the block, :func:`device_rows` of ``device`` on this thread returns the rows found on entry."""
    before = getattr(_HELD, "rows", None)
    _HELD.rows = (trace.gpu, device, _find(trace, device))
    try:
        yield
    finally:
        _HELD.rows = before


def take(values: np.ndarray, rows: np.ndarray | None) -> np.ndarray:
    """``values`` at ``rows`` (:func:`device_rows`), or ``values`` themselves when rows is None."""
    return values if rows is None else values[rows]
