"""The graph-replayed rows of a trace's window, counted a slice of rows at a time (efficiency._graph_not_measured).

Definitions (rows that start in the window [lo, hi) and are graph-replayed, ``gpu.in_graph``):

* ``whole``: the rows of kind ``graph``, nsys's whole-graph replay intervals (their kernels not recorded):
  their count and summed duration;
* ``kernels``, ``kernel_ns``: the rows of kind ``kernel``, their count and summed duration; ``untied``: those kernel rows not in
  ``tied_rows`` (rows an op was tied to), their count and summed duration;
* ``replays``: the distinct (pid, correlation) keys of the untied kernels' runs: a replay's kernels come in a
  run of one launch's correlation, and a key counts once however many runs it heads.

The table is read 256K rows at a time (intervals.SLICE): on a 10M-kernel export of graph replays every row is
replayed, and whole-column temporaries (row numbers, gathers, keys: ~20 passes over 80 MB arrays, each mapped
and zeroed afresh) cost more than the counting. Durations are summed as int64, exact in any order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tracetriage.analyzers.intervals import SLICE
from tracetriage.model import Trace, cat_codes

KEY_SHIFT = 1 << 32  # key = pid * 2^32 + correlation


@dataclass(frozen=True, slots=True)
class GraphRows:
    """What the module docstring defines; ``untied_rows`` (row numbers, ascending) only when asked for."""

    whole: int = 0
    whole_ns: int = 0
    kernels: int = 0
    kernel_ns: int = 0
    untied: int = 0
    untied_ns: int = 0
    replays: int = 0
    untied_rows: np.ndarray | None = None


def graph_rows(trace: Trace, lo: int, hi: int, tied_rows: np.ndarray, keep_rows: bool = False) -> GraphRows:
    """The window's graph-replayed rows of ``trace`` (module docstring)."""
    gpu = trace.gpu
    start, end = gpu["start"].to_numpy(np.int64), gpu["end"].to_numpy(np.int64)
    in_graph = gpu["in_graph"].to_numpy(bool)
    kind_codes, kinds = cat_codes(gpu["kind"])
    graph_code, kernel_code = (kinds.index(k) if k in kinds else -2 for k in ("graph", "kernel"))
    pid, corr = gpu["pid"].to_numpy(np.int64), gpu["correlation"].to_numpy(np.int64)
    whole = whole_ns = kernels = kernel_ns = untied = untied_ns = 0
    heads: list[np.ndarray] = []
    kept: list[np.ndarray] = []
    last_key = None
    for at in range(0, len(gpu), SLICE):
        part = slice(at, at + SLICE)
        s, e, codes = start[part], end[part], kind_codes[part]
        replayed = in_graph[part] & (s >= lo) & (s < hi)
        if not replayed.any():
            continue
        on = replayed & (codes == graph_code)
        whole += int(on.sum())
        whole_ns += int((e[on] - s[on]).sum())
        rows = np.flatnonzero(replayed & (codes == kernel_code))
        kernels += rows.size
        kernel_ns += int((e[rows] - s[rows]).sum())
        if tied_rows.size:
            rows = rows[~np.isin(rows + at, tied_rows)]
        if not rows.size:
            continue
        untied += rows.size
        untied_ns += int((e[rows] - s[rows]).sum())
        key = pid[part][rows] * KEY_SHIFT + corr[part][rows]
        head = np.empty(key.size, bool)
        head[0] = last_key is None or key[0] != last_key
        np.not_equal(key[1:], key[:-1], out=head[1:])
        heads.append(key[head])
        last_key = int(key[-1])
        if keep_rows:
            kept.append(rows + at)
    replays = int(np.unique(np.concatenate(heads)).size) if heads else 0
    return GraphRows(whole, whole_ns, kernels, kernel_ns, untied, untied_ns, replays,
                     (np.concatenate(kept) if kept else np.empty(0, np.int64)) if keep_rows else None)
