"""Safe extraction of ``.tar.gz`` / ``.tgz`` / ``.tar`` / ``.zip`` archives of captures.

Refused, with the reason, before anything is written: absolute member paths, members
that climb out with ``..``, symbolic or hard links, device files, more than
MAX_MEMBERS members, or more than MAX_TOTAL_BYTES uncompressed (declared sizes are
checked up front and actual bytes while copying, so a lying header cannot bomb; a tar.gz may not
inflate past MAX_RATIO times its own size, and no extraction runs past MAX_EXTRACT_SECONDS).
Everything lands under the destination directory.
"""

from __future__ import annotations

import io
import re
import shutil
import tarfile
import time
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Callable, NamedTuple

from tracetriage.errors import ArchiveError

MAX_MEMBERS = 10_000
MAX_TOTAL_BYTES = 8 * 1024**3  # real capture bundles are a few GiB; more is refused, not spilled to disk
MAX_RATIO = 200  # SQLite exports compress ~5-20x; a 200x member is a bomb
MAX_EXTRACT_SECONDS = 300.0  # a bundle of a few GiB inflates in well under a minute; longer is refused
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
SQLITE_MAGIC_LEN = 16


def is_archive(path: Path) -> bool:
    """A zip or tar (plain or compressed) by its content, whatever its name (a zip whose
    end record sits behind a 64 KiB comment included); a gzip file named .tar.gz/.tgz that
    cannot be read is one too, so that extract() says why."""
    name = path.name.lower()
    try:
        with open(path, "rb") as fh:
            magic = fh.read(SQLITE_MAGIC_LEN)
        if magic.startswith(b"SQLite format 3\x00"):
            return False  # the common case, answered without a tar probe
        if zipfile.is_zipfile(path) or _is_tar(path):
            return True
    except (OSError, EOFError, ValueError, zlib.error, tarfile.TarError, zipfile.BadZipFile):
        return False
    # corrupt inside (a cut download): still an archive, so that extract() says why
    return (name.endswith((".tar.gz", ".tgz")) and magic[:2] == b"\x1f\x8b") or (name.endswith(".zip") and magic[:2] == b"PK")


def _is_tar(path: Path) -> bool:
    """A tar (plain or compressed) with a first member, or named as one: ``tarfile.is_tarfile`` also
    says yes to a block of zero bytes (an empty archive's end), which is what a file of NULs starts with."""
    try:
        with tarfile.open(path) as tar:  # one open: is_tarfile would open it once more
            return path.name.lower().endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")) or tar.next() is not None
    except tarfile.TarError:
        return False


def _safe_name(archive: Path, name: str) -> PurePosixPath:
    p = PurePosixPath(name.replace("\\", "/"))
    if p.is_absolute() or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ArchiveError(archive, f"refused: member {name!r} has an absolute path")
    if ".." in p.parts:
        raise ArchiveError(archive, f"refused: member {name!r} climbs out of the archive with '..'")
    return p


def extract(archive: Path, dest: Path, max_members: int | None = None, max_bytes: int | None = None) -> Path:
    """Extract into ``dest`` (created) and return it. Raises ArchiveError when refused."""
    archive = Path(archive)
    max_members = MAX_MEMBERS if max_members is None else max_members
    max_bytes = MAX_TOTAL_BYTES if max_bytes is None else max_bytes
    try:
        if zipfile.is_zipfile(archive) or archive.name.lower().endswith(".zip"):  # a cut one fails here, with the reason
            return _extract_zip(archive, dest, max_members, max_bytes)
        if tarfile.is_tarfile(archive) or archive.name.lower().endswith((".tar.gz", ".tgz", ".tar")):
            return _extract_tar(archive, dest, max_members, max_bytes)  # a corrupt one fails here, with the reason
    except ArchiveError:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError, OverflowError,
            NotImplementedError, RuntimeError) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise ArchiveError(archive, f"corrupt or unsupported archive ({_why(exc)})") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)  # interrupted (Ctrl-C, SIGTERM): leave nothing behind
        raise
    raise ArchiveError(archive, "not a tar or zip archive")


def _why(exc: BaseException) -> str:
    if isinstance(exc, RuntimeError) and "encrypted" in str(exc):
        return "an encrypted member"
    if isinstance(exc, NotImplementedError):
        return f"a member's compression method is not supported: {exc}"
    text = str(exc)
    inner = re.search(r"- method gz: ReadError\('(truncated header|invalid header|empty file|bad checksum)'\)", text)
    if inner:  # it inflates, but what it holds does not start as a tar archive does
        return f"gzip-compressed, but what it holds is not a tar archive (tarfile: {inner.group(1)})"
    m = re.search(r"- method (?:gz|bz2|xz): ReadError\('((?:zlib error|invalid|Compressed|crc)[^']*)'\)", text)
    if m:  # tarfile's "could not be opened" lists every method it tried: the one that applies says why
        text = m.group(1)
    return f"{type(exc).__name__}: {' '.join(text.split())}"


class _Budget:
    """What an extraction may still spend: bytes (the total limit, and MAX_RATIO times the
    archive's own size when its members do not say their compressed size, as a tar.gz does)
    and time (MAX_EXTRACT_SECONDS), so that neither a lying header nor a stream of zeros
    inflates for long."""

    def __init__(self, archive: Path, max_bytes: int, ratio_of: int | None):
        self.archive = archive
        self.left = max_bytes
        self.written = 0
        self.ratio_limit = None if ratio_of is None else max(1 << 24, MAX_RATIO * max(ratio_of, 1))
        self.deadline = time.monotonic() + MAX_EXTRACT_SECONDS

    def spend(self, n: int) -> None:
        self.left -= n
        self.written += n
        if self.left < 0:
            raise ArchiveError(self.archive, f"refused: archive inflates past {MAX_TOTAL_BYTES >> 30} GiB")
        if self.ratio_limit is not None and self.written > self.ratio_limit:
            raise ArchiveError(self.archive, f"refused: the archive inflates more than {MAX_RATIO}x its size "
                                             f"(a compression bomb)")
        if time.monotonic() > self.deadline:
            raise ArchiveError(self.archive, f"refused: extracting took longer than {MAX_EXTRACT_SECONDS:.0f} s")


def _copy_limited(src, dst_path: Path, budget: _Budget, archive: Path, name: str, packed: int | None) -> None:
    dst_path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with open(dst_path, "wb") as out:
        while chunk := src.read(1 << 20):
            budget.spend(len(chunk))
            written += len(chunk)
            if packed is not None and written > (1 << 24) and written > MAX_RATIO * max(packed, 1):
                raise ArchiveError(archive, f"refused: member {name!r} inflates more than {MAX_RATIO}x (a compression bomb)")
            out.write(chunk)


class _Member(NamedTuple):
    name: str
    size: int
    is_dir: bool
    problem: str | None  # why the member is refused, if it is
    open: Callable[[], BinaryIO | None]
    packed: int | None = None  # compressed size, when the archive says (zip)


def _tar_members(tf: tarfile.TarFile, archive: Path, max_members: int) -> list[_Member]:
    out = []
    for i, m in enumerate(tf):  # count while reading: a bomb is refused before it is listed whole
        if i >= max_members:
            raise ArchiveError(archive, f"refused: more than {max_members} members")
        problem = (f"is a link ({m.linkname!r})" if m.issym() or m.islnk()
                   else None if m.isfile() or m.isdir() else "is not a regular file")
        out.append(_Member(m.name, m.size, m.isdir(), problem, lambda m=m: tf.extractfile(m)))
    return out


def _zip_members(zf: zipfile.ZipFile, archive: Path, max_members: int) -> list[_Member]:
    infos = zf.infolist()
    if len(infos) > max_members:
        raise ArchiveError(archive, f"refused: more than {max_members} members")
    return [
        _Member(i.filename, i.file_size, i.is_dir(),
                "is a symbolic link" if (i.external_attr >> 16) & 0o170000 == 0o120000
                else "is encrypted" if i.flag_bits & 0x1 else None,
                lambda i=i: zf.open(i), i.compress_size)
        for i in infos
    ]


def _extract_members(archive: Path, dest: Path, members: list[_Member], max_bytes: int, ratio_of: int | None) -> Path:
    """Check every member first (nothing is written for a refused archive), then copy
    with a byte budget that also catches a header lying about sizes."""
    total = 0
    for m in members:
        _safe_name(archive, m.name)
        if m.problem:
            raise ArchiveError(archive, f"refused: member {m.name!r} {m.problem}")
        total += m.size
    if total > max_bytes:
        raise ArchiveError(archive, f"refused: {total:,} bytes uncompressed exceeds the limit of {max_bytes:,}")
    for m in members:
        if m.packed is not None and m.size > (1 << 24) and m.size > MAX_RATIO * max(m.packed, 1):
            raise ArchiveError(archive, f"refused: member {m.name!r} declares {m.size:,} bytes from {m.packed:,} "
                                        f"compressed (over {MAX_RATIO}x: a compression bomb)")
    dest.mkdir(parents=True, exist_ok=True)
    budget = _Budget(archive, max_bytes, ratio_of)
    try:
        for m in members:
            target = dest.joinpath(*_safe_name(archive, m.name).parts)
            if m.is_dir:
                target.mkdir(parents=True, exist_ok=True)
                continue
            try:
                src = m.open()
                if src is not None:
                    with src:
                        _copy_limited(src, target, budget, archive, m.name, m.packed)
            except ArchiveError:
                raise
            except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, zlib.error, ValueError,
                    NotImplementedError, RuntimeError) as exc:
                raise ArchiveError(archive, f"member {m.name!r} cannot be extracted ({_why(exc)})") from None
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def _extract_tar(archive: Path, dest: Path, max_members: int, max_bytes: int) -> Path:
    with tarfile.open(archive, "r:*") as tf:
        compressed = not isinstance(tf.fileobj, io.BufferedReader)  # gz/bz2/xz: members do not say their packed size
        return _extract_members(archive, dest, _tar_members(tf, archive, max_members), max_bytes,
                                archive.stat().st_size if compressed else None)


def _extract_zip(archive: Path, dest: Path, max_members: int, max_bytes: int) -> Path:
    with zipfile.ZipFile(archive) as zf:
        return _extract_members(archive, dest, _zip_members(zf, archive, max_members), max_bytes, None)
