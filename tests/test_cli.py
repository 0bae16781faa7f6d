import json

import pytest
from conftest import BUNDLES, run_cli, run_cli_process

from tracetriage.cli import build_parser
from tracetriage.errors import EXIT_FAIL_ON


def test_every_command_has_help():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        assert p.description or p.format_help(), name
        assert any(a.help for a in sub._choices_actions if a.dest == name), f"{name} has no help text"


@pytest.mark.parametrize("fmt", ["text", "json", "md", "html"])
def test_analyze_formats(fmt, tmp_path):
    out = tmp_path / f"r.{fmt}"
    proc = run_cli("analyze", BUNDLES / "eager_decode", "--format", fmt, "-o", out)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "launch_bound" in text or "Launch-bound" in text


def test_fail_on(tmp_path):
    # a subprocess: the exit status of `python -m tracetriage` itself (run() ends the process with os._exit)
    assert run_cli_process("analyze", BUNDLES / "eager_decode", "--fail-on", "high").returncode == EXIT_FAIL_ON
    assert run_cli_process("analyze", BUNDLES / "healthy", "--fail-on", "low").returncode == 0


@pytest.mark.parametrize("args", [("analyze", BUNDLES / "eager_decode", "-f", "json"),
                                  ("analyze", BUNDLES / "healthy", "--bogus"), ("analyze", BUNDLES / "missing.sqlite")])
def test_in_process_cli_is_the_process(args):
    """run_cli (main in this process) gives what `python -m tracetriage` gives: exit status and every byte
    of standard output and error, for a report, a usage error (argparse's SystemExit) and an input error."""
    in_process = run_cli(*args)
    # a subprocess: the reference run_cli is checked against
    process = run_cli_process(*args)
    assert (in_process.returncode, in_process.stdout, in_process.stderr) == (process.returncode, process.stdout, process.stderr)


def test_step_range_option():
    proc = run_cli("analyze", BUNDLES / "prefill_stall", "--step-range", "^decode_step$", "-f", "json")
    data = json.loads(proc.stdout)
    p = data["processes"][0]
    assert p["steps"]["source"] == "nvtx" and p["steps"]["count"] == 55  # 60 steps, 5 of them prefill
    # a regex that names no range: said as such, never "no periodic sync" on a capture that has one
    miss = json.loads(run_cli("analyze", BUNDLES / "eager_decode", "--step-range", "nomatch", "-f", "json").stdout)
    steps = next(a for a in miss["abstentions"] if a["analysis"] == "steps")
    assert "--step-range 'nomatch' matched no annotation range" in steps["reason"]
    assert "periodic sync" not in steps["reason"] and "nsys" not in steps["capture_hint"]


def test_output_path_problems_are_one_line_exit_7(tmp_path):
    """-o into a missing folder makes it (as batch -o does); what cannot be written is exit 7,
    not 3 (3 is an unreadable input)."""
    from conftest import BUNDLES, run_cli

    p = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path / "missing" / "dir" / "r.html")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "missing" / "dir" / "r.html").read_text().startswith("<!DOCTYPE html>")
    p = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path)
    assert p.returncode == 7 and "is a directory" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    (tmp_path / "afile").write_text("x")
    p = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path / "afile" / "r.html")
    assert p.returncode == 7 and "afile is a file, not a folder" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert "internal error" not in p.stderr


def test_unknown_output_extension_is_usage_error(tmp_path):
    from conftest import BUNDLES, run_cli

    p = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path / "r.pdf")
    assert p.returncode == 2 and ".html" in p.stderr and "json" in p.stderr and not (tmp_path / "r.pdf").exists()
    p = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path / "r.pdf", "--format", "md")
    assert p.returncode == 0 and (tmp_path / "r.pdf").read_text().startswith("#")
    p = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path / "r.txt")
    assert p.returncode == 0 and "VERDICT" in (tmp_path / "r.txt").read_text()


def test_perfetto_options_are_never_silently_ignored(tmp_path):
    """A window without an export, or a report written into a file named as a Perfetto trace,
    is refused before any analysis (exit 2), and nothing is written."""
    window_alone = run_cli("analyze", BUNDLES / "healthy", "--perfetto-window", "all")
    assert window_alone.returncode == 2 and "add --perfetto FILE" in window_alone.stderr
    assert run_cli("batch", BUNDLES / "healthy", "-o", tmp_path / "b", "--perfetto-window", "all").returncode == 2
    assert not (tmp_path / "b").exists()
    html_in_trace = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path / "x.pftrace", "-f", "html")
    assert html_in_trace.returncode == 2 and "names a Perfetto trace" in html_in_trace.stderr
    assert not (tmp_path / "x.pftrace").exists()
    trace_in_html = run_cli("analyze", BUNDLES / "healthy", "-f", "perfetto", "-o", tmp_path / "x.html")
    assert trace_in_html.returncode == 2 and "binary trace" in trace_in_html.stderr and not (tmp_path / "x.html").exists()
    ok = run_cli("analyze", BUNDLES / "healthy", "-o", tmp_path / "x.pftrace", "--perfetto-window", "worst-steps", "2")
    assert ok.returncode == 0 and (tmp_path / "x.pftrace").stat().st_size > 0


def test_perfetto_conflict_names_what_was_given(tmp_path):
    """--perfetto F with a .pftrace -o (no --format): the refusal names -o, never a
    "--format perfetto" the user did not give (new-user trial)."""
    named = run_cli("analyze", BUNDLES / "healthy", "--perfetto", tmp_path / "a.pftrace", "-o", tmp_path / "b.pftrace")
    assert named.returncode == 2 and "--format" not in named.stderr and "b.pftrace (a Perfetto file name)" in named.stderr
    formatted = run_cli("analyze", BUNDLES / "healthy", "--perfetto", tmp_path / "a.pftrace", "-f", "perfetto",
                        "-o", tmp_path / "b.pftrace")
    assert formatted.returncode == 2 and formatted.stderr.count("--format perfetto") == 1
    assert not list(tmp_path.iterdir())


def test_a_path_given_twice_is_read_once(tmp_path):
    """``analyze X X`` (or ``X ./X/``) is X, not two runs refused as "not one run" (new-user trial)."""
    once = run_cli("analyze", BUNDLES / "healthy", "-f", "json")
    twice = run_cli("analyze", BUNDLES / "healthy", f"{BUNDLES / 'healthy'}/", "-f", "json")
    assert once.returncode == twice.returncode == 0, twice.stderr
    a, b = json.loads(once.stdout), json.loads(twice.stdout)
    assert len(b["inputs"]) == len(a["inputs"]) and b["headline"] == a["headline"]
    file = BUNDLES / "eager_decode" / "trace.sqlite"
    assert run_cli("analyze", file, file).returncode == 0
    inside = run_cli("analyze", BUNDLES / "healthy", BUNDLES / "healthy" / "trace.sqlite", "-f", "json")  # the folder reads it
    assert inside.returncode == 0, inside.stderr
    assert json.loads(inside.stdout)["headline"] == a["headline"]


def test_unrelated_traces_in_one_analyze_are_a_usage_error(tmp_path):
    from conftest import real

    a = real("nsys", "nsys2026.2_2xH100_torchrun_nccl_flashattn_window300ms.sqlite")
    b = real("nsys", "nsys2026.2_2xH100_fastvideo_sp2_pytorch_window1s.sqlite")
    p = run_cli("analyze", a, b)
    assert p.returncode == 2 and "tracetriage batch" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    r0 = real("kineto", "hta_trace_filter_sampled_rank0.json.gz")
    r1 = real("kineto", "hta_trace_filter_sampled_rank1.json.gz")
    assert run_cli("analyze", r0, r1).returncode == 0  # two ranks of one run: one case


def test_batch_case_ids_are_readable():
    from tracetriage.batches import _case_id

    for label in ("../shared/samples/real/nccl/nccl_log.txt", "/captures/a/b/trace.sqlite", "x.tar.gz!/bundle/trace.sqlite"):
        cid = _case_id(label)
        assert not cid.startswith((".", "_")) and len(cid) <= 70
        head = cid.rsplit("-", 1)[0]
        assert label.replace("/", "_").replace("!", "").endswith(head.replace("_", "_")) or head.split("_")[-1] in label


def test_a_path_without_a_command_suggests_analyze():
    from conftest import BUNDLES, run_cli

    p = run_cli(BUNDLES / "healthy")
    assert p.returncode == 2 and "did you mean tracetriage analyze" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def _bar_lines(monkeypatch, argv: list[str], tty: bool = True) -> list[str]:
    """The progress bar's lines on a stderr that is (or is not) a terminal while ``tracetriage ARGV`` runs
    (its 2 s threshold set to 0, so a small bundle draws it)."""
    import io
    import sys

    from tracetriage import cli, cli_output

    class Terminal(io.StringIO):
        def isatty(self):
            return tty

    err = Terminal()
    monkeypatch.setattr(cli_output, "PROGRESS_AFTER_S", 0.0)
    monkeypatch.setattr(sys, "stderr", err)
    assert cli.main(argv) == 0
    return [ln for ln in err.getvalue().replace("\r", "\n").splitlines() if "reading and analyzing" in ln]


@pytest.mark.parametrize("tty,fmt,shown", [(True, "text", True), (True, "json", False), (False, "text", False)])
def test_progress_bar_only_on_a_terminal_and_never_in_json(tty, fmt, shown, monkeypatch, capsys):
    """A long analysis shows a terminal user a progress bar of its stages on stderr (reading the
    trace, measuring it, writing the report), cleared when it ends; JSON and piped or CI output
    never get it."""
    drawn = _bar_lines(monkeypatch, ["analyze", str(BUNDLES / "eager_decode"), "--format", fmt, "--no-cache"], tty)
    if shown:
        assert any(": measuring trace.sqlite" in ln for ln in drawn), drawn
        assert any(": writing the report" in ln and "stages" in ln for ln in drawn), drawn
    else:
        assert drawn == []
    capsys.readouterr()


def test_compare_of_two_captures_shows_the_bar_of_both(monkeypatch, capsys):
    """compare analyzes two captures (minutes on big ones): the same bar names each side's stages."""
    before, after = BUNDLES / "eager_decode" / "trace.sqlite", BUNDLES / "graph_decode" / "trace.sqlite"
    drawn = _bar_lines(monkeypatch, ["compare", str(before), str(after), "--no-cache"])
    assert any("measuring trace.sqlite" in ln and "/5 stages" in ln for ln in drawn), drawn  # 2 traces x 2 + the report
    assert any(": writing the report" in ln for ln in drawn), drawn
    capsys.readouterr()


def test_mcp_without_the_sdk_is_one_line(monkeypatch):
    """`tracetriage mcp` where the mcp extra is not installed: a usage error naming the install, not an ImportError."""
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "mcp" else find_spec(name, *rest))
    proc = run_cli("mcp")
    assert proc.returncode == 2
    assert proc.stderr == "tracetriage: error: tracetriage mcp needs the MCP SDK: pip install 'tracetriage[mcp]'\n"
