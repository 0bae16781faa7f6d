"""Bad input: one line naming the file and the problem, a distinct exit code, no traceback."""

import shutil
import sqlite3

from conftest import BUNDLES, SCHEMA_SQL, api_only_export, run_cli

from tracetriage.errors import EXIT_INPUT, EXIT_NOTHING, EXIT_USAGE


def assert_one_line_error(proc, path, code, words):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr
    assert len(err.splitlines()) == 1, err
    assert err.startswith("tracetriage: error: ")
    assert str(path) in err
    assert words in err, err


def test_empty_file(tmp_path):
    p = tmp_path / "empty.sqlite"
    p.write_bytes(b"")
    assert_one_line_error(run_cli("analyze", p), p, EXIT_INPUT, "empty file")


def test_text_file_named_sqlite(tmp_path):
    p = tmp_path / "notes.sqlite"
    p.write_text("just some notes\nnothing to see\n")
    assert_one_line_error(run_cli("analyze", p), p, EXIT_INPUT, "not a supported input")


def test_truncated_sqlite(tmp_path):
    src = BUNDLES / "tp4_island" / "trace.sqlite"
    p = tmp_path / "truncated.sqlite"
    p.write_bytes(src.read_bytes()[: 40_000])
    proc = run_cli("analyze", p)
    assert proc.returncode == EXIT_INPUT, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert str(p) in proc.stderr


def test_sqlite_of_another_program(tmp_path):
    p = tmp_path / "app.db"
    con = sqlite3.connect(p)
    con.execute("create table users(id integer, name text)")
    con.commit()
    con.close()
    assert_one_line_error(run_cli("analyze", p), p, EXIT_INPUT, "another program (tables: users)")


def test_nsys_export_without_kernel_tables(tmp_path):
    p = api_only_export(tmp_path / "api_only.sqlite")
    assert_one_line_error(run_cli("analyze", p), p, EXIT_NOTHING, "nothing to analyze")


def test_nsys_export_with_empty_kernel_table(tmp_path):
    p = tmp_path / "empty_tables.sqlite"
    con = sqlite3.connect(p)
    con.executescript(SCHEMA_SQL.read_text())
    con.commit()
    con.close()
    assert_one_line_error(run_cli("analyze", p), p, EXIT_NOTHING, "nothing to analyze")


def test_missing_path(tmp_path):
    p = tmp_path / "nope.sqlite"
    assert_one_line_error(run_cli("analyze", p), p, EXIT_INPUT, "no such file")


def test_usage_errors():
    proc = run_cli("analyze")
    assert proc.returncode == EXIT_USAGE and "Traceback" not in proc.stderr
    proc = run_cli("analyze", BUNDLES / "healthy", "--step-range", "(")
    assert proc.returncode == EXIT_USAGE and "--step-range" in proc.stderr


def test_bundle_with_unknown_files_skips_them(tmp_path):
    b = tmp_path / "bundle"
    shutil.copytree(BUNDLES / "healthy", b)
    (b / "notes.txt").write_text("operator notes\n")
    proc = run_cli("analyze", b, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    import json

    data = json.loads(proc.stdout)
    assert {s["path"].split("/")[-1] for s in data["skipped"]} == {"notes.txt"}  # the generator's truth is not in the bundle


def test_analyze_an_archive_bundle(tmp_path):
    import tarfile

    arc = tmp_path / "incident.tgz"
    with tarfile.open(arc, "w:gz") as tf:
        tf.add(BUNDLES / "tp8_cross_island", arcname="incident")
    proc = run_cli("analyze", arc, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    import json

    data = json.loads(proc.stdout)
    assert data["findings"][0]["id"] == "cross_island_collective"
    assert all(i["path"].startswith(str(arc) + "!/incident/") for i in data["inputs"])
    assert data["topology"]["path"].startswith(str(arc) + "!")


def test_unsafe_archive_refused_by_analyze(tmp_path):
    import io
    import tarfile

    arc = tmp_path / "evil.tar.gz"
    with tarfile.open(arc, "w:gz") as tf:
        info = tarfile.TarInfo("../../evil.txt")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    proc = run_cli("analyze", arc)
    assert proc.returncode == 3 and "refused" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path.parent / "evil.txt").exists()


def test_json_nested_past_the_recursion_limit(tmp_path):
    """``json`` raises RecursionError, not JSONDecodeError, on deep nesting: still one line, input exit code."""
    p = tmp_path / "trace.json"
    p.write_text('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}")
    assert_one_line_error(run_cli("analyze", p), p, EXIT_INPUT, "nested too deeply")
