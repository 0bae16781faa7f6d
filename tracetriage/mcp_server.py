"""The MCP server of ``tracetriage mcp``: the library API (tracetriage/api.py) as tools a coding
assistant calls over stdio (the official ``mcp`` SDK): analyze, compare, trend, batch, explain and
capture_advice.

Each tool returns the JSON contract as structured content and a short text: the headline, the
compare summary or the trend verdicts. A rendered report is written only when asked (``format``
html or md, to the ``output`` path the user named). The jobs, one module each:

- the tools and their arguments (this module): each argument checked before any work starts; an
  argument of the wrong type, or one the tool does not take, is the CLI's usage error (exit 2);
- what the server may touch (tracetriage/mcp_roots.py): reads and writes only under the roots
  (the client's MCP roots and the ``--root`` folders), never inside an input folder or beside an input;
- the work of each tool (tracetriage/mcp_work.py), run in a worker process killed when the call's
  time bound passes, with progress notifications while it runs (tracetriage/mcp_worker.py);
- what a tool answers (tracetriage/mcp_results.py): the contract, or the CLI's one-line message and
  its exit code (tracetriage/errors.py) as structured content of an error result (isError), never a
  traceback, naming the tool's arguments where the CLI names its flags.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, ListRoots, MCPServer, Resolve
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ListRootsResult, ToolAnnotations
from pydantic import Field, Strict, ValidationError

from tracetriage import __version__
from tracetriage.errors import EXIT_INTERNAL, EXIT_USAGE, UnsupportedInputError, UsageError
from tracetriage.mcp_results import argument_error, error_result, failure, success, unknown_arguments, validation_problems
from tracetriage.mcp_roots import Roots
from tracetriage.mcp_work import (
    AdviceRequest,
    AnalyzeRequest,
    BatchRequest,
    CompareRequest,
    TrendRequest,
    capture_hints,
    explain,
    report_format,
)
from tracetriage.mcp_worker import Worker

# What each tool does to the client's environment (MCP tool annotations). The five that read
# write nothing unless asked for a report; batch writes its outdir (never an input: the roots refuse
# an outdir among the inputs) and a second call with the same inputs leaves the same outdir (an
# unchanged case is reused). None reaches beyond the local files under the roots.
READS = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
TITLES = {"analyze": "Analyze a capture", "compare": "Compare two captures", "trend": "Trend of a batch archive",
          "batch": "Analyze a folder of captures", "explain": "Explain a finding",
          "capture_advice": "What to capture next"}  # what a client shows a person
WRITES_OUTDIR = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)


@dataclass(frozen=True)
class Server:
    """What every call of one server shares: the ``--root`` folders, the time bound of a call in
    seconds, the runtime settings (cache folder, nsys) the worker rebuilds its Runtime from, and the worker."""

    roots: tuple[str, ...]
    timeout_s: float
    settings: dict
    worker: Worker

    def roots_of(self, granted: ListRootsResult | None) -> Roots:
        """The ``--root`` folders and the folders of the client's MCP roots."""
        return Roots.granted(self.roots, [str(root.uri) for root in granted.roots] if granted is not None else [])

    async def run(self, ctx: Context, tool: str, request) -> CallToolResult:
        return await self.worker.call(ctx, tool, request, self.settings, self.timeout_s)


class ToolServer(MCPServer):
    """The SDK's server, with every bad argument answered as the CLI answers a bad option: one line,
    exit code 2 (``error_class`` UsageError), never pydantic's multi-line validation dump; an
    argument the tool does not take is refused too, never ignored in silence."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None):
        tools = {tool.name: tool for tool in await self.list_tools()}
        if name not in tools:
            return failure(f"tracetriage: error: unknown tool {name!r}; the tools: {', '.join(tools)}", EXIT_USAGE, "UsageError")
        refused = unknown_arguments(name, arguments, set(tools[name].input_schema.get("properties", {})))
        if refused is not None:
            return refused
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return argument_error(name, validation_problems(exc.__cause__))
            cause = exc.__cause__ or exc
            return failure(f"tracetriage: internal error: {name}: {type(cause).__name__} (please report this)",
                           EXIT_INTERNAL, type(cause).__name__)


Paths = Annotated[list[str], Field(min_length=1, description="trace files, side artifacts, bundle folders or archives, "
                                               "under the roots (a relative path is taken from the server's working "
                                               "directory); at least one")]
Symptom = Annotated[str | None, Field(description="the axis whose findings rank first: throughput, utilization, tail, ttft, "
                                                  "tpot, oom, cost or quality (judged by compare, across a deploy)")]
Slo = Annotated[str | None, Field(description="latency budgets in ms, e.g. 'ttft_p95_ms=800,tpot_p95_ms=50'")]
StepRange = Annotated[str | None, Field(description="a regular expression naming the NVTX/roctx ranges that mark one step")]
Format = Annotated[Literal["html", "md"] | None, Field(description="also write the rendered report (needs output)")]
Output = Annotated[str | None, Field(description="where the report goes: under a root, not beside an input")]


def client_roots(ctx: Context) -> ListRoots | None:
    """The request for the client's MCP roots, when it declares the roots capability (the SDK
    sends it as the protocol version wants: mid-call, or as input the client's retry answers)."""
    capabilities = ctx.client_capabilities
    return ListRoots() if capabilities is not None and capabilities.roots is not None else None


Granted = Annotated[ListRootsResult | None, Resolve(client_roots)]


def checked_options(symptom, slo, step_range) -> None:
    """A bad option is refused before a worker starts, with the CLI's message."""
    from tracetriage.runtime import Options

    Options.checked(symptom, slo, step_range)


def batch_folder(roots: Roots, batch_dir: str) -> str:
    """trend's ``batch_dir``, under a root and a batch output folder: trend through MCP reads tables,
    it never batches a folder of captures on its own (that is the batch tool's call, into an outdir
    the user names)."""
    folder = roots.readable(batch_dir)
    if not Path(folder).exists():
        raise UnsupportedInputError(batch_dir, "no such file or directory")  # as the CLI's trend says it (exit 3)
    if not (Path(folder) / "summary.parquet").is_file():
        raise UsageError(None, f"batch_dir {batch_dir}: not a batch output folder: one holds summary.parquet, "
                               "findings.parquet, index.html and cases/ (what the batch tool writes into its outdir); "
                               "run batch on these captures first, then trend on its outdir")
    return folder


def tool(mcp: MCPServer, **settings):
    """``mcp.tool(...)`` with the function's docstring as its description on one line: a client
    shows it to its model as it is, so the docstring's line breaks and indentation are not kept."""
    def register(function):
        return mcp.tool(description=" ".join((function.__doc__ or "").split()), **settings)(function)

    return register


def build(server: Server) -> MCPServer:
    """The MCP server and its six tools."""
    mcp = ToolServer("tracetriage", version=__version__, instructions=(
        "Post-mortem triage of GPU profiler traces and LLM-serving artifacts. Each tool returns the JSON contract "
        "(findings with impact and its denominator, falsifiers, abstentions) as structured content and the headline as "
        "text. Paths are read only under the granted roots; reports are written only when format and output are given."))

    async def guarded(ctx: Context, granted: ListRootsResult | None, tool: str, prepare) -> CallToolResult:
        """Check the call's paths against the roots (``prepare``: roots -> the worker's request),
        then run it; any refusal is a one-line error result."""
        try:
            request = prepare(server.roots_of(granted))
        except Exception as exc:  # noqa: BLE001 - every failure is a one-line result
            return error_result(exc, tool)
        return await server.run(ctx, tool, request)

    @tool(mcp, title=TITLES["analyze"], annotations=READS)
    async def analyze(paths: Paths, ctx: Context, granted: Granted, symptom: Symptom = None, slo: Slo = None,
                      step_range: StepRange = None, format: Format = None, output: Output = None) -> CallToolResult:
        """Analyze the paths as one case (a trace, a bundle folder, artifacts): the analysis contract
        (tracetriage.analysis/1: findings, abstentions, devices, serving) and its headline."""
        def prepare(roots: Roots) -> AnalyzeRequest:
            checked_options(symptom, slo, step_range)
            fmt = report_format(format, output)
            read = [roots.readable(path) for path in paths]
            return AnalyzeRequest(read, symptom, slo, step_range, fmt, roots.writable(output, read) if fmt else None)

        return await guarded(ctx, granted, "analyze", prepare)

    @tool(mcp, title=TITLES["compare"], annotations=READS)
    async def compare(before: Annotated[str, Field(description="the capture before the change: a trace, bundle folder or "
                                                               "saved analysis.json")],
                      after: Annotated[str, Field(description="the capture after the change (the same kinds)")],
                      ctx: Context, granted: Granted,
                      threshold: Annotated[float, Field(description="the smallest step-time change that counts, in % of "
                                                                    "the before step")] = 5.0,
                      across_devices: Annotated[bool, Field(strict=True, description="the same program on two GPUs: each "
                                                                                     "op class held against its own "
                                                                                     "device's peaks")] = False,
                      symptom: Symptom = None, slo: Slo = None, step_range: StepRange = None, format: Format = None,
                      output: Output = None) -> CallToolResult:
        """What changed between two captures: the compare contract (tracetriage.compare/2: comparability,
        step time with its noise, each finding of before checked on after, the verdict; with across_devices
        each op class against its own device's peaks) and its summary."""
        def prepare(roots: Roots) -> CompareRequest:
            checked_options(symptom, slo, step_range)
            fmt = report_format(format, output)
            read = [roots.readable(before), roots.readable(after)]
            return CompareRequest(read[0], read[1], threshold, across_devices, symptom, slo, step_range, fmt,
                                  roots.writable(output, read) if fmt else None)

        return await guarded(ctx, granted, "compare", prepare)

    @tool(mcp, title=TITLES["trend"], annotations=READS)
    async def trend(batch_dir: Annotated[str, Field(description="a batch output folder (it holds summary.parquet)")],
                    ctx: Context, granted: Granted, order_by: Literal["time", "name"] = "time",
                    group_by: Annotated[str | int | None, Field(description="an extra group key: a path component index (-2: "
                                                                      "the folder holding the case) or tag:FILE")] = None,
                    threshold: Annotated[float, Field(description="the practical minimum of a change, in % of the "
                                                                  "step")] = 5.0,
                    baseline: Annotated[str | None, Field(description="with gate: the case the latest is judged "
                                                                      "against")] = None,
                    gate: Annotated[bool, Field(strict=True, description="judge the latest capture of each group")] = False,
                    format: Format = None, output: Output = None) -> CallToolResult:
        """An archive over time, from a batch output folder: the trend contract (tracetriage.trend/1:
        groups of comparable captures, their series, the changes with last good and first bad capture)."""
        def prepare(roots: Roots) -> TrendRequest:
            fmt = report_format(format, output)
            folder = batch_folder(roots, batch_dir)  # tables batch wrote, not captures: a report may go beside or into it
            key = str(group_by) if group_by is not None and not isinstance(group_by, bool) else group_by
            return TrendRequest(folder, order_by, key, threshold, baseline, gate, fmt,
                                roots.writable(output, []) if fmt else None)

        return await guarded(ctx, granted, "trend", prepare)

    @tool(mcp, title=TITLES["batch"], annotations=WRITES_OUTDIR)
    async def batch(inputs: Annotated[list[str], Field(min_length=1, description="folders, trace files, archives or glob "
                                                                                "patterns under the roots; at least one")],
                    outdir: Annotated[str, Field(description="where the case reports, index.html and the parquet tables "
                                                             "go: under a root, not inside or beside an input")],
                    ctx: Context, granted: Granted,
                    reports: Annotated[Annotated[bool, Strict()] | Literal["all", "failed", "none"],
                                       Field(description="true: also list each case's findings and the paths of its "
                                                         "report.html and analysis.json; all, failed or none: which cases "
                                                         "get a report.html, as the CLI's --reports (failed: those with a "
                                                         "finding other than healthy; none: the cheapest), each case listed "
                                                         "so; false (default): every report.html, the records without "
                                                         "findings")] = False,
                    force: Annotated[bool, Field(strict=True, description="re-analyze cases whose files did not change")] = False,
                    symptom: Symptom = None, slo: Slo = None, step_range: StepRange = None) -> CallToolResult:
        """Every case under the inputs analyzed into outdir (cases/<id>/report.html and analysis.json,
        index.html, summary.parquet): the counts and one record per case (status, error, top_finding: its top
        finding's title, top_finding_id: its id, as summary.parquet's top_finding). Progress notifications
        count the cases done."""
        def prepare(roots: Roots) -> BatchRequest:
            checked_options(symptom, slo, step_range)
            read = roots.readable_inputs(inputs)
            return BatchRequest(read, roots.writable(outdir, read, "outdir"), reports, force, symptom, slo, step_range)

        return await guarded(ctx, granted, "batch", prepare)

    @tool(mcp, name="explain", title=TITLES["explain"], annotations=READS)
    async def explain_tool(finding_id: Annotated[str, Field(description="a finding id, e.g. launch_bound")]) -> CallToolResult:
        """A finding explained from the catalog: its title, mechanism, fix, confirm and falsifier texts
        (format strings with their variants), its falsifier condition, and the rules that make it
        (stage, what they read and require, their thresholds and why)."""
        try:
            return success(*explain(finding_id))
        except Exception as exc:  # noqa: BLE001 - every failure is a one-line result
            return error_result(exc, "explain")

    @tool(mcp, title=TITLES["capture_advice"], annotations=READS)
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
            def prepare(roots: Roots) -> AdviceRequest:
                checked_options(None, None, step_range)
                return AdviceRequest([roots.readable(path) for path in paths], abstention, step_range)

            return await guarded(ctx, granted, "capture_advice", prepare)
        try:
            if abstention is None:
                raise UsageError(None, "capture_advice: give abstention (its name), paths (the capture), or both")
            return success(*capture_hints(abstention, profiler))
        except Exception as exc:  # noqa: BLE001 - every failure is a one-line result
            return error_result(exc, "capture_advice")

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
