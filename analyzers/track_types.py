"""The tracks of a Perfetto export as typed columns (what analyzers/tracks.py builds and
reports/perfetto.py writes): the selected rows of each table as views with their codes, the
launch -> GPU operation flows, the slices tracetriage adds (idle gaps, their causes, the
findings' claims), the steps, per device, per trace and for the case."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tracetriage.analyzers import timeline as tl
from tracetriage.model import cat_codes


@dataclass(frozen=True, slots=True)
class Codes:
    """A categorical column: ``codes`` (-1 = missing) index ``categories``."""

    codes: np.ndarray
    categories: list

    @classmethod
    def of(cls, column: pd.Series) -> Codes:
        codes, categories = cat_codes(column)
        return cls(codes, categories)


@dataclass(frozen=True, slots=True)
class Selected:
    """The rows of a table the export holds: ``ranges`` of row positions in start order
    (``order``, None when the table is kept in start order), each [first, last)."""

    order: np.ndarray | None
    ranges: tuple[tuple[int, int], ...]
    total: int  # rows in the table

    @property
    def count(self) -> int:
        return sum(last - first for first, last in self.ranges)


@dataclass(frozen=True, slots=True)
class Flows:
    """Rows of a table that start (or end) a launch -> GPU operation flow, ascending, and each
    one's flow id (:func:`flow_keys` of its (pid, correlation): both ends carry the same)."""

    rows: np.ndarray
    ids: np.ndarray

    @classmethod
    def of(cls, rows: np.ndarray, ids: np.ndarray) -> Flows:
        order = np.argsort(rows, kind="stable")
        return cls(rows[order], ids[order])


NO_FLOWS = Flows(np.empty(0, np.int64), np.empty(0, np.int64))


@dataclass(frozen=True, slots=True)
class GpuOps:
    """The trace's GPU operations (views of its columns) and which the export holds."""

    start: np.ndarray
    end: np.ndarray
    device: np.ndarray
    stream: np.ndarray
    pid: np.ndarray
    correlation: np.ndarray
    nbytes: np.ndarray
    pageable: np.ndarray
    in_graph: np.ndarray
    is_copy: np.ndarray  # memcpy or memset: the rows that carry their bytes
    name: Codes
    kind: Codes
    collective: Codes
    copy_kind: Codes
    rows: Selected
    flows: Flows  # the rows that end a launch's flow
    kernels_by_device: dict[str, int]  # selected kernels per device id


@dataclass(frozen=True, slots=True)
class HostEvents:
    """Host-side events (API calls, or annotation ranges) and which the export holds.
    ``group`` is the API call's category or the range's domain."""

    start: np.ndarray
    end: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    correlation: np.ndarray | None  # API calls only
    name: Codes
    group: Codes
    rows: Selected
    flows: Flows  # the rows that start a flow (launch calls linked to a GPU operation)


@dataclass(frozen=True, slots=True)
class Slices:
    """Slices of one track: [start, end) and ``code``, what each is (its owner says of what)."""

    start: np.ndarray
    end: np.ndarray
    code: np.ndarray


@dataclass(frozen=True, slots=True)
class LongestGap:
    rank: int  # 1 = the longest gap of the analysis
    start_ns: int
    length_ns: int
    cause: str


@dataclass(frozen=True, slots=True)
class DeviceTracks:
    """One device's tracetriage slices. ``gaps`` code: index into timeline.GAP_CLASSES;
    ``causes`` code: index into timeline.CAUSES; ``claims`` code: index into ``claims``'s
    findings. ``batches``: cumulative row counts (claims, gaps, causes) after each batch of
    CHUNK_ROWS gaps, then the busy slices' claims: the order the export writes them in."""

    index: int
    label: str  # the analysis's device id (with the trace's prefix when a case has several)
    name: str
    gaps: Slices
    causes: Slices
    claims: Slices
    batches: np.ndarray
    claimed: dict[str, dict[str, int]]  # finding -> accounting slice -> ns, in the findings' order
    gap_ns_by_cause: dict[str, int]  # drawn gap time per cause
    claimed_ns: dict[str, int] | None  # finding -> drawn claimed ns (None: the device has no claims)
    largest_claim: dict[str, tuple[int, int]] | None  # finding -> its longest drawn slice
    longest_gaps: tuple[LongestGap, ...]  # the analysis's longest gaps that lie in the selection


@dataclass(frozen=True, slots=True)
class StepTracks:
    """One process's steps. ``exported``: the steps in the selection; ``long_exported``: those
    over LONG_STEP_X_MEDIAN x the median; ``worst``: the longest step."""

    pid: int
    source: str
    starts: np.ndarray
    ends: np.ndarray
    is_prefill: np.ndarray  # empty when the source does not tell prefill from decode
    exported: np.ndarray
    long_exported: np.ndarray
    worst: int
    worst_duration_ns: int
    worst_x_median: float  # its duration / the median step (the median at least 1 ns)
    worst_exported: bool


@dataclass(frozen=True, slots=True)
class Window:
    """The analysis window of one trace, as the Analysis states it."""

    start_ns: int
    end_ns: int
    source: str | None
    warmup_steps_excluded: int | None
    setup_excluded_ns: int | None
    first_ns: int  # the first GPU operation or API call (the window's start at the latest)
    last_ns: int  # the last GPU operation's end (the window's end at the earliest)


@dataclass(frozen=True, slots=True)
class TraceTracks:
    path: str
    prefix: str  # "<index>:" when the case has several traces, else ""
    window: Window
    spans: tuple[tuple[int, int], ...]  # the selection: time spans, in order
    spans_text: str
    process_names: dict[int, str]
    gpu: GpuOps
    api: HostEvents
    ranges: HostEvents
    devices: tuple[DeviceTracks, ...]
    steps: tuple[StepTracks, ...]  # processes with steps, by pid


@dataclass(frozen=True, slots=True)
class Tracks:
    """Everything a Perfetto export of one case draws besides the Analysis's own findings."""

    mode: str  # all | steady | worst-steps
    worst_steps: int
    traces: tuple[TraceTracks, ...]
    gap_classes: tuple[str, ...] = tl.GAP_CLASSES  # what a gap's code names
    causes: tuple[str, ...] = tl.CAUSES  # what a cause piece's code names
