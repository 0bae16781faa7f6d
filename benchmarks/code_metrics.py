"""Code metrics of the package, for issue 31's closing note: per folder the string-key look-ups per 100
lines, the largest modules, and (with radon installed) the functions over a cyclomatic complexity.

A string-key look-up is a subscript by a string literal (``x["k"]``, read or written) or a ``.get``
call whose first argument is a string literal (``x.get("k")``, ``x.get("k", default)``). Lines are
physical lines of the folder's ``.py`` files (tests excluded: they live in tests/).

    python benchmarks/code_metrics.py                     # analyzers, reports, tracetriage (+ parsers, not in the total)
    python benchmarks/code_metrics.py analyzers --json    # one folder, machine-readable
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COUNTED = ("analyzers", "reports", "tracetriage")  # parsers read dict-shaped inputs: shown, not in the total
SHOWN = COUNTED + ("parsers",)
MODULE_MAX_LINES = 600
COMPLEXITY_MAX = 25


def string_key_lookups(tree: ast.AST) -> list[str]:
    """The string keys looked up in a module's syntax tree, one entry per look-up."""
    keys = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            keys.append(node.slice.value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            keys.append(node.args[0].value)
    return keys


def complex_functions(source: str, path: str, limit: int) -> list[dict] | None:
    """Functions of one module over cyclomatic ``limit`` (radon), or None without radon."""
    try:
        from radon.complexity import cc_visit
    except ImportError:
        return None
    out = []
    for block in cc_visit(source):
        if block.complexity > limit:
            out.append({"module": path, "function": block.fullname, "line": block.lineno, "complexity": block.complexity})
    return out


def folder_metrics(folder: Path, limit: int) -> dict:
    """Look-ups, lines and modules of one folder (recursively)."""
    modules, keys, complex_ = [], [], []
    radon = True
    for path in sorted(folder.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        rel = str(path.relative_to(ROOT))
        found = string_key_lookups(ast.parse(source, rel))
        modules.append({"module": rel, "lines": source.count("\n") + (not source.endswith("\n") and bool(source)),
                        "lookups": len(found)})
        keys += found
        got = complex_functions(source, rel, limit)
        radon = radon and got is not None
        complex_ += got or []
    lines = sum(m["lines"] for m in modules)
    return {"folder": folder.name, "lines": lines, "lookups": len(keys), "distinct_keys": len(set(keys)),
            "lookups_per_100_lines": round(100.0 * len(keys) / lines, 1) if lines else 0.0,
            "modules": sorted(modules, key=lambda m: -m["lines"]),
            "complex_functions": sorted(complex_, key=lambda f: -f["complexity"]) if radon else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", default=list(SHOWN), help="folders under the repository root")
    ap.add_argument("--json", action="store_true", help="print the metrics as JSON")
    ap.add_argument("--complexity", type=int, default=COMPLEXITY_MAX, help="list functions over this cyclomatic complexity")
    args = ap.parse_args(argv)
    result = [folder_metrics(ROOT / name, args.complexity) for name in args.folders]
    counted = [r for r in result if r["folder"] in COUNTED]
    lines, lookups = sum(r["lines"] for r in counted), sum(r["lookups"] for r in counted)
    total = {"folders": [r["folder"] for r in counted], "lines": lines, "lookups": lookups,
             "lookups_per_100_lines": round(100.0 * lookups / lines, 1) if lines else 0.0}
    if args.json:
        print(json.dumps({"folders": result, "total": total}, indent=2))
        return 0
    for r in result:
        print(f"{r['folder']}: {r['lookups']} string-key look-ups ({r['distinct_keys']} keys) in {r['lines']} lines = "
              f"{r['lookups_per_100_lines']} per 100 lines")
        for m in r["modules"]:
            if m["lines"] > MODULE_MAX_LINES:
                print(f"  over {MODULE_MAX_LINES} lines: {m['module']} {m['lines']}")
        if r["complex_functions"] is None:
            print("  (radon not installed: no complexity)")
        else:
            for f in r["complex_functions"]:
                print(f"  cyclomatic {f['complexity']}: {f['module']}:{f['line']} {f['function']}")
    print(f"total ({', '.join(total['folders'])}): {lookups} look-ups in {lines} lines = {total['lookups_per_100_lines']} "
          "per 100 lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
