"""``open_case(paths)``: the one entry point that opens user files.

Formats are detected by content, never by extension: the SQLite magic plus table
names (nsys vs rocpd v3 vs legacy RPD), gzip, JSON keys (Kineto), CSV headers
(rocprofv3) and text signatures (``NCCL INFO``, the ``nvidia-smi topo -m`` legend,
py-spy's ``Thread 0x...``). A directory is a bundle of artifacts from one incident;
files in it that are not recognised are listed as skipped, not fatal. A file named
explicitly that is not recognised is an error naming what it looked like.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracetriage.errors import MissingDataError, TraceTriageError, UnsupportedInputError, is_damaged
from tracetriage.parsers.head import HEAD_BYTES, read_head
from tracetriage.parsers.reports import NSYS_MAGIC

SQLITE_MAGIC = b"SQLite format 3\x00"

if TYPE_CHECKING:
    from tracetriage.model import Trace
    from tracetriage.parsers.sqlite import Database

MAX_BUNDLE_FILES = 10_000


@dataclass
class Case:
    """Everything captured for one incident, parsed."""

    paths: list[str]
    traces: list["Trace"] = field(default_factory=list)
    topologies: list[Any] = field(default_factory=list)
    nccl_logs: list[Any] = field(default_factory=list)
    pyspy: list[Any] = field(default_factory=list)
    serving: list[Any] = field(default_factory=list)
    inputs: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)

    @property
    def topology(self):
        return self.topologies[0] if self.topologies else None


def file_problem(path: Path) -> str | None:
    """Why a path cannot be read as a file (None when it is a readable regular file or a
    directory): checked before anything opens it, so a FIFO never blocks the run."""
    import errno
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return f"dangling symbolic link (to {os.readlink(path)})"
        return "no such file or directory"
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop"
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISDIR(st.st_mode):
        return None
    if not stat.S_ISREG(st.st_mode):
        what = ("a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "a special file")
        return f"not a regular file: {what}"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


_TOPO = re.compile(r"Legend:|\bX\s*=\s*Self|\bNV\d+\b.*\bSYS\b|\bSYS\b.*\bNV\d+\b|GPU0\s+GPU1", re.S)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_ROCM_TOPO = re.compile(r"=+\s*ROCm System Management Interface\s*=+|Weight between two GPUs|Link Type between two GPUs")
# Log lines as NCCL writes them (host:pid:tid [dev] ... NCCL INFO), the RCCL banner, or
# nccl-tests output; prose that merely mentions NCCL (a README) does not match.
_NCCL = re.compile(
    r":\d+:\d+ \[\d+\] (?:\S+ )?NCCL (?:INFO|WARN|ERROR)|^(?:NCCL|RCCL) version \S+|^#?\s*out-of-place\s+in-place"
    r"|^#?\s*nThread \d+ nGpus \d+|^\S*\w_perf -b \S+ -e ",  # \S*\w, not \S*\w+: linear on a long line
    re.M,
)
_SERVING = re.compile(
    r"Avg prompt throughput: [\d.]+ tokens/s|non-default args: \{|LLM engine \(v[\w.]+|vLLM API server version"
    r"|^# (?:HELP|TYPE) (?:vllm|sglang):|^(?:vllm|sglang):\w+"
    r"|(?:Decode|Prefill) batch[.,] #|Serving Benchmark Result"
    r"|CUDA out of memory|torch\.OutOfMemoryError|PyTorch CUDA memory summary",
    re.M,
)
_PYSPY = re.compile(r"^\s*Thread (0x[0-9A-Fa-f]+|\d+) \(", re.M)
_PYSPY_FRAME = re.compile(r"^\s+\S.* \([^()\n]+:\d+\)\s*$", re.M)  # "    broadcast (torch/distributed/c10d.py:1191)"
# The lines a serving artifact is made of: a log line (vLLM level prefix, SGLang/ISO timestamps,
# a bare SGLang batch line), Prometheus text, a traceback, the benchmark result table, rows of
# torch.cuda.memory_summary(). A file is a serving artifact when a signature is there AND at
# least half of its non-blank lines have this grammar: prose quoting a log line (a Markdown
# document, an issue) is not a log.
_SERVING_LINE = re.compile(
    r"^(?:\(\w+ pid=\d+\)\s+)?(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\b"
    r"|^\[?(?:\d{4}-\d\d-\d\d[ T])?\d\d:\d\d:\d\d|^\d\d-\d\d \d\d:\d\d:\d\d"
    r"|^(?:Decode|Prefill) batch[.,] #"
    r"|^# (?:HELP|TYPE) |^[A-Za-z_:][\w:]*(?:\{[^}]*\})?\s+[-+]?(?:[\d.]+(?:[eE][-+]?\d+)?|NaN|Inf)(?:\s+\d+)?$"
    r"|^Traceback |^\s+File \"|^ {4}\S|^[\w.]+(?:Error|Exception)\b"
    r"|^[=\-]{3,}|^[A-Za-z][\w ()/.%-]{1,60}:\s+[-\d.]+\s*$"
    r"|^\|\s*(?:[A-Z][\w -]*(?:memory|allocs|allocations|segments)\b|\s*from (?:large|small) pool|[-=]{5,}|\s+Cur Usage"
    r"|PyTorch CUDA memory summary)"
)


def _serving_grammar_share(text: str) -> float:
    lines = [line for line in text.splitlines() if line.strip()][:400]
    return sum(1 for line in lines if _SERVING_LINE.match(line)) / len(lines) if lines else 0.0
_PYSPY_HEADER = re.compile(r"^Process \d+: ", re.M)


# Names that promise a packed file: the suffix, the packing (how its content starts, PACKED_MAGIC;
# tar: "ustar" at byte 257) and what the file is not when its content does not start so.
PACKED_NAMES = ((".tar.gz", "gzip", "a gzip archive"), (".tgz", "gzip", "a gzip archive"), (".gz", "gzip", "gzip-compressed"),
                (".zip", "zip", "a zip archive"), (".tar", "tar", "a tar archive"))
PACKED_MAGIC = {"gzip": lambda head: head[:2] == b"\x1f\x8b", "zip": lambda head: head[:2] == b"PK",
                "tar": lambda head: head[257:262] == b"ustar"}


def detect(path: Path) -> str:
    """The kind of artifact a file holds, from its content (its name is never trusted: a file named
    .json that is SQLite is read as SQLite). A file its content does not make a capture of, named
    as a packed file (.tar.gz, .zip, ...) that it is not, says so: what the name promised and
    what the content is.

    Returns one of: nsys, rocpd, rpd, rocprof_v1 (recognised, not read), rocprof_csv, kineto, topology, rocm_topology,
    nccl, pyspy, unknown:<what it looks like>, empty.
    """
    head = read_head(path)
    if not head:
        return "empty"
    kind = _detect_content(path, head)
    if kind.startswith("unknown:"):
        name = Path(path).name.lower()
        packed = next((entry for entry in PACKED_NAMES if name.endswith(entry[0])), None)
        if packed and not PACKED_MAGIC[packed[1]](head):
            suffix, _, not_what = packed
            what = kind.split(":", 1)[1]
            return f"unknown:named {suffix} but not {not_what}: {what[:1].lower()}{what[1:]}"
    return kind


def _detect_content(path: Path, head: bytes) -> str:
    """:func:`detect` from the file's first bytes ``head`` (not empty)."""
    if head.startswith(SQLITE_MAGIC):
        return _detect_sqlite(path)
    if head.startswith(NSYS_MAGIC):
        return "nsys_rep"
    if head[:1] == b"\x0a" and (b"perfetto" in head.lower() or b"rocprof" in head
                                 or Path(path).suffix in (".pftrace", ".perfetto-trace")):
        return "perfetto"
    if head[:4] == b"OTF2" or Path(path).suffix == ".otf2":
        return "otf2"
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as fh:
                inner = fh.read(HEAD_BYTES)
        except (OSError, EOFError, zlib.error) as exc:
            return f"unknown:corrupt gzip ({exc})"
        if inner.startswith(SQLITE_MAGIC):
            return "gzip_sqlite"
        return _detect_text(inner, gz=True)
    return _detect_text(head)


def _detect_sqlite(path: Path) -> str:
    """Which profiler wrote a SQLite file, by the parsers' own table predicates."""
    from tracetriage.parsers.nsys import looks_like_nsys
    from tracetriage.parsers.rocpd import looks_like_rocpd, rocprof_v1_tables
    from tracetriage.parsers.rpd import looks_like_rpd
    from tracetriage.parsers.sqlite import Database

    try:
        with Database(path) as db:
            # RPD before rocpd v3: legacy RPD shares the rocpd_ table prefix.
            for kind, looks_like in (("nsys", looks_like_nsys), ("rpd", looks_like_rpd), ("rocpd", looks_like_rocpd),
                                     ("rocprof_v1", rocprof_v1_tables)):
                if looks_like(db):
                    return kind
            names = sorted(db.objects)
    except TraceTriageError as exc:
        return f"unknown:SQLite file that cannot be read: {exc.problem}"
    shown = ", ".join(names[:6]) or "no tables"
    return f"unknown:SQLite database of another program (tables: {shown})"


def _detect_text(head: bytes, gz: bool = False) -> str:
    sample = head[:4096]
    if not sample.strip(b"\x00"):
        return ("unknown:all zero bytes (what an interrupted or preallocated copy leaves behind: copy it again)"
                + (" inside its gzip" if gz else ""))
    controls = sum(1 for b in sample if b < 9 or 13 < b < 32)
    if controls > 0.1 * max(1, len(sample)):
        return "unknown:binary file"
    if b"\x00" in sample:
        # A few NULs in a log (a torn write, a pasted blob) keep it a log when a text signature is there.
        kind = _detect_text(sample.replace(b"\x00", b" "), gz)
        return kind if not kind.startswith("unknown:") and kind in ("serving", "nccl", "pyspy", "topology", "rocm_topology") \
            else "unknown:binary file"
    text = head.decode("utf-8", errors="replace")
    stripped = text.lstrip()
    from tracetriage.parsers.serving import looks_like_log

    if stripped.startswith(("{", "[")) and not looks_like_log(stripped):
        return _detect_json(text, stripped)
    first = stripped.splitlines()[0] if stripped else ""
    return _detect_csv(first) or _detect_log(text, first)


def _detect_json(text: str, stripped: str) -> str:
    """The kind of a JSON document, from the keys in its head."""
    if '"rocprofiler-sdk-tool"' in text:
        return "rocprof_json"
    if '"request_throughput"' in text or '"mean_ttft_ms"' in text or '"mean_e2e_latency_ms"' in text:
        return "serving"
    if '"traceEvents"' in text or '"deviceProperties"' in text or '"schemaVersion"' in text and '"ph"' in text:
        return "kineto"
    saved = re.search(r'"schema":\s*"(tracetriage\.[\w./]+)"', text)
    if saved:  # one of tracetriage's own results (analyze --format json, batch's analysis.json): not a capture
        return (f"unknown:a tracetriage result ({saved.group(1)}), not a capture: compare takes a saved analysis as "
                "a side; analyze and batch read the captures it came from")
    if '"$schema"' in text and "speedscope" in text:
        return "pyspy"
    if stripped.startswith("[") and '"frames"' in text and ('"thread_id"' in text or '"thread_name"' in text):
        return "pyspy"
    return "unknown:JSON without traceEvents (not a PyTorch profiler trace)"


def _detect_csv(first: str) -> str | None:
    """rocprofv3 CSV (or its statistics summary, which is not a trace) from the header line; None otherwise."""
    if re.match(r'^"?Name"?,"?Calls"?,"?TotalDurationNs"?', first):
        return "unknown:rocprofv3 statistics summary (*_stats.csv), not a trace: give the *_trace.csv files"
    if re.match(r'^"?(Kind|Agent_Id|Correlation_Id|Dispatch_Id|Domain|Guid)"?,', first, re.I) or (
        "," in first and re.search(r'"?(Correlation_Id|Kernel_Name|Start_Timestamp)"?', first)
    ):
        return "rocprof_csv"
    return None


def _detect_log(text: str, first: str) -> str:
    """The kind of a text artifact (serving log, topology, py-spy dump, NCCL log) from its signatures."""
    if _SERVING.search(text) and _serving_grammar_share(text) >= 0.5:
        return "serving"
    if _ROCM_TOPO.search(text):
        return "rocm_topology"
    if _PYSPY.search(text) and _PYSPY_FRAME.search(text) and (
            _PYSPY_HEADER.search(text) or re.search(r"\(idle\)|\(active", text) or "Python v" in text):
        return "pyspy"
    if len(_NCCL.findall(text, 0, len(text))[:2]) >= 2:  # two lines of NCCL's grammar, not prose quoting one
        return "nccl"
    if _is_topology_matrix(text):
        return "topology"
    if _is_collapsed_stack(first):
        return "pyspy"  # py-spy record --format raw: collapsed stacks
    return "unknown:text file that is not a trace, topology matrix, NCCL log, py-spy capture or serving artifact"


def _is_collapsed_stack(line: str) -> bool:
    """A line of collapsed stacks (``frame;frame;frame 12``): it starts with neither a space nor ``;``,
    holds a ``;`` after its first character and ends with a space and a count after that ``;``.
    Checked without a backtracking pattern (``^[^;\\s][^\\n]*;[^\\n]* \\d+$`` took seconds on
    a 64 KB line of semicolons): linear in the line."""
    if not line or line[0] == ";" or line[0].isspace():
        return False
    count = re.search(r" \d+$", line)
    return count is not None and ";" in line[1:count.start()]


def _is_topology_matrix(text: str) -> bool:
    """An ``nvidia-smi topo -m`` matrix: its legend or link names, a GPU header row and GPU rows (or one GPU)."""
    # nvidia-smi (driver 580+) underlines the header with ANSI escapes even when written to a file.
    plain = _ANSI.sub("", text)
    return bool(_TOPO.search(plain) and (
        re.search(r"^\s+GPU0(?:[ \t]+\S+)*[ \t]+GPU1\b", plain, re.M)
        and re.search(r"^GPU\d+[ \t]+(?:X|NV\d+|SYS|NODE|PHB|PXB|PIX|XGMI|MX|SOC)\b", plain, re.M)
        or re.search(r"^\s+GPU0[ \t]", plain, re.M) and re.search(r"^GPU0[ \t]+X[ \t]", plain, re.M)  # one GPU
    ))


def bundle_files(directory: Path) -> list[Path]:
    """The files a case finds in a folder (the folder's own and its subfolders', hidden ones left out), sorted."""
    out: list[Path] = []
    for root, dirs, files in os.walk(directory, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            out.append(Path(root) / name)
            if len(out) > MAX_BUNDLE_FILES:
                raise UnsupportedInputError(directory, f"more than {MAX_BUNDLE_FILES} files in the bundle")
    return out


MAX_ARCHIVE_DEPTH = 2  # an archive in a folder, or in an archive: no deeper (a zip quine never ends)


def _open_with_archives(paths, archives: list[Path], step_range, depth: int = 0, runtime=None) -> Case:
    """Archives are extracted (safely, see tracetriage.archive) into a private temporary
    directory that is removed once the files are parsed; inputs are named
    ``archive!/member`` so reports, and errors, point at what the user gave."""
    import tempfile

    from tracetriage.archive import extract
    from tracetriage.errors import ArchiveError

    with tempfile.TemporaryDirectory(prefix="tracetriage-") as tmp:
        mapping = {}
        expanded = []

        def rename(text: str) -> str:  # a member is archive!/member; the extracted folder itself, the archive
            for d, archive in mapping.items():
                text = text.replace(d + os.sep, f"{archive}!{os.sep}").replace(d, archive)
            return text

        for i, p in enumerate(map(Path, paths)):
            if p in archives:
                if depth >= MAX_ARCHIVE_DEPTH:
                    raise ArchiveError(p, f"refused: an archive nested more than {MAX_ARCHIVE_DEPTH} deep")
                dest = Path(tmp) / str(i)
                extract(p, dest)
                mapping[str(dest)] = str(p)
                expanded.append(dest)
            else:
                expanded.append(p)
        try:
            case = open_case(expanded, step_range, runtime=runtime, _depth=depth + 1)
        except TraceTriageError as exc:  # name the member as the user sees it, never the temporary copy
            exc.path = rename(exc.path) if exc.path else exc.path
            exc.args = (f"{exc.path}: {exc.problem}" if exc.path else exc.problem,)
            raise

        case.paths = [str(p) for p in paths]
        for item in case.inputs + case.skipped:
            item["path"] = rename(item["path"])
        for artifact in case.traces + case.topologies + case.nccl_logs + case.pyspy + case.serving:
            artifact.path = rename(artifact.path)
        return case


def _merge(case: Case, other: Case) -> None:
    """The artifacts of ``other`` (an archive found in a folder) added to ``case``."""
    for name in ("traces", "topologies", "nccl_logs", "pyspy", "serving", "inputs", "skipped"):
        getattr(case, name).extend(getattr(other, name))


def _merge_per_process_files(case: Case) -> None:
    """rocpd writes one database per process: those of one directory are one capture."""
    from tracetriage.model import merge_traces
    from tracetriage.parsers.rocpd import same_run_groups

    by_dir: dict[str, list[str]] = {}
    for t in case.traces:
        if t.format == "rocpd":
            by_dir.setdefault(str(Path(t.path).parent), []).append(t.path)
    for parent, paths in by_dir.items():
        for group in same_run_groups(paths):  # files of different runs stay apart
            if len(group) < 2:
                continue
            members = [t for t in case.traces if t.path in group]
            merged = merge_traces(members, parent)
            case.traces = [t for t in case.traces if t.path not in group] + [merged]
            case.inputs = [x for x in case.inputs if x["path"] not in group] + [{
                "path": parent, "kind": "rocpd", "version": merged.meta.get("version"), "warnings": merged.warnings,
                "counts": merged.counts(), "files": sorted(group)}]


def _graph_ties(trace) -> dict:
    """``meta["graph_ties"]`` of a trace: {} when it has none."""
    return trace.meta.get("graph_ties") or {}


def _tie_graph_replays(case: Case) -> None:
    """Graph replays of one trace tied to the capture profiled into another trace of the same
    process (vLLM and SGLang profile the capture phase apart): parsers/graph_replays.py. The
    replay trace's analysis then depends on the capture's file too, so its cache identity says so."""
    from tracetriage.parsers import graph_replays

    with_captures = [t for t in case.traces if t.meta.get("graph_captures")]
    for t in case.traces:
        if not with_captures or not _graph_ties(t).get("untied"):
            continue
        mine = t.meta.get("started_utc_ns")
        others = [c for c in with_captures if c is not t and (mine is None or c.meta.get("started_utc_ns") in (None, mine))]
        if not others or not graph_replays.tie(t, [(c.path, c.meta["graph_captures"], False) for c in others]):
            continue
        ident = t.meta.get("cache_identity")
        if ident and "+graphs:" not in ident:
            t.meta["cache_identity"] = ident + "+graphs:" + ",".join(str(c.meta.get("cache_identity") or c.path)
                                                                      for c in others)
    _set_aside_capture_phases(case)


def _set_aside_capture_phases(case: Case) -> None:
    """A trace whose captures tied another's replays is that process's capture phase, profiled
    apart: the shapes of the replayed kernels, not a run of its own (nor a second rank). It leaves
    ``case.traces``; its input row says why, as a note (information, not a warning: trial item 27)."""
    sources = {p for t in case.traces for p in _graph_ties(t).get("sources", [])}
    companions = [c for c in case.traces if c.path in sources and not _graph_ties(c).get("sources")]
    for c in companions:
        case.traces.remove(c)
        replays = [t for t in case.traces if c.path in _graph_ties(t).get("sources", [])]
        note = (f"this trace is the graph capture phase profiled apart for {', '.join(t.path for t in replays)}: read "
                "for the shapes of the kernels its graphs replay, not analyzed as a run of its own")
        for item in case.inputs:
            if item["path"] == c.path and note not in item.setdefault("notes", []):
                item["notes"].append(note)


def open_case(paths, step_range: str | None = None, runtime=None, _depth: int = 0) -> Case:
    """Open files and directories as one case. Raises a TraceTriageError on bad input.

    An archive (zip, tar, tar.gz: recognised by content) is extracted and its files are part
    of the case, whether it is named or lies in a folder; a corrupt one is an input error.
    ``runtime`` (a :class:`~tracetriage.runtime.Runtime`; default: no cache, nsys from $NSYS or
    PATH) parses each trace file, through its cache, and exports .nsys-rep reports."""
    from tracetriage import parsers as registry
    from tracetriage.runtime import Runtime

    runtime = runtime if runtime is not None else Runtime.create(use_cache=False)

    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    from tracetriage.archive import is_archive

    for p in map(Path, paths):  # before anything is opened: a FIFO named .tar.gz must not block
        problem = file_problem(p)
        if problem:
            raise UnsupportedInputError(p, problem)
    archives = [Path(p) for p in paths if Path(p).is_file() and is_archive(Path(p))]
    if archives:
        return _open_with_archives(paths, archives, step_range, _depth, runtime)
    case = Case(paths=[str(p) for p in paths])
    csv_groups: dict[Path, list[tuple[Path, bool]]] = {}
    damaged: list[TraceTriageError] = []
    for path, explicit in _candidates(paths):
        kind = _candidate_kind(case, path, explicit, damaged, step_range, _depth, runtime)
        if kind is None:
            continue
        if kind == "rocprof_csv":  # the files of one rocprofv3 run are merged below
            csv_groups.setdefault(path.parent, []).append((path, explicit))
            continue
        try:
            registry.load(case, path, kind, runtime.read_trace, runtime.exporter)
        except registry.NotReadableYet as exc:
            if explicit:
                raise
            case.skipped.append({"path": str(path), "reason": exc.problem})
    for group in csv_groups.values():
        registry.load_csv_group(case, [p for p, _ in group])
    _merge_per_process_files(case)
    _tie_graph_replays(case)
    if not (case.traces or case.topologies or case.nccl_logs or case.pyspy or case.serving):
        if damaged:  # the folder's only capture was an archive or a file that cannot be read: an input error
            raise damaged[0]
        raise MissingDataError(
            ", ".join(case.paths), "nothing to analyze: no profiler trace, topology matrix, NCCL log, py-spy capture "
            "or serving artifact (vLLM/SGLang log, /metrics scrape, benchmark result) found"
        )
    return case


def open_export(path) -> "Database":
    """One Nsight Systems export, open for a streamed read (analyzers/stream_timeline.analyze_streamed): checked
    as :func:`open_case` checks a file it is named (a readable regular file, recognised by its content as an
    nsys export), then opened read-only and immutable (parsers/sqlite.readonly_uri: nothing is written or
    created beside it). Raises the one-line input errors ``open_case`` raises for the same file."""
    from tracetriage.parsers.sqlite import Database

    path = Path(path)
    problem = file_problem(path)
    if problem is None and path.is_dir():
        problem = "a folder, not an Nsight Systems export"
    if problem:
        raise UnsupportedInputError(path, problem)
    try:
        kind = detect(path)
    except OSError as exc:
        raise UnsupportedInputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if kind != "nsys":
        why = "empty file" if kind == "empty" else kind.split(":", 1)[1] if kind.startswith("unknown:") else \
            f"recognised as {kind}, not an Nsight Systems export"
        raise UnsupportedInputError(path, f"not a supported input: {why}")
    return Database(path)


def check_named_file(path: Path) -> None:
    """The input error analyze gives a file the user named (:func:`_candidates`, :func:`_candidate_kind`): one
    that cannot be read, empty, or not recognised as anything it reads; None for any other. trend checks the
    files it is given with it before batch, which skips such a file unsaid (new-user trial 53 item 2: exit 4,
    "no capture found", where analyze said exit 3 and why; a skipped latest capture left the gate judging the
    one before it)."""
    from tracetriage.archive import is_archive

    problem = file_problem(path)
    if problem:
        raise UnsupportedInputError(path, problem)
    if path.is_dir() or is_archive(path):  # a folder's and an archive's files are batch's cases
        return
    try:
        kind = detect(path)
    except OSError as exc:
        raise UnsupportedInputError(path, f"cannot be read ({exc.strerror or exc})") from None
    if kind == "empty" or kind.startswith("unknown:"):
        raise UnsupportedInputError(path, f"not a supported input: {'empty file' if kind == 'empty' else kind.split(':', 1)[1]}")


def _candidates(paths) -> list[tuple[Path, bool]]:
    """The files to open, each with whether the user named it (True) or it lies in a named folder."""
    candidates: list[tuple[Path, bool]] = []
    for p in map(Path, paths):
        problem = file_problem(p)
        if problem:
            raise UnsupportedInputError(p, problem)
        if p.is_dir():
            candidates.extend((f, False) for f in bundle_files(p))
        else:
            candidates.append((p, True))
    return candidates


def _candidate_kind(case: Case, path: Path, explicit: bool, damaged: list[TraceTriageError],
                    step_range, depth: int, runtime) -> str | None:
    """The kind of one file to load, or None when it is not loaded here: a file of a folder that
    cannot be read or is not recognised (listed in ``case.skipped``), or an archive in a folder
    (its files merged into the case; an archive that cannot be read, or a damaged capture, also goes to
    ``damaged``).
    A file the user named that cannot be read or is not recognised is an input error."""
    from tracetriage.archive import is_archive

    problem = None if explicit else file_problem(path)
    if problem:  # inside a bundle: listed as skipped, the rest is analyzed
        case.skipped.append({"path": str(path), "reason": problem})
        return None
    if not explicit and is_archive(path):  # an archive in the folder: its files join the case
        try:
            _merge(case, _open_with_archives([path], [path], step_range, depth, runtime))
        except MissingDataError as exc:
            case.skipped.append({"path": str(path), "reason": exc.problem})
        except TraceTriageError as exc:
            damaged.append(exc)
            case.skipped.append({"path": str(path), "reason": exc.problem})
        return None
    try:
        kind = detect(path)
    except OSError as exc:
        if explicit:
            raise UnsupportedInputError(path, f"cannot be read ({exc.strerror or exc})") from None
        case.skipped.append({"path": str(path), "reason": f"cannot be read ({exc.strerror or exc})"})
        return None
    if kind == "empty" or kind.startswith("unknown:"):
        why = "empty file" if kind == "empty" else kind.split(":", 1)[1]
        if explicit:
            raise UnsupportedInputError(path, f"not a supported input: {why}")
        if is_damaged(why):  # a damaged capture in the folder: the input error if nothing else can be read
            damaged.append(UnsupportedInputError(path, f"not a supported input: {why}"))
        case.skipped.append({"path": str(path), "reason": why})
        return None
    return kind
