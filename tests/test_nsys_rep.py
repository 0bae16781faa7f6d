"""`.nsys-rep` reports exported through a stand-in `nsys` placed on PATH by the test: export and
analyze, reuse of the cached export, a changed report re-exported, a failing exporter, no exporter;
and the rocprofv3 formats that need re-capturing."""

import json
import os
import shlex
import stat
import sys
import textwrap

import pytest
from conftest import BUNDLES, run_cli

SOURCE = BUNDLES / "eager_decode" / "trace.sqlite"
HEAD = b"NVIDIA Tegra Profiler Report 2023@3@3@12345\x00\x01\x02"

STANDIN = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, shutil, sys
    args = sys.argv[1:]
    if args == ["--version"]:
        print("NVIDIA Nsight Systems version 2024.6.1.90-246160830v0")
        sys.exit(0)
    with open(os.environ["NSYS_STANDIN_LOG"], "a") as fh:
        fh.write(json.dumps(args) + "\\n")
    if os.environ.get("NSYS_STANDIN_FAIL"):
        print("Processing events...", file=sys.stderr)
        print("Error: the report is corrupted: unexpected end of stream", file=sys.stderr)
        sys.exit(1)
    out = args[args.index("--output") + 1]
    shutil.copyfile(os.environ["NSYS_STANDIN_SOURCE"], out)
""")


@pytest.fixture
def standin(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "nsys"
    exe.write_text(STANDIN)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    log = tmp_path / "calls.log"
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("NSYS_STANDIN_LOG", str(log))
    monkeypatch.setenv("NSYS_STANDIN_SOURCE", str(SOURCE))
    monkeypatch.delenv("NSYS", raising=False)
    return log


def calls(log):
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def report(tmp_path, name="report1.nsys-rep", extra=b""):
    p = tmp_path / "captures" / name
    p.parent.mkdir(exist_ok=True)
    p.write_bytes(HEAD + os.urandom(4096) + extra)
    return p


def test_export_then_analyze_with_exact_arguments(standin, tmp_path):
    rep = report(tmp_path)
    cdir = tmp_path / "cache"
    p = run_cli("analyze", rep, "-f", "json", "--cache-dir", cdir)
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    direct = json.loads(run_cli("analyze", SOURCE, "-f", "json", "--no-cache").stdout)
    assert d["headline"] == direct["headline"] and d["devices"][0]["busy_ns"] == direct["devices"][0]["busy_ns"]
    row = d["inputs"][0]
    assert row["path"] == str(rep) and row["kind"] == "nsys"
    assert row["report_version"].startswith("2023.3.3") and row["exporter_version"] == "2024.6.1.90"
    (args,) = calls(standin)
    out = args[args.index("--output") + 1]
    assert args == ["export", "--type", "sqlite", "--force-overwrite", "true", "--output", out, str(rep)]
    assert out.startswith(str(cdir / "exports")) and ".partial" in out  # written aside, then moved into place
    assert sorted(os.listdir(rep.parent)) == ["report1.nsys-rep"]  # nothing beside the report


def test_cached_export_is_reused_and_a_changed_report_is_exported_again(standin, tmp_path):
    rep = report(tmp_path)
    cdir = tmp_path / "cache"
    assert run_cli("analyze", rep, "--cache-dir", cdir).returncode == 0
    p = run_cli("analyze", rep, "-f", "json", "--cache-dir", cdir)
    assert p.returncode == 0 and json.loads(p.stdout)["inputs"][0]["export_reused"] is True
    assert len(calls(standin)) == 1
    with open(rep, "ab") as fh:  # the report changed
        fh.write(b"more events")
    assert run_cli("analyze", rep, "--cache-dir", cdir).returncode == 0
    assert len(calls(standin)) == 2


def test_no_cache_exports_to_a_temporary_directory(standin, tmp_path):
    rep = report(tmp_path)
    p = run_cli("analyze", rep, "--no-cache")
    assert p.returncode == 0, p.stderr
    out = calls(standin)[0][calls(standin)[0].index("--output") + 1]
    assert not os.path.exists(out) and not os.path.exists(os.path.dirname(out))


def test_failing_exporter_is_exit_3_with_its_last_error_line(standin, tmp_path, monkeypatch):
    monkeypatch.setenv("NSYS_STANDIN_FAIL", "1")
    rep = report(tmp_path)
    p = run_cli("analyze", rep, "--cache-dir", tmp_path / "cache")
    assert p.returncode == 3
    assert p.stderr.strip() == (f"tracetriage: error: {rep}: nsys export failed: "
                                "Error: the report is corrupted: unexpected end of stream")
    assert not list((tmp_path / "cache" / "exports").glob("*"))  # no partial export kept


def test_no_exporter_names_the_version_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("NSYS", raising=False)
    rep = report(tmp_path)
    p = run_cli("analyze", rep)
    assert p.returncode == 3 and len(p.stderr.strip().splitlines()) == 1
    assert "version 2023.3.3" in p.stderr
    # the command runs as printed from the user's directory: the report's folder kept (issue 25)
    out, rep_q = shlex.quote(str(rep.with_suffix(".sqlite"))), shlex.quote(str(rep))
    assert f"nsys export --type sqlite --output {out} {rep_q} and analyze {out}" in p.stderr


def test_no_exporter_quotes_paths_and_reads_the_version_not_the_format_number(tmp_path, monkeypatch):
    """Reports of 2022-2023 carry a format number ('1') after the magic and the Nsight Systems
    version further on: the message said 'version 1'; and a folder with a space must be quoted."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.delenv("NSYS", raising=False)
    d = tmp_path / "my captures"
    d.mkdir()
    rep = d / "old.nsys-rep"
    rep.write_bytes(b"NVIDIA Tegra Profiler Report 1\x00\x00\x02" + bytes(200) + b"2022.4.2.50-32196742v0" + bytes(100))
    p = run_cli("analyze", rep, cwd=tmp_path)
    assert p.returncode == 3 and len(p.stderr.strip().splitlines()) == 1
    assert "version 2022.4.2.50" in p.stderr and "version 1)" not in p.stderr
    assert f"--output '{d}/old.sqlite' '{rep}'" in p.stderr


def test_nsys_option_and_directory_and_batch(standin, tmp_path, monkeypatch):
    exe = os.path.join(os.environ["PATH"].split(os.pathsep)[0], "nsys")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    rep = report(tmp_path, "run.qdrep")
    p = run_cli("analyze", rep.parent, "--nsys", exe, "--cache-dir", tmp_path / "cache", "-f", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["inputs"][0]["report_version"] == "2023.3.3.12345"
    out = tmp_path / "batch"
    p = run_cli("batch", rep.parent, "-o", out, "--nsys", exe, "--cache-dir", tmp_path / "cache", "--jobs", "1", "--no-progress")
    assert p.returncode == 0, p.stderr
    assert "1 case: 1 analyzed" in p.stderr


@pytest.mark.parametrize("name,content,word", [
    ("trace.pftrace", b"\x0a\x12\x08\x01perfetto rocprofv3 packet" + bytes(200), "Perfetto"),
    ("trace.otf2", b"OTF2\x00\x01" + bytes(200), "OTF2"),
])
def test_recapture_formats_say_how(tmp_path, name, content, word):
    f = tmp_path / name
    f.write_bytes(content)
    p = run_cli("analyze", f)
    assert p.returncode == 3 and word in p.stderr and "--output-format rocpd" in p.stderr
