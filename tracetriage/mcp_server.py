"""The MCP server of ``tracetriage mcp``: the library API (tracetriage/api.py) as tools a coding
assistant calls over stdio (the official ``mcp`` SDK): analyze, compare, trend, batch, explain and
capture_advice.

Each tool returns the JSON contract as structured content and a short text: the headline, the
compare summary or the trend verdicts. A rendered report is written only when asked (``format``
html or md, to the ``output`` path the user named). What the server may touch:

- reads: only paths under the roots, which are the client's MCP roots and the ``--root`` folders
  (the working directory when neither names one); symlinks are resolved, and a path with a ``..``
  component or resolving outside every root is refused, as is a folder holding a link out;
- writes: only under the roots, and never inside an input folder or beside an input;
- time: each analysis runs in a worker process killed when the call's time bound passes, with
  progress notifications while it runs;
- errors: the CLI's one-line message and its exit code (tracetriage/errors.py) as structured content
  of an error result (isError), never a traceback.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import unquote, urlparse

from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.types import CallToolResult, ListRootsResult, TextContent
from pydantic import Field

from tracetriage import __version__
from tracetriage.errors import EXIT_INTERNAL, OutputError, TraceTriageError, UsageError

DEFAULT_CALL_TIMEOUT_S = 600.0
PROGRESS_EVERY_S = 2.0  # seconds between two progress notifications of a running call
POLL_S = 0.05  # how often the server looks whether the worker has answered
EXIT_TIMEOUT = 124  # a call past its time bound: the exit status timeout(1) gives

# The tables of capture_hints.toml by the profiler a client names (rules/hints.py capture_cmd's).
PROFILER_TABLES = {"nsys": "default", "rocprof": "rocm", "pytorch": "kineto"}
# How each abstention (its ``analysis`` name, analyzers/rules/abstain.py and efficiency.py) finds
# its capture hint: ("profiler", key) is a key of the profiler's table, ("abstention", key) a key of
# [abstention], ("host", None) the host profilers, ("efficiency", None) efficiency.capture_hint.
ABSTENTION_HINTS = {
    "steps": ("profiler", "steps"), "step_annotations": ("profiler", "steps"), "gap_causes": ("profiler", "api"),
    "graph_replays": ("profiler", "graphs"), "graph_capture_phase": ("profiler", "steady"),
    "too_few_gpu_ops": ("profiler", "steady"), "window_too_short": ("profiler", "steady"),
    "no_steady_phase": ("profiler", "steady"),
    "memset_only": ("profiler", "steady"), "topology": ("abstention", "topology"), "itl_tail": ("abstention", "itl_tail"),
    "slo": ("abstention", "slo"), "tpot_budget": ("abstention", "tpot_budget"), "tpot_fit": ("abstention", "tpot_fit"),
    "serving_load": ("abstention", "serving_load"), "host_frames": ("host", None), "step_tail": ("host", None),
    "efficiency": ("efficiency", None),
}
EFFICIENCY_FORMATS = {"nsys": "nsys", "rocprof": "rocpd", "pytorch": "kineto"}


@dataclass(frozen=True)
class Roots:
    """The folders the server reads and writes under, each resolved (symlinks followed)."""

    folders: tuple[Path, ...]

    @classmethod
    def of(cls, names) -> Roots:
        """The roots named (``--root`` values or MCP root URIs' paths), each an existing folder."""
        folders = []
        for name in names:
            folder = Path(name).expanduser()
            if not folder.is_dir():
                raise UsageError(None, f"--root {name}: not a folder")
            folders.append(folder.resolve())
        return cls(tuple(dict.fromkeys(folders)))

    def _inside(self, path: Path) -> bool:
        return any(path.is_relative_to(folder) for folder in self.folders)

    def _resolved(self, name: str) -> Path:
        """``name`` refused when it has a ``..`` component, else resolved (a relative path is taken
        from the server's working directory, as the CLI takes it); a ``file://`` URI, as MCP roots
        are written, is its path."""
        if name.startswith("file://"):
            from urllib.parse import unquote, urlparse

            name = unquote(urlparse(name).path)
        path = Path(name).expanduser()
        if ".." in path.parts:
            raise UsageError(None, f"{name}: a path with '..' is refused: name it under a root ({self.shown()})")
        return path.resolve()

    def shown(self) -> str:
        return ", ".join(map(str, self.folders))

    def readable(self, name: str) -> str:
        """The resolved path of an input under a root; a folder is walked and refused when a link
        inside it leads out of every root."""
        path = self._resolved(name)
        if not self._inside(path):
            raise UsageError(None, f"{name}: outside the roots this server reads ({self.shown()}): grant its folder "
                                   "as an MCP root or start the server with --root")
        if path.is_dir():
            for folder, subfolders, files in os.walk(path):
                for entry in subfolders + files:
                    linked = Path(folder) / entry
                    if linked.is_symlink() and not self._inside(linked.resolve()):
                        raise UsageError(None, f"{name}: {linked} links outside the roots this server reads "
                                               f"({self.shown()})")
        return str(path)

    def readable_inputs(self, names: list[str]) -> list[str]:
        """batch's inputs, each :meth:`readable`; a glob pattern is expanded here, so that each file
        it matches is checked (one matching nothing is passed on for batch to report)."""
        import glob

        out = []
        for name in names:
            matches = sorted(glob.glob(str(self._resolved(name)))) if any(ch in name for ch in "*?[") else []
            out += [self.readable(match) for match in matches] or [self.readable(name)]
        return out

    def writable(self, name: str, inputs: list[str]) -> str:
        """The resolved path of an output under a root, neither inside an input folder nor in the
        folder of an input (the captures' folders stay as they were)."""
        path = self._resolved(name)
        if not self._inside(path):
            raise OutputError(name, f"outside the roots this server writes under ({self.shown()})")
        for item in map(Path, inputs):
            if path == item or (item.is_dir() and path.is_relative_to(item)) or path.parent == item.parent:
                raise OutputError(name, f"beside or inside the input {item}: write outputs to a folder of their own")
        return str(path)


def error_fields(exc: BaseException) -> tuple[str, int, str]:
    """A failure as the CLI reports it: its one line, its exit code, and the error's class."""
    from tracetriage.cli import one_line

    if isinstance(exc, TraceTriageError):
        return f"tracetriage: error: {one_line(str(exc))}", exc.exit_code, type(exc).__name__
    return (f"tracetriage: internal error: {type(exc).__name__}: {one_line(str(exc))} (please report this)", EXIT_INTERNAL,
            type(exc).__name__)


def error_result(exc: BaseException) -> CallToolResult:
    return failure(*error_fields(exc))


def failure(line: str, exit_code: int, error_class: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True,
                          structured_content={"error": line, "exit_code": exit_code, "error_class": error_class})


def success(structured: dict, summary: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=structured)


def _report_format(fmt: str | None, output: str | None) -> str | None:
    """The report asked for: ``format`` with ``output``, or the format ``output``'s extension names."""
    if fmt and not output:
        raise UsageError(None, f"format {fmt} writes a report: give output, a path under the roots")
    if output and not fmt:
        fmt = {".html": "html", ".htm": "html", ".md": "md"}.get(Path(output).suffix.lower())
        if fmt is None:
            raise UsageError(None, f"output {output}: give format html or md (or an .html or .md name)")
    return fmt


def _write(path: str, text: str) -> None:
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputError(path, f"cannot write the report: {exc.strerror or exc}") from None


# The work of each tool, run in a worker process: (arguments, runtime settings) -> (structured, summary).

def _runtime(settings: dict):
    """The call's Runtime; it tells the server each stage of an analysis (``progress``, set by :func:`worker`)."""
    from dataclasses import replace

    from tracetriage.runtime import Runtime

    return replace(Runtime.from_settings(settings), progress=settings.get("progress"))


def work_analyze(arguments: dict, settings: dict) -> tuple[dict, str]:
    """As ``tracetriage analyze``: several traces are one case only when they are one run, and the
    library's warnings are recorded in the contract."""
    import warnings

    from tracetriage import analyze, open_case
    from tracetriage.cli import one_line
    from tracetriage.runs import check_one_run

    runtime = _runtime(settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        case = open_case(arguments["paths"], runtime=runtime)
        if len(case.traces) > 1:
            check_one_run(case)
        analysis = analyze(case, runtime=runtime, symptom=arguments.get("symptom"), slo=arguments.get("slo"),
                           step_range=arguments.get("step_range"))
    seen = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
    if seen:
        analysis.data.setdefault("warnings", []).extend(one_line(message) for message in seen)
    summary = analysis.headline
    if arguments.get("format"):
        from tracetriage.reports import render

        _write(arguments["output"], render(analysis, arguments["format"], runtime.cache))
        summary += f"\nwrote {arguments['output']}"
    return json.loads(analysis.to_json()), summary


def work_compare(arguments: dict, settings: dict) -> tuple[dict, str]:
    from tracetriage import compare

    runtime = _runtime(settings)
    result = compare(arguments["before"], arguments["after"], threshold_pct=arguments["threshold"], runtime=runtime,
                     across_devices=bool(arguments.get("across_devices")), symptom=arguments.get("symptom"),
                     slo=arguments.get("slo"), step_range=arguments.get("step_range"))
    summary = result.summary
    if arguments.get("format"):
        _write(arguments["output"], result.render(arguments["format"], runtime.cache))
        summary += f"\nwrote {arguments['output']}"
    return json.loads(result.to_json()), summary


def work_trend(arguments: dict, settings: dict) -> tuple[dict, str]:
    from tracetriage import trend

    runtime = _runtime(settings)
    result = trend(arguments["batch_dir"], order_by=arguments["order_by"], group_by=arguments.get("group_by"),
                   threshold_pct=arguments["threshold"], baseline=arguments.get("baseline"), gate=arguments["gate"],
                   runtime=runtime)
    summary = result.summary
    if arguments.get("format"):
        links = os.path.relpath(result.batch_dir, Path(arguments["output"]).parent)
        _write(arguments["output"], result.render(arguments["format"], links, runtime.cache))
        summary += f"\nwrote {arguments['output']}"
    return json.loads(result.to_json()), summary


BATCH_RECORD_KEYS = ("case_id", "path", "status", "error", "reused", "seconds")


def work_batch(arguments: dict, settings: dict) -> tuple[dict, str]:
    from tracetriage import batch

    result = batch(arguments["inputs"], arguments["outdir"], runtime=_runtime(settings), force=arguments["force"],
                   progress=False, symptom=arguments.get("symptom"), slo=arguments.get("slo"),
                   step_range=arguments.get("step_range"))
    records = []
    for record in result.records:
        row = {key: record.get(key) for key in BATCH_RECORD_KEYS}
        findings = record.get("findings") or []
        row["top_finding"] = findings[0]["title"] if findings else None
        if arguments["reports"]:
            ok = record.get("status") == "ok"
            row.update(findings=findings, report_html=f"cases/{record['case_id']}/report.html" if ok else None,
                       report_json=f"cases/{record['case_id']}/analysis.json" if ok else None)
        records.append(row)
    structured = {"outdir": result.outdir, "analyzed": result.analyzed, "reused": result.reused, "failed": result.failed,
                  "not_run": result.not_run, "seconds": result.seconds, "index_html": str(Path(result.outdir) / "index.html"),
                  "records": records}
    summary = (f"{len(records)} cases: {result.analyzed} analyzed, {result.reused} unchanged, {result.failed} failed; "
               f"wrote {structured['index_html']} and summary.parquet")
    return structured, summary


def work_capture_advice(arguments: dict, settings: dict) -> tuple[dict, str]:
    """The abstentions of the capture at ``paths`` (those named ``abstention``, when given), each
    with the capture hint the analysis gave for this capture's profiler, vendor and process."""
    from tracetriage import analyze

    analysis = analyze(arguments["paths"], runtime=_runtime(settings), step_range=arguments.get("step_range"))
    name = arguments.get("abstention")
    found = [item for item in analysis.data.get("abstentions") or [] if name is None or item["analysis"] == name]
    structured = {"paths": arguments["paths"], "abstention": name, "advice": found}
    if found:
        summary = "\n".join(f"{item['analysis']} ({item['scope']}): {item['capture_hint']}" for item in found)
    else:
        named = sorted({item["analysis"] for item in analysis.data.get("abstentions") or []})
        summary = (f"this capture does not abstain on {name}" if name else "this capture abstains on nothing") + (
            f" (it abstains on: {', '.join(named)})" if named else "")
    return structured, summary


WORK = {"analyze": work_analyze, "compare": work_compare, "trend": work_trend, "batch": work_batch,
        "capture_advice": work_capture_advice}


def worker(conn) -> None:
    """The worker process: answers one request at a time, (tool, arguments, runtime settings) with
    ("ok", structured, summary) or ("error", line, exit code, class) (:func:`error_fields`), until
    the server closes the pipe; before the answer, ("stage", words) as each stage of an analysis
    starts. Its standard output goes to standard error (the server's standard output is the MCP
    channel); it leads a process group of its own, so that the server can end it and batch's
    workers together."""
    import warnings

    import tracetriage.analyzers.analysis  # noqa: F401 - an analysis's imports, paid before the first call arrives
    import tracetriage.case  # noqa: F401
    from tracetriage.memory import tune_allocator

    os.dup2(2, 1)
    if hasattr(os, "setpgrp"):
        os.setpgrp()
    tune_allocator()
    warnings.simplefilter("ignore")
    while True:
        try:
            tool, arguments, settings = conn.recv()
        except (EOFError, OSError):
            return
        try:
            structured, summary = WORK[tool](arguments, {**settings, "progress": lambda stage: conn.send(("stage", stage))})
            answer = ("ok", structured, summary.encode("utf-8", "replace").decode("utf-8"))
        except Exception as exc:  # noqa: BLE001 - one line and its exit code, never a traceback
            answer = ("error", *error_fields(exc))
        conn.send(answer)


class Worker:
    """The one worker process the analyses run in, started before the first call so that its
    imports are paid once; ended (with its process group) when a call passes its time bound or is
    cancelled, and started again by the next call. Calls take their turn."""

    def __init__(self):
        self.process = None
        self.conn = None
        self.turn = None  # the lock calls queue on, made in the event loop

    def start(self) -> None:
        import multiprocessing

        spawn = multiprocessing.get_context("spawn")
        self.conn, child_end = spawn.Pipe()
        self.process = spawn.Process(target=worker, args=(child_end,), name="tracetriage-mcp-worker")
        self.process.start()
        child_end.close()

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

    async def call(self, ctx: Context, tool: str, arguments: dict, settings: dict, timeout_s: float) -> CallToolResult:
        """One tool's work, bounded by ``timeout_s``, with a progress notification every few seconds."""
        import anyio

        if self.turn is None:
            self.turn = anyio.Lock()
        async with self.turn:
            if self.process is None or not self.process.is_alive():
                self.stop()
                self.start()
            self.conn.send((tool, arguments, settings))
            started = time.monotonic()
            await ctx.report_progress(0, timeout_s, f"{tool}: started")
            next_note, stage, noted = started + PROGRESS_EVERY_S, "started", 0.0
            answer = None
            try:
                while True:
                    now = time.monotonic()
                    if self.conn.poll():
                        message = self.conn.recv()
                        if message[0] != "stage":
                            answer = message
                            break
                        stage, noted = message[1], max(noted + 0.1, round(now - started, 1))  # progress only increases
                        await ctx.report_progress(noted, timeout_s, f"{tool}: {stage}")
                        next_note = now + PROGRESS_EVERY_S
                        continue
                    if not self.process.is_alive():
                        return failure(f"tracetriage: internal error: the {tool} worker ended with exit code "
                                       f"{self.process.exitcode} (please report this)", EXIT_INTERNAL, "WorkerExit")
                    if now - started > timeout_s:
                        return failure(f"tracetriage: error: {tool}: timed out after {timeout_s:g} s (tracetriage mcp "
                                       "--timeout)", EXIT_TIMEOUT, "Timeout")
                    if now >= next_note:
                        noted = max(noted + 0.1, round(now - started, 1))
                        await ctx.report_progress(noted, timeout_s, f"{tool}: {stage}, {now - started:.0f} s")
                        next_note = now + PROGRESS_EVERY_S
                    await anyio.sleep(POLL_S)
            finally:
                if answer is None:  # timed out, ended, or the call was cancelled: the worker's state is unknown
                    self.stop()
        if answer[0] == "ok":
            return success(answer[1], answer[2])
        return failure(*answer[1:])


@dataclass(frozen=True)
class Server:
    """What every call of one server shares: the ``--root`` folders, the time bound of a call in
    seconds, the runtime settings (cache folder, nsys) the worker rebuilds its Runtime from, and the worker."""

    roots: tuple[str, ...]
    timeout_s: float
    settings: dict
    worker: Worker

    def roots_of(self, granted: ListRootsResult | None) -> Roots:
        """The ``--root`` folders and the folders of the client's MCP roots (file URIs); the working
        directory when neither names one."""
        names = list(self.roots)
        for root in granted.roots if granted is not None else []:
            uri = str(root.uri)
            if uri.startswith("file:") and Path(unquote(urlparse(uri).path)).is_dir():
                names.append(unquote(urlparse(uri).path))
        return Roots.of(names or [os.getcwd()])

    async def run(self, ctx: Context, tool: str, arguments: dict) -> CallToolResult:
        return await self.worker.call(ctx, tool, arguments, self.settings, self.timeout_s)


def explain(finding_id: str) -> tuple[dict, str]:
    """A finding's catalog entry (title, mechanism, fix, confirm and falsifier, as the format
    strings a rule fills, with their variants; its falsifier condition and how compare judges it)
    and the rules that make it: their stage, what they read and require, and their thresholds."""
    from tracetriage.analyzers.catalog import CATALOG
    from tracetriage.analyzers.rules.registry import REGISTRY
    from tracetriage.analyzers.rules.thresholds import THRESHOLDS
    if finding_id not in CATALOG:
        raise UsageError(None, f"explain: unknown finding {finding_id!r}; valid ids: {', '.join(CATALOG)}")
    entry = CATALOG[finding_id]
    rules = [{"rule": rule.id, "finding": rule.finding_id, "stage": rule.stage, "reads": list(rule.reads),
              "requires": list(rule.requires), "suppressed_by": list(rule.suppressed_by), "depends_on": list(rule.depends_on),
              "thresholds": {name: {"value": THRESHOLDS[name][0], "why": THRESHOLDS[name][1]} for name in rule.thresholds}}
             for rule in REGISTRY if finding_id in (rule.id, rule.finding_id) or finding_id in rule.entries]
    structured = {"id": finding_id, "axis": entry.get("axis"), "answers": entry.get("answers") or [entry.get("axis")],
                  **{key: entry.get(key) for key in ("title", "mechanism", "fix", "confirm", "falsifier")},
                  "falsified_when": entry.get("falsified_when"), "falsified_why": entry.get("falsified_why"),
                  "compare": entry.get("compare"), "rules": rules}
    title = entry.get("title")
    title = title.get("default", next(iter(title.values()))) if isinstance(title, dict) else title
    reads = sorted({part for rule in rules for part in rule["reads"]})
    summary = f"{finding_id} ({entry.get('axis')}): {' '.join(str(title).split())}; reads {', '.join(reads) or 'nothing'}"
    return structured, summary


def capture_hints(abstention: str, profiler: str | None) -> tuple[dict, str]:
    """What to capture next for an abstention, from capture_hints.toml (rules/hints.py reads the
    same texts): for the ``profiler`` named, else for nsys, rocprof and the PyTorch profiler."""
    from tracetriage.analyzers.catalog import capture_text
    from tracetriage.analyzers.efficiency import capture_hint

    if abstention not in ABSTENTION_HINTS:
        raise UsageError(None, f"capture_advice: unknown abstention {abstention!r}; valid names: {', '.join(ABSTENTION_HINTS)}")
    how, key = ABSTENTION_HINTS[abstention]
    hints = {}
    for name in [profiler] if profiler else list(PROFILER_TABLES):
        if how == "profiler":
            hints[name] = capture_text(PROFILER_TABLES[name], key)
        elif how == "abstention":
            hints[name] = capture_text("abstention", key)
        elif how == "efficiency":
            hints[name] = capture_hint(EFFICIENCY_FORMATS[name])
        else:
            native = capture_text("host_native", "rocm" if name == "rocprof" else "default")
            hints[name] = {"python": capture_text("host_python", "default").format(pid="<pid>"),
                           "native": native.format(pid="<pid>")}
    structured = {"abstention": abstention, "profiler": profiler, "capture": hints}
    return structured, "\n".join(f"{name}: {hint if isinstance(hint, str) else hint['python']}" for name, hint in hints.items())


Paths = Annotated[list[str], Field(description="trace files, side artifacts, bundle folders or archives, under the roots "
                                               "(a relative path is taken from the server's working directory)")]
Symptom = Annotated[str | None, Field(description="the axis whose findings rank first: throughput, utilization, tail, ttft, "
                                                  "tpot, oom, cost or quality (judged by compare, across a deploy)")]
Slo = Annotated[str | None, Field(description="latency budgets in ms, e.g. 'ttft_p95_ms=800,tpot_p95_ms=50'")]
StepRange = Annotated[str | None, Field(description="a regular expression naming the NVTX/roctx ranges that mark one step")]


def client_roots(ctx: Context) -> ListRoots | None:
    """The request for the client's MCP roots, when it declares the roots capability (the SDK
    sends it as the protocol version wants: mid-call, or as input the client's retry answers)."""
    capabilities = ctx.client_capabilities
    return ListRoots() if capabilities is not None and capabilities.roots is not None else None


Granted = Annotated[ListRootsResult | None, Resolve(client_roots)]
Format = Annotated[Literal["html", "md"] | None, Field(description="also write the rendered report (needs output)")]
Output = Annotated[str | None, Field(description="where the report goes: under a root, not beside an input")]


def build(server: Server) -> MCPServer:
    """The MCP server and its six tools."""
    mcp = MCPServer("tracetriage", version=__version__, instructions=(
        "Post-mortem triage of GPU profiler traces and LLM-serving artifacts. Each tool returns the JSON contract "
        "(findings with impact and its denominator, falsifiers, abstentions) as structured content and the headline as "
        "text. Paths are read only under the granted roots; reports are written only when format and output are given."))

    async def guarded(ctx: Context, granted: ListRootsResult | None, tool: str, prepare) -> CallToolResult:
        """Check the call's paths against the roots (``prepare``: roots -> the worker's arguments),
        then run it; any refusal is a one-line error result."""
        try:
            arguments = prepare(server.roots_of(granted))
        except Exception as exc:  # noqa: BLE001 - every failure is a one-line result
            return error_result(exc)
        return await server.run(ctx, tool, arguments)

    def checked_options(symptom, slo, step_range) -> dict:
        from tracetriage.runtime import Options

        Options.checked(symptom, slo, step_range)  # a bad option is refused before a worker starts
        return {"symptom": symptom, "slo": slo, "step_range": step_range}

    @mcp.tool()
    async def analyze(paths: Paths, ctx: Context, granted: Granted, symptom: Symptom = None, slo: Slo = None,
                      step_range: StepRange = None, format: Format = None, output: Output = None) -> CallToolResult:
        """Analyze the paths as one case (a trace, a bundle folder, artifacts): the analysis contract
        (tracetriage.analysis/1: findings, abstentions, devices, serving) and its headline."""
        def prepare(roots: Roots) -> dict:
            options = checked_options(symptom, slo, step_range)
            fmt = _report_format(format, output)
            read = [roots.readable(path) for path in paths]
            return {"paths": read, **options, "format": fmt, "output": roots.writable(output, read) if fmt else None}

        return await guarded(ctx, granted, "analyze", prepare)

    @mcp.tool()
    async def compare(before: Annotated[str, Field(description="the capture before the change: a trace, bundle folder or "
                                                               "saved analysis.json")],
                      after: Annotated[str, Field(description="the capture after the change (the same kinds)")],
                      ctx: Context, granted: Granted,
                      threshold: Annotated[float, Field(description="the smallest step-time change that counts, in % of "
                                                                    "the before step")] = 5.0,
                      across_devices: Annotated[bool, Field(description="the same program on two GPUs: each op class "
                                                                        "held against its own device's peaks")] = False,
                      symptom: Symptom = None, slo: Slo = None, step_range: StepRange = None, format: Format = None,
                      output: Output = None) -> CallToolResult:
        """What changed between two captures: the compare contract (tracetriage.compare/2: comparability,
        step time with its noise, each finding of before checked on after, the verdict; with across_devices
        each op class against its own device's peaks) and its summary."""
        def prepare(roots: Roots) -> dict:
            options = checked_options(symptom, slo, step_range)
            fmt = _report_format(format, output)
            read = [roots.readable(before), roots.readable(after)]
            return {"before": read[0], "after": read[1], "threshold": threshold, "across_devices": across_devices,
                    **options, "format": fmt,
                    "output": roots.writable(output, read) if fmt else None}

        return await guarded(ctx, granted, "compare", prepare)

    @mcp.tool()
    async def trend(batch_dir: Annotated[str, Field(description="a batch output folder (it holds summary.parquet)")],
                    ctx: Context, granted: Granted, order_by: Literal["time", "name"] = "time",
                    group_by: Annotated[str | None, Field(description="an extra group key: a path component index (-2: "
                                                                      "the folder holding the case) or tag:FILE")] = None,
                    threshold: Annotated[float, Field(description="the practical minimum of a change, in % of the "
                                                                  "step")] = 5.0,
                    baseline: Annotated[str | None, Field(description="with gate: the case the latest is judged "
                                                                      "against")] = None,
                    gate: Annotated[bool, Field(description="judge the latest capture of each group")] = False,
                    format: Format = None, output: Output = None) -> CallToolResult:
        """An archive over time, from a batch output folder: the trend contract (tracetriage.trend/1:
        groups of comparable captures, their series, the changes with last good and first bad capture)."""
        def prepare(roots: Roots) -> dict:
            fmt = _report_format(format, output)
            folder = roots.readable(batch_dir)  # tables batch wrote, not captures: a report may go beside or into it
            return {"batch_dir": folder, "order_by": order_by, "group_by": group_by, "threshold": threshold, "baseline": baseline,
                    "gate": gate, "format": fmt, "output": roots.writable(output, []) if fmt else None}

        return await guarded(ctx, granted, "trend", prepare)

    @mcp.tool()
    async def batch(inputs: Annotated[list[str], Field(description="folders, trace files, archives or glob patterns under "
                                                                   "the roots")],
                    outdir: Annotated[str, Field(description="where the case reports, index.html and the parquet tables "
                                                             "go: under a root, not inside or beside an input")],
                    ctx: Context, granted: Granted,
                    reports: Annotated[bool, Field(description="also list each case's findings and the paths of its "
                                                               "report.html and analysis.json")] = False,
                    force: Annotated[bool, Field(description="re-analyze cases whose files did not change")] = False,
                    symptom: Symptom = None, slo: Slo = None, step_range: StepRange = None) -> CallToolResult:
        """Every case under the inputs analyzed into outdir (cases/<id>/report.html and analysis.json,
        index.html, summary.parquet): the counts and one record per case (status, error, top finding)."""
        def prepare(roots: Roots) -> dict:
            options = checked_options(symptom, slo, step_range)
            read = roots.readable_inputs(inputs)
            return {"inputs": read, "outdir": roots.writable(outdir, read), "reports": reports, "force": force, **options}

        return await guarded(ctx, granted, "batch", prepare)

    @mcp.tool(name="explain")
    async def explain_tool(finding_id: Annotated[str, Field(description="a finding id, e.g. launch_bound")]) -> CallToolResult:
        """A finding explained from the catalog: its title, mechanism, fix, confirm and falsifier texts
        (format strings with their variants), its falsifier condition, and the rules that make it
        (stage, what they read and require, their thresholds and why)."""
        try:
            return success(*explain(finding_id))
        except Exception as exc:  # noqa: BLE001 - every failure is a one-line result
            return error_result(exc)

    @mcp.tool()
    async def capture_advice(ctx: Context, granted: Granted,
                             abstention: Annotated[str | None, Field(description="an abstention's analysis name, e.g. "
                                                                                 "steps, gap_causes, host_frames")] = None,
                             paths: Annotated[list[str] | None, Field(description="the capture that abstained: its "
                                                                                  "advice is then for its profiler, "
                                                                                  "vendor and process")] = None,
                             profiler: Literal["nsys", "rocprof", "pytorch"] | None = None,
                             step_range: StepRange = None) -> CallToolResult:
        """What to capture next so that an abstention is decided: with paths, the capture's own
        abstentions (those named abstention, when given) with their capture hints; without, the hint
        for the abstention named, for the profiler named (else nsys, rocprof and the PyTorch profiler)."""
        if paths:
            def prepare(roots: Roots) -> dict:
                checked_options(None, None, step_range)
                return {"paths": [roots.readable(path) for path in paths], "abstention": abstention, "step_range": step_range}

            return await guarded(ctx, granted, "capture_advice", prepare)
        try:
            if abstention is None:
                raise UsageError(None, "capture_advice: give abstention (its name), paths (the capture), or both")
            return success(*capture_hints(abstention, profiler))
        except Exception as exc:  # noqa: BLE001 - every failure is a one-line result
            return error_result(exc)

    return mcp


def serve(roots: list[str], timeout_s: float, settings: dict) -> None:
    """Serve MCP over standard input and output until the client closes it."""
    Roots.of(roots)  # a bad --root is refused before the client connects
    if not timeout_s > 0:
        raise UsageError(None, f"--timeout {timeout_s:g}: give a positive number of seconds")
    analyses = Worker()
    analyses.start()
    try:
        build(Server(tuple(roots), timeout_s, settings, analyses)).run("stdio")
    finally:
        analyses.stop(wait_s=5.0)
