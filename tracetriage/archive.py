"""Safe extraction of ``.tar.gz`` / ``.tgz`` / ``.tar`` / ``.zip`` archives of captures.

Refused, with the reason, before anything is written: absolute member paths, members
that climb out with ``..``, symbolic or hard links, device files, more than
MAX_MEMBERS members, or more than MAX_TOTAL_BYTES uncompressed (declared sizes are
checked up front and actual bytes while copying, so a lying header cannot bomb).
Everything lands under the destination directory.
"""

from __future__ import annotations

import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from tracetriage.errors import ArchiveError

MAX_MEMBERS = 10_000
MAX_TOTAL_BYTES = 64 * 1024**3
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")


def is_archive(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(ARCHIVE_SUFFIXES) and (tarfile.is_tarfile(path) or zipfile.is_zipfile(path))


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
        if zipfile.is_zipfile(archive):
            return _extract_zip(archive, dest, max_members, max_bytes)
        if tarfile.is_tarfile(archive):
            return _extract_tar(archive, dest, max_members, max_bytes)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ArchiveError(archive, f"corrupt archive ({exc})") from None
    raise ArchiveError(archive, "not a tar or zip archive")


def _copy_limited(src, dst_path: Path, budget: list[int], archive: Path) -> None:
    dst_path.parent.mkdir(parents=True, exist_ok=True)
    with open(dst_path, "wb") as out:
        while chunk := src.read(1 << 20):
            budget[0] -= len(chunk)
            if budget[0] < 0:
                raise ArchiveError(archive, "refused: archive inflates past the size limit")
            out.write(chunk)


def _extract_tar(archive: Path, dest: Path, max_members: int, max_bytes: int) -> Path:
    with tarfile.open(archive, "r:*") as tf:
        members = []
        for i, m in enumerate(tf):
            if i >= max_members:
                raise ArchiveError(archive, f"refused: more than {max_members} members")
            members.append(m)
        total = 0
        for m in members:
            _safe_name(archive, m.name)
            if m.issym() or m.islnk():
                raise ArchiveError(archive, f"refused: member {m.name!r} is a link ({m.linkname!r})")
            if not (m.isfile() or m.isdir()):
                raise ArchiveError(archive, f"refused: member {m.name!r} is not a regular file")
            total += m.size
        if total > max_bytes:
            raise ArchiveError(archive, f"refused: {total:,} bytes uncompressed exceeds the limit of {max_bytes:,}")
        dest.mkdir(parents=True, exist_ok=True)
        budget = [max_bytes]
        try:
            for m in members:
                target = dest.joinpath(*_safe_name(archive, m.name).parts)
                if m.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                src = tf.extractfile(m)
                if src is not None:
                    _copy_limited(src, target, budget, archive)
        except ArchiveError:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return dest


def _extract_zip(archive: Path, dest: Path, max_members: int, max_bytes: int) -> Path:
    with zipfile.ZipFile(archive) as zf:
        infos = zf.infolist()
        if len(infos) > max_members:
            raise ArchiveError(archive, f"refused: more than {max_members} members")
        total = 0
        for info in infos:
            _safe_name(archive, info.filename)
            mode = (info.external_attr >> 16) & 0o170000
            if mode == 0o120000:
                raise ArchiveError(archive, f"refused: member {info.filename!r} is a symbolic link")
            total += info.file_size
        if total > max_bytes:
            raise ArchiveError(archive, f"refused: {total:,} bytes uncompressed exceeds the limit of {max_bytes:,}")
        dest.mkdir(parents=True, exist_ok=True)
        budget = [max_bytes]
        try:
            for info in infos:
                target = dest.joinpath(*_safe_name(archive, info.filename).parts)
                if info.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                with zf.open(info) as src:
                    _copy_limited(src, target, budget, archive)
        except ArchiveError:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return dest
