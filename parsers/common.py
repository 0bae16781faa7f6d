"""Helpers shared by the parsers: per-distinct-value classification and AMD naming rules."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd


def per_distinct(values, fn) -> np.ndarray:
    """fn applied once per distinct value, broadcast back (no Python call per event)."""
    values = np.asarray(values, dtype=object)
    if not len(values):
        return np.zeros(0, dtype=object)
    codes, uniq = pd.factorize(pd.Series(values).astype(str))
    mapped = np.array([fn(u) for u in uniq] + [None], dtype=object)
    return mapped[np.where(codes < 0, len(uniq), codes)]


def blit_kind(name: str) -> str:
    if re.search(r"__amd_rocclr_fill", name):
        return "memset"
    if re.search(r"__amd_rocclr_copy", name):
        return "memcpy"
    return "kernel"


def copy_direction(name: str) -> str:
    n = name.upper()
    for key, label in (("HOST_TO_DEVICE", "HtoD"), ("DEVICE_TO_HOST", "DtoH"), ("DEVICE_TO_DEVICE", "DtoD"),
                       ("HOST_TO_HOST", "HtoH"), ("PEER", "PtoP")):
        if key in n:
            return label
    return "other"


def rccl_api_op(name: str) -> str | None:
    m = re.match(r"^(?:nccl|rccl)(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|AlltoAll|Gather|Scatter)", name)
    if not m:
        return None
    op = m.group(1)
    return {"Send": "SendRecv", "Recv": "SendRecv", "AlltoAll": "AllToAll", "Gather": "Collective", "Scatter": "Collective"}.get(op, op)
