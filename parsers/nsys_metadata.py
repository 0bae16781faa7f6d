"""The descriptive tables of an Nsight Systems export: export and capture metadata, the
nsys version, the capture session's wall-clock span, the GPUs (``TARGET_INFO_*``) and the
process names. The event tables are read by parsers/nsys_tables.py; parsers/nsys.py
assembles the trace."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from tracetriage.errors import TraceFormatError
from tracetriage.model import empty_devices
from tracetriage.parsers import coerce
from tracetriage.parsers.sqlite import Database


def enum_names(db: Database, table: str) -> dict[int, str]:
    if not db.has(table):
        return {}
    return {coerce.scalar_int(i): coerce.text(n) for i, n in db.rows(f"SELECT id, name FROM {table}")
            if n is not None and coerce.scalar_int(i) is not None}


def read_metadata(db: Database) -> tuple[dict[str, str], dict[str, list[str]]]:
    export: dict[str, str] = {}
    capture: dict[str, list[str]] = {}
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if db.has(table) and {"name", "value"} <= set(db.columns(table)):
            for name, value in db.rows(f"SELECT name, value FROM {table}"):
                export.setdefault(str(name), "" if value is None else str(value))
    if db.has("META_DATA_CAPTURE") and {"name", "value"} <= set(db.columns("META_DATA_CAPTURE")):
        for name, value in db.rows("SELECT name, value FROM META_DATA_CAPTURE"):
            capture.setdefault(str(name), []).append("" if value is None else str(value))
    return export, capture


def export_version(db: Database, export: dict[str, str]) -> str | None:
    for key in ("EXPORT_PRODUCT_VERSION", "NSYS_VERSION"):
        if export.get(key):
            return export[key]
    # Old exports: the install path of nsys ends up in StringIds.
    if db.has("StringIds"):
        for (value,) in db.rows(
            "SELECT value FROM StringIds WHERE value LIKE '%nsight-systems%' LIMIT 200"
        ):
            m = re.search(r"nsight-systems[-/](\d{4}\.\d+(?:\.\d+)*)", str(value))
            if m:
                return m.group(1)
    return None


def capture_session_span(db: Database) -> tuple[int, int] | None:
    if db.objects.get("TARGET_INFO_SESSION_START_TIME") != "table" or db.objects.get("ANALYSIS_DETAILS") != "table":
        return None
    try:
        start = coerce.scalar_int(db.rows("SELECT min(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME")[0][0])
        duration = coerce.scalar_int(db.rows("SELECT max(duration) FROM ANALYSIS_DETAILS")[0][0])
    except TraceFormatError:  # a column missing from a damaged or older table
        return None
    return (start, start + duration) if start is not None and duration is not None and duration >= 0 else None


def capture_says(capture: dict, db: Database) -> str:
    """What the capture's own metadata says about GPU tracing, instead of a guess."""
    types = [str(t) for t in capture.get("CAPTURE_EVENT_TYPE") or []]
    if not types:
        return "the export records no capture options, so whether GPU activity tracing was on is unknown"
    if "Cuda" not in types:
        return f"META_DATA_CAPTURE lists {', '.join(types)} but not Cuda: CUDA tracing was off"
    platform = ""
    if db.has("TARGET_INFO_SYSTEM_ENV"):
        try:
            rows = db.rows("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV")
            env = {str(k): str(v) for k, v in rows}
            os_name = " ".join(v for k, v in env.items() if k.lower() in ("osname", "os", "kernelversion", "osversion"))
            if "microsoft" in os_name.lower() or "wsl" in os_name.lower():
                platform = f"; the target is WSL ({os_name.strip()}), where CUDA activity records may not be delivered"
        except Exception:  # noqa: BLE001 - metadata is a hint, never a reason to fail differently
            platform = ""
    return ("META_DATA_CAPTURE says CUDA tracing was on (CAPTURE_EVENT_TYPE Cuda): the program did no GPU work "
            "in the capture window, or the platform did not deliver activity records" + platform)


def _target_gpus(db: Database) -> dict[int, dict]:
    """``TARGET_INFO_GPU`` by GPU id: name, uuid, SM count (``sm``), memory in bytes (``mem``)
    and CUDA device index (``cu``); rows without an id are left out."""
    gpus: dict[int, dict] = {}
    if not db.has("TARGET_INFO_GPU"):
        return gpus
    cols = db.columns("TARGET_INFO_GPU")
    sel = [c if c in cols else f"NULL AS {c}" for c in ("id", "name", "uuid", "smCount", "totalMemory", "cuDevice")]
    for gid, name, uuid, sm, mem, cu in db.rows(f"SELECT {', '.join(sel)} FROM TARGET_INFO_GPU"):
        gid = coerce.scalar_int(gid)
        if gid is None:
            continue
        gpus[gid] = {"name": coerce.text(name) or None, "uuid": coerce.text(uuid), "sm": coerce.scalar_int(sm),
                     "mem": coerce.scalar_int(mem), "cu": coerce.scalar_int(cu)}
    return gpus


def _gpu_ids_by_process_device(db: Database) -> dict[tuple[int, int], int]:
    """``TARGET_INFO_CUDA_DEVICE``: the GPU id of each (pid, CUDA device ordinal)."""
    by_pid_cuda: dict[tuple[int, int], int] = {}
    if db.has("TARGET_INFO_CUDA_DEVICE"):
        cols = db.columns("TARGET_INFO_CUDA_DEVICE")
        if {"gpuId", "cudaId", "pid"} <= set(cols):
            for gpu_id, cuda_id, pid in db.rows("SELECT gpuId, cudaId, pid FROM TARGET_INFO_CUDA_DEVICE"):
                gpu_id, cuda_id, pid = (coerce.scalar_int(v) for v in (gpu_id, cuda_id, pid))
                if gpu_id is not None and cuda_id is not None and pid is not None:
                    by_pid_cuda[(pid, cuda_id)] = gpu_id
    return by_pid_cuda


def _device_row(pid: int, ordinal: int, info: dict | None) -> dict:
    """One row of the model's ``devices`` table; ``info`` is the GPU's ``TARGET_INFO_GPU`` entry, if found."""
    return {
        "pid": pid,
        "ordinal": ordinal,
        "gpu_index": int(info["cu"]) if info and info["cu"] is not None else ordinal,
        "name": (info or {}).get("name") or "unknown GPU",
        "uuid": (info or {}).get("uuid") or "",
        "sm_count": int(info["sm"]) if info and info["sm"] is not None else -1,
        "memory_bytes": int(info["mem"]) if info and info["mem"] is not None else -1,
    }


def read_devices(db: Database, gpu_pid_dev: pd.DataFrame) -> pd.DataFrame:
    """One device per (pid, ordinal) seen in GPU activity, with names when the export has them."""
    gpus = _target_gpus(db)
    by_pid_cuda = _gpu_ids_by_process_device(db)
    by_cu = {int(v["cu"]): k for k, v in gpus.items() if v["cu"] is not None}
    rows = []
    for pid, ordinal in gpu_pid_dev.itertuples(index=False):  # one row per device, not per event
        gid = by_pid_cuda.get((int(pid), int(ordinal)))
        if gid is None:
            gid = by_cu.get(int(ordinal))
        info = gpus.get(gid) if gid is not None else None
        rows.append(_device_row(int(pid), int(ordinal), info))
    return pd.DataFrame(rows) if rows else empty_devices()


def read_processes(db: Database, pids: np.ndarray, capture: dict[str, list[str]]) -> pd.DataFrame:
    names: dict[int, str] = {}
    if db.has("PROCESSES") and {"pid", "name"} <= set(db.columns("PROCESSES")):
        wanted = ",".join(str(int(p)) for p in pids) or "-1"
        for pid, name in db.rows(f"SELECT pid, name FROM PROCESSES WHERE pid IN ({wanted})"):
            if pid is not None and name:
                names[int(pid)] = str(name)
    fallback = (capture.get("PROCESS_0:COMMAND") or [""])[0]
    return pd.DataFrame(
        {
            "pid": pd.Series([int(p) for p in pids], dtype="int64"),
            "name": pd.Series([names.get(int(p), fallback or f"pid {int(p)}") for p in pids], dtype=object),
        }
    )
