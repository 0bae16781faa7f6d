"""The error hierarchy. Raised deep, turned into one line and an exit code in the CLI.

Each class's docstring is what it means; the message names the file and the problem.
"""

from __future__ import annotations

# Exit codes, documented in README.md. Distinct so scripts can tell them apart.
EXIT_OK = 0
EXIT_USAGE = 2          # bad command line (argparse uses 2 as well)
EXIT_INPUT = 3          # unreadable, corrupt or unsupported input file
EXIT_NOTHING = 4        # input understood, but it holds nothing to analyze
EXIT_FAIL_ON = 5        # --fail-on: a finding at or above the given severity
EXIT_BATCH_FAILED = 6   # batch: at least one case failed
EXIT_OUTPUT = 7         # the report cannot be written where -o asks (a directory, no permission)
EXIT_REGRESSED = 8      # compare --gate / trend --gate: the after capture (the latest capture) regressed
EXIT_INCONCLUSIVE = 9   # compare --gate: the two captures cannot be judged; trend --gate: no series to judge
EXIT_MEMORY = 10        # the input needs more memory to analyze than this machine has free
EXIT_INTERNAL = 70      # a bug in tracetriage (EX_SOFTWARE)


DAMAGED_CAPTURE = ("corrupt gzip", "SQLite file that cannot be read", "all zero bytes")  # how detection names a damaged capture


def is_damaged(reason: str) -> bool:
    """Whether the reason a file of a folder was set aside says it is a capture that is damaged
    (truncated, corrupt), not a file of another kind: the case then lacks a capture it was given."""
    return reason.startswith(DAMAGED_CAPTURE)


class TraceTriageError(Exception):
    """Base class of every error tracetriage reports to the user."""

    exit_code = EXIT_INPUT

    def __init__(self, path: object, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path else problem)


class UnsupportedInputError(TraceTriageError):
    """The file is not a format tracetriage reads (the message says what it looks like)."""


class TraceFormatError(TraceTriageError):
    """The file is of a known format but corrupt, truncated or internally inconsistent."""


class MissingDataError(TraceTriageError):
    """The file is valid but holds nothing that can be analyzed (e.g. no GPU activity)."""

    exit_code = EXIT_NOTHING


class UsageError(TraceTriageError, ValueError):
    """The command line (or the Python API's options) asks for something impossible."""

    exit_code = EXIT_USAGE


class OutputError(TraceTriageError):
    """The report cannot be written where the user asked (no permission, a directory, a file in the way)."""

    exit_code = EXIT_OUTPUT


class MemoryNeededError(TraceTriageError):
    """The input is readable, but analyzing it needs more memory than the process has left (said
    before reading it where the need can be told from its size, else when an allocation failed)."""

    exit_code = EXIT_MEMORY


class ArchiveError(TraceTriageError):
    """An archive was refused: unsafe member paths, links out, or too large."""


def one_line(text: str) -> str:
    """A message as one printable line: newlines, escapes and other control characters from
    file, folder or table names are shown escaped, never sent raw to the terminal."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)


def error_fields(exc: BaseException) -> tuple[str, int, str]:
    """A failure as the CLI reports it: its one line, its exit code, and the error's class."""
    if isinstance(exc, TraceTriageError):
        return f"tracetriage: error: {one_line(str(exc))}", exc.exit_code, type(exc).__name__
    return (f"tracetriage: internal error: {type(exc).__name__}: {one_line(str(exc))} (please report this)", EXIT_INTERNAL,
            type(exc).__name__)
