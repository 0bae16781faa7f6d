"""The :class:`Analysis` a case's analysis returns, in a module of its own so that code which only
reads saved analyses (``compare``, ``trend``, the library API's import) does not load the analyzers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Analysis:
    data: dict
    series: dict = field(default_factory=dict)

    @property
    def findings(self) -> list[dict]:
        return self.data["findings"]

    @property
    def headline(self) -> str:
        return self.data["headline"]
