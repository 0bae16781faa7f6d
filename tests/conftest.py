import contextlib
import contextvars
import functools
import io
import json
import locale
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

# The CLI caches large captures under the user's cache directory: tests use a private one.
if "TRACETRIAGE_CACHE_DIR" not in os.environ:
    import atexit
    import shutil

    os.environ["TRACETRIAGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="tracetriage-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TRACETRIAGE_CACHE_DIR"], True)

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = ROOT / "samples" / "bundles"
TRUTH = ROOT / "samples" / "truth"  # the generator's truth per bundle, outside the bundles
SCHEMA_SQL = ROOT / "samples" / "nsys_schema.sql"
# Real captures: the ones whose licence allows it are in the repository (samples/real/, with
# SOURCES.md); the rest of the project's collection sits in ../shared/samples/real when it is
# there. Tests read one view of both, the repository's copy first: a folder per format of
# links, so REAL / fmt / name and globs work as on one folder.
REAL_IN_REPO = ROOT / "samples" / "real"
REAL_SHARED = (ROOT.parent / "shared" / "samples" / "real").resolve()
REAL_SKIP = "real sample not redistributable, in the project's ../shared/samples/real only"


def _real_view() -> Path:
    import atexit
    import hashlib
    import shutil

    view = Path(tempfile.mkdtemp(prefix="tracetriage-real-"))
    atexit.register(shutil.rmtree, str(view), True)
    for source in (REAL_IN_REPO, REAL_SHARED):
        if not source.is_dir():
            continue
        for fmt in sorted(p for p in source.iterdir() if p.is_dir()):
            (view / fmt.name).mkdir(exist_ok=True)
            listed = (fmt / "SOURCES.md").read_text() if (fmt / "SOURCES.md").exists() else ""
            seen = {hashlib.sha1(p.read_bytes()).digest() for p in (view / fmt.name).iterdir()}
            # one name per capture: a file kept twice in the repository (the compare pair's "before" is
            # the collection's torchrun export) appears once, under its collection name (a row of the
            # SOURCES.md table with its git blob), as in the collection
            blob_rows = {line.split("`")[1] for line in listed.splitlines() if line.startswith("| `") and line.count("|") >= 7}
            for f in sorted((f for f in fmt.iterdir() if f.is_file()), key=lambda f: (f.name not in blob_rows, f.name)):
                digest = hashlib.sha1(f.read_bytes()).digest()
                if (view / fmt.name / f.name).exists() or digest in seen:
                    continue
                seen.add(digest)
                (view / fmt.name / f.name).symlink_to(f.resolve())
    return view


REAL = _real_view()


def real(fmt: str, name: str) -> Path:
    path = REAL / fmt / name
    if not path.exists():
        pytest.skip(f"{REAL_SKIP}: {fmt}/{name}")
    return path


def script_module(folder: str, name: str):
    """A script of the repository's ``folder`` (samples, benchmarks: scripts, not packages) imported as a module."""
    import importlib

    sys.path.insert(0, str(ROOT / folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def samples_generate():
    """The scenario generator, samples/generate.py, as a module (it is a script, not a package)."""
    return script_module("samples", "generate")


def need_real(path: Path) -> None:
    """Skip (with the reason) when a real capture named by its full path is absent."""
    if not path.exists():
        pytest.skip(f"real capture not present: {path.name}")


def analyze_cli(*args, fmt="json"):
    """``tracetriage analyze ARGS -f FMT --no-cache`` that must succeed: the JSON parsed, or the text."""
    import json

    p = run_cli("analyze", *args, "-f", fmt, "--no-cache")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout) if fmt == "json" else p.stdout


def sql(path, q):
    """Rows of ``q`` read straight from the file with sqlite3 (read-only): the independent measurement."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute(q).fetchall()
    finally:
        con.close()


def api_only_export(path, capture_types=()):
    """An nsys export in the real schema with one CUDA API call and no GPU activity tables;
    ``capture_types`` become META_DATA_CAPTURE CAPTURE_EVENT_TYPE rows."""
    con = sqlite3.connect(path)
    con.executescript(SCHEMA_SQL.read_text())
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        con.execute(f"DROP TABLE {table}")
    con.execute("INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000')")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (10, 20, 0, 16777217, 1, 1, 0, NULL)")
    con.executemany("INSERT INTO META_DATA_CAPTURE VALUES ('CAPTURE_EVENT_TYPE', ?)", [(t,) for t in capture_types])
    con.commit()
    con.close()
    return path


def bundle_names():
    """The trace bundles (a serving bundle's truth names the findings it expects instead)."""
    return sorted(p.stem for p in TRUTH.glob("*.json")
                  if (BUNDLES / p.stem).is_dir() and "expect" not in json.loads(p.read_text()))


def truth(name):
    return json.loads((TRUTH / f"{name}.json").read_text())


def run_cli(*args, cwd=None):
    """The CLI in this process: ``tracetriage.cli.main(args)`` run as a fresh ``python -m tracetriage``
    would run it, its result a ``subprocess.CompletedProcess`` (returncode, stdout, stderr as text).
    What the call changes in the process is put back after it (see :func:`_as_a_fresh_process`).
    Any analysis JSON it writes (standard output, ``-o FILE.json``, a batch folder's ``analysis.json``
    files) is checked against the schema before the test reads it."""
    from tracetriage.cli import main

    argv = [str(a) for a in args]
    stdout, stderr = _ProcessStream(sys.__stdout__, "strict"), _ProcessStream(sys.__stderr__, "backslashreplace")
    with _as_a_fresh_process(cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = contextvars.copy_context().run(main, argv)
        except SystemExit as exc:  # argparse: a usage error, --help
            code = _exit_status(exc, stderr)
    result = subprocess.CompletedProcess([sys.executable, "-m", "tracetriage", *argv], code, stdout.text(), stderr.text())
    _check_cli_outputs(argv, result, cwd)
    return result


@functools.cache
def compared(before: str, after: str) -> dict:
    """``tracetriage.compare(before, after).data``, checked against the compare contract's schema (once a pair)."""
    import tracetriage

    data = tracetriage.compare(before, after).data
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "reports" / "compare.schema.json").read_text())
    jsonschema.validate({key: value for key, value in data.items() if not key.startswith("_")}, schema)
    return data


def compare_contract(before, after, *extra, codes=(0,)) -> dict:
    """``compare BEFORE AFTER -f json EXTRA...`` in this process: its exit status one of ``codes``, its
    JSON valid against reports/compare.schema.json, returned as a dict."""
    import pytest

    proc = run_cli("compare", before, after, "-f", "json", *extra)
    assert proc.returncode in codes, (proc.returncode, proc.stderr)
    data = json.loads(proc.stdout)
    schema = json.loads((ROOT / "reports" / "compare.schema.json").read_text())
    pytest.importorskip("jsonschema").validate(data, schema)
    return data


def run_cli_process(*args, cwd=None):
    """The CLI in a subprocess (``python -m tracetriage``), for what only a process of its own shows:
    the entry point itself, signals, limits, what is read at import. Outputs checked as run_cli's."""
    result = subprocess.run([sys.executable, "-m", "tracetriage", *map(str, args)], capture_output=True, text=True, cwd=cwd)
    _check_cli_outputs([str(a) for a in args], result, cwd)
    return result


class _ProcessStream(io.TextIOWrapper):
    """A standard stream as a subprocess's pipe is: the encoding and error handler the interpreter
    gives its own stream (``like``), read back as ``subprocess.run(text=True)`` reads a pipe."""

    def __init__(self, like, errors: str):
        self.encoding_of_the_reader = locale.getpreferredencoding(False)
        super().__init__(io.BytesIO(), encoding=getattr(like, "encoding", None) or "utf-8",
                         errors=getattr(like, "errors", None) or errors)

    def isatty(self) -> bool:
        return False

    def text(self) -> str:
        self.flush()
        data = self.buffer.getvalue().decode(self.encoding_of_the_reader)
        return data.replace("\r\n", "\n").replace("\r", "\n")


def _exit_status(exc: SystemExit, stderr) -> int:
    """The exit status the interpreter gives a process that ends with ``exc``."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=stderr)
    return 1


@contextlib.contextmanager
def _as_a_fresh_process(cwd):
    """Run the CLI in ``cwd`` with the state a fresh process starts with, and put back what it changes:
    the working directory, the environment, the warnings filters (main ignores warnings) and the
    SIGTERM handler. The CLI keeps no other process state: the cache and nsys travel in its Runtime."""
    saved_cwd, saved_environ = os.getcwd(), dict(os.environ)
    saved_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        with warnings.catch_warnings():
            if cwd is not None:
                os.chdir(cwd)
            yield
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_environ)
        if saved_sigterm is not None:
            signal.signal(signal.SIGTERM, saved_sigterm)


# --- the JSON contract, checked on every analysis the suite produces -------------------------
ANALYSIS_ID = "tracetriage.analysis/1"


def analysis_validator():
    """The validator of reports/analysis.schema.json (closed: an undeclared key is an error),
    the one compare checks saved analyses with, built once per process."""
    from tracetriage.analyzers.compare_side import analysis_validator as _analysis_validator

    return _analysis_validator()


def schema_errors(doc) -> list[str]:
    """Where ``doc`` breaks the analysis schema: 'path: message' per error (empty when valid)."""
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top level)'}: {e.message[:300]}"
            for e in analysis_validator().iter_errors(doc)]


def assert_valid_analysis(doc, where: str) -> None:
    errors = schema_errors(doc)
    assert not errors, f"{where}: the analysis JSON breaks reports/analysis.schema.json: " + "; ".join(errors[:5])


def _check_cli_outputs(args: list[str], result, cwd) -> None:
    base = Path(cwd) if cwd else Path.cwd()
    if result.stdout.lstrip().startswith("{"):
        try:
            doc = json.loads(result.stdout)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and doc.get("schema") == ANALYSIS_ID:
            assert_valid_analysis(doc, f"tracetriage {' '.join(args[:3])} (standard output)")
    for flag in ("-o", "--output"):
        if flag not in args[:-1]:
            continue
        out = base / args[args.index(flag) + 1]
        files = sorted(out.rglob("analysis.json")) if out.is_dir() else [out] if out.suffix == ".json" and out.is_file() else []
        for f in files:
            try:
                doc = json.loads(f.read_text(encoding="utf-8"))
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("schema") == ANALYSIS_ID:
                assert_valid_analysis(doc, str(f))


@pytest.fixture(scope="session", autouse=True)
def every_analysis_meets_the_schema():
    """Every analysis made in this process (API, in-process CLI, fixtures) is checked against the
    schema as it is made: a key the schema does not declare fails the test that produced it."""
    from tracetriage.analyzers import analysis as module
    from tracetriage.reports.jsonout import to_dict

    real = module.analyze

    @functools.wraps(real)
    def checked(*args, **kwargs):
        result = real(*args, **kwargs)
        assert_valid_analysis(to_dict(result), "analyze()")
        return result

    module.analyze = checked
    yield
    module.analyze = real


@pytest.fixture(scope="session")
def analyses():
    """Analysis of every committed bundle, computed once."""
    from tracetriage import analyze, open_case

    return {name: analyze(open_case([BUNDLES / name])) for name in bundle_names()}


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.json from the current analysis (on purpose, then review the diff)")


BROWSER_SKIP = "no Chromium for the browser tests: install it with .venv/bin/python -m playwright install chromium"


@contextlib.contextmanager
def chromium_page(html_path, width: int = 1200):
    """A written HTML file opened in headless Chromium (Debian's, through playwright), as a page at ``width``
    px; with the console errors and requested URLs it logged. Skips when playwright or Chromium is missing
    (.ci/run installs both)."""
    import os
    import shutil

    pw = pytest.importorskip("playwright.sync_api", reason=f"{BROWSER_SKIP} (playwright not installed)")
    exe = (next((c for c in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if os.path.exists(c)), None)
           or shutil.which("chromium"))
    errors, requests = [], []
    with pw.sync_playwright() as p:
        try:  # Debian's chromium, else the one `python -m playwright install chromium` downloads
            browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                                                                     "--disable-background-networking"])
        except pw.Error as exc:
            if "Executable doesn't exist" in str(exc) or "executable" in str(exc).lower():
                pytest.skip(BROWSER_SKIP)
            raise
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(Path(html_path).resolve().as_uri())
        page.wait_for_load_state("load")
        try:
            yield page, errors, requests
        finally:
            browser.close()


def open_in_chromium(html_path, screenshot=None):
    """Open a written HTML file in headless Chromium; return (visible text, console errors, requested URLs)
    and save a full-page screenshot."""
    with chromium_page(html_path) as (page, errors, requests):
        text = page.inner_text("body")
        if screenshot:
            (ROOT / "test-artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / "test-artifacts" / screenshot), full_page=True)
    return text, errors, requests


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    """What skipped, and why, in one line: real samples that only the project's collection
    holds, a missing browser, anything else."""
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    kinds = {"real samples not redistributable (absent without ../shared/samples/real)": 0,
             "no Chromium (.venv/bin/python -m playwright install chromium)": 0, "other (each listed below)": 0}
    for rep in skipped:
        reason = str(rep.longrepr[-1]) if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if REAL_SKIP in reason or "shared/samples/real" in reason or "real sample" in reason:
            kinds["real samples not redistributable (absent without ../shared/samples/real)"] += 1
        elif BROWSER_SKIP in reason or "chromium" in reason.lower() or "playwright" in reason.lower():
            kinds["no Chromium (.venv/bin/python -m playwright install chromium)"] += 1
        else:
            kinds["other (each listed below)"] += 1
    terminalreporter.write_line(f"tracetriage: {len(skipped)} skipped: "
                                + "; ".join(f"{n} {k}" for k, n in kinds.items() if n))


def add_nsys_session(db, utc_start_ns, duration_ns):
    """Give a generated export the two tables real nsys exports record their session in."""
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT)")
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", (utc_start_ns,))
    con.execute("CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER, duration INTEGER, startTime INTEGER, stopTime INTEGER)")
    con.execute("INSERT INTO ANALYSIS_DETAILS VALUES (281474976710656, ?, 0, ?)", (duration_ns, duration_ns))
    con.commit()
    con.close()


def matrix_training(matrix_kernels, elementwise: str, pid: int, seed: int):
    """A GPU-bound training loop for the precision tests: 8 steps (NVTX/roctx ranges named step) of 120 kernels
    queued well ahead of the GPU, matrix kernels (alternating ``matrix_kernels``) of ~300 us and elementwise ones
    of ~100 us; returns the rank and the generator's own share (%) of the kernel time the matrix kernels hold."""
    import random

    generate = samples_generate()
    rng = random.Random(seed)
    rank = generate.Rank(pid=pid, device=0, program="python3 train.py")
    matrix_ns = all_ns = 0
    for _ in range(8):
        start = rank.t
        for k in range(120):
            matrix = k % 3 != 2
            dur = int(rng.uniform(250, 350) * 1_000) if matrix else int(rng.uniform(80, 120) * 1_000)
            rank.launch(matrix_kernels[k % 2] if matrix else elementwise, dur)
            rank.host(int(rng.uniform(5, 10) * 1_000))
            matrix_ns += dur * matrix
            all_ns += dur
        rank.t = max(rank.t, rank.gpu_free - 2_000 * 1_000)  # the host stays a little ahead of the GPU
        rank.nvtx.append((start, rank.t, "step"))
    return rank, 100.0 * matrix_ns / all_ns
