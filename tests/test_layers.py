"""The import graph follows the pipeline (DESIGN.md, Layout): parsers know the model, analyzers know
the model and the parsers' types, reports render what they are given, and only the glue (CLI, API,
batch, runtime, case) wires them. Every import counts, a lazy one inside a function too: a lazy
import that reaches up a layer is the same dependency, only hidden."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Modules of tracetriage/ that depend on no layer: the trace model, the error hierarchy and small
# utilities (thread pools, allocator tuning, sort order, the version; a device's rows of the model,
# tracetriage.partition). Every layer may use them.
NEUTRAL = {"tracetriage", "tracetriage.__version__", "tracetriage.codeversion", "tracetriage.model", "tracetriage.partition",
           "tracetriage.errors", "tracetriage.threads", "tracetriage.memory", "tracetriage.order",
           "tracetriage.captured", "tracetriage.wording", "tracetriage.casenames", "tracetriage.contract",
           "tracetriage.records"}

# What each layer may import besides itself and NEUTRAL.
ALLOWED = {
    "parsers": set(),
    "analyzers": {"parsers"},
    "reports": set(),
}


def _layer(module: str) -> str:
    """The layer an imported module belongs to: parsers/analyzers/reports, a NEUTRAL module, or glue."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ("parsers", "analyzers", "reports"):
        return parts[1]
    name = ".".join(parts[:2])
    return "neutral" if name in NEUTRAL or module in NEUTRAL else f"glue ({name})"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every tracetriage import in a file, at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tracetriage"):
            # `from tracetriage import x` names a submodule or a package attribute: judge the submodule
            found += [(node.lineno, f"{node.module}.{alias.name}" if node.module == "tracetriage" else node.module)
                      for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.startswith("tracetriage")]
    return found


def _violations(folder: str) -> list[str]:
    out = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for line, module in _imports(path):
            layer = _layer(module)
            if layer in (folder, "neutral") or layer in ALLOWED[folder]:
                continue
            out.append(f"{path.relative_to(ROOT)}:{line} imports {module} ({layer})")
    return sorted(set(out))


@pytest.mark.parametrize("folder", sorted(ALLOWED))
def test_layer_imports_only_downwards(folder):
    assert _violations(folder) == []


def test_the_check_sees_a_lazy_import(tmp_path, monkeypatch):
    """A function-local import that reaches up is found (the check cannot pass by not looking)."""
    fake = tmp_path / "reports"
    fake.mkdir()
    (fake / "x.py").write_text("def f():\n    from tracetriage.analyzers import rules\n    return rules\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert _violations("reports") == ["reports/x.py:2 imports tracetriage.analyzers (analyzers)"]
