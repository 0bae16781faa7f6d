"""The progress of one analysis: the stages it passes, for a person at a terminal (a bar on
stderr) and for an MCP client (progress notifications).

The :class:`~tracetriage.runtime.Runtime` names each stage as it starts (``progress``: a callable
taking the stage's words): ``reading NAME`` when a trace file is parsed, ``measuring NAME`` when its
metrics are computed (each skipped when the cache holds it), and the CLI adds ``writing the
report``. A case's traces are found as they are read, so the count of stages grows with them:
each trace is two stages, the report one. A batch's progress is its cases instead: a
:data:`CasesDone` callable told the cases done and in all as each ends (:func:`case_counter`).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

BAR_AFTER_S = 2.0  # an analysis shorter than this draws no bar

CasesDone = Callable[[int, int], None]  # a batch's progress: told (cases done, cases in all)


def case_counter(progress, done: int, total: int) -> Callable[[], None]:
    """What counts the cases of a batch as they end: ``progress``, a :data:`CasesDone`, is told
    ``(done, total)`` now (``done``: the cases reused, done before any runs) and again as each case ends
    (the call returned); nothing when ``progress`` is not callable (a bar, or no progress at all)."""
    if not callable(progress):
        return lambda: None
    count = [done]
    progress(done, total)

    def ended() -> None:
        count[0] += 1
        progress(count[0], total)

    return ended


class ProgressBar:
    """A tqdm bar on ``stream`` (default stderr) over the stages, drawn only once the analysis has
    run ``after_s`` seconds, cleared when it ends; nothing when the stream is not a terminal.
    ``what`` names the inputs in the bar's first words."""

    def __init__(self, what: str, after_s: float = BAR_AFTER_S, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        self.what = what
        self.stage = "opening the inputs"
        self.begun = False  # a stage was named (the one before the next is done)
        self.done = 0
        self.total = 1  # the report; each trace adds its two stages when it is read
        self.bar = None
        self.lock = threading.Lock()
        self.timer = threading.Timer(after_s, self._show)
        self.timer.daemon = True
        self.enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        if self.enabled and after_s > 0:
            self.timer.start()
        elif self.enabled:
            self._show()

    def __call__(self, stage: str) -> None:
        """A stage starts: the one before it is done."""
        with self.lock:
            self.done += self.begun
            self.begun = True
            if stage.startswith("reading "):
                self.total += 2
            self.stage = stage
            if self.bar is not None:
                self._draw()

    def _show(self) -> None:
        from tqdm import tqdm

        with self.lock:
            if self.bar is None and self.enabled:
                self.bar = tqdm(total=self.total, file=self.stream, leave=False, dynamic_ncols=True, mininterval=0,
                                desc=self._words(), bar_format="{desc} {bar} {n_fmt}/{total_fmt} stages, {elapsed}")

    def _draw(self) -> None:
        self.bar.total = self.total
        self.bar.n = min(self.done, self.total)
        self.bar.set_description_str(self._words(), refresh=False)
        self.bar.refresh()

    def _words(self) -> str:
        return f"tracetriage: reading and analyzing {self.what}: {self.stage}"

    def close(self) -> None:
        self.timer.cancel()
        with self.lock:
            self.enabled = False
            if self.bar is not None:
                self.bar.close()
                self.bar = None
