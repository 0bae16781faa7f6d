"""The worker process of ``tracetriage mcp``: each analysis runs there, so that a call past its
time bound, or cancelled, ends with its worker (and batch's worker processes) killed, while the
server goes on; progress notifications tell the client each stage while it runs."""

from __future__ import annotations

import os
import time

from mcp.server.mcpserver import Context
from mcp.types import CallToolResult

from tracetriage.errors import EXIT_INTERNAL, error_fields
from tracetriage.mcp_results import failure, for_tool, success

PROGRESS_EVERY_S = 2.0  # seconds between two progress notifications of a running call
STARTUP_BOUND_S = 300.0  # a worker that has not finished its imports by then is reported, not waited on
POLL_S = 0.05  # how often the server looks whether the worker has answered
EXIT_TIMEOUT = 124  # a call past its time bound: the exit status timeout(1) gives


def worker(conn) -> None:
    """The worker process: answers one request at a time, (tool, request, runtime settings) with
    ("ok", structured, summary) or ("error", line, exit code, class) (:func:`error_fields`), until
    the server closes the pipe; before the answer, ("stage", words) as each stage of an analysis
    starts, and batch's ("cases", done, total) once its cases are found and as each ends. Its standard
    output goes to standard error (the server's standard output is the MCP channel); it leads a process
    group of its own, so that the server can end it and batch's workers together."""
    import warnings

    import tracetriage.analyzers.analysis  # noqa: F401 - an analysis's imports, paid before the first call arrives
    import tracetriage.case  # noqa: F401
    from tracetriage.mcp_work import work
    from tracetriage.memory import tune_allocator
    from tracetriage.reports.figures import lean_import

    os.dup2(2, 1)
    if hasattr(os, "setpgrp"):
        os.setpgrp()
    tune_allocator()
    lean_import()  # this process is the server's own: matplotlib, when a report draws, without set()'s docs
    warnings.simplefilter("ignore")
    try:
        conn.send(("ready",))  # imports paid: a call's time bound starts counting from here, not from the spawn
        while True:
            try:
                _tool, request, settings = conn.recv()
            except (EOFError, OSError):
                return
            try:
                structured, summary = work(request, {**settings, "progress": lambda stage: conn.send(("stage", stage)),
                                                     "cases": lambda done, total: conn.send(("cases", done, total))})
                answer = ("ok", structured, summary.encode("utf-8", "replace").decode("utf-8"))
            except (BrokenPipeError, EOFError):
                raise
            except Exception as exc:  # noqa: BLE001 - one line and its exit code, never a traceback
                answer = ("error", *error_fields(exc))
            conn.send(answer)
    except (BrokenPipeError, EOFError, ConnectionResetError):
        return  # the server is gone (its client closed the session): nothing is left to answer


class Progress:
    """The progress notifications of one call. An analysis's progress is its seconds against the call's
    time bound: one note at the start, one as each stage starts (``analyze: reading trace.sqlite``) and
    one every PROGRESS_EVERY_S naming the stage (``analyze: measuring trace.sqlite, 6 s``). batch's is
    its cases: done against the cases in all (``batch: 3 of 20 cases done``), one note as each ends;
    as the protocol wants a progress that increases with each note, it sends no note between two ends."""

    def __init__(self, ctx: Context, tool: str, timeout_s: float):
        self.ctx, self.tool, self.timeout_s = ctx, tool, timeout_s
        self.started = time.monotonic()
        self.next_note = self.started + PROGRESS_EVERY_S
        self.stage = "started"
        self.noted = 0.0  # the last progress sent
        self.counting = tool == "batch"  # its progress is cases, never seconds

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    async def start(self) -> None:
        await self.ctx.report_progress(0, None if self.counting else self.timeout_s, f"{self.tool}: started")

    async def told(self, kind: str, *what) -> None:
        """A message of the worker: ("stage", words) or ("cases", done, total)."""
        if kind == "cases" and self.counting:
            done, total = what
            if done > self.noted:  # 0 done is what the start said
                self.noted = done
                await self.ctx.report_progress(done, total, f"{self.tool}: {done} of {total} cases done")
            return
        if self.counting or kind != "stage":  # a count of cases only from batch, a stage only from an analysis
            return
        self.stage, self.noted = what[0], max(self.noted + 0.1, round(self.elapsed(), 1))  # progress only increases
        await self.ctx.report_progress(self.noted, self.timeout_s, f"{self.tool}: {self.stage}")
        self.next_note = time.monotonic() + PROGRESS_EVERY_S

    async def alive(self) -> None:
        """The note every PROGRESS_EVERY_S of a call that counts no cases."""
        now = time.monotonic()
        if self.counting or now < self.next_note:
            return
        self.noted = max(self.noted + 0.1, round(now - self.started, 1))
        await self.ctx.report_progress(self.noted, self.timeout_s, f"{self.tool}: {self.stage}, {now - self.started:.0f} s")
        self.next_note = now + PROGRESS_EVERY_S


class Worker:
    """The one worker process the analyses run in, started before the first call so that its
    imports are paid once; ended (with its process group) when a call passes its time bound or is
    cancelled, and started again at once, so that its imports are paid while the server waits for
    the next call. A call's time bound counts from the moment the worker is ready, never its
    start-up. Calls take their turn."""

    def __init__(self):
        self.process = None
        self.conn = None
        self.ready = False  # the worker said it finished its imports
        self.turn = None  # the lock calls queue on, made in the event loop

    def start(self) -> None:
        import multiprocessing

        spawn = multiprocessing.get_context("spawn")
        self.conn, child_end = spawn.Pipe()
        self.process = spawn.Process(target=worker, args=(child_end,), name="tracetriage-mcp-worker")
        self.process.start()
        self.ready = False
        child_end.close()

    async def _until_ready(self, tool: str) -> CallToolResult | None:
        """Wait for the worker's imports (a fresh worker's, after a timeout): a failure result when it
        dies or passes STARTUP_BOUND_S, None once it is ready."""
        import anyio

        started = time.monotonic()
        while not self.ready:
            if self.conn.poll():
                self.ready = self.conn.recv()[0] == "ready"
                continue
            if not self.process.is_alive():
                return failure(f"tracetriage: internal error: the {tool} worker ended with exit code "
                               f"{self.process.exitcode} before it was ready (please report this)", EXIT_INTERNAL,
                               "WorkerExit")
            if time.monotonic() - started > STARTUP_BOUND_S:
                return failure(f"tracetriage: error: {tool}: the analysis worker did not start within "
                               f"{STARTUP_BOUND_S:g} s (the machine is overloaded?)", EXIT_TIMEOUT, "Timeout")
            await anyio.sleep(POLL_S)
        return None

    def stop(self, wait_s: float = 0.0) -> None:
        """End the worker: close its pipe (an idle worker then returns), wait up to ``wait_s``
        seconds, then end its process group (batch's worker processes with it)."""
        import signal

        process, self.process = self.process, None
        if process is None:
            return
        self.conn.close()
        process.join(wait_s)
        if process.is_alive():
            try:
                if hasattr(os, "killpg"):
                    os.killpg(process.pid, signal.SIGKILL)
                else:
                    process.kill()
            except (ProcessLookupError, PermissionError):
                process.kill()
        process.join(5)

    async def call(self, ctx: Context, tool: str, request, settings: dict, timeout_s: float) -> CallToolResult:
        """One tool's work, bounded by ``timeout_s``, with progress notifications (:class:`Progress`)."""
        import anyio

        if self.turn is None:
            self.turn = anyio.Lock()
        async with self.turn:
            if self.process is None or not self.process.is_alive():
                self.stop()
                self.start()
            not_ready = await self._until_ready(tool)
            if not_ready is not None:
                self.stop()
                return not_ready
            self.conn.send((tool, request, settings))
            progress = Progress(ctx, tool, timeout_s)

            def timed_out() -> CallToolResult:
                return failure(f"tracetriage: error: {tool}: timed out after {timeout_s:g} s (tracetriage mcp --timeout)",
                               EXIT_TIMEOUT, "Timeout")

            await progress.start()
            answer = None
            try:
                while True:
                    if self.conn.poll():
                        message = self.conn.recv()
                        if message[0] not in ("stage", "cases"):
                            answer = message
                            if progress.elapsed() > timeout_s:  # it came, but past the bound: a timeout all the same
                                return timed_out()
                            break
                        await progress.told(*message)
                        continue
                    if not self.process.is_alive():
                        return failure(f"tracetriage: internal error: the {tool} worker ended with exit code "
                                       f"{self.process.exitcode} (please report this)", EXIT_INTERNAL, "WorkerExit")
                    if progress.elapsed() > timeout_s:
                        return timed_out()
                    await progress.alive()
                    await anyio.sleep(POLL_S)
            finally:
                if answer is None:  # timed out, ended, or the call was cancelled: the worker's state is unknown
                    self.stop()
                    self.start()  # the next call finds its imports paid
        if answer[0] == "ok":  # the contract as the CLI writes it; the text names the tool's arguments, not flags
            return success(answer[1], for_tool(tool, answer[2]))
        return failure(*answer[1:], tool=tool)
