"""Where batch cases run, and what happens when one goes wrong.

Each case runs in a worker process of its own kind (:mod:`tracetriage.batch_worker`), started
and watched by a :class:`CaseRunner`: on this machine ``jobs`` of them side by side
(:func:`run_local`); on Dask, one per Dask worker thread, started by the task itself
(:func:`run_on_worker`), so that the same limits hold on a cluster. The failure policy:

* a case whose worker's resident memory grows by more than ``--case-memory`` MB while it runs is
  stopped (SIGKILL) and is a failed row naming the ceiling; the growth is the worker's peak (Linux
  keeps it, reset when the worker takes the case), so a case that peaked between two looks, or
  peaked and ended before the next, is failed all the same;
* a case still running ``--case-timeout`` seconds after it started is a failed row naming the
  timeout (the worker's own alarm first; a case stuck in native code is stopped
  :data:`KILL_GRACE_S` later);
* a worker that dies (SIGKILL from the OOM killer, a segfault in a native reader, any exit) is a
  failed row for the case it held, naming how it died; and on Dask, a task whose Dask worker
  died (``KilledWorker``) likewise;
* the runner of a dead or stopped worker is replaced: the rest of the batch goes on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from tracetriage.batch_records import CaseRecord, CaseRequest

WATCH_S = 0.1  # how often a running case's memory and time are looked at
KILL_GRACE_S = 5.0  # after --case-timeout, how long the worker's own alarm has before the worker is stopped
READY_TIMEOUT_S = 300.0  # a worker that has not started (imported tracetriage) in this long is broken


@dataclass(frozen=True)
class Limits:
    """A case's limits: ``timeout_s`` (None: none), ``memory_mb`` (the growth of its worker's
    resident memory while it runs; None: none)."""

    timeout_s: float | None = None
    memory_mb: float | None = None


class WorkerStartError(RuntimeError):
    """The batch's worker process cannot start (a broken installation): no case could run."""


def resident_mb(pid: int) -> float | None:
    """A process's resident memory in MB (None when it cannot be read: the process is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss / 2**20
    except Exception:  # noqa: BLE001 - psutil absent or the process gone: nothing to watch
        return None


def peak_mb(pid: int) -> float | None:
    """A process's peak resident memory in MB since its peak was last reset (Linux's VmHWM: a
    peak between two looks is not missed); None where the system does not keep it."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**10
    except (OSError, ValueError, IndexError):
        pass
    return None


def reset_peak(pid: int) -> None:
    """The process's peak resident memory set back to its present size (Linux: ``clear_refs``)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass


def death_reason(returncode: int | None) -> str:
    """How a worker process ended, for the failed row of the case it held."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if -returncode == signal.SIGKILL:
            return f"likely out of memory (killed by {name}, as the kernel's OOM killer does)"
        if -returncode in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGABRT, signal.SIGFPE):
            return f"it crashed ({name}: a fault in native code, e.g. a reader library)"
        return f"killed by {name}"
    return f"it exited with status {returncode}"


class CaseRunner:
    """One worker process and the case it runs: it starts the process, hands it one case at a
    time and watches it (:meth:`step`)."""

    def __init__(self):
        request_read, request_write = os.pipe()
        reply_read, reply_write = os.pipe()
        try:
            self.process = subprocess.Popen([sys.executable, "-m", "tracetriage.batch_worker", str(request_read),
                                             str(reply_write)], pass_fds=(request_read, reply_write),
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        finally:
            os.close(request_read)
            os.close(reply_write)
        self.requests = Connection(request_write, readable=False)
        self.replies = Connection(reply_read, writable=False)
        self.started = time.monotonic()
        self.ready = False
        self.dead = False
        self.job: CaseRequest | None = None  # the request of the case it runs
        self.job_started = 0.0
        self.idle_mb = 0.0
        self.limits = Limits()

    def submit(self, request: CaseRequest, limits: Limits) -> None:
        reset_peak(self.process.pid)
        self.idle_mb = resident_mb(self.process.pid) or 0.0
        self.job, self.job_started, self.limits = request, time.monotonic(), limits
        self.requests.send(request)

    def step(self) -> CaseRecord | None:
        """What happened since the last look (without waiting): the record of a case that ended,
        in any way, or None."""
        if self.dead:
            return None
        if self.replies.poll():
            try:
                kind, value = self.replies.recv()
            except (EOFError, OSError):
                return self._died()
            if kind == "ready":
                self.ready = True
                return None
            over = self._over_memory()
            if over is not None:  # it ended, but went over its ceiling on the way: failed all the same
                return over
            self.job = None
            return value
        if self.job is not None:
            return self._over_limits()
        if not self.ready and time.monotonic() - self.started > READY_TIMEOUT_S:
            self.stop()
            raise WorkerStartError(f"the batch's worker process did not start in {READY_TIMEOUT_S:g} s")
        return None

    def _over_limits(self) -> CaseRecord | None:
        label = self.job.spec.label
        elapsed = time.monotonic() - self.job_started
        if self.limits.timeout_s and elapsed > self.limits.timeout_s + KILL_GRACE_S:
            return self._stopped(f"{label}: timed out after {self.limits.timeout_s:g} s (--case-timeout); its worker was "
                                 "stopped")
        return self._over_memory()

    def _over_memory(self) -> CaseRecord | None:
        """The failed record of a case whose worker's resident memory grew past the ceiling (its
        peak where the system keeps one, else its present size), the worker stopped; else None."""
        if not self.limits.memory_mb:
            return None
        pid = self.process.pid
        peak = peak_mb(pid)  # the peak is at least the present size: that one read where the system keeps it
        now = peak if peak is not None else resident_mb(pid)
        if now is None or now - self.idle_mb <= self.limits.memory_mb:
            return None
        growth = now - self.idle_mb
        return self._stopped(f"{self.job.spec.label}: over the {self.limits.memory_mb:g} MB per-case ceiling: its "
                             f"worker's resident memory grew by {growth:.{1 if growth < 10 else 0}f} MB "
                             f"({'its peak' if peak is not None else 'as sampled'}, over the idle worker's "
                             f"{self.idle_mb:.0f} MB) while analyzing it (--case-memory); its worker was stopped")

    def _stopped(self, why: str) -> CaseRecord:
        self.stop()
        return self._failed(why)

    def _died(self) -> CaseRecord | None:
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.stop()
            code = self.process.returncode
        self.dead = True
        if self.job is None:
            if not self.ready:
                raise WorkerStartError(f"the batch's worker process could not start ({death_reason(code)}; its "
                                       "error is above)")
            return None
        return self._failed(f"{self.job.spec.label}: worker died while analyzing it: {death_reason(code)}")

    def _failed(self, why: str) -> CaseRecord:
        record = CaseRecord.failed(self.job.spec, self.job.options, why).with_(
            seconds=round(time.monotonic() - self.job_started, 3))
        self.job = None
        return record

    def stop(self) -> None:
        """The process ended (SIGKILL when it does not end on its own), its pipes closed."""
        self.dead = True
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for conn in (self.requests, self.replies):
            try:
                conn.close()
            except OSError:
                pass

    def __del__(self):  # a runner dropped with its thread (a Dask worker's) ends its process
        if getattr(self, "process", None) is not None and not self.dead:
            try:
                self.stop()
            except Exception:  # noqa: BLE001 - at interpreter shutdown: the worker ends with its pipe anyway
                pass


def run_local(requests: list[CaseRequest], jobs: int, limits: Limits):
    """Each request's record as its case ends, from ``jobs`` workers on this machine."""
    pending = deque(requests)
    runners = [CaseRunner() for _ in range(max(1, min(jobs, len(pending))))]
    try:
        while pending or any(runner.job is not None for runner in runners):
            wait([runner.replies for runner in runners if not runner.dead], timeout=WATCH_S)
            for i, runner in enumerate(runners):
                record = runner.step()
                if record is not None:
                    yield record
                if runner.dead:
                    runner = runners[i] = CaseRunner()  # the pool restarted for the rest
                if runner.ready and runner.job is None and pending:
                    runner.submit(pending.popleft(), limits)
    finally:
        for runner in runners:
            runner.stop()


_THREAD = threading.local()


def run_on_worker(request: CaseRequest, limits: Limits) -> CaseRecord:
    """One case as a Dask task: in a worker process of its own started by (and kept for) this Dask
    worker thread, under the same limits as on this machine."""
    runner = getattr(_THREAD, "runner", None)
    if runner is None or runner.dead:
        runner = _THREAD.runner = CaseRunner()
    while not runner.ready:
        wait([runner.replies], timeout=WATCH_S)
        runner.step()
        if runner.dead:
            runner = _THREAD.runner = CaseRunner()
    runner.submit(request, limits)
    while True:
        wait([runner.replies], timeout=WATCH_S)
        record = runner.step()
        if record is not None:
            return record


def run_dask(requests: list[CaseRequest], client, limits: Limits):
    """Each request's record as its case ends, from the Dask cluster of ``client``; a task lost
    with its Dask worker (``KilledWorker``, after Dask's own retries) is a failed row."""
    from dask.distributed import as_completed

    futures = {}
    for request in requests:
        future = client.submit(run_on_worker, request, limits, pure=False)
        futures[future.key] = (future, request)
    try:
        for future in as_completed([future for future, _ in futures.values()]):
            request = futures.pop(future.key)[1]
            try:
                record = future.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker, a lost scheduler: the case failed, the rest go on
                reason = " ".join(str(exc).split()).split(". ")[0][:300] or type(exc).__name__  # Dask's first sentence
                record = CaseRecord.failed(request.spec, request.options, f"{request.spec.label}: worker died while "
                                           f"analyzing it: likely out of memory (Dask: {type(exc).__name__}: {reason})")
            future.release()  # its record read: the Dask worker frees it (held to the end, the workers grew with the cases)
            yield record
    finally:
        client.cancel([future for future, _ in futures.values()])
