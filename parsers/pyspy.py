"""py-spy captures -> stacks with sample counts.

Formats (detected from content):

* ``py-spy dump`` text — ``Process N: cmd`` / ``Python vX`` headers (optional),
  ``Thread <decimal or 0xHEX> (idle|active|...): "name"`` then one indented frame
  per line, innermost first: ``func (file:line)``. One dump = one sample per thread.
  Shell prompts, ``=== PID ===`` separators and ``--locals`` lines are skipped.
* ``py-spy dump --json`` — a list of threads with ``frames`` (innermost first).
* ``py-spy record --format raw`` — collapsed stacks, outermost first, ``;``-joined,
  a space and a count at the end; ``process ..`` / ``thread (..)`` elements are
  metadata, not frames. Idle samples are not recorded unless ``--idle`` was given.
* speedscope JSON (``py-spy record --format speedscope``) — shared frames and
  sampled profiles with weights.

Every stack is stored outermost-first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tracetriage.errors import TraceFormatError
from tracetriage.parsers.common import json_document, read_text

_THREAD = re.compile(r"^\s*Thread (0x[0-9A-Fa-f]+|\d+) \((\w[\w ]*)\)(?::\s*\"(.*)\")?\s*$")
_PROCESS = re.compile(r"^\s*Process (\d+): (.*)$")
_FRAME = re.compile(r"^\s+(\S.*?) \((.+?)(?::(\d+))?\)\s*$")
_RAW = re.compile(r"^(.*\S)\s+(\d+)\s*$")
_RAW_FRAME = re.compile(r"^(.+?) \((.+?)(?::(\d+))?\)$")


@dataclass
class Sample:
    stack: tuple[str, ...]  # outermost first, "func (file:line)"
    count: int
    thread: str = ""
    idle: bool = False
    pid: int | None = None


@dataclass
class PySpyCapture:
    path: str
    format: str
    samples: list[Sample] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)
    threads: int = 0
    idle_threads: int = 0
    warnings: list[str] = field(default_factory=list)


def frame_label(func: str, file: str, line) -> str:
    return f"{func} ({file}:{line})" if line not in (None, "", 0) else f"{func} ({file})"


def parse(path: str, text: str | None = None) -> PySpyCapture:
    if text is None:
        text = read_text(path)
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        doc = json_document(path, text, "py-spy JSON")
        if isinstance(doc, dict) and "profiles" in doc:
            return _speedscope(path, doc)
        if isinstance(doc, list):
            return _dump_json(path, doc)
        raise TraceFormatError(path, "JSON that is neither a py-spy dump nor a speedscope profile")
    if _THREAD.search(text.splitlines()[0] if text else "") or re.search(r"^\s*Thread (0x[0-9A-Fa-f]+|\d+) \(", text, re.M):
        return _dump_text(path, text)
    return _raw(path, text)


def _dump_text(path: str, text: str) -> PySpyCapture:
    cap = PySpyCapture(path=str(path), format="dump")
    pid = None
    current = None  # (thread label, idle, frames innermost-first)

    def flush():
        if current is not None:
            label, idle, frames = current
            cap.samples.append(Sample(tuple(reversed(frames)), 1, label, idle, pid))

    for line in text.splitlines():
        p = _PROCESS.match(line)
        if p:
            flush()
            current = None
            pid = int(p.group(1))
            cap.processes[pid] = p.group(2).strip()
            continue
        t = _THREAD.match(line)
        if t:
            flush()
            idle = t.group(2).strip().lower() == "idle"
            cap.threads += 1
            cap.idle_threads += idle
            current = (t.group(3) or t.group(1), idle, [])
            continue
        f = _FRAME.match(line)
        if f and current is not None and not line.startswith(" " * 8):
            current[2].append(frame_label(f.group(1), f.group(2), f.group(3)))
            continue
        if line.strip() and not line.startswith(" "):
            flush()
            current = None  # a prompt line or separator ends the thread
    flush()
    return cap


def _dump_json(path: str, doc: list) -> PySpyCapture:
    cap = PySpyCapture(path=str(path), format="dump-json")
    for th in doc:
        if not isinstance(th, dict):
            continue
        frames = []
        for fr in th.get("frames") or []:
            if isinstance(fr, dict):
                frames.append(frame_label(fr.get("name", "?"), fr.get("short_filename") or fr.get("filename", "?"),
                                          fr.get("line")))
        idle = not th.get("active", True)
        cap.threads += 1
        cap.idle_threads += idle
        cap.samples.append(Sample(tuple(reversed(frames)), 1, str(th.get("thread_name") or th.get("thread_id")), idle,
                                  th.get("pid")))
    return cap


def _speedscope(path: str, doc: dict) -> PySpyCapture:
    """Loosely typed on purpose: a frame, profile, sample or weight of the wrong JSON type is
    skipped (and counted), never fatal."""
    from tracetriage.parsers.coerce import scalar_int, text

    cap = PySpyCapture(path=str(path), format="speedscope")
    shared = doc.get("shared") if isinstance(doc.get("shared"), dict) else {}
    frames = shared.get("frames") if isinstance(shared.get("frames"), list) else []
    labels = [frame_label(text(f.get("name", "?")), text(f.get("file", "?")), scalar_int(f.get("line")))
              if isinstance(f, dict) else "?" for f in frames]
    profiles = doc.get("profiles") if isinstance(doc.get("profiles"), list) else []
    skipped = 0
    for prof in profiles:
        if not isinstance(prof, dict):
            skipped += 1
            continue
        cap.threads += 1
        weights = prof.get("weights") if isinstance(prof.get("weights"), list) else []
        samples = prof.get("samples") if isinstance(prof.get("samples"), list) else []
        for i, stack in enumerate(samples):
            try:
                names = tuple(labels[j] for j in stack if isinstance(j, int) and 0 <= j < len(labels))
            except TypeError:
                names = ()
            if not names:
                skipped += 1  # a malformed sample
                continue
            w = scalar_int(weights[i]) if i < len(weights) else 1
            cap.samples.append(Sample(names, w if w and w > 0 else 1, text(prof.get("name", "")), False))
    if skipped:
        cap.warnings.append(f"{skipped:,} speedscope profiles or samples of the wrong shape skipped")
    return cap


def _raw(path: str, text: str) -> PySpyCapture:
    cap = PySpyCapture(path=str(path), format="raw")
    threads = set()
    for line in text.splitlines():
        m = _RAW.match(line)
        if not m:
            continue
        parts = m.group(1).split(";")
        stack, thread, pid = [], "", None
        for part in parts:
            part = part.strip()
            if part.startswith("process "):
                pm = re.match(r"process (\d+)", part)
                pid = int(pm.group(1)) if pm else None
                continue
            if part.startswith("thread "):
                thread = part
                continue
            if _RAW_FRAME.match(part) or part:
                stack.append(part)
        if not stack:
            continue
        threads.add(thread)
        cap.samples.append(Sample(tuple(stack), int(m.group(2)), thread, False, pid))
    if not cap.samples:
        raise TraceFormatError(path, "no py-spy stacks found (expected dump text, raw collapsed stacks or speedscope JSON)")
    cap.threads = len(threads)
    return cap
