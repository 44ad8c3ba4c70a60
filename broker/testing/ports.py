"""Free loopback ports for the servers tests start (brokers, ZooKeeper, Kafka, proxies).

A port is picked before its server binds it, sometimes seconds before (a cluster's brokers are
given each other's ports up front). `bind(0)` hands out a port of the kernel's ephemeral range,
which every outgoing connection of every client in the meantime draws from too, so a picked port
could be taken before its server starts ("Address already in use"). Ports are therefore picked at
random below the ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`), where nothing takes
one unasked, checked free with a bind, and never handed out twice by one process.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_LOWEST = 10_000
_handed_out: set[tuple[int, int]] = set()
_lock = threading.Lock()


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    """A loopback port of `kind` (TCP or UDP) that no socket holds now and this process has not
    handed out before."""
    top = _ephemeral_start()
    with _lock:
        for _ in range(200 if top - _LOWEST > 1_000 else 0):
            port = random.randrange(_LOWEST, top)
            if (kind, port) in _handed_out or not _bindable(kind, port):
                continue
            _handed_out.add((kind, port))
            return port
        while True:  # no room below the ephemeral range: the kernel's pick, still never twice
            with socket.socket(socket.AF_INET, kind) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if (kind, port) not in _handed_out:
                _handed_out.add((kind, port))
                return port


def _bindable(kind: int, port: int) -> bool:
    with socket.socket(socket.AF_INET, kind) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
