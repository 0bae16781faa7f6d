"""Top kernels and copy checks, computed on the model (like ``nsys stats`` summaries).

* Kernel summary: kernels whose start lies in the window, grouped by name: count,
  total_ns, mean_ns, median_ns, and ``share_pct`` = total_ns of the name / total_ns
  of all kernels in the window x 100 (a share of kernel time, not of wall time).
* Copies: in the window, async copies whose host side is pageable memory
  (``pageable_async``: the copy kind says pageable and the launching call is an
  ``*Async`` API, joined on (pid, correlation)), synchronous copy calls, and
  device-to-host copies, each with count and bytes; unified-memory migrations
  (``migrations``: UVM page moves, e.g. from cudaMemPrefetchAsync) apart from copies.
"""

from __future__ import annotations

import numpy as np

from tracetriage.model import UVM_KINDS, Trace, is_kind

TOP_KERNELS = 15


def kernel_summary(trace: Trace, lo: int, hi: int, top: int = TOP_KERNELS) -> list[dict]:
    return kernel_summary_multi([(trace, lo, hi)], top)


def _kernel_durations(trace: Trace, lo: int, hi: int):
    g = trace.gpu
    start = g["start"].to_numpy()
    sel = is_kind(g, "kernel") & (start >= lo) & (start < hi)
    dur = g["end"].to_numpy()[sel] - start[sel]
    codes = np.asarray(g["name"].cat.codes.to_numpy()[sel], dtype=np.int64)
    return dur, codes, g["name"].cat.categories


def kernel_summary_multi(parts: list[tuple[Trace, int, int]], top: int = TOP_KERNELS) -> list[dict]:
    """Kernel summary over several traces (each in its own window), by kernel name.

    Counts and totals by bincount per trace (no sort of the whole table), summed by
    name across traces; the median is computed only for the names that make the list,
    over their durations in every trace."""
    totals: dict[str, list] = {}
    read = []
    for trace, lo, hi in parts:
        dur, codes, cats = _kernel_durations(trace, lo, hi)
        if not dur.size:
            continue
        shift = codes + 1  # code -1 (unknown name) goes to bin 0
        count = np.bincount(shift)
        total_by = np.bincount(shift, weights=dur)
        for b in np.flatnonzero(count):
            name = str(cats[b - 1]) if b > 0 else "<unknown>"
            acc = totals.setdefault(name, [0, 0.0])
            acc[0] += int(count[b])
            acc[1] += float(total_by[b])
        read.append((dur, shift, cats))
    if not totals:
        return []
    grand = sum(v[1] for v in totals.values())
    names = sorted(totals, key=lambda n: (-totals[n][1], n))[:top]
    out = []
    for name in names:
        count, total = totals[name]
        mine = []
        for dur, shift, cats in read:
            b = 0 if name == "<unknown>" else (int(cats.get_loc(name)) + 1 if name in cats else None)
            if b is not None:
                mine.append(dur[shift == b])
        out.append({
            "name": name,
            "count": int(count),
            "total_ns": int(round(total)),
            "mean_ns": int(round(total / count)),
            "median_ns": int(round(float(np.median(np.concatenate(mine))))),
            "share_pct": round(100.0 * total / grand, 3) if grand else 0.0,
        })
    return out


def merge_copy_checks(checks: list[dict]) -> dict | None:
    """The copy checks of several traces, summed field by field."""
    if not checks:
        return None

    def add(a, b):
        if isinstance(a, dict):
            return {k: add(a.get(k, 0 if not isinstance(v, dict) else {}), v) for k, v in b.items()} | {
                k: v for k, v in a.items() if k not in b}
        return a + b

    out = checks[0]
    for c in checks[1:]:
        out = add(out, c)
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
    uvm = copies[copies["copy_kind"].astype(object).isin(UVM_KINDS).to_numpy()]
    dur = (pageable_async["end"] - pageable_async["start"]).to_numpy()
    devs, inverse = np.unique(pageable_async["device"].to_numpy(), return_inverse=True)
    by_device = {int(k): int(v) for k, v in zip(devs, np.bincount(inverse, weights=dur, minlength=devs.size))}
    return {
        "pageable_async": {
            "count": int(len(pageable_async)),
            "bytes": int(pageable_async["bytes"].sum()),
            "time_ns": int(dur.sum()),
            "by_device": by_device,
        },
        "migrations": {"count": int(len(uvm)), "bytes": int(uvm["bytes"].sum())},
        "pageable_any": {"count": int(len(pageable)), "bytes": int(pageable["bytes"].sum())},
        "sync_copy_calls": {"count": int(len(sync_calls)), "time_ns": int((sync_calls["end"] - sync_calls["start"]).sum())},
        "dtoh": {"count": int(len(dtoh)), "bytes": int(dtoh["bytes"].sum())},
    }
