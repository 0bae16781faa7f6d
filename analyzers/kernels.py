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
import pandas as pd

from tracetriage.model import Trace, is_kind

TOP_KERNELS = 15


def kernel_summary(trace: Trace, lo: int, hi: int, top: int = TOP_KERNELS) -> list[dict]:
    g = trace.gpu
    start = g["start"].to_numpy()
    sel = is_kind(g, "kernel") & (start >= lo) & (start < hi)
    if not sel.any():
        return []
    dur = g["end"].to_numpy()[sel] - start[sel]
    codes = g["name"].cat.codes.to_numpy()[sel]
    cats = g["name"].cat.categories
    # Group on the integer codes; only the top names are turned back into strings.
    df = pd.DataFrame({"code": codes, "dur": dur})
    agg = df.groupby("code", sort=False)["dur"].agg(["count", "sum", "mean", "median"])
    total = int(dur.sum())
    agg = agg.sort_values("sum", ascending=False).head(top)
    return [
        {
            "name": str(cats[code]) if code >= 0 else "<unknown>",
            "count": int(r["count"]),
            "total_ns": int(r["sum"]),
            "mean_ns": int(round(r["mean"])),
            "median_ns": int(round(r["median"])),
            "share_pct": round(100.0 * r["sum"] / total, 3) if total else 0.0,
        }
        for code, r in agg.iterrows()
    ]


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
