"""What an entry point decides once and passes down: the analysis :class:`Options` (what the user
asks) and the :class:`Runtime` (how it runs: the analysis cache, the nsys exporter, the workers).

Nothing below the entry point reads a process global or the environment for these: the CLI
builds both from its arguments, the Python API from its keyword arguments, and batch workers
(other processes, possibly Dask) rebuild the Runtime from :meth:`Runtime.settings`, plain values.
The Runtime is also where parsing and per-trace analysis are memoised by input identity
(:meth:`Runtime.read_trace`, :meth:`Runtime.trace_metrics`): parsers and analyzers never see the cache.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tracetriage.cache import Cache
from tracetriage.errors import TraceTriageError

DEFAULT_NSYS_TIMEOUT_S = 900.0


def check_step_range(pattern: str | None) -> str | None:
    """None, or a valid regular expression naming the step ranges."""
    if pattern:
        import re

        from tracetriage.errors import UsageError

        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(None, f"--step-range is not a valid regular expression: {exc}") from None
    return pattern


@dataclass(frozen=True)
class Options:
    """The analysis options: ``symptom`` (an axis whose findings rank first), ``slo`` (latency
    budgets in ms by name), ``step_range`` (a regex naming the step ranges)."""

    symptom: str | None = None
    slo: Mapping[str, float] = field(default_factory=dict)
    step_range: str | None = None

    @classmethod
    def checked(cls, symptom=None, slo=None, step_range: str | None = None) -> Options:
        """The options as the CLI checks them (a :class:`~tracetriage.errors.UsageError` with its message);
        ``slo`` as ``{"tpot_p95_ms": 50}`` or the CLI's ``"tpot_p95_ms=50"``."""
        from tracetriage.options import check_slo, check_symptom

        symptom = check_symptom(symptom)
        step_range = check_step_range(step_range)  # the CLI's order: the first bad option is the one named
        return cls(symptom=symptom, slo=check_slo(slo), step_range=step_range)


@dataclass(frozen=True)
class Runtime:
    """How an analysis runs: ``cache`` (None: nothing kept), ``nsys`` (the exporter of .nsys-rep
    reports; None: nsys on PATH), ``nsys_timeout_s`` (its time limit), and the executor of batch
    cases: ``jobs`` worker processes (None: one per core) or the Dask scheduler at ``dask_address``;
    ``progress`` is told each stage of an analysis as it starts (tracetriage/progress.py)."""

    cache: Cache | None = None
    nsys: str | None = None
    nsys_timeout_s: float = DEFAULT_NSYS_TIMEOUT_S
    jobs: int | None = None
    dask_address: str | None = None
    progress: Callable[[str], None] | None = field(default=None, compare=False, repr=False)  # tracetriage/progress.py

    @classmethod
    def create(cls, cache_dir: str | os.PathLike | None = None, use_cache: bool = True, nsys: str | None = None,
               jobs: int | None = None, dask_address: str | None = None) -> Runtime:
        """The Runtime of an entry point: the cache in ``cache_dir`` (default: $TRACETRIAGE_CACHE_DIR, else
        the user cache folder) unless not ``use_cache``; ``nsys`` given, else $NSYS; the export's time
        limit from $TRACETRIAGE_NSYS_TIMEOUT (default 900 s)."""
        return cls(cache=Cache(cache_dir) if use_cache else None, nsys=nsys or os.environ.get("NSYS") or None,
                   nsys_timeout_s=float(os.environ.get("TRACETRIAGE_NSYS_TIMEOUT", DEFAULT_NSYS_TIMEOUT_S)),
                   jobs=jobs, dask_address=dask_address)

    def settings(self) -> dict:
        """What a worker process needs to rebuild this Runtime (:meth:`from_settings`): plain, picklable values."""
        return {"cache_dir": os.path.abspath(self.cache.dir) if self.cache is not None else None, "nsys": self.nsys,
                "nsys_timeout_s": self.nsys_timeout_s}

    @classmethod
    def from_settings(cls, settings: Mapping) -> Runtime:
        cache_dir = settings.get("cache_dir")
        return cls(cache=Cache(cache_dir) if cache_dir else None, nsys=settings.get("nsys"),
                   nsys_timeout_s=settings.get("nsys_timeout_s", DEFAULT_NSYS_TIMEOUT_S))

    def exporter(self):
        """How .nsys-rep reports are exported: this Runtime's nsys, into the cache's ``exports/``
        (None without a usable cache: the parser then uses a temporary folder it removes)."""
        from tracetriage.parsers.reports import Exporter

        workdir = self.cache.exports_dir() if self.cache is not None else None
        return Exporter(nsys=self.nsys, workdir=workdir, timeout_s=self.nsys_timeout_s)

    def read_trace(self, path: str | os.PathLike, kind: str):
        """The trace model of one file: from the cache when this input (by its identity, see
        tracetriage/cache.py) was parsed before by the same code, else parsed and kept. The
        identity travels in ``trace.meta["cache_identity"]`` for :meth:`trace_metrics`."""
        from tracetriage.memory import collect_again
        from tracetriage.parsers import read_trace

        collect_again()  # the parser is imported (detection did): a large trace is read with the collector on
        identity = self.cache.identity(path) if self.cache is not None else None
        trace = self.cache.get_model(identity, str(path)) if identity else None
        if trace is None:
            if self.progress is not None:
                self.progress(f"reading {Path(path).name}")
            trace = read_trace(Path(path), kind)
            if identity:
                self.cache.put_model(identity, trace)
        trace.meta["cache_identity"] = identity
        return trace

    def trace_metrics(self, trace, index: int, multi: bool, step_range: str | None) -> dict:
        """``analyze_trace``'s metrics of one trace, from the cache when this input was analyzed
        before with the same options by the same code, else computed and kept."""
        from tracetriage.analyzers.analysis import analyze_trace

        identity = trace.meta.get("cache_identity")
        options = {"step_range": step_range, "index": index, "multi": multi}
        if self.cache is not None and identity:
            kept = self.cache.get_metrics(identity, options, trace.path)
            if kept is not None:
                return kept
        if self.progress is not None:
            self.progress(f"measuring {Path(trace.path).name}")
        metrics = analyze_trace(trace, index, multi, step_range)
        if self.cache is not None and identity:
            self.cache.put_metrics(identity, options, metrics, trace.path)
        return metrics

    def analysis_key(self, paths, options: Options) -> str | None:
        """The cache key of the analysis of ``paths`` as one case (tracetriage/cache.py, ``analysis/``), or
        None where it is not kept: no cache, or an input that is neither a plain file nor a folder whose
        files can all be read (a folder is keyed by each file the case would open in it, by its name
        there and identity). Any size: a small capture's analysis costs more than its key."""
        if self.cache is None or not paths:
            return None
        inputs = []
        for path in paths:
            identity = _input_identity(Path(path))
            if identity is None:
                return None
            inputs.append((str(path), os.path.realpath(path), identity))
        settings = {"symptom": options.symptom, "slo": sorted(options.slo.items()), "step_range": options.step_range,
                    "cwd": os.getcwd(), "nsys": self.nsys}
        return self.cache.analysis_key(inputs, settings)


def _input_identity(path: Path):
    """A plain file's identity (parsers/reports.file_identity), or a folder's: the identities of the
    files a case finds in it (tracetriage/case.py), by their place in it; None for anything else, a
    file that cannot be read (the case says why as it opens), or an Nsight Systems report (its analysis
    says whether this run exported it or reused the export: a fact of each run, not of the file)."""
    from tracetriage.parsers.reports import NSYS_MAGIC, file_identity

    def identity(f: Path) -> str | None:
        with open(f, "rb") as fh:
            if fh.read(len(NSYS_MAGIC)) == NSYS_MAGIC:
                return None
        return file_identity(f)

    try:
        if path.is_file():
            return identity(path)
        if path.is_dir():
            from tracetriage.case import bundle_files

            found = [(f.relative_to(path).as_posix(), identity(f)) for f in bundle_files(path)]
            return None if any(ident is None for _, ident in found) else found
    except (OSError, ValueError, TraceTriageError):
        return None
    return None
