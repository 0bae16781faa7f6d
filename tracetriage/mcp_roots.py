"""What ``tracetriage mcp`` may touch: the roots it reads and writes under.

The roots are the client's MCP roots and the ``--root`` folders (the working directory when
neither names one). A path with a ``..`` component, or one resolving (symlinks followed) outside
every root, is refused, as is a folder holding a link out; an output is refused inside an input
folder or beside an input, so that the captures' folders stay as they were.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from tracetriage.errors import OutputError, UsageError


def uri_path(name: str) -> str:
    """A ``file://`` URI (how MCP roots are written, so assistants pass paths so too) as its path; any other name as given."""
    return unquote(urlparse(name).path) if name.startswith("file://") else name


@dataclass(frozen=True)
class Roots:
    """The folders the server reads and writes under, each resolved (symlinks followed)."""

    folders: tuple[Path, ...]

    @classmethod
    def of(cls, names) -> Roots:
        """The roots named (``--root`` values or MCP root URIs' paths), each an existing folder."""
        folders = []
        for name in names:
            folder = Path(name).expanduser()
            if not folder.is_dir():
                raise UsageError(None, f"--root {name}: not a folder")
            folders.append(folder.resolve())
        return cls(tuple(dict.fromkeys(folders)))

    @classmethod
    def granted(cls, server_roots: tuple[str, ...], client_uris: list[str]) -> Roots:
        """The ``--root`` folders and the folders of the client's MCP roots (file URIs); the working
        directory when neither names one."""
        names = list(server_roots)
        for uri in client_uris:
            if uri.startswith("file:") and Path(unquote(urlparse(uri).path)).is_dir():
                names.append(unquote(urlparse(uri).path))
        return cls.of(names or [os.getcwd()])

    def _inside(self, path: Path) -> bool:
        return any(path.is_relative_to(folder) for folder in self.folders)

    def _resolved(self, name: str) -> Path:
        """``name`` refused when it has a ``..`` component, else resolved (a relative path is taken
        from the server's working directory, as the CLI takes it); a ``file://`` URI is its path."""
        path = Path(uri_path(name)).expanduser()
        if ".." in path.parts:
            raise UsageError(None, f"{name}: a path with '..' is refused: name it under a root ({self.shown()})")
        return path.resolve()

    def shown(self) -> str:
        return ", ".join(map(str, self.folders))

    def readable(self, name: str) -> str:
        """The resolved path of an input under a root; a folder is walked and refused when a link
        inside it leads out of every root."""
        path = self._resolved(name)
        if not self._inside(path):
            raise UsageError(None, f"{name}: outside the roots this server reads ({self.shown()}): grant its folder "
                                   "as an MCP root or start the server with --root")
        if path.is_dir():
            for folder, subfolders, files in os.walk(path):
                for entry in subfolders + files:
                    linked = Path(folder) / entry
                    if linked.is_symlink() and not self._inside(linked.resolve()):
                        raise UsageError(None, f"{name}: {linked} links outside the roots this server reads "
                                               f"({self.shown()})")
        return str(path)

    def readable_inputs(self, names: list[str]) -> list[str]:
        """batch's inputs, each :meth:`readable`; a glob pattern is expanded here, so that each file
        it matches is checked (one matching nothing is passed on for batch to report)."""
        out = []
        for name in names:
            matches = sorted(glob.glob(str(self._resolved(name)))) if any(ch in name for ch in "*?[") else []
            out += [self.readable(match) for match in matches] or [self.readable(name)]
        return out

    def writable(self, name: str, inputs: list[str], argument: str = "output") -> str:
        """The resolved path of an output (the tool's ``argument``) under a root, neither an input,
        nor inside an input folder, nor in the folder of an input: the server never writes among
        the captures (a later batch over that folder would take the reports for captures, and the
        user's folders stay as they were)."""
        path = self._resolved(name)
        if not self._inside(path):
            raise OutputError(name, f"{argument} is outside the roots this server writes under ({self.shown()}): "
                                    "name a folder under one of them")
        for item in map(Path, inputs):
            if path == item:
                where = "is the input itself"
            elif item.is_dir() and path.is_relative_to(item):
                where = f"is inside the input folder {item}"
            elif path.parent == item.parent:
                where = f"is beside the input {item} (in its folder {item.parent})"
            else:
                continue
            raise OutputError(name, f"{argument} {where}: this server never writes among the captures it reads (a "
                                    f"later batch of that folder would read the outputs as captures): name an {argument} "
                                    f"outside every input, e.g. {self.suggested(item, path)}")
        return str(path)

    def suggested(self, item: Path, path: Path) -> Path:
        """An output path outside the input ``item``: beside the input folder (a folder named for the
        output), when that is still under a root, else under the first root."""
        folder = item if item.is_dir() else item.parent
        candidate = folder.parent / f"{folder.name}-{path.name}"
        return candidate if self._inside(candidate) else self.folders[0] / path.name
