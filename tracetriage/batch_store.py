"""Object storage for ``batch`` and ``trend``: inputs and OUTDIR given as URIs that fsspec opens
(``s3://``, ``gs://``, ``az://``, ``file://``, ...; the ``s3`` extra installs fsspec and s3fs).

* Discovery lists the store (:func:`store_cases`): each folder (key prefix) that holds files is
  one case, its files those directly in it (a deeper folder is a case of its own), named by the
  folder (by its file when it holds one, as a local folder of one trace is); a file given as the
  input is a case alone. The reuse identity of a case is, per file, its name, size and the
  version the store reports (ETag, else its modification time), from the listing alone.
* A worker reads its case from the store (:func:`run_store_case`): it downloads the case's files
  into a private temporary folder (at most :data:`CASE_DOWNLOAD_MAX_BYTES`, and no more than the
  folder's disk has free), finds the case in them as for a local folder (an archive is extracted
  there), analyzes it, writes the case's files back under ``OUTDIR/cases/<id>/`` and deletes the
  folder.
* The client stages the tables, the Parquet parts and index.html in a local folder and uploads
  each as it is written (:class:`StoreOutdir`).

Credentials are the store library's own: for S3 the AWS chain (``AWS_ACCESS_KEY_ID`` /
``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, ``~/.aws``, an instance role; ``AWS_ENDPOINT_URL`` for
an S3-compatible server). A URI fsspec cannot open, a store that cannot be reached or refuses the
credentials is a usage error (exit 2), a missing input prefix a missing input (exit 3).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from tracetriage import __version__
from tracetriage.batch_records import CaseRecord, CaseRequest, CaseSpec, case_id_of
from tracetriage.errors import OutputError, TraceFormatError, TraceTriageError, UsageError

CASE_DOWNLOAD_MAX_BYTES = 64 * 2**30  # a case's files a worker downloads at most (a case over it is a failed row)
DISK_MARGIN_BYTES = 256 * 2**20  # left free on the worker's disk beside a downloaded case
TABLES = ("summary", "findings", "kernels")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")  # two letters at least: C:\ is a drive, not a scheme


def is_uri(text: str) -> bool:
    """Whether ``text`` names a store (``scheme://...``) rather than a local path."""
    return bool(_SCHEME.match(str(text)))


def join(uri: str, *parts: str) -> str:
    return "/".join([str(uri).rstrip("/"), *parts])


def in_outdir(outdir: str, name: str) -> str:
    """A file of batch's OUTDIR, a local folder or a store's URI, as the user would name it."""
    return join(outdir, name) if is_uri(outdir) else str(Path(outdir) / name)


def open_store(uri: str):
    """The fsspec file system of ``uri`` and the path in it (without a trailing slash)."""
    try:
        import fsspec
    except ImportError:
        raise UsageError(uri, "object storage needs fsspec and the store's package: pip install 'tracetriage[s3]'") from None
    try:
        fs, path = fsspec.core.url_to_fs(uri)
    except ImportError as exc:
        raise UsageError(uri, f"this store needs a package that is not installed ({_reason(exc)})") from None
    except (ValueError, TypeError) as exc:
        raise UsageError(uri, f"not a URI fsspec opens ({_reason(exc)})") from None
    return fs, path.rstrip("/")


def _reason(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]


@contextmanager
def store_errors(uri: str, writing: bool = False):
    """The store's errors as one line: a missing prefix (exit 3; writing: exit 7), access refused or no
    credentials, an endpoint that cannot be reached (exit 2)."""
    try:
        yield
    except TraceTriageError:
        raise
    except FileNotFoundError as exc:
        error = OutputError if writing else TraceFormatError
        raise error(uri, f"no such bucket, folder or object in the store ({_reason(exc)})") from None
    except PermissionError as exc:
        raise UsageError(uri, f"the store refused access: credentials missing or without the permission ({_reason(exc)})") \
            from None
    except Exception as exc:  # noqa: BLE001 - botocore's NoCredentialsError, connection errors: one line, not a traceback
        if "credential" in type(exc).__name__.lower():
            raise UsageError(uri, f"no credentials for the store were found ({type(exc).__name__}: {_reason(exc)})") from None
        raise UsageError(uri, f"cannot reach the object store ({type(exc).__name__}: {_reason(exc)})") from None


def _version_of(info: dict) -> str:
    """The version of an object as the store reports it: its ETag (S3, GCS, Azure), else its modification time."""
    for key in ("ETag", "etag", "md5Hash", "mtime", "LastModified", "last_modified", "updated", "modified"):
        if info.get(key) is not None:
            return str(info[key])
    return ""


def _hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def store_cases(uri: str, skip: str | None) -> list[CaseSpec]:
    """The cases under the store URI ``uri`` (``skip``: OUTDIR's URI, never an input), in key order,
    their ``paths`` URIs, each with its identity and the size of its files."""
    from tracetriage.batch_case import _code_version

    fs, root = open_store(uri)
    skip_root = open_store(skip)[1] if skip and is_uri(skip) else None
    with store_errors(uri):
        fs.invalidate_cache()  # a listing kept by this process's file system (a notebook's) may be stale
        single = fs.isfile(root)
        if single:
            listing = {root: fs.info(root)}
            base = root.rsplit("/", 1)[0]
        else:
            listing = fs.find(root, detail=True)
            base = root
            if not listing and not fs.exists(root):
                raise FileNotFoundError(root)
    folders: dict[str, list[tuple[str, dict]]] = {}
    for path, info in sorted(listing.items()):
        if info.get("type", "file") != "file" or _hidden(path[len(base):].lstrip("/")):
            continue
        if skip_root and (path == skip_root or path.startswith(skip_root + "/")):
            continue
        folders.setdefault(path.rsplit("/", 1)[0], []).append((path, info))
    cases = []
    code = _code_version()
    for folder, files in sorted(folders.items()):
        digest = hashlib.sha256(__version__.encode())
        digest.update(code.encode())
        for path, info in files:
            digest.update(f"{path.rsplit('/', 1)[-1]}\0{info.get('size')}\0{_version_of(info)}\0".encode())
        size = sum(int(info.get("size") or 0) for _, info in files)
        label = fs.unstrip_protocol(files[0][0] if len(files) == 1 else folder)  # as a local folder of one file is named
        error = None
        if size > CASE_DOWNLOAD_MAX_BYTES:
            error = (f"{label}: its files are {size / 2**30:.1f} GiB, over the {CASE_DOWNLOAD_MAX_BYTES / 2**30:g} GiB a "
                     "worker downloads for one case")
        cases.append(CaseSpec(case_id_of(label), label, [fs.unstrip_protocol(path) for path, _ in files], error=error,
                              identity=digest.hexdigest(), size_bytes=size))
    return cases


def _download(paths: list[str], size_bytes: int | None, folder: Path) -> None:
    """A case's files from the store into ``folder`` (its own name each), refused in one line when
    the folder's disk has not room for them."""
    free = shutil.disk_usage(folder).free
    if size_bytes is not None and size_bytes + DISK_MARGIN_BYTES > free:
        raise TraceFormatError(paths[0].rsplit("/", 1)[0], f"its files are {size_bytes / 2**20:.0f} MB and the worker's "
                                                           f"temporary folder has {free / 2**20:.0f} MB free")
    for uri in paths:
        fs, path = open_store(uri)
        with store_errors(uri):
            fs.get_file(path, str(folder / path.rsplit("/", 1)[-1]))


def _local_case(folder: Path, store_folder: str) -> tuple[list[str], str | None]:
    """The files of the one case a downloaded folder holds, found as for a local folder; or the
    reason it holds none, or several (an error naming the store, not the temporary folder)."""
    from tracetriage.batches import discover

    specs = discover([str(folder)], folder / "_archives")
    if len(specs) == 1:
        spec = specs[0]
        return spec.paths, spec.error.replace(str(folder), store_folder) if spec.error else None
    if not specs:
        return [], f"{store_folder}: no capture batch reads in this folder (trace, bundle or archive)"
    return [], (f"{store_folder}: holds {len(specs)} runs that are not one case; on object storage a folder is one case: "
                "put each run in a folder of its own")


def _push_case(local: Path, uri: str) -> None:
    """The case folder ``local`` written to ``uri``; the store's files of the case that it no longer has removed."""
    fs, root = open_store(uri)
    with store_errors(uri, writing=True):
        kept = set()
        for file in sorted(local.iterdir()):
            if file.is_file():
                _put(fs, file, f"{root}/{file.name}")
                kept.add(file.name)
        for path in fs.find(root):
            if path.rsplit("/", 1)[-1] not in kept:
                fs.rm_file(path)


def _is_local(fs) -> bool:
    """Whether ``fs`` is this machine's file system (``file://``): folders, made as they are needed."""
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else fs.protocol
    return "file" in protocols or "local" in protocols


def _put(fs, local: Path, path: str) -> None:
    """A local file uploaded to ``path``; on a file system of folders (``file://``) its folder made first
    (a bucket is never made: a missing one is the user's error)."""
    if _is_local(fs):
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    fs.put_file(str(local), path)


def _pull_case(uri: str, local: Path) -> None:
    """The last run's files of a case (its record, whether it had a report) into ``local``."""
    fs, root = open_store(uri)
    local.mkdir(parents=True, exist_ok=True)
    with store_errors(uri):
        for path in fs.find(root):
            fs.get_file(path, str(local / path.rsplit("/", 1)[-1]))


def run_store_case(analyze, request: CaseRequest) -> CaseRecord:
    """One case whose inputs or OUTDIR are on a store, analyzed by ``analyze``
    (:func:`~tracetriage.batch_case.analyze_case`) from a private temporary folder, deleted after."""
    scratch = Path(tempfile.mkdtemp(prefix="tracetriage-case-"))
    try:
        spec, read_paths = request.spec, None
        store_folder = spec.paths[0].rsplit("/", 1)[0]
        if not spec.error and any(is_uri(path) for path in spec.paths):
            downloaded = scratch / "in"
            downloaded.mkdir()
            try:
                _download(spec.paths, spec.size_bytes, downloaded)
                read_paths, error = _local_case(downloaded, store_folder)
            except TraceTriageError as exc:
                error = str(exc)
            spec = replace(spec, error=error)
        local_out = scratch / "out" if is_uri(request.outdir) else Path(request.outdir)
        case_uri = join(request.outdir, "cases", spec.case_id)
        try:
            if is_uri(request.outdir) and spec.reuse_hash:
                _pull_case(case_uri, local_out / "cases" / spec.case_id)
            record = analyze(replace(request, spec=spec, outdir=str(local_out)), read_paths=read_paths,
                             shown_folder=(str(scratch / "in"), store_folder) if read_paths else None)
            if is_uri(request.outdir):
                _push_case(local_out / "cases" / spec.case_id, case_uri)
        except TraceTriageError as exc:  # the store went away mid-case: the case failed, the batch goes on
            record = CaseRecord.failed(spec, request.options, f"{spec.label}: {exc}")
        return record
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class StoreOutdir:
    """OUTDIR on a store: what the client writes (the parts, the tables, index.html) staged in a
    local folder and uploaded; what the reuse check reads (records, parts) listed once at the start."""

    def __init__(self, uri: str):
        self.uri = uri.rstrip("/")
        self.fs, self.root = open_store(uri)
        with store_errors(uri, writing=True):
            self.fs.invalidate_cache()
            bucket = self.root.split("/", 1)[0]
            if not _is_local(self.fs):  # said before any case runs (info, not exists: exists hides a refusal)
                try:
                    self.fs.info(bucket)
                except FileNotFoundError:
                    raise OutputError(uri, f"no such bucket ({bucket}): make it first (batch never makes one)") from None
            self.existing = set(self.fs.find(self.root)) if self.fs.exists(self.root) else set()
        self.staging = Path(tempfile.mkdtemp(prefix="tracetriage-out-"))

    def records(self, case_ids: list[str]) -> dict[str, bytes]:
        """The last run's record.json of each of ``case_ids`` that has one (fetched concurrently)."""
        wanted = {f"{self.root}/cases/{case_id}/record.json": case_id for case_id in case_ids}
        wanted = {path: case_id for path, case_id in wanted.items() if path in self.existing}
        if not wanted:
            return {}
        with store_errors(self.uri):
            found = self.fs.cat(list(wanted), on_error="omit")
        return {wanted[path]: data for path, data in found.items()}

    def has_parts(self, case_id: str) -> bool:
        return all(f"{self.root}/{name}/part-{case_id}.parquet" in self.existing for name in TABLES)

    def push(self, relative: str) -> None:
        """The staged file ``relative`` uploaded to the same place under OUTDIR."""
        with store_errors(self.uri, writing=True):
            _put(self.fs, self.staging / relative, f"{self.root}/{relative}")
        self.existing.add(f"{self.root}/{relative}")

    def push_parts(self, case_id: str) -> None:
        for name in TABLES:
            self.push(f"{name}/part-{case_id}.parquet")
            (self.staging / name / f"part-{case_id}.parquet").unlink()  # the staging folder stays small

    def push_outputs(self) -> None:
        for relative in (*(f"{name}.parquet" for name in TABLES), "index.html"):
            self.push(relative)

    def prune_parts(self, case_ids: set[str]) -> None:
        """The store's parts of cases not among ``case_ids`` removed (as :func:`~tracetriage.batch_tables.prune_parts`)."""
        with store_errors(self.uri, writing=True):
            for name in TABLES:
                prefix = f"{self.root}/{name}/part-"
                for path in sorted(self.existing):
                    if path.startswith(prefix) and path.endswith(".parquet") \
                            and path[len(prefix):-len(".parquet")] not in case_ids:
                        self.fs.rm_file(path)
                        self.existing.discard(path)

    def close(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)


def is_batch_folder(uri: str) -> bool:
    """Whether the store URI ``uri`` holds batch tables (summary.parquet)."""
    fs, root = open_store(uri)
    with store_errors(uri):
        return fs.isfile(f"{root}/summary.parquet")


def read_bytes(uri: str) -> bytes:
    fs, path = open_store(uri)
    with store_errors(uri):
        return fs.cat_file(path)
