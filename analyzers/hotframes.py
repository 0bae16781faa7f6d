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
    """The function of a frame label ``func (file:line)``."""
    return frame.split(" (", 1)[0]


_SYNC_CACHE: dict[str, bool] = {}


def _is_sync(frame: str) -> bool:
    """Whether a frame is a host-syncing operation (SYNC_FRAME), memoised per label."""
    syncs = _SYNC_CACHE.get(frame)
    if syncs is None:
        syncs = _SYNC_CACHE[frame] = bool(SYNC_FRAME.match(_func(frame)))
    return syncs


def _file(frame: str) -> str:
    """The file of a frame label ``func (file:line)``, empty when it names none."""
    match = re.search(r"\((.+?)(?::\d+)?\)$", frame)
    return match.group(1) if match else ""


def is_framework(frame: str) -> bool:
    """Whether a frame is framework or interpreter code (FRAMEWORK), or names no file."""
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
        function_key = re.sub(r":\d+\)$", ")", frame)
        labels.setdefault(function_key, {})
        return function_key

    incl: dict[str, int] = {}
    self_: dict[str, int] = {}
    user: dict[str, int] = {}
    sync_under: dict[str, int] = {}
    total = idle = 0
    for capture in caps:
        for sample in capture.samples:
            if sample.idle:
                idle += sample.count
                continue
            total += sample.count
            stack = tuple(key(frame) for frame in sample.stack)
            for frame, function_key in zip(sample.stack, stack):
                labels[function_key][frame] = labels[function_key].get(frame, 0) + sample.count
            for frame in set(stack):
                incl[frame] = incl.get(frame, 0) + sample.count
            if stack:
                self_[stack[-1]] = self_.get(stack[-1], 0) + sample.count
            blame = next((frame for frame in reversed(stack) if not is_framework(frame) and not ENTRY.match(_func(frame))),
                         None)
            if blame:
                user[blame] = user.get(blame, 0) + sample.count
            # frames with a host sync below them in this sample: every frame above the deepest sync
            # (one pass: a 50k-frame stack costs 50k checks, not 50k^2)
            deepest = next((depth for depth in range(len(stack) - 1, -1, -1) if _is_sync(stack[depth])), -1)
            for frame in set(stack[:max(deepest, 0)]):
                sync_under[frame] = sync_under.get(frame, 0) + sample.count
    if not total:
        return {"total_samples": 0, "idle_samples": idle, "frames": [], "user": []}

    def pct(samples):
        return round(100.0 * samples / total, 2)

    def shown(function_key):  # "func (file:line)" with the line seen most often
        seen = labels.get(function_key)
        return max(seen.items(), key=lambda label_count: label_count[1])[0] if seen else function_key

    frames = sorted(incl, key=lambda frame: (-incl[frame], frame))[:top]
    return {
        "total_samples": total,
        "idle_samples": idle,
        "frames": [
            {"frame": shown(frame), "share_pct": pct(incl[frame]), "self_pct": pct(self_.get(frame, 0)),
             "user_pct": pct(user.get(frame, 0)), "framework": is_framework(frame), "calls_sync": bool(sync_under.get(frame))}
            for frame in frames
        ],
        # Hot user frames: application code (not a framework or the interpreter), ranked by
        # inclusive share; a frame holding >= WRAPPER_PCT of all samples wraps everything
        # (a request handler, a serve loop) and is not a hot spot.
        "user": [
            {"frame": shown(frame), "function": frame, "share_pct": pct(incl[frame]), "user_pct": pct(user.get(frame, 0)),
             "self_pct": pct(self_.get(frame, 0)), "calls_sync": bool(sync_under.get(frame)),
             "sync_pct": pct(sync_under.get(frame, 0))}
            for frame in sorted(incl, key=lambda function_key: (-incl[function_key], function_key))
            if not is_framework(frame) and not ENTRY.match(_func(frame)) and pct(incl[frame]) < WRAPPER_PCT
        ][:top],
    }
