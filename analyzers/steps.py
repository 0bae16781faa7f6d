"""Steps (decode/prefill iterations) per process, and host activity per step.

Where steps come from, in order of trust:

1. ``nvtx`` — NVTX/roctx ranges whose name matches ``--step-range REGEX`` or one of
   :data:`STEP_PATTERNS` (the names serving engines and common instrumentation use: PyTorch's
   ``ProfilerStep#N``, SGLang's ``step[EXTEND bs=.. toks=..]`` / ``step[DECODE bs=..]``, vLLM V1's
   ``execute_context_N(..)_generation_M(..)``);
   only the outermost matching ranges of a process count, and at least
   :data:`MIN_STEPS` of them are needed (one, when they are all a serving engine's own per-iteration
   annotation, :data:`ENGINE_STEP`, or torch.profiler's own ``ProfilerStep#N``, :data:`PROFILER_STEP`, or
   match the user's ``--step-range``: such a range is a step by its name; fewer than :data:`MIN_STEPS` of
   them leave the window to the GPU activity, widened to cover them, phases.cover_steps).
2. ``sync`` — one blocking host sync per step (``cudaStreamSynchronize``,
   ``cudaDeviceSynchronize``, a synchronous copy...): a step runs from the end of one
   blocking call to the end of the next. This is the shape of a decode loop that
   reads the sampled tokens back every iteration.
3. ``graph_launch`` — one graph launch per step: a step runs from one graph
   replay's start on the GPU to the next (from one ``cudaGraphLaunch`` call to the
   next when replays were not traced).
4. ``none`` — no periodic structure: an abstention, and per-step metrics are null.

Inferred steps (``sync``, ``graph_launch``) are only trusted when the pattern is
periodic: at least :data:`MIN_INFERRED_STEPS` steps, spanning at least
:data:`MIN_INFERRED_COVERAGE` of the process's GPU activity, each launching work
(kernel or graph launches), with at least :data:`MIN_REGULAR_SHARE` of the steps
within +-25% of the median launch count. Otherwise the next source is tried.

Warm-up: leading steps longer than :data:`WARMUP_FACTOR` x the median step are
dropped (at most :data:`WARMUP_MAX_SHARE` of the steps); the count dropped is
reported. The steady-state window is first kept step start to last step end.

Per-step host activity counts API calls whose *start* lies in [step start, step
end) of the same process: the median over steps is reported (numerator: calls of
that category in a step; denominator: one step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from tracetriage.analyzers.metrics import HostActivity
from tracetriage.model import Trace, cat_mask, is_kind, is_sorted

STEP_PATTERNS = re.compile(
    r"(?i)^(decode|prefill|step|execute_model|model_step|forward_step|engine_step|iteration|iter|"
    r"decode_step|prefill_step|forward_batch|run_batch|generate_step|serving_step|schedule_and_run|ProfilerStep|"
    r"execute_context|execute_\d+_context)"
    r"(?=$|[\s_:#\-\[(\d])"
)
# vLLM V1's per-iteration annotation (GPUWorker.annotate_profile): execute_context_<n>(<tokens>)_generation_<n>(<tokens>),
# or execute_<requests>_context_<n>(...)_generation_<n>(...): a step is prefill when it holds context (prompt) requests.
VLLM_STEP = re.compile(r"(?i)^execute_(?:\d+_)?context_(\d+)")
PREFILL_NAME = re.compile(r"(?i)prefill|extend|context")


def is_prefill_name(name: str) -> bool:
    """Whether a step range's name marks a prefill step: SGLang's ``step[EXTEND ...]``, a ``prefill``
    range, vLLM's ``execute_context_N(..)`` with N > 0 context requests."""
    vllm = VLLM_STEP.match(name)
    if vllm:
        return int(vllm.group(1)) > 0
    return bool(PREFILL_NAME.search(name))
MIN_STEPS = 3
# A serving engine's own per-iteration annotation names one iteration whatever else the capture holds: vLLM V1's
# ``execute_context_N(..)_generation_M(..)`` (GPUWorker.annotate_profile, around each execute_model; TraceLens's
# patched vLLM writes the request count after ``execute_`` and the sequence-length aggregates in the parentheses)
# and SGLang's ``step[EXTEND|DECODE|MIXED|IDLE ...]``. A profile of one iteration (an eager prefill, one decode step)
# is common: such ranges are steps from the first one on (MIN_ENGINE_STEPS). Fewer than MIN_STEPS of them do not
# bound the analysis window (analysis.py: the host leaves an iteration's range once it has queued its work, and no
# later step bounds that work), which stays the GPU activity's.
ENGINE_STEP = re.compile(r"(?i)^(?:execute_(?:\d+_)?context_\d+\(.*\)_generation_\d+\(|step\[(?:EXTEND|DECODE|MIXED|IDLE)\b)")
# torch.profiler's own step annotation (prof.step() once per step): a step by its name, however few the schedule's
# active= steps recorded (as are the ranges --step-range names: the user said they are steps)
PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
MIN_ENGINE_STEPS = 1
MIN_INFERRED_STEPS = 8
MIN_INFERRED_COVERAGE = 0.5
MIN_REGULAR_SHARE = 0.6
WARMUP_FACTOR = 2.0
WARMUP_MAX_SHARE = 0.10
BLOCKING = ("sync", "memcpy_sync")


@dataclass(frozen=True, slots=True, eq=False)
class Steps:
    pid: int
    source: str  # nvtx | sync | graph_launch | none
    starts: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    is_prefill: np.ndarray = field(default_factory=lambda: np.empty(0, bool))
    warmup_dropped: int = 0
    pattern: str | None = None
    range_name: str | None = None  # the most common matching NVTX name (nvtx source)

    @property
    def count(self) -> int:
        return int(self.starts.size)

    @property
    def durations(self) -> np.ndarray:
        return self.ends - self.starts


def _outermost(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Mask of intervals not nested inside an earlier one (input sorted by start)."""
    if starts.size == 0:
        return np.zeros(0, dtype=bool)
    prev_max = np.maximum.accumulate(ends)
    keep = np.ones(starts.size, dtype=bool)
    keep[1:] = starts[1:] >= prev_max[:-1]
    return keep


def _from_ranges(ranges: pd.DataFrame, pattern: re.Pattern, asked: bool = False) -> tuple | None:
    """The outermost ranges matching ``pattern`` (starts, ends, is_prefill, the most common name), None when
    fewer than MIN_STEPS match — or fewer than MIN_ENGINE_STEPS when each names a step by itself (an engine's
    iteration, ProfilerStep#N) or ``asked`` (the pattern is the user's --step-range)."""
    if ranges.empty:
        return None
    names = ranges["name"]
    cats = names.cat.categories
    matching = np.array([bool(pattern.search(str(c))) for c in cats.tolist()], dtype=bool)  # no arrow scalar per item
    if not matching.any():
        return None
    codes = names.cat.codes.to_numpy()
    mask = (codes >= 0) & matching[np.maximum(codes, 0)]
    sel = ranges[mask & (ranges["end"].to_numpy() > ranges["start"].to_numpy())].sort_values("start", kind="stable")
    names = sel["name"].astype(str).unique()
    named = bool(len(sel)) and (all(ENGINE_STEP.match(name) for name in names)
                                or all(PROFILER_STEP.match(name) for name in names))
    least = MIN_ENGINE_STEPS if named or asked else MIN_STEPS  # a step by its name, or by the user's word: one is a step
    if len(sel) < least:
        return None
    s = sel["start"].to_numpy(np.int64)
    e = sel["end"].to_numpy(np.int64)
    keep = _outermost(s, e)
    if keep.sum() < least:
        return None
    prefill_cats = np.array([is_prefill_name(str(c)) for c in sel["name"].cat.categories.tolist()], dtype=bool)
    sc = sel["name"].cat.codes.to_numpy()
    is_prefill = (sc >= 0) & prefill_cats[np.maximum(sc, 0)]
    top = sel["name"][keep].astype(str).value_counts()
    return s[keep], e[keep], is_prefill[keep], str(top.index[0])


def _drop_warmup(steps: Steps) -> Steps:
    d = steps.durations
    if d.size < MIN_STEPS + 1:
        return steps
    med = np.median(d)
    limit = max(1, int(WARMUP_MAX_SHARE * d.size))
    n = 0
    while n < limit and d[n] > WARMUP_FACTOR * med:
        n += 1
    if n:
        return replace(steps, starts=steps.starts[n:], ends=steps.ends[n:], is_prefill=steps.is_prefill[n:], warmup_dropped=n)
    return steps


def find_steps(trace: Trace, pid: int, step_range: str | None = None, within: tuple[int, int] | None = None) -> Steps:
    """Steps of one process (see module docstring for the sources and their order). ``within``: the
    steady phase [lo, hi) the inferred sources (``sync``, ``graph_launch``) look in — a periodic sync
    or graph launch is the loop's, and the set-up before the loop has none (phases.find_steps)."""
    named = nvtx_steps(trace.ranges, pid, step_range)
    if named is not None:
        return named
    # Columns and masks only: no copy of the (possibly 10M-row) tables.
    api, gpu = trace.api, trace.gpu
    mine = api["pid"].to_numpy() == pid
    a_start, a_end = api["start"].to_numpy(), api["end"].to_numpy()
    launches = Selected(a_start, mine & cat_mask(api, "category", ("launch", "graph_launch")))
    g_mine = gpu["pid"].to_numpy() == pid
    g_start, g_end = gpu["start"].to_numpy(), gpu["end"].to_numpy()
    if within is not None:
        g_mine = g_mine & (g_end > within[0]) & (g_start < within[1])
    span = ((int(g_start.min(where=g_mine, initial=np.iinfo(np.int64).max)),
             int(g_end.max(where=g_mine, initial=np.iinfo(np.int64).min))) if g_mine.any() else (0, 0))
    if within is not None:
        span = (max(span[0], within[0]), min(span[1], within[1]))
        mine = mine & (a_end >= within[0]) & (a_start < within[1])
    synced = sync_steps(pid, a_end[mine & cat_mask(api, "category", BLOCKING)], launches, span)
    if synced is not None:
        return synced
    replays = gpu["start"].to_numpy()[g_mine & is_kind(gpu, "graph")]
    graphs = a_start[mine & cat_mask(api, "category", "graph_launch")]
    return graph_steps(pid, replays, graphs, launches, span) or Steps(pid, "none")


def graph_steps(pid: int, replays: np.ndarray, graphs: np.ndarray, launches, span: tuple[int, int]) -> Steps | None:
    """The process's steps from its CUDA graphs (``graph_launch``), None when they are not periodic: replay to
    replay on the GPU when replays were traced (the host may run ahead of the GPU by many steps), else launch
    call to launch call. ``replays``, ``graphs``: the replays' and the graph launch calls' starts."""
    if replays.size > MIN_INFERRED_STEPS or graphs.size > MIN_INFERRED_STEPS:
        starts = np.sort(replays if replays.size > MIN_INFERRED_STEPS else graphs)
        cand = _drop_warmup(Steps(pid, "graph_launch", starts[:-1], starts[1:], np.zeros(starts.size - 1, bool)))
        if _periodic(cand, launches, span):
            return cand
    return None


def nvtx_steps(ranges: pd.DataFrame, pid: int, step_range: str | None) -> Steps | None:
    """The process's steps from its NVTX ranges (``nvtx``; ``none`` when ``step_range`` matches none of
    them), None when the inferred sources are to be tried."""
    pattern = re.compile(step_range) if step_range else STEP_PATTERNS
    got = _from_ranges(ranges[ranges["pid"] == pid], pattern, asked=bool(step_range))
    if got is not None:
        s, e, pre, top = got
        return _drop_warmup(Steps(pid, "nvtx", s, e, pre, pattern=pattern.pattern, range_name=top))
    if step_range:
        return Steps(pid, "none", pattern=pattern.pattern)
    return None


def sync_steps(pid: int, blocking_ends: np.ndarray, launches, span: tuple[int, int]) -> Steps | None:
    """The process's steps from its blocking calls' ends (``sync``), None when they are not periodic.
    ``launches``: its launch calls, counted per step by ``launches.per_step(steps)``."""
    if blocking_ends.size > MIN_INFERRED_STEPS:
        ends = np.sort(blocking_ends)
        cand = _drop_warmup(Steps(pid, "sync", ends[:-1], ends[1:], np.zeros(ends.size - 1, bool)))
        if _periodic(cand, launches, span):
            return cand
    return None


def _periodic(steps: Steps, launches: Selected, span: tuple[int, int]) -> bool:
    """Whether inferred steps look like an iteration loop (see module docstring)."""
    if steps.count < MIN_INFERRED_STEPS:
        return False
    covered = int(steps.ends[-1] - steps.starts[0])
    if span[1] <= span[0] or covered < MIN_INFERRED_COVERAGE * (span[1] - span[0]):
        return False
    counts = launches.per_step(steps)
    med = float(np.median(counts))
    if med < 1:
        return False
    regular = np.abs(counts - med) <= 0.25 * med + 0.5
    return bool(regular.mean() >= MIN_REGULAR_SHARE)


class Selected:
    """The rows of a start-ordered column picked by a mask, counted per step without
    copying them out (on a 10M-launch trace that copy was 80 MB per question asked)."""

    CHUNK = 1 << 18  # rows per slice: temporaries under the 4 MiB mmap threshold (tracetriage/memory.py)

    def __init__(self, starts: np.ndarray, mask: np.ndarray, ordered: bool | None = None):
        """``ordered``: whether ``starts`` ascend, when the caller already knows."""
        self.starts, self.mask = starts, mask
        self.ordered = is_sorted(starts) if ordered is None else ordered

    def per_step(self, steps: Steps) -> np.ndarray:
        if not self.ordered:  # rare: copy and sort the picked rows
            return per_step_counts(np.sort(self.starts[self.mask]), steps)
        n = len(steps.ends)
        both = self._before(np.concatenate((np.searchsorted(self.starts, steps.ends, "left"),
                                            np.searchsorted(self.starts, steps.starts, "left"))))
        return both[:n] - both[n:]

    def _before(self, idx: np.ndarray) -> np.ndarray:
        """For each row index, how many picked rows precede it: a running count per slice."""
        out = np.zeros(idx.size, np.int64)
        base = 0
        for c in range(0, self.mask.size, self.CHUNK):
            running = np.cumsum(self.mask[c:c + self.CHUNK], dtype=np.int64)
            here = (idx > c) & (idx <= c + running.size)
            out[here] = base + running[idx[here] - c - 1]
            base += int(running[-1]) if running.size else 0
        return out


def per_step_counts(starts_sorted: np.ndarray, steps: Steps) -> np.ndarray:
    """How many event starts fall in each step's [start, end)."""
    return np.searchsorted(starts_sorted, steps.ends, "left") - np.searchsorted(starts_sorted, steps.starts, "left")


def host_activity(trace: Trace, steps: Steps) -> HostActivity:
    """Median per step of launches, graph launches, blocking syncs, DtoH copies (count, bytes)."""
    if steps.count == 0:
        return HostActivity()
    api = trace.api
    mine = api["pid"].to_numpy() == steps.pid
    a_start = api["start"].to_numpy()

    ordered = is_sorted(a_start)  # checked once for the three questions below

    def median_of(values) -> float:
        return float(np.median(Selected(a_start, mine & cat_mask(api, "category", values), ordered).per_step(steps)))

    gpu = trace.gpu
    sel = (gpu["pid"].to_numpy() == steps.pid) & is_kind(gpu, "memcpy") & cat_mask(gpu, "copy_kind", "DtoH")
    dtoh = gpu[sel].sort_values("start")
    ds = dtoh["start"].to_numpy(np.int64)
    cum = np.concatenate(([0], np.cumsum(np.maximum(dtoh["bytes"].to_numpy(np.int64), 0))))  # -1: size not recorded
    lo = np.searchsorted(ds, steps.starts, "left")
    hi = np.searchsorted(ds, steps.ends, "left")
    return HostActivity(
        launches_per_step=median_of("launch"),
        graph_launches_per_step=median_of("graph_launch"),
        syncs_per_step=median_of(BLOCKING),
        dtoh_copies_per_step=float(np.median(hi - lo)),
        dtoh_bytes_per_step=float(np.median(cum[hi] - cum[lo])),
    )
