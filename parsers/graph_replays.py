"""Kernels replayed from a CUDA/HIP graph, tied to the operators that launched them at capture.

What the traces record (the real Kineto samples, samples/real/kineto/SOURCES.md): a replayed
kernel carries only the correlation id of the ``cudaGraphLaunch``/``hipGraphLaunch`` that
replayed it — no ``graph node id`` (none of the samples has a non-zero one) and no External id
of its own (an older CUDA trace repeats the launch's). The operator that launched it ran once,
during the capture: between ``*StreamBeginCapture`` and ``*StreamEndCapture`` the host thread
makes one launch call per kernel (with the External id of the innermost op, whose shapes
``record_shapes=True`` wrote, and on ROCm the kernel's name in ``args.kernel``), and no kernel
runs. vLLM and SGLang profile the capture phase into its own trace; its launches pair one to one,
in order, with the kernels of each replay of that graph (421 = 421, 25 piecewise graphs of 4 and
15 kernels, 544 = 544 in the TraceLens pairs).

So a replay is tied to a capture when they are the same sequence of kernels: the same count,
the same names where the capture recorded them, kernels in start order on one stream. A graph
replays exactly the shapes it was captured with, so the capture's ops are the replay's. When
several captures match (the same layer captured for several batch sizes) they must record the
same ops and shapes, else the replay stays untied: which one ran is not in the trace. Within one
trace the capture and the replay are the same process; across two files of a case (the capture
profiled apart) they must be the same process (pid and profiler start) and the capture must name
its kernels, so a count alone never pairs two files.

:func:`captures` collects a trace's captures (JSON-friendly, kept in ``meta["graph_captures"]``);
:func:`tie` adds ``ops``/``op_kernels`` rows for the replays it can tie — ``op_kernels.nth`` is
the kernel's place among its replay's kernels — and records in ``meta["graph_ties"]`` which
replays stayed untied and why.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracetriage.model import is_kind

BEGIN = re.compile(r"^(cuda|cu|hip)StreamBeginCapture")
END = re.compile(r"^(cuda|cu|hip)StreamEndCapture")

# why a replay stays untied (meta["graph_ties"]["untied"] keys; analyzers/efficiency.py words them)
REASONS = ("no_capture", "no_match", "ambiguous", "unnamed")


def captures(api: pd.DataFrame, ext: np.ndarray, launch_kernel: np.ndarray | None, ops: pd.DataFrame,
             ranges: pd.DataFrame | None = None) -> dict | None:
    """The graph captures of one trace: per capture its thread, span, label (the innermost host
    range around it, e.g. vLLM's ``capture_32_FULL``) and, per kernel launch call inside it, the
    kernel's name (``args.kernel``, when recorded) and the op (name, shape) whose External id it
    carries. ``api`` is the trace's runtime table in start order, ``ext`` its External ids,
    ``launch_kernel`` the kernel names of the launch calls (None: not recorded), ``ops`` the shaped
    ops before linking (pid, start, end, name, shape, ext_id). None when the trace captured nothing."""
    if not len(api):
        return None
    names = np.asarray(api["name"].cat.categories, dtype=object)
    is_begin = np.append([bool(BEGIN.match(n)) for n in names], False)[np.asarray(api["name"].cat.codes)]
    if not is_begin.any():
        return None
    is_end = np.append([bool(END.match(n)) for n in names], False)[np.asarray(api["name"].cat.codes)]
    pid, tid = api["pid"].to_numpy(np.int64), api["tid"].to_numpy(np.int64)
    start, end = api["start"].to_numpy(np.int64), api["end"].to_numpy(np.int64)
    launch = (api["category"] == "launch").to_numpy()
    by_ext = ops.drop_duplicates("ext_id", keep="last").set_index("ext_id") if len(ops) else None
    kernels: dict[str, int] = {}
    op_keys: dict[tuple, int] = {}
    out = []
    ends = np.flatnonzero(is_end)
    for b in np.flatnonzero(is_begin):  # per capture: a few to a few hundred
        e = ends[(ends > b) & (pid[ends] == pid[b]) & (tid[ends] == tid[b])]
        if not e.size:
            continue
        e = e[0]
        rows = b + 1 + np.flatnonzero(launch[b + 1:e] & (pid[b + 1:e] == pid[b]) & (tid[b + 1:e] == tid[b]))
        if not rows.size:
            continue
        knames = []
        for r in rows:
            k = launch_kernel[r] if launch_kernel is not None else None
            knames.append(kernels.setdefault(k, len(kernels)) if isinstance(k, str) and k else -1)
        op_idx = []
        for x in ext[rows]:
            if by_ext is None or x < 0 or x not in by_ext.index:
                op_idx.append(-1)
                continue
            o = by_ext.loc[x]
            key = (str(o["name"]), str(o["shape"]), int(x), int(o["start"]), int(o["end"]))
            op_idx.append(op_keys.setdefault(key, len(op_keys)))
        label = None
        if ranges is not None and len(ranges):
            around = ranges[(ranges["pid"].to_numpy() == pid[b]) & (ranges["start"].to_numpy() <= start[b])
                            & (ranges["end"].to_numpy() >= end[e])]
            if len(around):
                label = str(around["name"].iloc[int(np.argmax(around["start"].to_numpy()))])
        out.append({"pid": int(pid[b]), "tid": int(tid[b]), "start": int(start[b]), "end": int(end[e]),
                    "label": label, "kernel": knames, "op": op_idx})
    if not out:
        return None
    return {"kernels": list(kernels), "ops": [list(k) for k in op_keys], "captures": out}


def _replays(trace) -> tuple[np.ndarray, np.ndarray, np.ndarray, list]:
    """Graph-replayed kernels grouped by replay: their gpu rows in (pid, correlation, start)
    order, the group bounds, and per replay (pid, correlation, number of streams)."""
    g = trace.gpu
    rows = np.flatnonzero(is_kind(g, "kernel") & g["in_graph"].to_numpy(bool) & (g["correlation"].to_numpy() >= 0))
    if not rows.size:
        return rows, np.zeros(1, np.int64), np.zeros(0, np.int64), []
    pid, corr = g["pid"].to_numpy()[rows], g["correlation"].to_numpy()[rows]
    order = np.lexsort((g["start"].to_numpy()[rows], corr, pid))
    rows, pid, corr = rows[order], pid[order], corr[order]
    cut = np.flatnonzero((np.diff(pid) != 0) | (np.diff(corr) != 0)) + 1
    bounds = np.concatenate(([0], cut, [rows.size]))
    stream = g["stream"].to_numpy()[rows]
    keys = [(int(pid[a]), int(corr[a]), int(np.unique(stream[a:b]).size)) for a, b in zip(bounds[:-1], bounds[1:])]
    return rows, bounds, corr, keys


def tie(trace, sources: list[tuple[str, dict, bool]]) -> int:
    """Tie the trace's untied graph replays to the captures in ``sources`` — (where, the
    ``graph_captures`` of a trace, whether it is this same trace) — appending to its ``ops`` and
    ``op_kernels``; ``meta["graph_ties"]`` says which replays stay untied and why. Returns how
    many replays were tied now."""
    rows, bounds, _, keys = _replays(trace)
    if not keys:
        return 0
    state = trace.meta.get("graph_ties") or {"replays": len(keys), "tied": [], "untied": {}, "sources": []}
    done = {(p, c) for p, c in state["tied"]}
    names = trace.gpu["name"]
    codes, cats = np.asarray(names.cat.codes), np.asarray(names.cat.categories, dtype=object)
    by_count = _captures_by_count(sources)
    new_ops, new_links = [], []
    n_ops = len(trace.ops)
    untied: dict[str, list] = {}
    tied_now = 0
    for i, (pid, corr, streams) in enumerate(keys):  # per replay, not per kernel
        if (pid, corr) in done:
            continue
        a, b = bounds[i], bounds[i + 1]
        reason, match = _matching_captures(sources, by_count.get((pid, b - a), []), streams, rows[a:b], codes, cats)
        if not match:
            untied.setdefault(reason, []).append([pid, corr])
            continue
        s, c = match[0]
        where, caps, _ = sources[s]
        _add_capture_ops(pid, corr, caps, caps["captures"][c], n_ops, new_ops, new_links)
        state["tied"].append([pid, corr])
        if where not in state["sources"]:
            state["sources"].append(where)
        tied_now += 1
    state["untied"] = untied
    trace.meta["graph_ties"] = state
    if new_ops:
        _append_ops(trace, new_ops, new_links)
    return tied_now


def _captures_by_count(sources: list[tuple[str, dict, bool]]) -> dict[tuple, list]:
    """Every capture's signature: (pid, kernel count) -> [(source index, capture index), ...]."""
    by_count: dict[tuple, list] = {}
    for s, (_, caps, _) in enumerate(sources):
        for c, cap in enumerate(caps["captures"]):
            by_count.setdefault((cap["pid"], len(cap["kernel"])), []).append((s, c))
    return by_count


def _matching_captures(sources: list[tuple[str, dict, bool]], cands: list, streams: int, replay_rows: np.ndarray,
                       codes: np.ndarray, cats: np.ndarray) -> tuple[str, list]:
    """The captures among ``cands`` (same pid and kernel count) one replay matches, kernel by kernel
    (``replay_rows``: its GPU rows in start order, named by ``cats[codes[row]]``), and the reason it
    stays untied when none does, or several with different op shapes do ("ambiguous": then no match)."""
    reason, match = ("no_capture" if not any(src[1]["captures"] for src in sources) else "no_match"), []
    seq = None
    for s, c in cands:
        where, caps, same = sources[s]
        cap = caps["captures"][c]
        if any(k < 0 for k in cap["kernel"]):
            if not same:
                reason = "unnamed"
                continue
            if streams > 1:
                continue  # without names, start order across streams is not the capture order
        else:
            if seq is None:
                seq = cats[codes[replay_rows]]
            if any(x != caps["kernels"][k] for x, k in zip(seq, cap["kernel"])):
                continue
        match.append((s, c))
    if match:
        shapes = {tuple(tuple(sources[s][1]["ops"][o][:2]) if o >= 0 else None
                        for o in sources[s][1]["captures"][c]["op"]) for s, c in match}
        if len(shapes) > 1:
            reason, match = "ambiguous", []
    return reason, match


def _add_capture_ops(pid: int, corr: int, caps: dict, cap: dict, n_ops: int, new_ops: list, new_links: list) -> None:
    """The ops of one tied capture as new ops of the replay's process (each op once: ``n_ops`` is
    how many the trace had), and the replay's kernels linked to them by position."""
    local: dict[int, int] = {}
    for nth, o in enumerate(cap["op"]):
        if o < 0:
            continue
        if o not in local:
            name, shape, _, start, end = caps["ops"][o]
            local[o] = n_ops + len(new_ops)
            new_ops.append((pid, start, end, name, shape, -1))
        new_links.append((pid, corr, nth, local[o]))


def _append_ops(trace, new_ops: list, new_links: list) -> None:
    """The new ops and kernel links appended to ``trace.ops`` and ``trace.op_kernels``."""
    add = pd.DataFrame(new_ops, columns=["pid", "start", "end", "name", "shape", "ext_id"])
    ops = pd.concat([trace.ops.astype({"name": object, "shape": object}), add], ignore_index=True)
    trace.ops = ops.astype({"pid": np.int64, "start": np.int64, "end": np.int64, "ext_id": np.int64}).assign(
        name=object_categorical(ops["name"]), shape=object_categorical(ops["shape"]))
    links = pd.DataFrame(new_links, columns=["pid", "correlation", "nth", "op"]).astype(np.int64)
    trace.op_kernels = pd.concat([trace.op_kernels, links], ignore_index=True)


def object_categorical(values) -> pd.Categorical:
    """A categorical with object-dtype categories, as the parsers build them (pandas 3 would infer str)."""
    codes, uniq = pd.factorize(np.asarray(values, dtype=object))
    return pd.Categorical.from_codes(codes, categories=pd.Index(np.asarray(uniq, dtype=object), dtype=object))
