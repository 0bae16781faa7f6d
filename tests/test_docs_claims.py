"""What the README and the other set-up texts claim, checked against the checkout (trial 73cc2a3 items
1, 3, 4 and 7): the README's sample output is what the tool prints, its browser hint names the
distribution's package first, the samples' commands run from the venv a new user made, and setup.py
counts the optional extensions it builds."""

from __future__ import annotations

import re

from conftest import ROOT, run_cli


def _fenced_after(text: str, marker: str) -> list[str]:
    block = text.split(marker, 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_the_readmes_sample_output_is_what_analyze_prints():
    readme = (ROOT / "README.md").read_text()
    shown = _fenced_after(readme, "$ .venv/bin/tracetriage analyze samples/bundles/eager_decode\n")
    printed = run_cli("analyze", "samples/bundles/eager_decode", "--no-cache", cwd=ROOT).stdout
    assert len(shown) >= 8
    for line in shown:
        if line.strip() == "...":
            continue
        kept = line[:-4] if line.endswith(" ...") else line  # a long line the README elides
        assert kept in printed, line


def test_the_browser_hint_names_the_distributions_package_before_a_download():
    readme = (ROOT / "README.md").read_text()
    assert readme.index("apt-get install chromium") < readme.index("playwright install chromium")


def test_the_samples_commands_run_from_the_venv_the_readme_makes():
    text = (ROOT / "samples" / "README.md").read_text()
    commands = [line.strip() for line in text.splitlines()
                if re.match(r"^\s{4}(\S*/)?(python3?|tracetriage)\s", line)]
    assert commands and all(command.startswith(".venv/bin/") for command in commands), commands


def test_setup_counts_the_optional_extensions_it_builds():
    setup = (ROOT / "setup.py").read_text()
    count = setup.count("optional=True")
    words = {2: "Both", 3: "All three", 4: "All four"}
    assert count in words and f"{words[count]} are optional" in setup
