"""Profiler reports that must be exported before they can be read, and formats to re-capture.

* Nsight Systems ``.nsys-rep`` / ``.qdrep``: the file begins with
  ``NVIDIA Tegra Profiler Report `` and the writer's version (``2023@3@3@...``). When an
  ``nsys`` executable is found (the :class:`Exporter`'s, which the entry point takes from
  ``--nsys PATH`` or the ``NSYS`` environment variable; else ``nsys`` on ``PATH``) it is run as
  ``nsys export --type sqlite --force-overwrite true --output OUT REPORT`` into the exporter's
  folder (the analysis cache's ``exports/``; a private temporary directory with ``--no-cache``),
  never beside the report, and the export is reused while the report is unchanged. Without
  ``nsys`` the error names the report's version and the exact command.
* rocprofv3 ``--output-format pftrace`` (Perfetto protobuf) and ``otf2``: not read; the
  error says to re-capture as rocpd (or csv), which keep the kernel-to-launch links the
  analyses need.
* rocprof v1's ``results.db`` (rocprofiler v1, ROCm 5 and before): not read; the error names
  it and gives the rocprofv3 command that captures the same kernels, HIP calls and copies.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tracetriage.errors import TraceFormatError, UnsupportedInputError

NSYS_MAGIC = b"NVIDIA Tegra Profiler Report"


@dataclass(frozen=True)
class Exporter:
    """How a report is exported: ``nsys`` (the executable, or the folder holding it; None: nsys on
    PATH), ``workdir`` (where exports are kept; None: a temporary folder the caller removes),
    ``timeout_s`` (the export's time limit)."""

    nsys: str | None = None
    workdir: Path | None = None
    timeout_s: float = 900.0


_NSYS_VERSION = re.compile(rb"(20\d\d)[@.](\d{1,3})(?:[@.](\d{1,4}))?(?:[@.](\d{1,6}))?")


def report_version(head: bytes) -> str | None:
    """The Nsight Systems version that wrote the report: ``2023@3@3@...`` after the magic ->
    ``2023.3.3``. Reports of 2022-2023 put a small format number there (``1``) and the version
    further on: a version is a year-led number (20YY.N...), never the format number; None
    when the head names none."""
    m = re.match(re.escape(NSYS_MAGIC) + rb"\s*([0-9@.]+)", head)
    if m and _NSYS_VERSION.match(m.group(1)):
        parts = [p for p in m.group(1).decode("ascii", "replace").replace(".", "@").split("@") if p]
        return ".".join(parts[:4])
    m = _NSYS_VERSION.search(head[:65536])
    return ".".join(g.decode() for g in m.groups() if g) if m else None


def find_nsys(given: str | None) -> str | None:
    """The nsys to run: the one ``given`` (a folder means its ``nsys``; None when it is not an
    executable), else nsys on PATH."""
    if given:
        p = Path(given)
        if p.is_dir():
            p = p / "nsys"
        return str(p) if p.exists() and os.access(p, os.X_OK) else None
    return shutil.which("nsys")


def export_command(nsys: str, report: Path, out: Path) -> list[str]:
    return [nsys, "export", "--type", "sqlite", "--force-overwrite", "true", "--output", str(out), str(report)]


def _exporter_version(nsys: str) -> str | None:
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", out.stdout + out.stderr)
    return m.group(1) if m else None


IDENTITY_HASHED_BYTES = 1 << 20


def file_identity(path: Path) -> str:
    """A key that changes with a file's content: a digest of its name, size, modification time
    (ns) and its first and last MiB, so a file rewritten in place (even with the same size) has
    another key. The name of a report's export here, and of cache entries (tracetriage/cache.py)."""
    st = path.stat()
    digest = hashlib.sha256(f"{path.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    with open(path, "rb") as fh:
        digest.update(fh.read(IDENTITY_HASHED_BYTES))
        if st.st_size > IDENTITY_HASHED_BYTES:
            fh.seek(max(IDENTITY_HASHED_BYTES, st.st_size - IDENTITY_HASHED_BYTES))
            digest.update(fh.read(IDENTITY_HASHED_BYTES))
    return digest.hexdigest()[:32]


def export_nsys_report(report: Path, head: bytes, workdir: Path, exporter: Exporter) -> tuple[Path, dict]:
    """The SQLite export of a report (made now into ``workdir``, or reused from there) and what to record about it."""
    version = report_version(head)
    nsys = find_nsys(exporter.nsys)
    # the command as the user runs it, from the directory they ran tracetriage in: the report's
    # path as given (its folder kept), quoted for the shell
    suggested = shlex.quote(str(report.with_suffix(".sqlite")))
    if nsys is None and exporter.nsys:  # the user named one: say what is wrong with it
        given = Path(exporter.nsys)
        problem = ("does not exist" if not given.exists()
                   else "is a folder without an nsys in it" if given.is_dir() else "is not executable")
        raise UnsupportedInputError(
            report, f"Nsight Systems report (version {version or 'unknown'}) needs exporting and the nsys given "
                    f"({exporter.nsys}, from --nsys or $NSYS) {problem}")
    if nsys is None:
        raise UnsupportedInputError(
            report, f"Nsight Systems report (version {version or 'unknown'}) needs exporting and no nsys was found: run "
                    f"nsys export --type sqlite --output {suggested} {shlex.quote(str(report))} and analyze {suggested}, "
                    "or give --nsys PATH")
    try:
        ident = file_identity(report)
    except OSError:
        ident = "report"
    out = workdir / f"{ident}.sqlite"
    info = {"report_version": version, "exporter": nsys, "exporter_version": _exporter_version(nsys), "reused": False}
    if out.exists() and out.stat().st_size > 0:
        info["reused"] = True
        os.utime(out)
        return out, info
    workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = workdir / f".{ident}.partial.sqlite"
    cmd = export_command(nsys, report, partial)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=exporter.timeout_s, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        partial.unlink(missing_ok=True)
        raise TraceFormatError(report, f"nsys export timed out after {exporter.timeout_s:g} s") from None
    except OSError as exc:
        raise TraceFormatError(report, f"nsys export could not run ({exc.strerror or exc})") from None
    if proc.returncode != 0 or not partial.exists() or partial.stat().st_size == 0:
        lines = [x.strip() for x in (proc.stderr or proc.stdout or "").splitlines() if x.strip()]
        partial.unlink(missing_ok=True)
        last = lines[-1] if lines else f"exit status {proc.returncode}, no export written"
        raise TraceFormatError(report, f"nsys export failed: {last[:300]}")
    os.replace(partial, out)
    return out, info


ROCPROFV3_COMMAND = "rocprofv3 --kernel-trace --hip-runtime-trace --memory-copy-trace --output-format rocpd -- <app>"


def recapture_message(kind: str, tables: list[str] | None = None) -> str:
    """Why a recognised format is not read and how to capture one that is (``tables``: those found
    in a rocprof v1 database)."""
    if kind == "rocprof_v1":
        return (f"a rocprof v1 results database (rocprofiler v1; tables {', '.join(tables or [])}) is not read: "
                f"re-capture with {ROCPROFV3_COMMAND} (--output-format csv where rocpd is not available)")
    what = {"perfetto": "a Perfetto trace (rocprofv3 --output-format pftrace)",
            "otf2": "an OTF2 archive (rocprofv3 --output-format otf2)"}[kind]
    return (f"{what} is not read: it drops the links between kernels and the calls that launched them; re-capture with "
            "rocprofv3 --runtime-trace --kernel-trace --output-format rocpd (or csv), or convert a rocpd database")
