"""Hot frames from py-spy samples: where the host's time goes, and which frames sync."""

from __future__ import annotations

import re

from tracetriage.parsers.pyspy import PySpyCapture

SYNC_FRAME = re.compile(
    r"^(item|tolist|cpu|numpy|synchronize|_local_scalar_dense\w*|\w*::_local_scalar_dense\w*|"
    r"cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cuStreamSynchronize|cuCtxSynchronize|"
    r"hipStreamSynchronize|hipDeviceSynchronize|cudaMemcpy|cudaMemcpy2D|hipMemcpy)\b"
)
FRAMEWORK = re.compile(
    r"(site-packages/|dist-packages/|<frozen|^torch/|/torch/|^vllm/|/vllm/|^sglang/|/sglang/|transformers/|"
    r"threading\.py|multiprocessing/|asyncio/|concurrent/|queue\.py|selectors\.py|socket\.py|runpy|"
    r"uvicorn/|fastapi/|starlette/|^ray/|/ray/|numpy/|triton/|flashinfer/|\.so\b|lib\w+\.so|python3\.\d+/)"
)
WRAPPER_PCT = 90.0
ENTRY = re.compile(r"^(<module>|main|run|_run_code|_run_module_as_main|_bootstrap\w*|<lambda>)$")


def _func(frame: str) -> str:
    return frame.split(" (", 1)[0]


_SYNC_CACHE: dict[str, bool] = {}


def _is_sync(frame: str) -> bool:
    got = _SYNC_CACHE.get(frame)
    if got is None:
        got = _SYNC_CACHE[frame] = bool(SYNC_FRAME.match(_func(frame)))
    return got


def _file(frame: str) -> str:
    m = re.search(r"\((.+?)(?::\d+)?\)$", frame)
    return m.group(1) if m else ""


def is_framework(frame: str) -> bool:
    return bool(FRAMEWORK.search(_file(frame))) or "(" not in frame


def hot_frames(caps: list[PySpyCapture], top: int = 15) -> dict:
    """Per-frame shares of non-idle samples, and the user frame the host time goes to.

    ``share_pct`` (inclusive) = samples whose stack contains the frame / all non-idle
    samples x 100; ``self_pct`` = samples where it is the innermost frame / all non-idle.
    ``user_pct`` = samples whose innermost non-framework, non-entry frame is this one
    (where a custom callback's time lands even when it spends it inside torch).
    ``user`` lists application frames by inclusive share (see WRAPPER_PCT).
    ``calls_sync``: a host-syncing operation (``.item()``, ``.cpu()``, ``.tolist()``,
    ``synchronize``, ``cudaStreamSynchronize``...) appears below the frame in its samples.
    """
    # Aggregate by function and file: the line moves as the function runs.
    labels: dict[str, dict[str, int]] = {}

    def key(frame: str) -> str:
        k = re.sub(r":\d+\)$", ")", frame)
        labels.setdefault(k, {})
        return k

    incl: dict[str, int] = {}
    self_: dict[str, int] = {}
    user: dict[str, int] = {}
    sync_under: dict[str, int] = {}
    total = idle = 0
    for cap in caps:
        for s in cap.samples:
            if s.idle:
                idle += s.count
                continue
            total += s.count
            full = s.stack
            stack = tuple(key(f) for f in full)
            for f, k in zip(full, stack):
                labels[k][f] = labels[k].get(f, 0) + s.count
            s = type(s)(stack, s.count, s.thread, s.idle, s.pid)
            for f in set(s.stack):
                incl[f] = incl.get(f, 0) + s.count
            if s.stack:
                self_[s.stack[-1]] = self_.get(s.stack[-1], 0) + s.count
            blame = next((f for f in reversed(s.stack) if not is_framework(f) and not ENTRY.match(_func(f))), None)
            if blame:
                user[blame] = user.get(blame, 0) + s.count
            # frames with a host sync below them in this sample: every frame above the deepest sync
            # (one pass: a 50k-frame stack costs 50k checks, not 50k^2)
            deepest = next((i for i in range(len(s.stack) - 1, -1, -1) if _is_sync(s.stack[i])), -1)
            for f in set(s.stack[:max(deepest, 0)]):
                sync_under[f] = sync_under.get(f, 0) + s.count
    if not total:
        return {"total_samples": 0, "idle_samples": idle, "frames": [], "user": []}

    def pct(n):
        return round(100.0 * n / total, 2)

    def shown(k):  # "func (file:line)" with the line seen most often
        return max(labels[k].items(), key=lambda kv: kv[1])[0] if labels.get(k) else k

    frames = sorted(incl, key=lambda f: (-incl[f], f))[:top]
    return {
        "total_samples": total,
        "idle_samples": idle,
        "frames": [
            {"frame": shown(f), "share_pct": pct(incl[f]), "self_pct": pct(self_.get(f, 0)), "user_pct": pct(user.get(f, 0)),
             "framework": is_framework(f), "calls_sync": bool(sync_under.get(f))}
            for f in frames
        ],
        # Hot user frames: application code (not a framework or the interpreter), ranked by
        # inclusive share; a frame holding >= WRAPPER_PCT of all samples wraps everything
        # (a request handler, a serve loop) and is not a hot spot.
        "user": [
            {"frame": shown(f), "function": f, "share_pct": pct(incl[f]), "user_pct": pct(user.get(f, 0)),
             "self_pct": pct(self_.get(f, 0)), "calls_sync": bool(sync_under.get(f)), "sync_pct": pct(sync_under.get(f, 0))}
            for f in sorted(incl, key=lambda k: (-incl[k], k))
            if not is_framework(f) and not ENTRY.match(_func(f)) and pct(incl[f]) < WRAPPER_PCT
        ][:top],
    }
