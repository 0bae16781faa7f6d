"""A device's rows of the GPU table (tracetriage/partition.py): exactly the rows the mask ``device == d``
picks, in order, on generated and real multi-device captures; found once inside ``held``; and the
per-device passes that read them give the numbers of the mask."""

import numpy as np
import pytest
from conftest import BUNDLES, real

from tracetriage.analyzers import accounting, host_activity
from tracetriage.analyzers import collectives as coll
from tracetriage.analyzers import intervals as iv
from tracetriage.analyzers import timeline as tl
from tracetriage.model import is_kind
from tracetriage.parsers import nsys
from tracetriage.partition import device_rows, held, take

CAPTURES = [BUNDLES / "tp8_cross_island" / "trace.sqlite", BUNDLES / "dp2_late_rank" / "trace.sqlite",
            BUNDLES / "eager_decode" / "trace.sqlite"]


def _traces():
    paths = [p for p in CAPTURES if p.exists()]
    paths.append(real("nsys", "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite"))
    return [nsys.parse(str(p)) for p in paths]


@pytest.fixture(scope="module")
def traces():
    return _traces()


def test_the_rows_are_the_masks_rows_in_order(traces):
    assert any(len(t.devices) > 2 for t in traces) and any(len(t.devices) == 1 for t in traces)
    for trace in traces:
        devs = trace.gpu["device"].to_numpy()
        for device in range(-1, len(trace.devices) + 1):
            rows = device_rows(trace, device)
            want = np.flatnonzero(devs == device)
            if rows is None:  # every row is the device's: the columns are read whole
                assert want.size == devs.size
            else:
                assert rows.dtype.kind == "i" and np.array_equal(rows, want)
                assert not rows.flags.writeable
                assert np.array_equal(take(trace.gpu["start"].to_numpy(), rows), trace.gpu["start"].to_numpy()[want])


def test_held_finds_them_once_and_only_for_its_device(traces):
    trace = next(t for t in traces if len(t.devices) > 2)
    with held(trace, 1):
        first = device_rows(trace, 1)
        assert device_rows(trace, 1) is first  # the same array for every pass of the device
        assert device_rows(trace, 2) is not first and not np.array_equal(device_rows(trace, 2), first)
    assert device_rows(trace, 1) is not first and np.array_equal(device_rows(trace, 1), first)


def _masked(trace, device, lo, hi):
    """The device's passes as the whole-table masks gave them (the code before the partition)."""
    g = trace.gpu
    mine = (g["device"].to_numpy() == device) & (g["end"].to_numpy() > lo) & (g["start"].to_numpy() < hi)
    return g["start"].to_numpy()[mine], g["end"].to_numpy()[mine]


def test_the_device_passes_read_the_masks_rows(traces):
    for trace in traces:
        g = trace.gpu
        lo, hi = int(g["start"].min()), int(g["end"].max())
        lo += (hi - lo) // 10  # a window that cuts rows at its edges
        for device in range(len(trace.devices)):
            s, e = _masked(trace, device, lo, hi)
            chunks = list(tl._device_chunks(trace, device, lo, hi, 64, with_rows=True))
            want_s, want_e = tl._clipped(s, e, lo, hi)
            for k, want in ((0, want_s), (1, want_e)):
                assert np.array_equal(np.concatenate([c[k] for c in chunks]) if chunks else np.empty(0), want)
            with held(trace, device):
                gaps = host_activity._device_gaps(trace, device, lo, hi, 1)
                got = coll.device_collectives(trace, device, lo, hi)
                copies = accounting.copy_activity(trace, device, lo, hi)
            # the gaps and the collective time as the masks over the whole table give them
            busy = iv.union(np.maximum(s, lo), np.minimum(iv.not_before(e, s), hi))
            for a, b in zip(gaps, iv.gaps(*busy, lo, hi, 1)):
                assert np.array_equal(a, b)
            kern = (g["device"].to_numpy() == device) & is_kind(g, "kernel") & (g["collective"].cat.codes.to_numpy() >= 0)
            cs, ce = iv.clip(*iv.union(g["start"].to_numpy()[kern], g["end"].to_numpy()[kern]), lo, hi)
            assert got.collective_ns == iv.measure(cs, ce)
            assert copies == accounting.copy_activity(trace, device, lo, hi)  # outside held: found afresh
