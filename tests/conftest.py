import json
import os
import sqlite3
import subprocess
import sys
import tempfile
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
REAL = (ROOT.parent / "shared" / "samples" / "real").resolve()
SCHEMA_SQL = ROOT / "samples" / "nsys_schema.sql"


def real(fmt: str, name: str) -> Path:
    path = REAL / fmt / name
    if not path.exists():
        pytest.skip(f"real sample {fmt}/{name} not present (../shared/samples/real is absent in this checkout)")
    return path


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
    return sorted(p.name for p in BUNDLES.iterdir() if (p / "truth.json").exists())


def truth(name):
    return json.loads((BUNDLES / name / "truth.json").read_text())


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tracetriage", *map(str, args)], capture_output=True, text=True, cwd=cwd)


@pytest.fixture(scope="session")
def analyses():
    """Analysis of every committed bundle, computed once."""
    from tracetriage import analyze, open_case

    return {name: analyze(open_case([BUNDLES / name])) for name in bundle_names()}


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.json from the current analysis (on purpose, then review the diff)")


def open_in_chromium(html_path, screenshot=None):
    """Open a written HTML file in headless Chromium (Debian's, through playwright); return
    (visible text, console errors, requested URLs) and save a full-page screenshot. Skips
    when playwright or Chromium is missing (.ci/run installs both)."""
    import os
    import shutil

    pw = pytest.importorskip("playwright.sync_api", reason="playwright not installed (.ci/run installs it)")
    exe = next((c for c in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if os.path.exists(c)), None) or shutil.which("chromium")
    if not exe:
        pytest.skip("Debian chromium not installed (.ci/run installs it)")
    errors, requests = [], []
    with pw.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                                                                 "--disable-background-networking"])
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(Path(html_path).resolve().as_uri())
        page.wait_for_load_state("load")
        text = page.inner_text("body")
        if screenshot:
            (ROOT / "test-artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / "test-artifacts" / screenshot), full_page=True)
        browser.close()
    return text, errors, requests
