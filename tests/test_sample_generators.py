"""The sample generators' command lines: what --help says, what they refuse (samples/gen_efficiency.py,
samples/generate.py)."""

import sys

import pytest
from conftest import ROOT

from tracetriage import analyze, open_case

sys.path.insert(0, str(ROOT / "samples"))
import gen_efficiency  # noqa: E402
import generate  # noqa: E402


def test_gen_efficiency_help_names_both_formats_and_the_scenarios(capsys):
    with pytest.raises(SystemExit) as exc:
        gen_efficiency.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "Kineto" in out and "nsys" in out and "--format {kineto,nsys,both}" in out and "(default: both)" in out
    assert all(name in out for name in gen_efficiency.scenarios())
    assert "(default: None)" not in out


def test_gen_efficiency_unknown_scenario_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        gen_efficiency.main(["--out", str(tmp_path), "--only", "nonexistent"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "nonexistent" in err and all(name in err for name in gen_efficiency.scenarios())
    assert not list(tmp_path.iterdir())


def test_gen_efficiency_writes_nsys_from_the_command_line(tmp_path, capsys):
    gen_efficiency.main(["--out", str(tmp_path), "--only", "gemm_slow", "--format", "nsys"])
    assert capsys.readouterr().out.split() == [str(tmp_path / "efficiency_gemm_slow_nsys")]
    a = analyze(open_case([tmp_path / "efficiency_gemm_slow_nsys" / "trace.sqlite"]))
    assert a.data["inputs"][0]["kind"] == "nsys" and a.findings[0]["id"] == "below_roofline"
    gen_efficiency.main(["--out", str(tmp_path), "--only", "gemm_slow"])  # default: both formats, apart
    assert sorted(p.name for p in tmp_path.iterdir()) == ["efficiency_gemm_slow", "efficiency_gemm_slow_nsys", "truth"]
    assert sorted(p.name for p in (tmp_path / "truth").iterdir()) == ["efficiency_gemm_slow.json",
                                                                     "efficiency_gemm_slow_nsys.json"]
    assert not list(tmp_path.glob("efficiency_*/truth.json"))  # the truth is outside each bundle (trial item 5)


def test_generate_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        generate.main(["--help"])
    out = capsys.readouterr().out
    assert "(default: 7)" in out and "default: 13)" in out and "default: 6)" in out


@pytest.mark.parametrize("argv,word", [
    (["--nightly", "10"], "--switch-at 13"),  # the default switch after the last night: no regression
    (["--nightly", "5", "--switch-at", "1"], "--switch-at 1"),
    (["--nightly", "5", "--switch-at", "0", "--outlier-at", "9"], "--outlier-at 9"),
])
def test_generate_nightly_without_a_regression_is_a_usage_error(argv, word, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        generate.main([*argv, "--out", str(tmp_path / "n")])
    assert exc.value.code == 2 and word in capsys.readouterr().err
    assert not (tmp_path / "n").exists()
