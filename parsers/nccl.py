"""NCCL / RCCL ``NCCL_DEBUG=INFO`` logs and nccl-tests output -> :class:`NcclLog`.

A log line is recognised wherever its NCCL part starts, so any outer prefix
(mpirun's ``[1,0]<stdout>:``, Ray/vLLM worker tags, timestamps) is ignored:
``host:pid:tid [cudaDev] [file.cc:line] NCCL INFO|WARN message``. Lines that do not
parse are skipped (truncated first lines, application output, tracebacks); a WARN
message hard-wrapped onto the next line is joined back. Nothing here raises on a
bad line: the parser keeps going.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tracetriage.parsers.common import read_text

# The lookbehind starts a match only at the start of a host token: without it, `search`
# retries the greedy host class at every offset of a long token (quadratic on a 200 kB line).
_LINE = re.compile(
    r"(?<![\w.\-])(?P<host>[\w.\-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] "
    r"(?:(?P<loc>[\w/.\-]+\.\w+:\d+) )?NCCL (?P<level>INFO|WARN|ERROR|TRACE) ?(?P<msg>.*)$"
)
_TS = re.compile(r"\[(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\]")
_VERSION = re.compile(r"\b(NCCL|RCCL) version (\S+)")
_COMM = re.compile(
    r"comm (0x[0-9a-fA-F]+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank (\d+)(?: MNNVL (\d+))?"
)
_INIT = re.compile(
    r"(?:ncclCommInitRank\w*|ncclCommSplit|ncclCommInitAll)?\s*comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) cudaDev (\d+)"
    r"(?: nvmlDev (\d+))? busId (\w+)(?: commId (0x[0-9a-fA-F]+))?.*?- Init (START|COMPLETE)"
)
_CONN = re.compile(
    r"Channel (\d+)/(\d+) : (\d+)\[(\w+)\] -> (\d+)\[(\w+)\] (?:\[(send|receive)\] )?via (.+?)\s*$"
)
_RING = re.compile(r"Channel (\d+)/(\d+) :((?:\s+\d+)+)\s*$")
_TREES = re.compile(r"Trees((?: \[\d+\] [-\d/]+->\d+->-?\d+)+)")
_COLL = re.compile(
    r"\b(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|AlltoAll): opCount (\w+) "
    r".*?count (\d+) datatype (\d+) op (\d+) root (-?\d+) comm (0x[0-9a-fA-F]+) \[nranks=(\d+)\]"
)
_TEST_ROW = re.compile(
    r"^\s*(\d+)\s+(\d+)\s+([A-Za-z]\w*)\s+(?:(\w+)\s+(-?\d+)\s+)?"
    r"([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$"
)
_TEST_RANK = re.compile(r"Rank\s+(\d+) Group\s+(\d+) Pid\s+(\d+) on (\S+) device\s+(\d+) \[([^\]]+)\] (.+?)\s*$")
_AVG_BUSBW = re.compile(r"Avg bus bandwidth\s*:\s*([\d.]+)")
_TEST_NAME = re.compile(r"\b(\w+_perf)\b")
# The network transport (NCCL's/RCCL's init.cc, net.cc, transport/net_*.cc INFO lines): the network a process
# uses ("Using network IB|Socket|AWS Libfabric|Libfabric|IBext ..."), a net's own init line ("NET/IB : Using [0]..",
# "NET/Socket : Using [0]hsn0:.."), the IB probe failing ("NET/IB : No device found.", "Failed to open
# libibverbs.so[.1]"), the net plugin asked for and whether it loaded, and the environment overrides.
_USING_NET = re.compile(r"^Using network (\S.*)$")
_NET_INIT = re.compile(r"^NET/(IB|Socket)\s*:\s*Using \[\d+\]\w")
_IB_NO_DEVICE = re.compile(r"^NET/IB\s*:\s*No device found")
_NO_VERBS = re.compile(r"^Failed to open libibverbs")
_ENV = re.compile(r"^((?:NCCL|RCCL)_\w+) set by environment to (.*)$")
_NET_ENV = re.compile(r"^(?:NCCL|RCCL)_(?:IB|NET|SOCKET|PLUGIN|COLLNET)")
_PLUGIN_ASKED = re.compile(r"^(?:NET/Plugin\s*:\s*)?Plugin name set by env to (\S+)")
_PLUGIN_PATH = re.compile(r"^Plugin Path\s*:\s*(\S+)")
_PLUGIN_LOADED = re.compile(r"^(?:NET/Plugin\s*:\s*Loaded net plugin (.+?)(?: \(v\d+\))?\s*$"
                            r"|Successfully loaded external plugin (\S+)|P2P plugin (\S+))")
_PLUGIN_FAILED = re.compile(r"^NET/Plugin\s*:\s*(?:dlerror=|Plugin load |No plugin found|Could not find|Failed to find "
                            r"ncclNetPlugin symbol)")
_PLUGIN_FAILED_NAME = re.compile(r"No plugin found \(([^)]+)\)|Plugin load \(([^)]+)\)|Could not find:? (\S+?)\.?(?:\s|$)"
                                 r"|dlerror=([^:\s]+)")


def transport_class(via: str) -> str:
    """P2P, SHM, NET, NVLS, CollNet or other, from the text after ``via``."""
    v = via.strip()
    for key in ("NVLS", "CollNet", "P2P", "SHM", "NET"):
        if v.startswith(key):
            return key
    return "other"


_VIA_NET = re.compile(r"^NET/(.+?)/\d")


def via_net(via: str) -> str | None:
    """The network of a connection through NET (``NET/IB/0/GDRDMA`` -> IB, ``NET/AWS Libfabric/0`` -> AWS Libfabric,
    ``NET/Socket/1`` -> Socket), None for P2P, SHM, NVLS or CollNet."""
    m = _VIA_NET.match(via.strip())
    return m.group(1) if m else None


@dataclass
class NcclLog:
    path: str
    library: str = "NCCL"
    version: str | None = None
    lines: int = 0
    parsed_lines: int = 0
    communicators: dict = field(default_factory=dict)  # comm pointer -> info
    connections: list = field(default_factory=list)
    rings: dict = field(default_factory=dict)  # (host, pid, channel) -> [ranks]
    trees: dict = field(default_factory=dict)  # (host, pid) -> {channel: "down0/down1/down2->rank->up"}
    warnings: list = field(default_factory=list)
    colls: list = field(default_factory=list)
    tests: dict = field(default_factory=lambda: {"name": None, "rows": [], "ranks": [], "avg_busbw": None})
    # the network transport: one row per "Using network" line (host, pid, tid, net), the nets that initialized
    # ("NET/IB|Socket : Using", with their first interface), the IB probe's failures, the net plugin and the
    # environment overrides of the network (NCCL_IB_DISABLE, NCCL_NET, NCCL_NET_PLUGIN, NCCL_SOCKET_IFNAME ...)
    nets: list = field(default_factory=list)
    net_inits: list = field(default_factory=list)
    ib_no_device: int = 0
    verbs_missing: int = 0
    plugin: dict = field(default_factory=lambda: {"asked": None, "by_env": False, "loaded": None, "name": None,
                                                  "error": None})
    net_env: dict = field(default_factory=dict)
    pending_net: dict = field(default_factory=dict)  # (host, pid, tid) -> the net of the next comm its thread inits


def parse(path: str, text: str | None = None) -> NcclLog:
    if text is None:
        text = read_text(path)
    log = NcclLog(path=str(path))
    last_warn = None
    for raw in text.splitlines():
        log.lines += 1
        line = raw.rstrip()
        try:
            last_warn = _parse_line(log, line, last_warn)
        except (ValueError, IndexError):  # a malformed field: skip the line, keep going
            last_warn = None
    return log


def _parse_line(log: NcclLog, line: str, last_warn):
    v = _VERSION.search(line)
    if v and log.version is None:
        log.library, log.version = v.group(1), v.group(2)
    m = _LINE.search(line)
    if not m:
        _parse_other_line(log, line, last_warn)
        return None
    log.parsed_lines += 1
    host, pid, dev, level, msg = m.group("host"), int(m.group("pid")), int(m.group("dev")), m.group("level"), m.group("msg")
    tid = int(m.group("tid"))
    if level in ("WARN", "ERROR"):
        ts = _TS.search(line[: m.start()] or "")
        warn = {"host": host, "pid": pid, "cuda_dev": dev, "location": m.group("loc"), "message": msg.strip(),
                "time": ts.group(1) if ts else None}
        log.warnings.append(warn)
        return warn
    if _parse_net_line(log, msg.strip(), host, pid, tid):
        return None
    c = _COMM.search(msg)
    if c:
        info = log.communicators.setdefault(c.group(1), {"ranks": {}, "init_complete": 0})
        _attach_net(log, info, host, pid, tid)
        info.update({"nranks": int(c.group(3)), "nnodes": int(c.group(4)), "local_ranks": int(c.group(5))})
        if c.group(7) is not None:
            info["mnnvl"] = int(c.group(7))
        info["ranks"].setdefault(int(c.group(2)), {}).update({"host": host, "pid": pid, "cuda_dev": dev})
        return None
    i = _INIT.search(msg)
    if i:
        info = log.communicators.setdefault(i.group(1), {"ranks": {}, "init_complete": 0})
        _attach_net(log, info, host, pid, tid)
        info["nranks"] = int(i.group(3))
        if i.group(7):
            info["comm_id"] = i.group(7)
        info["ranks"].setdefault(int(i.group(2)), {}).update(
            {"host": host, "pid": pid, "cuda_dev": int(i.group(4)), "bus_id": i.group(6)})
        if i.group(8) == "COMPLETE":
            info["init_complete"] += 1
        return None
    k = _CONN.search(msg)
    if k:
        via = k.group(8)
        log.connections.append({
            "host": host, "pid": pid, "channel": int(k.group(1)),
            "from_rank": int(k.group(3)), "from_dev": k.group(4), "to_rank": int(k.group(5)), "to_dev": k.group(6),
            "direction": k.group(7), "via": via, "transport": transport_class(via), "gdrdma": "GDRDMA" in via,
            "net": via_net(via),
        })
        return None
    r = _RING.search(msg)
    if r:
        log.rings[(host, pid, int(r.group(1)))] = [int(x) for x in r.group(3).split()]
        return None
    tr = _TREES.search(msg)
    if tr:
        log.trees[(host, pid)] = {int(ch): spec for ch, spec in re.findall(r"\[(\d+)\] (\S+)", tr.group(1))}
        return None
    co = _COLL.search(msg)
    if co:
        op = co.group(1)
        log.colls.append({"op": "AllToAll" if op == "AlltoAll" else op, "count": int(co.group(3)),
                          "datatype": int(co.group(4)), "comm": co.group(7), "nranks": int(co.group(8)),
                          "host": host, "pid": pid})
    return None


def _parse_other_line(log: NcclLog, line: str, last_warn) -> None:
    """A line without the NCCL prefix: the continuation of a hard-wrapped WARN, else nccl-tests output."""
    if (last_warn is not None and line and "NCCL" not in line and len(line) < 200
            and not line.startswith(("[", "Traceback", "  File"))):
        last_warn["message"] += " " + line.strip()  # a hard-wrapped WARN continues here
        return
    _parse_test_line(log, line)


def _parse_net_line(log: NcclLog, msg: str, host: str, pid: int, tid: int) -> bool:
    """A line about the network transport (the patterns above): recorded on ``log``; False for any other line."""
    u = _USING_NET.match(msg)
    if u:
        name = u.group(1).strip()
        log.nets.append({"host": host, "pid": pid, "tid": tid, "net": name})
        log.pending_net[(host, pid, tid)] = name
        return True
    n = _NET_INIT.match(msg)
    if n:
        log.net_inits.append({"host": host, "pid": pid, "net": n.group(1),
                              "interfaces": re.findall(r"\[\d+\]([\w.\-]+)", msg)})
        return True
    if _IB_NO_DEVICE.match(msg):
        log.ib_no_device += 1
        return True
    if _NO_VERBS.match(msg):
        log.verbs_missing += 1
        return True
    e = _ENV.match(msg)
    if e:
        if _NET_ENV.match(e.group(1)):
            value = e.group(2).strip()
            log.net_env[e.group(1)] = value[:-1] if value.endswith(".") else value  # NCCL ends most of them with "."
        return True
    return _parse_plugin_line(log.plugin, msg)


def _parse_plugin_line(plugin: dict, msg: str) -> bool:
    """A NET/Plugin line: the plugin asked for (by NCCL_NET_PLUGIN: "set by env"), loaded or not."""
    a = _PLUGIN_ASKED.match(msg) or _PLUGIN_PATH.match(msg)
    if a:
        plugin["asked"] = a.group(1)
        plugin["by_env"] = plugin["by_env"] or "set by env" in msg
        return True
    ok = _PLUGIN_LOADED.match(msg)
    if ok:
        plugin["loaded"] = True
        plugin["error"] = None
        if ok.group(1) or ok.group(3):
            plugin["name"] = ok.group(1) or ok.group(3)
        elif plugin["asked"] is None:
            plugin["asked"] = ok.group(2)
        return True
    if _PLUGIN_FAILED.match(msg):
        if not plugin["loaded"]:
            plugin["loaded"] = False
            plugin["error"] = msg[:300]
            f = _PLUGIN_FAILED_NAME.search(msg)
            if f and plugin["asked"] is None:
                plugin["asked"] = next(group for group in f.groups() if group)
        return True
    return False


def _attach_net(log: NcclLog, info: dict, host: str, pid: int, tid: int) -> None:
    """The network the thread initializing this comm pointer logged just before ("Using network X" precedes
    its Init START on the same host:pid:tid), kept on the comm's rank rows."""
    net = log.pending_net.pop((host, pid, tid), None)
    if net is not None:
        info.setdefault("nets", []).append(net)


def _parse_test_line(log: NcclLog, line: str) -> None:
    body = line.lstrip("# ").rstrip()
    t = _TEST_ROW.match(line)
    if t:
        g = t.groups()
        log.tests["rows"].append({
            "size": int(g[0]), "count": int(g[1]), "type": g[2], "redop": g[3], "root": int(g[4]) if g[4] else None,
            "oop_time_us": float(g[5]), "oop_algbw": float(g[6]), "oop_busbw": float(g[7]), "oop_wrong": g[8],
            "ip_time_us": float(g[9]), "ip_algbw": float(g[10]), "ip_busbw": float(g[11]), "ip_wrong": g[12],
        })
        return
    r = _TEST_RANK.search(body)
    if r:
        log.tests["ranks"].append({"rank": int(r.group(1)), "pid": int(r.group(3)), "host": r.group(4),
                                   "device": int(r.group(5)), "bus": r.group(6), "gpu": r.group(7)})
        return
    a = _AVG_BUSBW.search(line)
    if a:
        log.tests["avg_busbw"] = float(a.group(1))
        return
    if log.tests["name"] is None:
        n = _TEST_NAME.search(line)
        if n and ("build/" in line or "Collective test" in line or line.startswith("./")):
            log.tests["name"] = n.group(1)
