"""Every output of the CLI on every bundled and real sample, written to one folder, so that a
refactor can be checked byte for byte: run it before and after, then ``diff -r BEFORE AFTER``.

    python benchmarks/snapshot.py OUTDIR [--only SUBSTRING ...] [--jobs N] [--quick]

For each input it runs ``tracetriage analyze`` in process (``cli.main``) once per format (text,
json, md, html, perfetto) and records each run's exit code, standard output and error; then
``compare`` on before/after pairs in every format, and ``trend`` and ``batch`` on a generated
nightly archive (batch's Parquet tables are written out as CSV). Paths are relative to the
repository root, so two checkouts side by side (worktrees) give comparable outputs.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "samples" / "real"
FORMATS = ("text", "json", "md", "html")

COMPARE_PAIRS = [
    ("samples/bundles/eager_decode", "samples/bundles/graph_decode"),
    ("samples/bundles/graph_decode", "samples/bundles/eager_decode"),
    ("samples/bundles/eager_decode", "samples/bundles/eager_decode_nvtx"),
    ("samples/bundles/prefill_stall", "samples/bundles/decode_rare_prefill"),
    ("samples/bundles/serving_at_capacity", "samples/bundles/serving_healthy"),
    ("samples/bundles/tp8_cross_island", "samples/bundles/tp4_island"),
    ("samples/h200/eager_decode.json.gz", "samples/h200/graph_decode.json.gz"),
    ("samples/h200/host_sync_decode.json.gz", "samples/h200/eager_decode.json.gz"),
    ("../shared/samples/real/kineto/hta_trace_diff_control.json.gz", "../shared/samples/real/kineto/hta_trace_diff_test.json.gz"),
    ("../shared/samples/real/kineto/tracelens_h100_qwen1.5-0.5b_chat.json.gz",
     "../shared/samples/real/kineto/tracelens_mi300_qwen1.5-0.5b_chat.json.gz"),
]


def inputs() -> list[str]:
    found = sorted(f"samples/bundles/{p.name}" for p in (ROOT / "samples" / "bundles").iterdir() if p.is_dir())
    found += sorted(f"samples/h200/{p.name}" for p in (ROOT / "samples" / "h200").iterdir()
                    if p.suffix in (".gz", ".txt"))
    if SHARED.is_dir():
        found += sorted(os.path.relpath(p, ROOT) for p in SHARED.rglob("*") if p.is_file() and p.name != "SOURCES.md")
    return found


def _name(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", path.replace("../shared/samples/real/", "real/"))


def _run(argv: list[str]) -> tuple[int, str, str]:
    """``main(argv)`` in process: its exit code, stdout and stderr."""
    from tracetriage import cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


TEMP = re.compile(re.escape(tempfile.gettempdir()).encode() + rb"/tmp[A-Za-z0-9_]+")


ELAPSED = re.compile(rb"(?<=summary\.parquet )\((\d+\.)?\d+ s\)")  # batch's closing note


def _clean(data: bytes) -> bytes:
    """Temporary folders named the same in every run (their names are random), wall times masked."""
    return ELAPSED.sub(b"(<T> s)", TEMP.sub(b"<TMP>", data))


def _record(dest: Path, argv: list[str], files: dict[str, Path] | None = None) -> None:
    code, out, err = _run(argv)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "argv").write_bytes(_clean((" ".join(argv) + "\n").encode()))
    (dest / "rc").write_text(f"{code}\n")
    (dest / "stdout").write_bytes(_clean(out.encode("utf-8", "surrogateescape")))
    (dest / "stderr").write_bytes(_clean(err.encode("utf-8", "surrogateescape")))
    for name, produced in (files or {}).items():
        if produced.exists():
            (dest / name).write_bytes(_clean(produced.read_bytes()))
            produced.unlink()


def snapshot_input(path: str, outdir: str, quick: bool) -> str:
    out = Path(outdir) / "analyze" / _name(path)
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        cache = ["--cache-dir", os.path.join(tmp, "cache")]
        for fmt in FORMATS if not quick else ("text", "json"):
            produced = Path(tmp) / f"report.{fmt}"
            _record(out / fmt, ["analyze", path, "-f", fmt, "-o", str(produced), *cache], {"output": produced})
            _record(out / f"{fmt}-stdout", ["analyze", path, "-f", fmt, *cache]) if fmt == "text" else None
        if not quick:
            pf = Path(tmp) / "t.pftrace"
            _record(out / "perfetto", ["analyze", path, "-f", "perfetto", "-o", str(pf), *cache], {"output": pf})
            _record(out / "nocache-json", ["analyze", path, "-f", "json", "--no-cache"])
    return path


def snapshot_compare(pair: tuple[str, str], outdir: str, quick: bool) -> str:
    before, after = pair
    out = Path(outdir) / "compare" / f"{_name(before)}__{_name(after)}"
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        cache = ["--cache-dir", os.path.join(tmp, "cache")]
        for fmt in FORMATS if not quick else ("text",):
            produced = Path(tmp) / f"cmp.{fmt}"
            _record(out / fmt, ["compare", before, after, "-f", fmt, "-o", str(produced), "--gate", *cache],
                    {"output": produced})
        # saved analyses as inputs: compare reads the JSON contract
        saved = []
        for side, path in (("before", before), ("after", after)):
            target = Path(tmp) / f"{side}.json"
            _run(["analyze", path, "-f", "json", "-o", str(target), *cache])
            saved.append(str(target))
        _record(out / "saved-text", ["compare", *saved, "--gate", *cache])
    return before


def snapshot_archive(outdir: str, quick: bool) -> str:
    """batch and trend on a generated nightly archive (the generator is seeded: the same bytes each run).
    The archive is given by a relative path from a temporary working folder, so case names and ids
    (which follow the path) are the same in every run."""
    import subprocess

    out = Path(outdir) / "archive"
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        subprocess.run([sys.executable, str(ROOT / "samples" / "generate.py"), "--out", "nightly", "--nightly", "14"],
                       check=True, stdout=subprocess.DEVNULL)
        cache = ["--cache-dir", "cache"]
        _record(out / "batch", ["batch", "nightly", "-o", "batch", "-j", "1", "--no-progress", *cache])
        _tables(Path("batch"), out / "batch")
        for fmt in FORMATS if not quick else ("text",):
            _record(out / f"trend-{fmt}", ["trend", "batch", "-f", fmt, "-o", f"trend.{fmt}", "--gate", *cache],
                    {"output": Path(f"trend.{fmt}")})
        _record(out / "trend-stdout", ["trend", "batch", *cache])
        os.chdir(ROOT)
    return "archive"


def _tables(batch_out: Path, dest: Path) -> None:
    import pandas as pd

    for parquet in sorted(batch_out.glob("*.parquet")):
        frame = pd.read_parquet(parquet).drop(columns=["seconds"], errors="ignore")  # wall time of each case
        (dest / f"{parquet.stem}.csv").write_bytes(_clean(frame.to_csv(index=False).encode()))
    for analysis in sorted(batch_out.glob("cases/*/analysis.json")):
        (dest / f"case-{analysis.parent.name}.json").write_bytes(_clean(analysis.read_bytes()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir")
    parser.add_argument("--only", nargs="*", default=[], help="inputs whose path contains one of these")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="text and json only")
    parser.add_argument("--no-archive", action="store_true", help="leave out batch and trend")
    parser.add_argument("--archive-only", action="store_true", help="only batch and trend")
    args = parser.parse_args()
    outdir = os.path.abspath(args.outdir)
    todo = [p for p in inputs() if not args.only or any(s in p for s in args.only)] if not args.archive_only else []
    pairs = [p for p in COMPARE_PAIRS if not args.only or any(s in p[0] or s in p[1] for s in args.only)]
    pairs = [p for p in pairs if all((ROOT / side).exists() for side in p)] if not args.archive_only else []
    # one process per input: chart ids and other per-process counters start afresh, as in one CLI run,
    # so the outputs do not depend on which inputs a worker happened to run before
    with ProcessPoolExecutor(args.jobs, max_tasks_per_child=1) as pool:
        jobs = [pool.submit(snapshot_input, p, outdir, args.quick) for p in todo]
        jobs += [pool.submit(snapshot_compare, p, outdir, args.quick) for p in pairs]
        if not args.no_archive and not args.only:
            jobs.append(pool.submit(snapshot_archive, outdir, args.quick))
        for job in jobs:
            print("done", job.result(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
