"""The analysis cache: parsed models and per-trace metrics of large captures, kept for next time.

A second look at the same capture — another ``--symptom``, another output format,
``compare``, a batch re-run — should not re-read a multi-GB export. Three things are
kept, each under a key that changes whenever its input or its code does:

* the **model** of a trace (``model/``): every table as an Arrow IPC file (columns as
  written, categoricals as dictionaries) plus the trace's metadata, keyed by the input's
  identity and :func:`model_version` (a digest of the parsers' source);
* the **metrics** of a trace (``metrics/``): what ``analyze_trace`` computed for it
  (pickled), keyed by the input's identity, :func:`metrics_version` (a digest of the
  parsers' and analyzers' source) and the options that
  change them (``--step-range``). Rules run again on a new ``--symptom`` / ``--slo``;
  rendering runs every time;
* the **analysis** of a case of files (``analysis/``): the contract and its chart series, keyed by
  each file's identity and path, the options (``--symptom``, ``--slo``, ``--step-range``) and the
  parsers' and analyzers' source, so a report of a capture analyzed before (another format, the
  same format again) is rendered from it without loading the model, the metrics or the analyzers
  (pandas, pyarrow): a cached HTML report of the 2xH100 export took 0.83 s, most of it imports;
* the HTML report's **charts** (``charts/``): each chart's SVG, keyed by its data, the reports'
  source and matplotlib's version (reports/charts.py): drawing them was most of a cached report;
  and the compiled report templates (``templates/``, Jinja's bytecode cache).

The identity of an input is its size, its modification time (ns) and a SHA-256 of its
first and last MiB (and of its path's name), so a file rewritten in place — even with
the same size — is a different entry, and a changed row near either end changes the hash
even if the mtime was preserved. The identity names no folder, so a copy kept with its time (``cp -p``,
rsync, an archive unpacked) or a file moved is the same entry: a metrics entry keeps the input's path as a mark, not as text,
read back as the path of the input being analyzed now, and a model's path (and its meta's) is rewritten to
it as it is read, so ``devices[].trace`` and every other path of the analysis name that input, never the
one first cached.
Entries live in a user cache directory (``--cache-dir``,
else ``$TRACETRIAGE_CACHE_DIR``, else ``$XDG_CACHE_HOME/tracetriage``, else
``~/.cache/tracetriage``), never beside the input; the directory is created private
(0700). The entry point's :class:`~tracetriage.runtime.Runtime` holds the :class:`Cache` and
memoises parsing and per-trace analysis through it; parsers and analyzers never see it.
Its size is bounded (``TRACETRIAGE_CACHE_MAX_GB``, default 20 GB): after a write, the least
recently used entries are removed until it fits. The model and metrics of files smaller than
:data:`MIN_CACHED_BYTES` are not cached (reading them is faster than caching them); their
analysis is (it costs more than its key). A cache entry that cannot be read
is ignored and rewritten; a cache that cannot be written is skipped with no error — the
cache is an accelerator, never a requirement.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import tempfile
import time
from pathlib import Path

from tracetriage.codeversion import code_version


def model_version() -> str:
    """What makes a model: the parsers and the model (tracetriage/*.py)."""
    return "model-" + code_version("tracetriage", "tracetriage.parsers")


def metrics_version() -> str:
    """What makes analyze_trace's metrics: the model's code and the analyzers."""
    return "metrics-" + code_version("tracetriage", "tracetriage.parsers", "tracetriage.analyzers")


# below this, caching gains nothing: the 0.6 MB real nsys export costs 0.65 CPU-s read, 0.70 written to the
# cache, 0.60 from it; the 2.7 MB 2xH100 one 1.0 / 1.05 / 0.67 (a JSON analysis, imports included)
MIN_CACHED_BYTES = 1024 * 1024
DEFAULT_MAX_BYTES = 20 * 1000 ** 3

_TABLES = ("gpu", "api", "ranges", "syncs", "devices", "processes", "ops", "op_kernels")


def default_dir() -> Path:
    env = os.environ.get("TRACETRIAGE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "tracetriage"


class Cache:
    def __init__(self, directory: str | os.PathLike | None = None, max_bytes: int | None = None):
        self.dir = Path(directory) if directory else default_dir()
        env = os.environ.get("TRACETRIAGE_CACHE_MAX_GB")
        self.max_bytes = max_bytes or (int(float(env) * 1000 ** 3) if env else DEFAULT_MAX_BYTES)
        self.hits = {"model": 0, "metrics": 0}

    # -- identity ----------------------------------------------------------------------
    @staticmethod
    def identity(path: str | os.PathLike) -> str | None:
        """A key that changes with the file's content (see the module docstring); None for files
        smaller than :data:`MIN_CACHED_BYTES` (and unreadable ones)."""
        from tracetriage.parsers.reports import file_identity

        p = Path(path)
        try:
            if p.stat().st_size < MIN_CACHED_BYTES:
                return None
            return file_identity(p)
        except OSError:
            return None

    def templates_dir(self) -> Path | None:
        """Where compiled report templates are kept (reports/html.py)."""
        if not self._ready():
            return None
        d = self.dir / "templates"
        try:
            d.mkdir(exist_ok=True, mode=0o700)
        except OSError:
            return None
        return d

    def exports_dir(self) -> Path | None:
        """Where exports of reports (.nsys-rep -> SQLite) are kept."""
        return self.dir / "exports" if self._ready() else None

    def _entry(self, kind: str, key: str) -> Path:
        return self.dir / kind / key

    def _ready(self) -> bool:
        try:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            return os.access(self.dir, os.W_OK)
        except OSError:
            return False

    def _commit(self, tmp: Path, final: Path) -> None:
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if final.exists():
            shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        self.evict()

    @staticmethod
    def _touch(entry: Path) -> None:
        try:
            os.utime(entry)
        except OSError:
            pass

    # -- models ------------------------------------------------------------------------
    def model_key(self, identity: str) -> str:
        return f"{identity}-{model_version()}"

    def get_model(self, identity: str, path: str | os.PathLike | None = None):
        """The cached trace for an input identity (tables read on first use), or None. ``path``: the input
        as given now, which the trace then names wherever the entry named the path it was made from (an
        identity is the file's name, size, time and content, not its folder: a copy kept with its time, a
        file moved, is the same entry)."""
        entry = self._entry("model", self.model_key(identity))
        meta_file = entry / "trace.json"
        if not meta_file.exists() or not all((entry / f"{name}.arrow").exists() for name in _TABLES):
            return None
        try:
            info = json.loads(meta_file.read_text())
            if path is not None and str(path) != info["path"]:
                info = _repathed(info, info["path"], str(path))
            trace = CachedTrace(entry, info)
        except Exception:  # noqa: BLE001 - a broken entry is a miss, and is rewritten
            shutil.rmtree(entry, ignore_errors=True)
            return None
        self._touch(entry)
        self.hits["model"] += 1
        return trace

    def put_model(self, identity: str, trace) -> None:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        if not self._ready():
            return
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.dir))
        try:
            for name in _TABLES:
                df = getattr(trace, name)
                table = pa.Table.from_pandas(df, preserve_index=False)
                with pa.OSFile(str(tmp / f"{name}.arrow"), "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table)
            (tmp / "trace.json").write_text(json.dumps({"path": trace.path, "format": trace.format,
                                                        "meta": _jsonable(trace.meta), "counts": trace.counts()}))
            self._commit(tmp, self._entry("model", self.model_key(identity)))
        except Exception:  # noqa: BLE001 - an unwritable or full cache is skipped
            shutil.rmtree(tmp, ignore_errors=True)

    # -- metrics -----------------------------------------------------------------------
    def metrics_key(self, identity: str, options: dict) -> str:
        opts = hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return f"{identity}-{metrics_version()}-{opts}"

    def get_metrics(self, identity: str, options: dict, path: str | os.PathLike | None = None):
        """The metrics kept for an input identity and options, or None; every place they name the path they
        were computed from (``devices[].trace``, the processes', the trace's meta) names ``path`` instead, the
        input as given now (see :meth:`get_model`)."""
        return self._get_pickle("metrics", self.metrics_key(identity, options), path)

    def put_metrics(self, identity: str, options: dict, value, path: str | os.PathLike | None = None) -> None:
        """Keep ``value``, the metrics of the input at ``path``: that path is kept as a mark in the pickle,
        which :meth:`get_metrics` reads back as the path of the input it is asked for."""
        self._put_pickle("metrics", self.metrics_key(identity, options), value, path)

    # -- analyses ----------------------------------------------------------------------
    @staticmethod
    def analysis_key(inputs: list, options: dict) -> str:
        """The key of a case's analysis: each input as given, where it is and its identity, in order; the
        options (symptom, SLO budgets, step range, the exporter of reports); the code of the parsers,
        analyzers and rules (:func:`metrics_version`: the same code makes both)."""
        text = json.dumps({"inputs": inputs, "options": options}, sort_keys=True, default=str)
        return f"{hashlib.sha256(text.encode()).hexdigest()[:32]}-analysis-{metrics_version()}"

    def get_analysis(self, key: str):
        """What :meth:`put_analysis` kept: (the contract, its chart series), or None."""
        return self._get_pickle("analysis", key)

    def put_analysis(self, key: str, data: dict, series: dict) -> None:
        self._put_pickle("analysis", key, (data, series))

    # -- pickled entries (metrics, analyses) ---------------------------------------------
    def _get_pickle(self, kind: str, key: str, path: str | os.PathLike | None = None):
        """The value kept under ``kind``/``key``, or None, its input's path read as ``path``
        (:class:`_PathPickler`); a broken entry is a miss, and is rewritten."""
        entry = self._entry(kind, key)
        try:
            with open(entry / f"{kind}.pickle", "rb") as fh:
                value = _PathUnpickler(fh, path).load()  # our own file, in a private (0700) directory
        except FileNotFoundError:
            return None
        except Exception:  # noqa: BLE001
            shutil.rmtree(entry, ignore_errors=True)
            return None
        self._touch(entry)
        self.hits[kind] = self.hits.get(kind, 0) + 1
        return value

    def _put_pickle(self, kind: str, key: str, value, path: str | os.PathLike | None = None) -> None:
        if not self._ready():
            return
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.dir))
        try:
            with open(tmp / f"{kind}.pickle", "wb") as fh:
                _PathPickler(fh, path).dump(value)
            self._commit(tmp, self._entry(kind, key))
        except Exception:  # noqa: BLE001 - an unwritable or full cache is skipped
            shutil.rmtree(tmp, ignore_errors=True)

    # -- rendered pieces (charts) -------------------------------------------------------
    def get_blob(self, kind: str, key: str) -> bytes | None:
        """What :meth:`put_blob` kept under ``kind``/``key`` (a key its caller derives from the
        inputs and the code that made it), or None."""
        entry = self._entry(kind, key)
        try:
            data = (entry / "blob").read_bytes()
        except OSError:
            return None
        self._touch(entry)
        return data

    def put_blob(self, kind: str, key: str, data: bytes) -> None:
        if not self._ready():
            return
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.dir))
        try:
            (tmp / "blob").write_bytes(data)
            self._commit(tmp, self._entry(kind, key))
        except Exception:  # noqa: BLE001 - an unwritable or full cache is skipped
            shutil.rmtree(tmp, ignore_errors=True)

    # -- size bound --------------------------------------------------------------------
    def entries(self) -> list[tuple[float, int, Path]]:
        out = []
        for kind in ("model", "metrics", "analysis", "charts", "templates"):
            d = self.dir / kind
            if not d.is_dir():
                continue
            for entry in d.iterdir():
                try:
                    size = sum(f.stat().st_size for f in entry.iterdir()) if entry.is_dir() else entry.stat().st_size
                    out.append((entry.stat().st_mtime, size, entry))
                except OSError:
                    continue
        return out

    def size(self) -> int:
        return sum(s for _, s, _ in self.entries())

    def evict(self) -> None:
        """Least recently used entries out until the cache fits its bound."""
        entries = sorted(self.entries())
        total = sum(s for _, s, _ in entries)
        for _, size, entry in entries:
            if total <= self.max_bytes:
                break
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:  # a compiled template
                entry.unlink(missing_ok=True)
            total -= size
        for stale in self.dir.glob(".tmp-*"):  # a write killed half-way
            try:
                if time.time() - stale.stat().st_mtime > 3600:
                    shutil.rmtree(stale, ignore_errors=True)
            except OSError:
                pass


_PATH_MARK = "input-path"  # the persistent id of the input's path in a pickled entry


class _PathPickler(pickle.Pickler):
    """A pickler that writes the input's path (each str equal to it) as a mark, not as text: an entry is
    keyed by its input's identity, not by where that input is, so the path is the reader's to give."""

    def __init__(self, fh, path: str | os.PathLike | None):
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._path = None if path is None else str(path)

    def persistent_id(self, obj):
        if self._path is not None and type(obj) is str and obj == self._path:
            return _PATH_MARK
        return None


class _PathUnpickler(pickle.Unpickler):
    """Reads what :class:`_PathPickler` wrote, the mark as ``path`` (the input it is read for now)."""

    def __init__(self, fh, path: str | os.PathLike | None):
        super().__init__(fh)  # noqa: S301 - our own file, in a private (0700) directory
        self._path = None if path is None else str(path)

    def persistent_load(self, pid):
        if pid != _PATH_MARK or self._path is None:
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")  # a miss, and the entry is rewritten
        return self._path


def _repathed(value, old: str, new: str):
    """``value`` (JSON: dicts, lists, strings) with the path ``old`` read as ``new`` wherever it appears, alone or
    inside a string (``<path>: a warning``)."""
    if isinstance(value, str):
        return value.replace(old, new) if old and old in value else value
    if isinstance(value, dict):
        return {key: _repathed(item, old, new) for key, item in value.items()}
    if isinstance(value, list):
        return [_repathed(item, old, new) for item in value]
    return value


class CachedTrace:
    """A trace from the cache: the same attributes as ``model.Trace``, each table read from its
    Arrow file only when first used, so a case whose metrics are cached never loads them."""

    def __init__(self, entry: Path, info: dict):
        self._entry = entry
        self._counts = info["counts"]
        self.path = info["path"]
        self.format = info["format"]
        self.meta = info["meta"]

    def __getattr__(self, name):
        if name not in _TABLES:
            raise AttributeError(name)
        import pyarrow as pa
        import pyarrow.ipc as ipc

        with pa.memory_map(str(self._entry / f"{name}.arrow")) as src:
            table = ipc.open_file(src).read_all()
        df = table.to_pandas(split_blocks=True, self_destruct=True)
        setattr(self, name, df)
        return df

    def distinct_names(self, table: str) -> list[str] | None:
        """The categories of a table's ``name`` column, read from its Arrow dictionary without
        loading the table (the capture-kind evidence needs only them); None when the table is
        loaded already or its names are not a dictionary."""
        if table in vars(self) or table not in _TABLES:
            return None
        import pyarrow as pa
        import pyarrow.ipc as ipc

        with pa.memory_map(str(self._entry / f"{table}.arrow")) as src:
            reader = ipc.open_file(src)
            if "name" not in reader.schema.names or not pa.types.is_dictionary(reader.schema.field("name").type):
                return None
            names: dict[str, None] = {}
            for i in range(reader.num_record_batches):
                names.update(dict.fromkeys(str(v) for v in reader.get_batch(i).column("name").dictionary.to_pylist()))
        return list(names)

    @property
    def warnings(self) -> list[str]:
        return self.meta.setdefault("warnings", [])

    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def device_label(self, device: int) -> str:
        from tracetriage.model import Trace

        return Trace.device_label(self, device)


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)
