"""rocprofv3 CSV output (``--output-format csv``) -> :class:`Trace`.

One run writes several files (``*_kernel_trace.csv``, ``*_hip_api_trace.csv``,
``*_memory_copy_trace.csv``, ``*_marker_api_trace.csv``, ``*_rccl_api_trace.csv``...);
the files of one directory are merged into one trace. Each file is recognised by
its header, mapped by column name case-insensitively (headers differ across ROCm
versions), and kernels join their launching call on ``Correlation_Id``.

``Agent_Id`` is the absolute agent number ("Agent 4"), which counts CPUs: without an
agent_info file the GPU number is the rank of the agent among the agents that ran
kernels or copies (GPU agents only appear there). Kernel rows carry no process id:
it comes from the launching call, else the trace has one anonymous process.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from tracetriage.errors import MissingDataError, TraceFormatError
from tracetriage.model import (
    API_CATEGORIES,
    Trace,
    api_category,
    collective_op,
    finish_trace,
)
from tracetriage.parsers import coerce
from tracetriage.parsers.common import (
    UNRECORDED_BYTES,
    blit_bytes,
    blit_kind,
    compact_categorical,
    copy_direction,
    per_distinct,
    rccl_api_op,
)


def _read(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise TraceFormatError(path, f"unreadable CSV ({str(exc).splitlines()[0]})") from None
    df.columns = [c.strip().lower() for c in df.columns]
    return df


def _int(df: pd.DataFrame, col: str, default: int = -1) -> np.ndarray:
    if col not in df.columns:
        return np.full(len(df), default, dtype=np.int64)
    return coerce.int64_text(df[col], col, default=default)


def classify(df: pd.DataFrame) -> str:
    cols = set(df.columns)
    if "kernel_name" in cols:
        return "kernel"
    if "direction" in cols and "source_agent_id" in cols:
        return "copy"
    if {"domain", "function", "start_timestamp"} <= cols:
        return "api"
    if "operation" in cols and "allocation_size" in cols:
        return "alloc"
    return "unknown"


def parse_files(paths: list[Path]) -> Trace:
    frames: dict[str, list[tuple[Path, pd.DataFrame]]] = {}
    for p in paths:
        df = _read(p)
        frames.setdefault(classify(df), []).append((p, df))
    if not frames.get("kernel") and not frames.get("copy"):
        raise MissingDataError(paths[0], "nothing to analyze: no kernel or memory-copy trace among the rocprofv3 CSV files")
    trace = Trace(path=str(paths[0].parent) if len(paths) > 1 else str(paths[0]), format="rocprof_csv")
    trace.meta["version"] = None
    trace.meta["files"] = [str(p) for p in paths]
    corr_pid, corr_name = _host_calls(trace, [df for _, df in frames.get("api", [])])
    parts = [_kernel_rows(df, corr_name) for _, df in frames.get("kernel", [])]
    parts += [_copy_rows(df) for _, df in frames.get("copy", [])]
    gpu = pd.concat(parts, ignore_index=True)
    if not len(gpu):
        raise MissingDataError(paths[0], "nothing to analyze: the kernel and copy CSV files are empty")
    gpu["pid"] = corr_pid.reindex(gpu["correlation"].to_numpy()).fillna(-1).to_numpy(np.int64) if len(corr_pid) else -1
    known = gpu["pid"] >= 0
    fallback = int(gpu.loc[known, "pid"].mode().iloc[0]) if known.any() else 0
    gpu.loc[~known, "pid"] = fallback
    agents = np.sort(np.unique(gpu["agent"].to_numpy()))
    ordinal = np.searchsorted(agents, gpu["agent"].to_numpy())
    gpu["ordinal"] = ordinal
    gpu = gpu.drop(columns="agent")
    gpu["pageable"] = False
    gpu["in_graph"] = False
    finish_trace(trace, gpu, lambda o: {"name": "AMD GPU"})
    trace.meta["graph_trace_mode"] = "unknown"
    if len(trace.api) and len(trace.gpu):
        _warn_other_runs(trace)
    if not len(trace.api):
        trace.warnings.append("no HIP API CSV next to the kernel trace: idle time cannot be attributed to host calls")
    return trace


def _host_calls(trace: Trace, api_rows: list[pd.DataFrame]) -> tuple[pd.Series, pd.Series]:
    """The API CSV rows into ``trace.api``, and those of marker domains into ``trace.ranges``; the
    pid and the function name of each correlation id (its first row)."""
    api = pd.concat(api_rows, ignore_index=True) if api_rows else pd.DataFrame(columns=["domain", "function"])
    domain = api["domain"].astype(str).to_numpy(object) if len(api) else np.zeros(0, object)
    is_marker = (per_distinct(domain, lambda d: bool(re.search(r"(?i)marker|roctx", d))).astype(bool) if len(api)
                 else np.zeros(0, bool))
    a_pid, a_tid, a_corr = _int(api, "process_id"), _int(api, "thread_id"), _int(api, "correlation_id")
    a_start, a_end = _int(api, "start_timestamp", 0), _int(api, "end_timestamp", 0)
    fn = api["function"].astype(str).to_numpy(object) if len(api) else np.zeros(0, object)
    names = pd.Categorical(fn)
    cats = np.array([api_category(str(c)) for c in names.categories] + ["other"], dtype=object)
    category = pd.Categorical(cats[np.where(names.codes < 0, len(names.categories), names.codes)], categories=API_CATEGORIES)
    all_api = pd.DataFrame({"pid": a_pid, "tid": a_tid, "start": a_start, "end": a_end, "name": names,
                            "category": category, "correlation": a_corr})
    trace.api = all_api[~is_marker].sort_values("start", kind="stable", ignore_index=True)
    trace.api["name"] = compact_categorical(trace.api["name"].array.codes, trace.api["name"].cat.categories)
    if is_marker.any():
        mk = all_api[is_marker]
        trace.ranges = pd.DataFrame({"pid": mk["pid"].to_numpy(), "tid": mk["tid"].to_numpy(), "start": mk["start"].to_numpy(),
                                     "end": mk["end"].to_numpy(), "name": pd.Categorical(mk["name"].astype(object)),
                                     "domain": pd.Categorical(domain[is_marker])}).reset_index(drop=True)
    corr_pid = pd.Series(a_pid, index=a_corr)
    corr_pid = corr_pid[~corr_pid.index.duplicated()]
    corr_name = pd.Series(fn, index=a_corr)
    corr_name = corr_name[~corr_name.index.duplicated()]
    return corr_pid, corr_name


def _kernel_rows(df: pd.DataFrame, corr_name: pd.Series) -> pd.DataFrame:
    """One kernel-trace CSV as GPU rows (blit kernels as copies and memsets); generically named RCCL
    kernels take the op of the RCCL call that launched them (``corr_name``: call name by correlation id)."""
    corr = _int(df, "correlation_id")
    name = df["kernel_name"].astype(str).to_numpy(object)
    kind = per_distinct(name, blit_kind)
    ops = per_distinct(name, lambda n: collective_op(str(n)))
    generic = ops == "Collective"
    if generic.any():  # generically named RCCL kernels: the op of the launching RCCL call
        launched_by = corr_name.reindex(corr[generic]).fillna("").to_numpy(object)
        ops[generic] = per_distinct(launched_by, lambda n: rccl_api_op(str(n)) or "Collective")
    return pd.DataFrame({
        "agent": _int(df, "agent_id"), "stream": _int(df, "stream_id" if "stream_id" in df.columns else "queue_id"),
        "start": _int(df, "start_timestamp", 0), "end": _int(df, "end_timestamp", 0), "kind": kind,
        "name": name, "correlation": corr, "collective": np.where(kind == "kernel", ops, None),
        "bytes": blit_bytes(kind), "copy_kind": np.where(kind == "memcpy", "other", None),
    })


def _copy_rows(df: pd.DataFrame) -> pd.DataFrame:
    """One memory-copy CSV as GPU rows, on the destination agent of a host-to-device copy, else the source."""
    ck = per_distinct(df["direction"].astype(str).to_numpy(object), copy_direction)
    src, dst = _int(df, "source_agent_id"), _int(df, "destination_agent_id")
    agent = np.where(ck == "HtoD", dst, src)
    return pd.DataFrame({
        "agent": agent, "stream": _int(df, "stream_id"), "start": _int(df, "start_timestamp", 0),
        "end": _int(df, "end_timestamp", 0), "kind": "memcpy", "name": per_distinct(ck, lambda k: f"memcpy {k}"),
        "correlation": _int(df, "correlation_id"), "collective": None,
        "bytes": _int(df, "size", UNRECORDED_BYTES),
        "copy_kind": ck,
    })


def _warn_other_runs(trace: Trace) -> None:
    """A warning when fewer than half the GPU operations follow their launch call in time (by less
    than 10 s): the API and GPU CSV files then come from different runs."""
    first_start = trace.api.drop_duplicates("correlation").set_index("correlation")["start"]
    launch_at = first_start.reindex(trace.gpu["correlation"].to_numpy()).to_numpy()
    gpu_start = trace.gpu["start"].to_numpy()
    ok = ~np.isnan(launch_at) & (launch_at <= gpu_start) & (gpu_start - launch_at < 10e9)
    if ok.mean() < 0.5:
        trace.meta["clocks_unrelated"] = True  # the files' times cannot be laid side by side (analyzers/phases.py)
        trace.warnings.append(
            f"only {ok.mean():.0%} of GPU operations follow their launch call in time: the API and GPU CSV files "
            "come from different runs, so host-side attribution is not trustworthy")
