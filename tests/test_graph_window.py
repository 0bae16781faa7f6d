"""analyzers/graph_window.graph_rows (efficiency's graph-replay figures) read a slice of rows at a time: with
slices of 7 rows its counts equal those computed here from the raw table, row by row."""

import numpy as np
import pytest
from conftest import ROOT

from tracetriage import open_case
from tracetriage.analyzers import graph_window

BUNDLES = ("samples/bundles/graph_decode", "samples/h200/graph_decode.json.gz")


def _raw(trace, lo, hi, tied):
    """The module docstring's definitions, one row at a time."""
    gpu = trace.gpu
    whole = whole_ns = kernels = kernel_ns = untied = untied_ns = 0
    heads, last = set(), None
    for row, (kind, start, end, replayed, pid, corr) in enumerate(zip(
            gpu["kind"], gpu["start"], gpu["end"], gpu["in_graph"], gpu["pid"], gpu["correlation"])):
        if not (replayed and lo <= start < hi):
            continue
        if kind == "graph":
            whole, whole_ns = whole + 1, whole_ns + int(end - start)
        if kind != "kernel":
            continue
        kernels, kernel_ns = kernels + 1, kernel_ns + int(end - start)
        if row in tied:
            continue
        untied, untied_ns = untied + 1, untied_ns + int(end - start)
        key = (int(pid), int(corr))
        if key != last:
            heads.add(key)
        last = key
    return whole, whole_ns, kernels, kernel_ns, untied, untied_ns, len(heads)


@pytest.mark.parametrize("bundle", BUNDLES)
def test_graph_rows_in_slices_equal_the_raw_table(bundle, monkeypatch):
    trace = open_case([ROOT / bundle]).traces[0]
    gpu = trace.gpu
    assert gpu["in_graph"].any(), f"{bundle} replays no graph"
    replayed = gpu["start"][gpu["in_graph"].to_numpy(bool)]
    lo, hi = int(replayed.quantile(0.1)), int(replayed.quantile(0.8))
    tied = np.flatnonzero(gpu["in_graph"].to_numpy(bool))[::3].astype(np.int64)
    monkeypatch.setattr(graph_window, "SLICE", 7)
    for tied_rows in (np.empty(0, np.int64), tied):
        got = graph_window.graph_rows(trace, lo, hi, tied_rows, keep_rows=True)
        want = _raw(trace, lo, hi, set(tied_rows.tolist()))
        assert (got.whole, got.whole_ns, got.kernels, got.kernel_ns, got.untied, got.untied_ns, got.replays) == want
        assert got.untied_rows.size == want[4] and not np.isin(got.untied_rows, tied_rows).any()
        assert want[0] or (want[2] and want[6])  # whole-graph replays (nsys) or replayed kernels (Kineto)
