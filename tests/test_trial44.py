"""What the new-user trials of stop 43 (notes trial43.md and trial43b.md) left open, each checked through the
CLI or the library on the bundled samples: trend names a short group's captures one by one; batch --help says
its exit codes, each true to what batch exits with; a count agrees with its noun ("1 case", "1 group",
"1 GPU process"); compare writes a finding's durations as analyze does ("18.9 µs", not "0.019 ms") while its
JSON keeps its own text. (The MCP items are in tests/test_mcp.py: they need its stdio session.)"""

from __future__ import annotations

import json
import re

import pytest
from conftest import BUNDLES, run_cli
from test_view_parity_compare_trend import trend_contract

from tracetriage import errors
from tracetriage.cli_parser import BATCH_EXIT_CODES
from tracetriage.reports.trend import render_trend
from tracetriage.reports.trend_view import NAMED_IN_FULL, trend_view
from tracetriage.wording import duration_ms, duration_pair_ms, ms_text, us

THREE = ("eager_decode", "graph_decode", "healthy")


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """A batch folder of three bundled captures of one workload (too few for a series, one group)."""
    folder = tmp_path_factory.mktemp("three") / "batch"
    proc = run_cli("trend", *(BUNDLES / name for name in THREE), "--batch-dir", folder, "--order-by", "name")
    assert proc.returncode == 0, proc.stderr
    return folder


@pytest.mark.parametrize("fmt, joined", [("text", ", "), ("md", ", ")])
def test_trend_names_each_capture_of_a_group_of_three(three, fmt, joined):
    """trial43b item 4: "3 captures: eager_decode ... healthy" hid graph_decode; a short group is written out."""
    out = run_cli("trend", three, "--order-by", "name", "-f", fmt).stdout
    names = [name.replace("_", r"\_") for name in THREE] if fmt == "md" else list(THREE)
    assert f"3 captures: {joined.join(names)}" in out, out
    assert "..." not in out.split("3 captures:", 1)[1].splitlines()[0] and "…" not in out


def test_trend_says_one_group_not_group_s(three):
    out = run_cli("trend", three, "--order-by", "name").stdout
    assert out.startswith("tracetriage trend: 1 group, ordered by"), out.splitlines()[0]
    assert "group(s)" not in out


def _long_contract(extra: int) -> dict:
    """The parity test's five nightly captures and ``extra`` more nights, its first and last taken from it."""
    contract = trend_contract()
    cases = contract["groups"][0]["cases"]
    for night in range(len(cases) + 1, len(cases) + 1 + extra):
        cases.append({**cases[-1], "name": f"nightly-2026-11-{night:02d}", "label": f"2026-11-{night:02d}",
                      "case_id": f"nightly-{night:02d}"})
    for series in contract["groups"][0]["series"].values():
        series["values"] += [series["values"][-1]] * extra
    return contract


def test_a_long_group_is_named_by_its_first_and_last_capture():
    """Only a group longer than NAMED_IN_FULL is shortened, to its first and last capture."""
    short, long = trend_contract(), _long_contract(NAMED_IN_FULL + 1 - len(trend_contract()["groups"][0]["cases"]))
    for contract, cut in ((short, False), (long, True)):
        names = [case["name"] for case in contract["groups"][0]["cases"]]
        group = trend_view(contract).groups[0]
        assert group.cases_cut is cut and len(names) == NAMED_IN_FULL + cut
        assert group.named_cases == ((names[0], names[-1]) if cut else tuple(names))
        text = render_trend(contract, "text")
        said = f"{len(names)} captures: " + (f"{names[0]} ... {names[-1]}" if cut else ", ".join(names))
        assert said in text, text


def test_batch_help_lists_its_exit_codes():
    """trial43b item 6: batch --help had no exit-code line; the codes it lists are errors.py's."""
    proc = run_cli("batch", "--help")
    assert proc.returncode == 0
    assert "exit codes:" in " ".join(proc.stdout.split())
    listed = {int(code) for code in re.findall(r"(?:^|; )(\d+) ", BATCH_EXIT_CODES.split("exit codes: ", 1)[1])}
    assert listed == {errors.EXIT_OK, errors.EXIT_USAGE, errors.EXIT_INPUT, errors.EXIT_NOTHING, errors.EXIT_FAIL_ON,
                      errors.EXIT_BATCH_FAILED, errors.EXIT_OUTPUT, errors.EXIT_INTERNAL, 130}


def _help_says(code: int) -> str:
    return next(part for part in BATCH_EXIT_CODES.split("exit codes: ", 1)[1].split("; ") if part.startswith(f"{code} "))


def test_each_exit_code_batch_help_lists_is_what_batch_exits_with(tmp_path):
    """The listed codes, each met: a good case, a bad option, a missing input, a folder with no capture,
    --fail-on, a corrupt capture (a failed case), an OUTDIR with a file in the way (was exit 70, a 'bug')."""
    empty, corrupt = tmp_path / "empty", tmp_path / "corrupt"
    empty.mkdir()
    corrupt.mkdir()
    (corrupt / "trace.sqlite").write_text("a text file, not an SQLite database\n")
    (tmp_path / "a_file").write_text("in the way\n")
    healthy = BUNDLES / "healthy"
    runs = {
        errors.EXIT_OK: ("batch", healthy, "-o", tmp_path / "ok"),
        errors.EXIT_USAGE: ("batch", healthy, "-o", tmp_path / "usage", "--jobs", "0"),
        errors.EXIT_INPUT: ("batch", tmp_path / "no_such_folder", "-o", tmp_path / "missing"),
        errors.EXIT_NOTHING: ("batch", empty, "-o", tmp_path / "nothing"),
        errors.EXIT_FAIL_ON: ("batch", BUNDLES / "eager_decode", "-o", tmp_path / "fail_on", "--fail-on", "low"),
        errors.EXIT_BATCH_FAILED: ("batch", corrupt, "-o", tmp_path / "failed"),
        errors.EXIT_OUTPUT: ("batch", healthy, "-o", tmp_path / "a_file"),
    }
    for code, args in runs.items():
        proc = run_cli(*args, "--no-progress")
        assert proc.returncode == code, (code, _help_says(code), proc.stderr)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    first = run_cli(*runs[errors.EXIT_OK], "--no-progress")
    assert "tracetriage: 1 case: 0 analyzed, 1 unchanged, 0 failed" in first.stderr  # not "1 cases"
    said = run_cli(*runs[errors.EXIT_OUTPUT], "--no-progress").stderr
    assert said.startswith(f"tracetriage: error: {tmp_path / 'a_file'}: cannot make the output folder") and said.count("\n") == 1


def test_the_index_page_of_one_case_says_one_case(tmp_path):
    assert run_cli("batch", BUNDLES / "healthy", "-o", tmp_path / "out", "--no-progress").returncode == 0
    page = (tmp_path / "out" / "index.html").read_text()
    assert "tracetriage batch — 1 case<" in page and "1 cases" not in page


def test_a_pair_of_one_gpu_process_and_none_says_one_process():
    """trial43b item 2: "world size differs: 1 GPU processes before"."""
    proc = run_cli("compare", BUNDLES / "eager_decode", BUNDLES / "serving_at_capacity", "-f", "json")
    data = json.loads(proc.stdout)
    reasons = " ".join(data["comparable"]["reasons"])
    assert "1 GPU process before, 0 after" in reasons and "1 GPU processes" not in reasons


def test_duration_ms_writes_under_a_millisecond_as_analyze_does():
    for value in (0.0189, 0.0084, 0.25, 0.9994):
        assert duration_ms(value) == us(value * 1e6)
        assert duration_ms(-value) == "-" + us(value * 1e6)
    for value in (1.0, 2.1195, 4.776, 1234.5):
        assert duration_ms(value) == ms_text(value)
    assert duration_ms(None) == "not measured"


def _analysis(name: str) -> dict:
    proc = run_cli("analyze", BUNDLES / name, "-f", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _sync_idle_ns(analysis: dict) -> int:
    finding = next(f for f in analysis["findings"] if f["id"] == "host_sync_per_step")
    return next(e["value"] for e in finding["evidence"] if e["name"] == "idle_after_sync_per_step")


def _readable(fmt: str, out: str) -> str:
    """A report as a reader sees it: HTML entities and Markdown escapes undone."""
    import html

    return html.unescape(out) if fmt == "html" else re.sub(r"\\(.)", r"\1", out) if fmt == "md" else out


PAIR = BUNDLES / "eager_decode", BUNDLES / "graph_decode"


def test_compare_writes_the_host_sync_claim_as_analyze_does():
    """trial 43 item: analyze said "about 18.9 µs … per step" where compare said "0.019 ms" for the same claim.
    The text, Markdown and HTML now write it as analyze does; the JSON keeps its text and its values."""
    before, after = _analysis("eager_decode"), _analysis("graph_decode")
    said_before = us(_sync_idle_ns(before))
    assert f"about {said_before} of GPU idle per step" in json.dumps(before, ensure_ascii=False)
    data = json.loads(run_cli("compare", *PAIR, "-f", "json").stdout)
    finding = next(f for f in data["findings"] if f["id"] == "host_sync_per_step")
    claim = next(e for e in finding["evidence"] if e["name"] == "claim_ms")
    assert claim["text"] == (f"what each analysis says it claims, ms per step: {ms_text(claim['before'])} -> "
                             f"{ms_text(claim['after'])}")  # the contract as it was
    for fmt in ("text", "md", "html"):
        out = _readable(fmt, run_cli("compare", *PAIR, "-f", fmt).stdout)
        line = re.search(r"what each analysis says it claims, per step: (\S+ µs) -> (\S+ µs)", out)
        assert line, (fmt, [row for row in out.splitlines() if "claims" in row])
        assert line.group(1) == said_before, fmt  # the before side, as analyze wrote it
        # the after side: compare's claim is the analysis's claimed share x window / steps (the share kept to 3
        # decimals), analyze's the idle it took over the steps: the same figure within the contract's 0.1 µs
        assert abs(float(line.group(2).split()[0]) - _sync_idle_ns(after) / 1e3) <= 0.1 + 1e-9, fmt
        assert f"{ms_text(claim['before'])} ->" not in out, fmt


def test_a_decision_that_ends_in_its_figures_writes_them_as_its_evidence_line():
    """A status decided on the figures ("the rule no longer fires ...: its slices, ms per step: X -> Y", as
    compare_findings._status writes it) shows them as the finding's evidence line does, in every format."""
    from tracetriage.reports.compare import render_compare
    from tracetriage.reports.compare_view import compare_view

    data = json.loads(run_cli("compare", *PAIR, "-f", "json").stdout)
    finding = next(f for f in data["findings"] if f["id"] == "host_sync_per_step")
    cause = next(e for e in finding["evidence"] if e["name"] == "cause_ms")
    finding["decided_by"] = f"the rule no longer fires after the change, and its own time fell: {cause['text']}"
    shown = next(f for f in compare_view(data).findings if f.id == "host_sync_per_step")
    line = f"its slices, per step: {duration_pair_ms(cause['before'], cause['after'])}"
    assert line in shown.evidence and shown.decided_by.endswith(f"its own time fell: {line}")
    for fmt in ("text", "md", "html"):
        assert _readable(fmt, render_compare(data, fmt)).count(line) >= 2, fmt
    for evidence, text in zip(finding["evidence"], shown.evidence):  # the other figures: as the contract says them
        if not evidence["unit"].startswith("ms"):
            assert text == evidence["text"]


def test_the_librarys_batch_tells_a_callable_its_cases_as_they_end(tmp_path):
    """batch(progress=callable): (cases done, cases in all) once the cases are found and as each ends; the
    cases a re-run reuses count as done at once. A progress that is neither a flag nor a callable is refused."""
    import tracetriage
    from tracetriage.errors import UsageError

    inputs = [BUNDLES / "healthy", BUNDLES / "graph_decode"]
    told = []
    first = tracetriage.batch(inputs, tmp_path / "out", progress=lambda done, total: told.append((done, total)))
    cases = len(first.records)
    assert cases == 2 and told == [(done, cases) for done in range(cases + 1)]
    told.clear()
    again = tracetriage.batch(inputs, tmp_path / "out", progress=lambda done, total: told.append((done, total)))
    assert again.reused == cases and told == [(cases, cases)]
    with pytest.raises(UsageError, match="progress must be True or False"):
        tracetriage.batch(inputs, tmp_path / "other", progress="yes")


def test_a_before_after_pair_is_written_in_one_unit():
    """trial44u item 12: "2.120 ms -> 0.0 µs" mixed two units in one pair; µs only when both are under 1 ms."""
    assert duration_pair_ms(2.12, 0.0) == f"{ms_text(2.12)} -> {ms_text(0.0)}"
    assert duration_pair_ms(0.0189, 0.025) == f"{us(18.9e3)} -> {us(25e3)}"
    assert duration_pair_ms(None, 1.5) == f"not measured -> {ms_text(1.5)}"
    assert duration_pair_ms(None, None) == "not measured -> not measured"
