"""The JSON contract (``--format json``), schema ``tracetriage.analysis/1``."""

from __future__ import annotations

import json
import math

import numpy as np


def _clean(obj):
    kind = type(obj)
    if kind is str or kind is int or kind is bool or obj is None:  # most leaves: as they are
        return obj
    if kind is float:
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def to_dict(analysis) -> dict:
    return _clean(analysis.data)


def render_json(analysis) -> str:
    return json.dumps(to_dict(analysis), indent=2, ensure_ascii=False) + "\n"
