"""Top kernels and copy checks, computed on the model (like ``nsys stats`` summaries).

* Kernel summary: kernels whose start lies in the window, grouped by name: count,
  total_ns, mean_ns, median_ns, and ``share_pct`` = total_ns of the name / total_ns
  of all kernels in the window x 100 (a share of kernel time, not of wall time).
* Copies: in the window, async copies whose host side is pageable memory
  (``pageable_async``: the copy kind says pageable and the launching call is an
  ``*Async`` API, joined on (pid, correlation)), synchronous copy calls, and
  device-to-host copies, each with count and bytes.
"""

from __future__ import annotations

import numpy as np

from tracetriage.model import Trace, is_kind

TOP_KERNELS = 15


def kernel_summary(trace: Trace, lo: int, hi: int, top: int = TOP_KERNELS) -> list[dict]:
    g = trace.gpu
    start = g["start"].to_numpy()
    sel = is_kind(g, "kernel") & (start >= lo) & (start < hi)
    if not sel.any():
        return []
    dur = g["end"].to_numpy()[sel] - start[sel]
    codes = np.asarray(g["name"].cat.codes.to_numpy()[sel], dtype=np.int64)
    cats = g["name"].cat.categories
    # Count and total per name with bincount (no sort of the whole table); the median
    # is computed only for the names that make the top list.
    shift = codes + 1  # code -1 (unknown name) goes to bin 0
    count = np.bincount(shift)
    total_by = np.bincount(shift, weights=dur)
    total = int(dur.sum())
    order = np.argsort(-total_by, kind="stable")[:top]
    out = []
    for b in order:
        if count[b] == 0:
            continue
        mine = dur[shift == b]
        out.append({
            "name": str(cats[b - 1]) if b > 0 else "<unknown>",
            "count": int(count[b]),
            "total_ns": int(round(total_by[b])),
            "mean_ns": int(round(total_by[b] / count[b])),
            "median_ns": int(round(float(np.median(mine)))),
            "share_pct": round(100.0 * total_by[b] / total, 3) if total else 0.0,
        })
    return out


def kernel_duration_median(trace: Trace, lo: int, hi: int) -> int | None:
    g = trace.gpu
    sel = (is_kind(g, "kernel")) & (g["start"].to_numpy() >= lo) & (g["start"].to_numpy() < hi)
    if not sel.any():
        return None
    return int(np.median((g["end"].to_numpy() - g["start"].to_numpy())[sel]))


def copy_checks(trace: Trace, lo: int, hi: int) -> dict:
    g = trace.gpu
    in_win = (g["start"].to_numpy() >= lo) & (g["start"].to_numpy() < hi)
    copies = g[in_win & (is_kind(g, "memcpy"))]
    api = trace.api
    async_calls = api[api["category"] == "memcpy_async"][["pid", "correlation"]]
    pageable = copies[copies["pageable"].to_numpy()]
    if len(pageable) and len(async_calls):
        key = lambda df: df["pid"].to_numpy(np.int64) * (1 << 32) + df["correlation"].to_numpy(np.int64)  # noqa: E731
        pageable_async = pageable[np.isin(key(pageable), key(async_calls))]
    else:
        pageable_async = pageable.iloc[0:0]
    a_in = api[(api["start"] >= lo) & (api["start"] < hi)]
    sync_calls = a_in[a_in["category"] == "memcpy_sync"]
    dtoh = copies[copies["copy_kind"] == "DtoH"]
    return {
        "pageable_async": {
            "count": int(len(pageable_async)),
            "bytes": int(pageable_async["bytes"].sum()),
            "time_ns": int((pageable_async["end"] - pageable_async["start"]).sum()),
        },
        "pageable_any": {"count": int(len(pageable)), "bytes": int(pageable["bytes"].sum())},
        "sync_copy_calls": {"count": int(len(sync_calls)), "time_ns": int((sync_calls["end"] - sync_calls["start"]).sum())},
        "dtoh": {"count": int(len(dtoh)), "bytes": int(dtoh["bytes"].sum())},
    }
