"""What a ``tracetriage mcp`` tool answers: the JSON contract and a short text, or the CLI's
one-line error with its exit code and class as structured content (``isError``), never a
traceback nor pydantic's multi-line dump; the error names the tool's argument where the CLI's
message names its flag."""

from __future__ import annotations

import re

from mcp.types import CallToolResult, TextContent

from tracetriage.errors import EXIT_USAGE, UsageError, error_fields, one_line

# The CLI flags the library's messages name, as each tool's arguments: a message through MCP names
# what the assistant can change. A flag a tool has no argument for is left as it is.
_VERDICT_FLAGS = {"--symptom": "symptom", "--slo": "slo", "--step-range": "step_range"}
_REPORT_FLAGS = {"-o": "output", "--output": "output", "--format": "format", "-f": "format"}
TOOL_ARGUMENTS = {
    "analyze": {**_VERDICT_FLAGS, **_REPORT_FLAGS},
    "compare": {**_VERDICT_FLAGS, **_REPORT_FLAGS, "--gate-threshold": "threshold", "--across-devices": "across_devices"},
    "trend": {**_REPORT_FLAGS, "--threshold": "threshold", "--baseline": "baseline", "--gate": "gate",
              "--group-by": "group_by", "--order-by": "order_by", "--force": "force",
              "--batch-dir": "batch_dir"},
    "batch": {**_VERDICT_FLAGS, "-o": "outdir", "--output": "outdir", "--force": "force"},
    "capture_advice": {"--step-range": "step_range"},
}
_FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z-]*|-[of])(?![\w-])")
_COMMAND_FLAG = re.compile(r"\b(?:tracetriage )?(analyze|compare|trend|batch) (--[a-z][a-z-]*|-[of])(?![\w-])")
_COMMAND = re.compile(r"\btracetriage (analyze|compare|trend|batch)\b")


def for_tool(tool: str, text: str) -> str:
    """``text`` with the CLI's flags named as ``tool``'s arguments: ``compare --across-devices`` is
    the compare tool with across_devices, ``--symptom`` is symptom, ``tracetriage batch`` the batch tool."""
    def command_flag(match: re.Match) -> str:
        command, flag = match.groups()
        argument = TOOL_ARGUMENTS[command].get(flag)
        return f"the {command} tool with {argument}" if argument else match.group(0)

    names = TOOL_ARGUMENTS.get(tool, {})
    text = _COMMAND_FLAG.sub(command_flag, text)
    text = _FLAG.sub(lambda match: names.get(match.group(1), match.group(1)), text)
    return _COMMAND.sub(lambda match: f"the {match.group(1)} tool", text)


def failure(line: str, exit_code: int, error_class: str, tool: str | None = None) -> CallToolResult:
    """An error result: ``line`` (the CLI's one line, its flags named as ``tool``'s arguments) as text and structured content."""
    line = for_tool(tool, line) if tool else line
    return CallToolResult(content=[TextContent(type="text", text=line)], is_error=True,
                          structured_content={"error": line, "exit_code": exit_code, "error_class": error_class})


def error_result(exc: BaseException, tool: str | None = None) -> CallToolResult:
    return failure(*error_fields(exc), tool=tool)


def success(structured: dict, summary: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=summary)], structured_content=structured)


def _shown(value) -> str:
    """A rejected value as the error shows it: its repr, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def argument_error(tool: str, problems: list[tuple[str, str, object]]) -> CallToolResult:
    """Arguments that do not fit the tool's schema, ``(argument, what it should be, the value given)``
    each, as one usage error (exit 2), as the CLI refuses a bad option."""
    said = "; ".join(f"{name}: {should[:1].lower() + should[1:]} (got {_shown(value)})" for name, should, value in problems)
    return failure(*error_fields(UsageError(None, one_line(f"{tool}: bad argument {said}"))), tool=tool)


def validation_problems(error) -> list[tuple[str, str, object]]:
    """pydantic's ValidationError as ``(argument, what it should be, the value given)``, one per argument
    (a list's item is ``paths.0``): what each branch of an argument of several types wants is said in one
    ("input should be a valid boolean or 'all', 'failed' or 'none'"), never under the branch's own name."""
    problems: dict[str, tuple[str, str, object]] = {}
    for item in error.errors():
        loc = [part for at, part in enumerate(item["loc"]) if at == 0 or isinstance(part, int)]
        name = ".".join(str(part) for part in loc) or "arguments"
        if name in problems:
            first, should, value = problems[name]
            problems[name] = (first, f"{should} or {item['msg'].removeprefix('Input should be ')}", value)
        else:
            problems[name] = (name, item["msg"], item.get("input"))
    return list(problems.values())


def unknown_arguments(tool: str, given, known: set[str]) -> CallToolResult | None:
    """An error result for arguments ``tool`` does not take (None when every one is known)."""
    unknown = sorted(set(given) - known)
    if not unknown:
        return None
    line = (f"tracetriage: error: {tool}: unknown argument{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(_shown, unknown))}; {tool} takes {', '.join(sorted(known))}")
    return failure(one_line(line), EXIT_USAGE, "UsageError")
