"""Records of the side artifacts' blocks of the analysis contract: the node's topology, the NCCL
logs, and the host profile (py-spy) with its hot frames."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CrossingGroup:
    """A process group and the NVLink islands it spans, with its worst link."""
    group: list[int] = field(default_factory=list)  # a list, printed as the contract holds it
    islands_spanned: int = 0
    worst_link: str | None = None
    crosses_slow_link: bool = False


@dataclass(frozen=True, slots=True)
class Topology:
    """The node's topology (nvidia-smi topo -m or its AMD peer): GPUs, NICs, NVLink/fabric islands,
    NUMA nodes and CPU affinity per GPU (keyed by the GPU's index as a string), the link matrix
    (``links["GPU0"]["GPU1"]``), the process groups that cross islands, the recommended layout."""
    path: str = ""
    kind: str | None = None
    gpus: tuple[int, ...] = ()
    nics: int = 0
    islands: list[list[int]] = field(default_factory=list)  # lists, printed as the contract holds them
    numa: dict[str, int | None] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    crossing_groups: tuple[CrossingGroup, ...] = ()
    recommendation: str | None = None


@dataclass(frozen=True, slots=True)
class Communicator:
    """One NCCL communicator as its log shows it (``nnodes`` None where it was not logged)."""
    comm: str = ""
    nranks: int | None = None
    nnodes: int | None = None
    ranks_seen: int = 0
    init_complete: int = 0
    hosts: tuple[str, ...] = ()
    cuda_devs: tuple[int, ...] = ()
    network: str | None = None
    spans_nodes: bool | None = None
    mnnvl: bool | None = None


@dataclass(frozen=True, slots=True)
class SlowPath:
    """An intra-node hop that goes through the host."""
    from_dev: str = ""
    to_dev: str = ""
    via: str = ""


@dataclass(frozen=True, slots=True)
class NcclWarning:
    """One WARN line of an NCCL log."""
    host: str = ""
    pid: int | None = None
    cuda_dev: int | None = None
    location: str | None = None
    message: str = ""
    time: str | None = None


@dataclass(frozen=True, slots=True)
class NcclTests:
    """The nccl-tests table of a log: its name, rows (message sizes), ranks, bus bandwidth (GB/s)."""
    name: str | None = None
    rows: int = 0
    ranks: int = 0
    avg_busbw: float | None = None
    max_busbw: float | None = None


@dataclass(frozen=True, slots=True)
class NetPlugin:
    """The NCCL/RCCL net plugin a log shows: asked for (by NCCL_NET_PLUGIN when ``by_env``), loaded or not."""
    asked: str | None = None
    by_env: bool = False
    loaded: bool | None = None
    name: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class ProcessNet:
    """One process's network (``Using network ..``) and where the log says it."""
    host: str = ""
    pid: int | None = None
    net: str = ""
    source: str = ""


@dataclass(frozen=True, slots=True)
class Network:
    """The network transport of an NCCL log: processes per network, the plugin, the environment overrides,
    the IB probe's failures, the socket transport's interfaces."""
    nets: dict[str, int] = field(default_factory=dict)
    processes: tuple[ProcessNet, ...] = ()
    plugin: NetPlugin = NetPlugin()
    env: dict[str, str] = field(default_factory=dict)
    ib_no_device: int = 0
    verbs_missing: int = 0
    socket_interfaces: tuple[str, ...] = ()
    connection_nets: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NcclLog:
    """One NCCL (or RCCL) log: library and version, communicators, transports per hop, GPUDirect RDMA
    connections, slow hops, rings and trees, WARN lines, the nccl-tests table."""
    path: str = ""
    library: str = ""
    version: str | None = None
    lines: int | None = None
    nccl_lines: int = 0
    communicators: tuple[Communicator, ...] = ()
    transports: dict[str, int] = field(default_factory=dict)
    gdrdma_connections: int = 0
    intra_node_slow_paths: tuple[SlowPath, ...] = ()
    rings: int | None = None
    ring_orders: dict[str, tuple[int, ...]] = field(default_factory=dict)
    trees: int | None = None
    warnings: tuple[NcclWarning, ...] = ()
    colls: int | None = None
    tests: NcclTests = NcclTests()
    network: Network = Network()


@dataclass(frozen=True, slots=True)
class HotFrame:
    """A frame of the py-spy profile: inclusive, own and user-code share of the non-idle samples (%)."""
    frame: str = ""
    share_pct: float = 0.0
    self_pct: float = 0.0
    user_pct: float | None = None
    calls_sync: bool = False


@dataclass(frozen=True, slots=True)
class UserFrame:
    """A frame of the profiled program's own code, with the share of samples it holds and syncs in."""
    frame: str = ""
    function: str = ""
    share_pct: float = 0.0
    self_pct: float = 0.0
    user_pct: float | None = None
    sync_pct: float | None = None
    calls_sync: bool = False


@dataclass(frozen=True, slots=True)
class ProfileCapture:
    """One py-spy capture: its format, threads (idle ones), processes by pid."""
    path: str = ""
    format: str = ""
    threads: int = 0
    idle_threads: int = 0
    processes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ThreadSnapshot:
    """One thread of a py-spy dump: process, thread, whether idle, its innermost frame and that frame's caller."""
    pid: int | None = None
    process: str = ""
    thread: str = ""
    idle: bool = False
    frame: str = ""
    caller: str = ""


@dataclass(frozen=True, slots=True)
class HostProfile:
    """The host profile (py-spy): samples (idle ones), the user frames, the captures, a dump's threads."""
    total_samples: int = 0
    idle_samples: int = 0
    user_frames: tuple[UserFrame, ...] = ()
    captures: tuple[ProfileCapture, ...] = ()
    snapshot: tuple[ThreadSnapshot, ...] = ()
