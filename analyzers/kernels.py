"""Top kernels and copy checks, computed on the model (like ``nsys stats`` summaries).

* Kernel summary: kernels whose start lies in the window, grouped by name: count,
  total_ns, mean_ns, median_ns, and ``share_pct`` = total_ns of the name / total_ns
  of all kernels in the window x 100 (a share of kernel time, not of wall time).
* Copies: in the window, async copies whose host side is pageable memory
  (``pageable_async``: the copy kind says pageable and the launching call is an
  ``*Async`` API, joined on (pid, correlation)), synchronous copy calls, and
  device-to-host copies, each with count and bytes (``pageable_async.hidden_ns``: of those
  copies' time, the part during which a kernel of the same device runs); unified-memory migrations
  (``migrations``: UVM page moves, e.g. from cudaMemPrefetchAsync) apart from copies.
"""

from __future__ import annotations

import numpy as np

from tracetriage.analyzers import intervals as iv
from tracetriage.model import UVM_KINDS, Trace, cat_mask, is_kind

TOP_KERNELS = 15


def kernel_summary(trace: Trace, lo: int, hi: int, top: int = TOP_KERNELS) -> list[dict]:
    return kernel_summary_multi([(trace, lo, hi)], top)


SUMMARY_CHUNK = 1 << 18  # rows per slice: temporaries under the 4 MiB mmap threshold (tracetriage/memory.py)
FEW_NAMES = 16  # up to this many names in a slice, count by one mask per name instead of bincount


def _kernel_slices(trace: Trace, lo: int, hi: int):
    """(durations, name codes + 1) of the kernels that start in [lo, hi), a slice of the
    table at a time; code 0 is a kernel without a name."""
    g = trace.gpu
    start, end = g["start"].to_numpy(), g["end"].to_numpy()
    kernel = is_kind(g, "kernel")
    codes = g["name"].cat.codes.to_numpy()
    for k in range(0, start.size, SUMMARY_CHUNK):
        sk = start[k:k + SUMMARY_CHUNK]
        sel = kernel[k:k + SUMMARY_CHUNK] & (sk >= lo) & (sk < hi)
        yield end[k:k + SUMMARY_CHUNK][sel] - sk[sel], codes[k:k + SUMMARY_CHUNK][sel].astype(np.int32) + 1


def kernel_summary_multi(parts: list[tuple[Trace, int, int]], top: int = TOP_KERNELS) -> list[dict]:
    """Kernel summary over several traces (each in its own window), by kernel name.

    Counts and totals by bincount per slice of each trace (no sort, no copy of the whole
    table), summed by name across traces; the median is computed only for the names that
    make the list, over their durations in every trace (a second pass)."""
    totals: dict[str, list] = {}
    read = []
    for trace, lo, hi in parts:
        cats = trace.gpu["name"].cat.categories
        count = np.zeros(len(cats) + 1, np.int64)
        total_by = np.zeros(len(cats) + 1)
        for dur, shift in _kernel_slices(trace, lo, hi):
            seen = np.zeros(count.size, dtype=bool)
            seen[shift] = True
            used = np.flatnonzero(seen)
            if used.size <= FEW_NAMES:  # a bincount into a handful of bins serializes on its counters
                for b in used:
                    mine = shift == b
                    count[b] += np.count_nonzero(mine)
                    total_by[b] += dur.sum(where=mine)
            else:
                count += np.bincount(shift, minlength=count.size)
                total_by += np.bincount(shift, weights=dur, minlength=count.size)
        if not count.any():
            continue
        for b in np.flatnonzero(count):
            name = str(cats[b - 1]) if b > 0 else "<unknown>"
            acc = totals.setdefault(name, [0, 0.0])
            acc[0] += int(count[b])
            acc[1] += float(total_by[b])
        read.append((trace, lo, hi, cats))
    if not totals:
        return []
    grand = sum(v[1] for v in totals.values())
    names = sorted(totals, key=lambda n: (-totals[n][1], n))[:top]
    durations: dict[str, list] = {name: [] for name in names}
    for trace, lo, hi, cats in read:
        bins = {name: 0 if name == "<unknown>" else int(cats.get_loc(name)) + 1
                for name in names if name == "<unknown>" or name in cats}
        for dur, shift in _kernel_slices(trace, lo, hi):
            if dur.size and dur.min() >= 0 and dur.max() < 1 << 31:
                dur = dur.astype(np.int32)  # half the memory for the medians of every top kernel
            for name, b in bins.items():
                durations[name].append(dur[shift == b])
    out = []
    for name in names:
        count, total = totals[name]
        out.append({
            "name": name,
            "count": int(count),
            "total_ns": int(round(total)),
            "mean_ns": int(round(total / count)),
            "median_ns": int(round(float(np.median(np.concatenate(durations[name]))))),
            "share_pct": round(100.0 * total / grand, 3) if grand else 0.0,
        })
    return out


DEVICE_TOP_KERNELS = 20
CALL_SAMPLE_MAX = 200  # per-call durations kept per kernel name and device of a step-less capture
RATE_BINS = 20  # equal parts of the window a step-less capture's kernel calls are counted in


def device_kernels(trace: Trace, lo: int, hi: int, top: int = DEVICE_TOP_KERNELS,
                   call_samples: bool = False) -> dict[int, list[dict]]:
    """Per device (index into ``trace.devices``): the kernels *and graph replays* that start in
    [lo, hi), by name: ``kind`` ("kernel" or "graph"), ``count``, ``total_ns``; the ``top`` names
    by total time. A graph-level capture records a replay without the kernels inside it, so a
    replay is its own entry ("graph 1"): the time is counted, never left out of the window.
    With ``call_samples`` (a capture without steps, whose comparison judges time per call) each
    entry also has ``durations_ns``: the durations of at most :data:`CALL_SAMPLE_MAX` of its
    calls, every k-th in start order (k = ceil(count / CALL_SAMPLE_MAX)), so every part of the
    window is represented, and ``calls_per_bin``: its calls starting in each of :data:`RATE_BINS`
    equal parts of the window (the spread of its rate over the window).

    One bincount per slice on (device, name) codes: no sort, no copy of the table."""
    g = trace.gpu
    if not len(g):
        return {}
    start, end = g["start"].to_numpy(), g["end"].to_numpy()
    work = is_kind(g, "kernel") | is_kind(g, "graph")
    graph = is_kind(g, "graph")
    codes = g["name"].cat.codes.to_numpy()
    devs = g["device"].to_numpy()
    cats = g["name"].cat.categories
    n_names = len(cats) + 1  # + 1: code -1 (no name) shifted to 0
    n_dev = max(len(trace.devices), int(devs.max()) + 1 if devs.size else 0)
    size = 2 * n_dev * n_names
    if size > 1 << 22:  # a pathological name table: no per-device summary rather than a huge array
        return {}
    count = np.zeros(size, np.int64)
    total = np.zeros(size)
    for sl, sel, key in _chunk_keys(start, work, graph, devs, codes, lo, hi, n_dev, n_names):
        sk = start[sl]
        c = np.bincount(key)
        count[:c.size] += c
        total[:c.size] += np.bincount(key, weights=(end[sl][sel] - sk[sel]).astype(np.float64))
    out: dict[int, list[dict]] = {}
    for key in np.flatnonzero(count):
        is_graph, rest = divmod(int(key), n_dev * n_names)
        dev, code = divmod(rest, n_names)
        name = str(cats[code - 1]) if code > 0 else "<unknown>"
        out.setdefault(dev, []).append({"name": name, "kind": "graph" if is_graph else "kernel",
                                        "count": int(count[key]), "total_ns": int(round(total[key])), "_key": int(key)})
    kept: dict[int, dict] = {}
    for dev, rows in out.items():
        rows.sort(key=lambda r: (-r["total_ns"], r["name"]))
        del rows[top:]
        kept.update({row.pop("_key"): row for row in rows})
    for row in (row for rows in out.values() for row in rows):
        row.pop("_key", None)
    if call_samples and kept:
        _call_samples(kept, start, end, work, graph, devs, codes, lo, hi, n_dev, n_names)
    return out


def _chunk_keys(start, work, graph, devs, codes, lo: int, hi: int, n_dev: int, n_names: int):
    """The table in SUMMARY_CHUNK slices: (slice, rows of it that are work starting in [lo, hi), their
    (graph or kernel, device, name) key), skipping slices without such rows."""
    for k in range(0, start.size, SUMMARY_CHUNK):
        sl = slice(k, k + SUMMARY_CHUNK)
        sk = start[sl]
        sel = work[sl] & (sk >= lo) & (sk < hi)
        if sel.any():
            yield sl, sel, ((graph[sl][sel].astype(np.int64) * n_dev + devs[sl][sel].astype(np.int64)) * n_names
                            + codes[sl][sel].astype(np.int64) + 1)


def _call_samples(rows: dict[int, dict], start, end, work, graph, devs, codes, lo: int, hi: int,
                  n_dev: int, n_names: int) -> None:
    """``durations_ns`` of each kept (device, name) key's entry in ``rows``: every k-th call in
    start order (the table is sorted by start), k = ceil(count / CALL_SAMPLE_MAX); and
    ``calls_per_bin``, its calls by the part of the window they start in."""
    keys = np.fromiter(rows, np.int64)
    stride = {key: -(-row["count"] // CALL_SAMPLE_MAX) for key, row in rows.items()}
    seen = dict.fromkeys(rows, 0)
    picked: dict[int, list] = {key: [] for key in rows}
    bins = {key: np.zeros(RATE_BINS, np.int64) for key in rows}
    span = max(1, hi - lo)
    for sl, sel, key in _chunk_keys(start, work, graph, devs, codes, lo, hi, n_dev, n_names):
        sk = start[sl]
        kept_rows = np.isin(key, keys)
        key = key[kept_rows]
        duration = (end[sl][sel] - sk[sel]).astype(np.int64)[kept_rows]
        part = np.minimum((sk[sel][kept_rows] - lo) * RATE_BINS // span, RATE_BINS - 1)
        order = np.argsort(key, kind="stable")  # by key, each key's calls still in start order
        present, first = np.unique(key[order], return_index=True)
        for one, lo_row, hi_row in zip(present.tolist(), first.tolist(), [*first[1:].tolist(), order.size]):
            rows_of = order[lo_row:hi_row]
            bins[one] += np.bincount(part[rows_of], minlength=RATE_BINS)
            mine = duration[rows_of]
            ordinal = seen[one] + np.arange(mine.size)
            picked[one].append(mine[ordinal % stride[one] == 0])
            seen[one] += mine.size
    for key, row in rows.items():
        row["durations_ns"] = [int(value) for value in np.concatenate(picked[key])] if picked[key] else []
        row["calls_per_bin"] = [int(value) for value in bins[key]]


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
    """Median duration of the kernels that start in [lo, hi), gathered slice by slice into one
    buffer that the median then partitions in place (no copy of the durations)."""
    buf = np.empty(len(trace.gpu), np.int32)  # half the memory while every kernel is under 2.1 s
    n = 0
    for dur, _ in _kernel_slices(trace, lo, hi):
        if buf.dtype == np.int32 and dur.size and int(dur.max()) > np.iinfo(np.int32).max:
            wide = np.empty(buf.size, np.int64)
            wide[:n] = buf[:n]
            buf = wide
        buf[n:n + dur.size] = dur
        n += dur.size
    return int(np.median(buf[:n], overwrite_input=True)) if n else None


def under_kernels(trace: Trace, copies) -> int:
    """Of the copies' summed time (each copy's own duration), the ns during which a kernel or a
    graph replay of the same device runs: copy time the GPU spends computing anyway, so the copy
    delays no work (``pageable_async.hidden_ns``; its share of ``time_ns`` is the hidden share)."""
    if not len(copies):
        return 0
    g = trace.gpu
    work = is_kind(g, "kernel") | is_kind(g, "graph")
    g_dev, g_start, g_end = g["device"].to_numpy(), g["start"].to_numpy(), g["end"].to_numpy()
    c_dev, c_start, c_end = (copies[k].to_numpy(np.int64) for k in ("device", "start", "end"))
    hidden = 0
    for dev in np.unique(c_dev):
        mine = c_dev == dev
        cs, ce = c_start[mine], c_end[mine]
        k = work & (g_dev == dev)
        ks, ke = g_start[k], g_end[k]
        near = iv.Coverage(*iv.union(cs, ce)).overlap(ks, ke) > 0  # only kernels that touch a copy matter
        if near.any():
            hidden += int(iv.Coverage(*iv.union(ks[near], ke[near])).overlap(cs, ce).sum())
    return hidden


def copy_checks(trace: Trace, lo: int, hi: int, labels: list[str]) -> dict:
    """Copies that cost (pageable async copies, with their time per device label: ``labels[i]`` names
    device i), page migrations, pageable copies, synchronous copy calls, DtoH copies, in [lo, hi)."""
    g = trace.gpu
    g_start = g["start"].to_numpy()
    copies = g[(g_start >= lo) & (g_start < hi) & is_kind(g, "memcpy")]
    copies = copies.assign(bytes=copies["bytes"].clip(lower=0))  # a size the format does not record (-1) adds nothing
    # API rows are picked by category first: copy calls are few, the table may hold 10M launches
    api = trace.api
    async_calls = api.loc[cat_mask(api, "category", "memcpy_async"), ["pid", "correlation"]]
    pageable = copies[copies["pageable"].to_numpy()]
    if len(pageable) and len(async_calls):
        key = lambda df: df["pid"].to_numpy(np.int64) * (1 << 32) + df["correlation"].to_numpy(np.int64)  # noqa: E731
        pageable_async = pageable[np.isin(key(pageable), key(async_calls))]
    else:
        pageable_async = pageable.iloc[0:0]
    sync_calls = api[cat_mask(api, "category", "memcpy_sync")]
    sync_calls = sync_calls[(sync_calls["start"] >= lo) & (sync_calls["start"] < hi)]
    dtoh = copies[copies["copy_kind"] == "DtoH"]
    uvm = copies[copies["copy_kind"].astype(object).isin(UVM_KINDS).to_numpy()]
    dur = (pageable_async["end"] - pageable_async["start"]).to_numpy()
    devs, inverse = np.unique(pageable_async["device"].to_numpy(), return_inverse=True)
    by_device = {labels[int(k)]: int(v) for k, v in zip(devs, np.bincount(inverse, weights=dur, minlength=devs.size))}
    return {
        "pageable_async": {
            "count": int(len(pageable_async)),
            "bytes": int(pageable_async["bytes"].sum()),
            "time_ns": int(dur.sum()),
            "hidden_ns": under_kernels(trace, pageable_async),
            "by_device": by_device,
        },
        "migrations": {"count": int(len(uvm)), "bytes": int(uvm["bytes"].sum())},
        "pageable_any": {"count": int(len(pageable)), "bytes": int(pageable["bytes"].sum())},
        "sync_copy_calls": {"count": int(len(sync_calls)), "time_ns": int((sync_calls["end"] - sync_calls["start"]).sum())},
        "dtoh": {"count": int(len(dtoh)), "bytes": int(dtoh["bytes"].sum())},
    }
