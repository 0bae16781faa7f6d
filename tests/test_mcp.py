"""`tracetriage mcp` through the MCP SDK's own client, over a real stdio session with
`python -m tracetriage mcp --root ...`: the tools listed, analyze and compare on sample bundles, a
report written where asked, paths refused outside the roots (given with --root or granted by the
client as MCP roots), a corrupt input's one-line error with exit code 3."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from conftest import BUNDLES, ROOT

pytest.importorskip("mcp", reason="the MCP SDK is not installed (pip install 'tracetriage[mcp]')")

from mcp import Client, StdioServerParameters  # noqa: E402
from mcp.types import ListRootsResult, Root  # noqa: E402

from tracetriage.errors import EXIT_INPUT, EXIT_OUTPUT, EXIT_USAGE, OutputError, UsageError  # noqa: E402
from tracetriage.mcp_work import ABSTENTION_HINTS  # noqa: E402
from tracetriage.mcp_worker import EXIT_TIMEOUT  # noqa: E402

TOOLS = {"analyze", "compare", "trend", "batch", "explain", "capture_advice"}


def _calls(work: Path, granted: Path, outside: Path) -> dict:
    """Each call's name -> (tool, arguments): everything one session asks."""
    return {
        "analyze": ("analyze", {"paths": [str(BUNDLES / "eager_decode")]}),
        "compare": ("compare", {"before": str(BUNDLES / "eager_decode"), "after": str(BUNDLES / "graph_decode")}),
        "report": ("analyze", {"paths": [str(BUNDLES / "eager_decode")], "format": "md",
                               "output": str(work / "reports" / "eager.md")}),
        "report_inside_input": ("analyze", {"paths": [str(BUNDLES / "eager_decode")], "format": "md",
                                            "output": str(BUNDLES / "eager_decode" / "report.md")}),
        "outside": ("analyze", {"paths": [str(outside / "trace.sqlite")]}),
        "dotdot": ("analyze", {"paths": [f"{work}/../{outside.name}/trace.sqlite"]}),
        "corrupt": ("analyze", {"paths": [str(work / "x.sqlite")]}),
        "granted": ("analyze", {"paths": [str(granted / "x.sqlite")]}),
        "explain": ("explain", {"finding_id": "launch_bound"}),
        "explain_unknown": ("explain", {"finding_id": "no_such_finding"}),
        "advice": ("capture_advice", {"abstention": "gap_causes", "profiler": "nsys"}),
        # every bad argument: the CLI's usage error in one line (exit 2), naming the tool's argument
        "bad_paths": ("analyze", {"paths": 5}),
        "bad_threshold": ("compare", {"before": str(BUNDLES / "eager_decode"), "after": str(BUNDLES / "graph_decode"),
                                      "threshold": "x"}),
        "bad_symptom": ("analyze", {"paths": [str(BUNDLES / "eager_decode")], "symptom": "bogus"}),
        "bad_slo": ("analyze", {"paths": [str(BUNDLES / "eager_decode")], "slo": "ttft_p95_ms=-1"}),
        "unknown_argument": ("analyze", {"paths": [str(BUNDLES / "eager_decode")], "sypmtom": "tail"}),
        "bad_explain": ("explain", {"finding_id": ["launch_bound"]}),
        "threshold_zero": ("compare", {"before": str(BUNDLES / "eager_decode"), "after": str(BUNDLES / "graph_decode"),
                                       "threshold": 0}),
        "trend_on_captures": ("trend", {"batch_dir": str(BUNDLES / "eager_decode")}),
        "no_batch_dir": ("trend", {"batch_dir": str(work / "no_such_batch")}),
        "format_disagrees": ("analyze", {"paths": [str(BUNDLES / "eager_decode")], "format": "html",
                                         "output": str(work / "reports" / "r.md")}),
        "output_is_a_folder": ("analyze", {"paths": [str(BUNDLES / "eager_decode")], "format": "html", "output": str(work)}),
        "empty_paths": ("analyze", {"paths": []}),
        "empty_inputs": ("batch", {"inputs": [], "outdir": str(work / "out")}),
        "lax_boolean": ("compare", {"before": str(BUNDLES / "eager_decode"), "after": str(BUNDLES / "graph_decode"),
                                    "across_devices": "yes"}),
        "number_as_boolean": ("batch", {"inputs": [str(work / "captures")], "outdir": str(work / "out"), "force": 1}),
        "outdir_inside_input": ("batch", {"inputs": [str(work / "captures")], "outdir": str(work / "captures" / "out")}),
        "fake_archive": ("analyze", {"paths": [str(work / "fake.tar.gz")]}),
        "sqlite_named_json": ("analyze", {"paths": [str(work / "captures" / "trace.json")]}),
        # one kind of mistake, one error_class (trial 43 item 9): a missing input, a batch_dir, a glob of nothing
        "missing_input": ("analyze", {"paths": [str(work / "nope")]}),
        "batch_nomatch": ("batch", {"inputs": [str(work / "captures" / "nomatch*")], "outdir": str(work / "out-nomatch")}),
        # batch's reports: the CLI's values (which cases get a report.html), the boolean as before (item 6)
        "batch_none": ("batch", {"inputs": [str(BUNDLES / "eager_decode"), str(BUNDLES / "graph_decode")],
                                 "outdir": str(work / "batch-none"), "reports": "none"}),
        "batch_listed": ("batch", {"inputs": [str(BUNDLES / "graph_decode")], "outdir": str(work / "batch-listed"),
                                   "reports": True}),
        "batch_plain": ("batch", {"inputs": [str(BUNDLES / "graph_decode")], "outdir": str(work / "batch-plain")}),
        "batch_bad_reports": ("batch", {"inputs": [str(BUNDLES / "graph_decode")], "outdir": str(work / "batch-bad"),
                                        "reports": "some"}),
    }


def _server(*args: str) -> StdioServerParameters:
    """`python -m tracetriage mcp ARGS`, run from the repository with the tests' analysis cache."""
    return StdioServerParameters(command=sys.executable, args=["-m", "tracetriage", "mcp", *args],
                                 env={"TRACETRIAGE_CACHE_DIR": os.environ["TRACETRIAGE_CACHE_DIR"]}, cwd=str(ROOT))


async def _session(work: Path, granted: Path, outside: Path) -> dict:
    async def list_roots(context) -> ListRootsResult:
        return ListRootsResult(roots=[Root(uri=granted.as_uri(), name="granted")])

    params = _server("--root", str(work), "--root", str(BUNDLES))
    results, progress, of_call = {}, [], {}

    async with Client(params, list_roots_callback=list_roots, read_timeout_seconds=300) as client:
        results["tools"] = (await client.list_tools()).tools
        for name, (tool, arguments) in _calls(work, granted, outside).items():
            async def note(value, total, message, name=name):
                progress.append((value, total, message))
                of_call.setdefault(name, []).append((value, total, message))

            results[name] = await client.call_tool(tool, arguments, progress_callback=note)
    results["progress"], results["progress_of"] = progress, of_call
    return results


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One stdio session's answers (starting the server and its worker costs seconds: paid once)."""
    work, granted, outside = (tmp_path_factory.mktemp(name) for name in ("work", "granted", "outside"))
    for folder in (work, granted):
        (folder / "x.sqlite").write_text("this is a text file, not an SQLite database\n")
    (outside / "trace.sqlite").write_text("never read\n")
    (work / "fake.tar.gz").write_text("a text file, not a gzip archive\n")
    (work / "captures").mkdir()
    shutil.copy(BUNDLES / "eager_decode" / "trace.sqlite", work / "captures" / "trace.json")  # SQLite, named as JSON
    return {"work": work, **asyncio.run(_session(work, granted, outside))}


def _error(result) -> dict:
    assert result.is_error
    line = result.content[0].text
    assert "\n" not in line and "Traceback" not in line and line.startswith("tracetriage: error: ")
    assert result.structured_content["error"] == line
    return result.structured_content


def test_lists_the_tools(session):
    tools = {tool.name: tool for tool in session["tools"]}
    assert set(tools) == TOOLS
    assert all(tool.description for tool in tools.values())
    assert set(tools["analyze"].input_schema["properties"]) == {"paths", "symptom", "slo", "step_range", "format", "output"}


def test_each_tool_has_a_title_a_person_reads(session):
    titles = [tool.title for tool in session["tools"]]
    assert all(titles) and len(set(titles)) == len(titles)
    # the description a client gives its model: one line, no docstring indentation left in it
    assert all("  " not in tool.description and "\n" not in tool.description for tool in session["tools"])


def test_a_report_output_is_checked_before_the_analysis(session):
    """An html page asked into r.md is refused (the name would misdescribe it), and a folder as output is
    the output error at once, not after the analysis ran (trial 43 item 10)."""
    error = _error(session["format_disagrees"])
    assert error["exit_code"] == EXIT_USAGE and "disagree" in error["error"]
    assert not (session["work"] / "reports" / "r.md").exists()
    error = _error(session["output_is_a_folder"])
    assert error["exit_code"] == EXIT_OUTPUT and "directory" in error["error"]


def test_a_batch_dir_that_does_not_exist_is_named_as_missing(session):
    """As the CLI's trend says it: the path and "no such file or directory", exit code 3 — not
    "not a batch output folder" about a folder that is not there."""
    error = _error(session["no_batch_dir"])
    assert error["exit_code"] == EXIT_INPUT and "no such file or directory" in error["error"]
    assert "not a batch output folder" not in error["error"]


def test_the_tools_say_what_they_touch(session):
    """MCP tool annotations: the five that read are read-only (and idempotent); batch writes its
    outdir, never an input (not destructive), and a second call leaves the same outdir."""
    tools = {tool.name: tool.annotations for tool in session["tools"]}
    for name in ("analyze", "compare", "trend", "explain", "capture_advice"):
        assert tools[name].read_only_hint is True and tools[name].idempotent_hint is True, name
    assert tools["batch"].read_only_hint is False and tools["batch"].destructive_hint is False
    assert tools["batch"].idempotent_hint is True
    assert all(annotations.open_world_hint is False for annotations in tools.values())


@pytest.mark.parametrize(("call", "argument"), [("bad_paths", "paths"), ("bad_threshold", "threshold"),
                                                ("bad_symptom", "symptom"), ("bad_slo", "slo"),
                                                ("unknown_argument", "sypmtom"), ("bad_explain", "finding_id"),
                                                ("threshold_zero", "threshold"), ("empty_paths", "paths"),
                                                ("empty_inputs", "inputs"), ("lax_boolean", "across_devices"),
                                                ("number_as_boolean", "force")])
def test_a_bad_argument_is_the_usage_error_naming_the_argument(session, call, argument):
    """A wrong type, an unknown name or a value out of range: one line, exit code 2 (the CLI's usage
    error), naming the tool's argument, never pydantic's dump nor a CLI flag."""
    error = _error(session[call])
    assert error["exit_code"] == EXIT_USAGE and error["error_class"] == "UsageError"
    assert argument in error["error"] and "--" not in error["error"] and "pydantic" not in error["error"]


def test_messages_name_the_tools_arguments_not_the_clis_flags():
    """The library's messages name CLI flags; through MCP they name the tool's argument (a flag the
    tool has no argument for, such as the server's own --timeout, stays as it is)."""
    from tracetriage.mcp_results import for_tool

    assert for_tool("compare", "devices differ (compare --across-devices holds each op class against its own peaks)") == \
        "devices differ (the compare tool with across_devices holds each op class against its own peaks)"
    assert for_tool("compare", "--gate-threshold 0: give a percentage") == "threshold 0: give a percentage"
    assert for_tool("batch", "-o x: cannot write") == "outdir x: cannot write"
    assert for_tool("trend", "re-run tracetriage batch with --force into this folder") == \
        "re-run the batch tool with force into this folder"
    assert for_tool("analyze", "timed out (tracetriage mcp --timeout); /data/run--slo/x") == \
        "timed out (tracetriage mcp --timeout); /data/run--slo/x"


def test_trend_refuses_a_folder_that_is_not_a_batch_output(session):
    error = _error(session["trend_on_captures"])
    assert error["exit_code"] == EXIT_USAGE
    assert str(BUNDLES / "eager_decode") in error["error"] and "summary.parquet" in error["error"]
    assert "run batch" in error["error"]


def test_an_outdir_inside_an_input_says_why_and_what_to_do(session):
    error = _error(session["outdir_inside_input"])
    assert error["exit_code"] == EXIT_OUTPUT
    assert "outdir is inside the input folder" in error["error"] and "outside every input" in error["error"]
    assert not (session["work"] / "captures" / "out").exists()


def test_content_decides_not_the_name(session):
    """A fake .tar.gz is said not to be a gzip archive; an SQLite export named .json is read as SQLite."""
    error = _error(session["fake_archive"])
    assert error["exit_code"] == EXIT_INPUT and "named .tar.gz but not a gzip archive" in error["error"]
    assert session["sqlite_named_json"].structured_content["findings"][0]["id"] == "launch_bound"


def test_analyze_returns_the_contract_and_its_headline(session):
    result = session["analyze"]
    assert not result.is_error
    data = result.structured_content
    assert data["schema"] == "tracetriage.analysis/1"
    assert data["findings"][0]["id"] == "launch_bound"
    assert result.content[0].text == data["headline"]
    assert any(message == "analyze: started" for _, _, message in session["progress"])
    values = [value for value, _, _ in session["progress"]]
    assert all(later > earlier for earlier, later in zip(values, values[1:]) if later), values


def test_the_worker_tells_each_stage_of_an_analysis():
    """What the server forwards as progress notifications: the worker's stages of the call, before its answer."""
    from tracetriage.mcp_work import AnalyzeRequest, work_analyze

    stages = []
    data, summary = work_analyze(AnalyzeRequest([str(BUNDLES / "eager_decode")]), {"cache_dir": None, "progress": stages.append})
    assert stages == ["reading trace.sqlite", "measuring trace.sqlite"]
    assert summary == data["headline"]


def test_compare_a_before_after_pair(session):
    result = session["compare"]
    assert not result.is_error
    data = result.structured_content
    assert data["schema"] == "tracetriage.compare/2" and data["verdict"] == "improved"
    assert not any(key.startswith("_") for key in data)
    assert result.content[0].text == data["summary"]


def test_a_report_only_where_asked_and_never_inside_an_input(session):
    report = session["work"] / "reports" / "eager.md"
    assert not session["report"].is_error and report.is_file()
    assert session["report"].content[0].text.endswith(f"wrote {report}")
    assert _error(session["report_inside_input"])["exit_code"] == EXIT_OUTPUT
    assert not (BUNDLES / "eager_decode" / "report.md").exists()


@pytest.mark.parametrize("call", ["outside", "dotdot"])
def test_a_path_outside_the_roots_is_refused(session, call):
    error = _error(session[call])
    assert error["exit_code"] == EXIT_USAGE
    assert "outside the roots" in error["error"] or "'..'" in error["error"]


def test_a_corrupt_input_is_one_line_with_the_input_exit_code(session):
    assert _error(session["corrupt"])["exit_code"] == EXIT_INPUT


def test_the_clients_roots_are_read_too(session):
    """A folder granted only as an MCP root is read: its corrupt file fails as input, not as refused."""
    assert _error(session["granted"])["exit_code"] == EXIT_INPUT


def test_explain_and_capture_advice(session):
    explained = session["explain"].structured_content
    assert explained["axis"] == "throughput" and explained["falsified_when"]
    assert {"mechanism", "fix", "confirm", "falsifier"} <= set(explained)
    assert explained["rules"][0]["thresholds"]["launch_per_step_min"]["why"]
    assert _error(session["explain_unknown"])["exit_code"] == EXIT_USAGE
    assert "nsys profile" in session["advice"].structured_content["capture"]["nsys"]


def test_every_abstention_has_its_capture_advice():
    """capture_advice's table names every abstention the rules can give (their "analysis" names)."""
    from tracetriage.analyzers.rules.abstain import ODD

    names = set(ODD)
    for module in ("analyzers/rules/abstain.py", "analyzers/rules/efficiency.py"):
        for node in ast.walk(ast.parse((ROOT / module).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                names |= {value.value for key, value in zip(node.keys, node.values)
                          if isinstance(key, ast.Constant) and key.value == "analysis" and isinstance(value, ast.Constant)}
    assert names <= set(ABSTENTION_HINTS)


def test_a_call_past_the_time_bound_ends_with_its_exit_code():
    """--timeout: the call's worker is ended and the call answers exit code 124; the server goes on."""
    async def calls():
        async with Client(_server("--root", str(BUNDLES), "--timeout", "0.01"), read_timeout_seconds=120) as client:
            late = await client.call_tool("analyze", {"paths": [str(BUNDLES / "eager_decode")]})
            return late, await client.call_tool("explain", {"finding_id": "healthy"})

    late, after = asyncio.run(calls())
    assert _error(late) == {"error": "tracetriage: error: analyze: timed out after 0.01 s (tracetriage mcp --timeout)",
                            "exit_code": EXIT_TIMEOUT, "error_class": "Timeout"}
    assert not after.is_error


def test_roots_resolve_links_and_globs(tmp_path):
    """What the roots refuse without a session: a link out (given, inside a folder, or matched by a
    batch glob), a '..' escape, and an output beside an input; what they allow: a path under a root."""
    from tracetriage.mcp_roots import Roots

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "captures").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.sqlite").write_text("never read\n")
    (root / "captures" / "run.sqlite").write_text("a capture\n")
    (root / "captures" / "link.sqlite").symlink_to(outside / "secret.sqlite")
    roots = Roots.of([str(root)])
    for refused in ([str(root / "captures" / "link.sqlite")], [str(root / "captures")], [str(root / "captures" / "*.sqlite")],
                    [f"{root}/../outside/secret.sqlite"]):
        with pytest.raises(UsageError):
            roots.readable_inputs(refused)
    assert roots.readable_inputs([str(root / "captures" / "r*")]) == [str((root / "captures" / "run.sqlite").resolve())]
    inputs = [str(root / "captures" / "run.sqlite")]
    with pytest.raises(OutputError, match="output is beside the input .*: name an output outside every input, e.g. "):
        roots.writable(str(root / "captures" / "report.md"), inputs)
    assert roots.writable(str(root / "reports" / "report.md"), inputs) == str((root / "reports" / "report.md").resolve())
    # a file:// URI (how MCP roots are written, so assistants pass them) is its path; its link out is still refused
    run = root / "captures" / "run.sqlite"
    assert roots.readable_inputs([run.as_uri()]) == [str(run.resolve())]
    with pytest.raises(UsageError):
        roots.readable_inputs([(root / "captures" / "link.sqlite").as_uri()])


def test_a_timed_out_worker_is_replaced_at_once_and_its_start_up_is_not_the_next_calls_time(tmp_path):
    """After a call past its bound the worker is started again straight away (its imports are paid
    while the server waits), and the next call's bound counts from the moment that worker is ready:
    a fresh worker's start-up used to count against the call after a timeout, which then timed out
    too, call after call."""
    import time

    from tracetriage.mcp_work import AnalyzeRequest
    from tracetriage.mcp_worker import Worker

    class Quiet:  # the Context the worker reports progress to
        async def report_progress(self, *args):
            return None

    settings = {"cache_dir": None, "nsys": None}
    analyses = Worker()
    analyses.start()
    try:
        request = AnalyzeRequest(paths=[str(BUNDLES / "eager_decode")])
        late = asyncio.run(analyses.call(Quiet(), "analyze", request, settings, 0.0))
        assert _error(late)["exit_code"] == EXIT_TIMEOUT
        assert analyses.process is not None and analyses.process.is_alive()  # replaced, before any call
        assert not analyses.ready
        waited = time.monotonic()
        while not analyses.ready and time.monotonic() - waited < 120:  # it gets ready on its own
            if analyses.conn.poll(0.1):
                analyses.ready = analyses.conn.recv()[0] == "ready"
        assert analyses.ready
        answer = asyncio.run(analyses.call(Quiet(), "analyze", request, settings, 120.0))
        assert not answer.is_error, _error(answer)
    finally:
        analyses.stop()


def test_one_kind_of_mistake_has_one_error_class(session):
    """A missing input (analyze), a batch_dir that is not there (trend) and a glob that matches nothing (batch):
    each exit code 3 with the same specific class, never the base class TraceTriageError (trial 43 item 9)."""
    classes = {call: _error(session[call])["error_class"] for call in ("missing_input", "no_batch_dir", "batch_nomatch")}
    assert set(classes.values()) == {"UnsupportedInputError"}, classes
    assert all(_error(session[call])["exit_code"] == EXIT_INPUT for call in classes)
    assert "the pattern matches no file" in _error(session["batch_nomatch"])["error"]


def _batch(session, call) -> dict:
    result = session[call]
    assert not result.is_error, result.content[0].text
    return result.structured_content


def test_batch_takes_the_clis_reports_values_and_still_its_boolean(session):
    """reports "none" writes no report.html (as --reports none) and lists each case with its findings;
    true keeps its meaning: every report.html written, each case listed with its paths; false lists none."""
    none, listed, plain = (_batch(session, call) for call in ("batch_none", "batch_listed", "batch_plain"))
    for data, wrote in ((none, False), (listed, True), (plain, True)):
        outdir = Path(data["outdir"])
        for record in data["records"]:
            assert (outdir / "cases" / record["case_id"] / "report.html").is_file() is wrote, record
            assert (outdir / "cases" / record["case_id"] / "analysis.json").is_file()
    for data in (none, listed):
        for record in data["records"]:
            assert record["findings"] and record["report_json"] == f"cases/{record['case_id']}/analysis.json"
            assert record["report_html"] == (f"cases/{record['case_id']}/report.html" if data is listed else None)
    assert all("findings" not in record and "report_html" not in record for record in plain["records"])
    error = _error(session["batch_bad_reports"])
    assert error["exit_code"] == EXIT_USAGE and error["error_class"] == "UsageError"
    assert error["error"].count("reports") == 1 and "valid boolean or 'all', 'failed' or 'none'" in error["error"], error


def test_a_batch_record_names_its_top_finding_by_title_and_by_id(session):
    """top_finding is the top finding's title (as before); top_finding_id is its id, what summary.parquet's
    top_finding column holds (trial 43 item 11)."""
    import pandas as pd

    data = _batch(session, "batch_none")
    table = pd.read_parquet(Path(data["outdir"]) / "summary.parquet").set_index("case_id")
    assert len(data["records"]) == len(table) == 2
    for record in data["records"]:
        analysis = json.loads((Path(data["outdir"]) / "cases" / record["case_id"] / "analysis.json").read_text())
        top = analysis["findings"][0]
        assert (record["top_finding"], record["top_finding_id"]) == (top["title"], top["id"])
        assert table.loc[record["case_id"], "top_finding"] == record["top_finding_id"]


def test_batch_progress_counts_the_cases(session):
    """batch's notifications: cases done of cases in all, one as each ends, never seconds against the
    time bound (trial 43 item 7); the progress increases with each one, as the protocol wants."""
    for call in ("batch_none", "batch_listed"):
        cases = len(_batch(session, call)["records"])
        notes = session["progress_of"][call]
        assert notes[0] == (0, None, "batch: started"), notes
        assert notes[1:] == [(done, cases, f"batch: {done} of {cases} cases done") for done in range(1, cases + 1)], notes
