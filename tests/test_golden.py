"""Golden tests: each bundle's JSON analysis against a checked-in expected file.

Regenerate on purpose with ``python -m pytest tests/test_golden.py --update-golden``
and review the diff. Paths are made relative to the repository so the files do not
depend on where the checkout lives.
"""

import json

import pytest
from conftest import ROOT, bundle_names

from tracetriage.reports import render

GOLDEN = ROOT / "tests" / "golden"


def normalized(analysis) -> dict:
    text = render(analysis, "json").replace(str(ROOT) + "/", "")
    data = json.loads(text)
    data.pop("tool_version", None)
    return data


@pytest.mark.parametrize("name", bundle_names())
def test_golden(name, analyses, request):
    got = normalized(analyses[name])
    path = GOLDEN / f"{name}.json"
    if request.config.getoption("--update-golden"):
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=1, ensure_ascii=False) + "\n")
    if not path.exists():
        pytest.fail(f"no golden file {path.name}: run pytest tests/test_golden.py --update-golden")
    expected = json.loads(path.read_text())
    assert got == expected
