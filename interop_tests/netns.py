"""Hosts on a private LAN for the multi-host fault tests: Linux network namespaces joined by veth
pairs through a bridge, all made by the test and all torn down by it.

::

    with Lan() as lan:                       # a switch: its own namespace holding a bridge
        gw = lan.host("gateway")             # a namespace, eth0 = 10.231.0.2/24 on the switch
        srv = lan.host("server")             # 10.231.0.3
        proc = srv.popen([PY, "-m", ...])    # ``ip netns exec``; killed at teardown
        lan.unplug(srv)                      # its switch port goes down (carrier lost)
        lan.plug(srv)
        lan.silence(srv)                     # the port drops every frame, both ways, carrier up
        lan.unsilence(srv)
        text = gw.call(read_something)       # run a function in a thread inside the namespace

Nothing is created in the caller's namespace: the bridge lives in a switch namespace of its own,
so the private subnet (default 10.231.0.0/24) cannot collide with the machine's networks or with
another run's (names carry the process id and a counter: parallel runs never share one).
Teardown kills the processes started through :meth:`Host.popen` and deletes every namespace,
whatever the test did; a run killed before its teardown leaves namespaces whose names the next
run deletes (only the names: it never signals processes it did not start).

A silent link is the bridge port's STP state ``disabled``: every frame to and from that host is
dropped while both carriers stay up (no ``tc netem`` needed, which some kernels lack). Unplugging
is the switch-side veth going down: the host sees its carrier go, its peers see nothing.

:func:`unavailable` says why namespaces cannot be made here (no ``ip``, no CAP_NET_ADMIN), for
a skip.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import itertools
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

PREFIX = "gwtest"  #: every namespace this module makes is named ``gwtest-<pid>-<n>-<role>``
SUBNET = "10.231.0.0/24"
NETNS_DIR = "/run/netns"
_CLONE_NEWNET = 0x40000000
_counter = itertools.count()
_probe: list[str | None] = []


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def unavailable() -> str | None:
    """Why network namespaces cannot be made here (None: they can). Tried once per process:
    ``ip netns add`` needs CAP_NET_ADMIN and a writable /run/netns."""
    if _probe:
        return _probe[0]
    reason: str | None = None
    missing = [tool for tool in ("ip", "bridge") if shutil.which(tool) is None]
    if missing:
        reason = f"{' and '.join(missing)} not installed (Debian: iproute2)"
    else:
        name = f"{PREFIX}-{os.getpid()}-probe"
        made = _ip("netns", "add", name, check=False)
        if made.returncode != 0:
            reason = f"cannot make a network namespace (ip netns add: {made.stderr.strip()})"
        else:
            _ip("netns", "del", name, check=False)
    _probe.append(reason)
    return reason


def _forget_dead_runs() -> None:
    """Delete the names of namespaces left by runs that died before their teardown."""
    listed = _ip("netns", "list", check=False).stdout.split()
    for name in listed:
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        pid = int(parts[1])
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            _ip("netns", "del", name, check=False)
        except PermissionError:
            pass


class Host:
    """One namespace on the LAN: ``address`` on its ``eth0``, loopback up."""

    def __init__(self, lan: Lan, role: str, ns: str, address: str, port: str) -> None:
        self.lan, self.role, self.ns, self.address, self.port = lan, role, ns, address, port
        self.procs: list[subprocess.Popen[Any]] = []

    def __repr__(self) -> str:
        return f"Host({self.role} {self.address} ns={self.ns})"

    def exec_argv(self, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside this host (``ip netns exec`` execs it: same pid, same signals)."""
        return ["ip", "netns", "exec", self.ns, *argv]

    def popen(self, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` in this host; it is killed at the LAN's teardown if still running."""
        proc = subprocess.Popen(self.exec_argv(argv), **kw)
        self.procs.append(proc)
        return proc

    def run(self, *argv: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.exec_argv(argv), capture_output=True, text=True,
                              timeout=timeout)

    def call(self, fn: Callable[..., T], *args: Any, timeout: float = 20) -> T:
        """``fn(*args)`` in a new thread that entered this namespace (``setns``): sockets it
        opens are this host's. The thread ends with the call; the caller's stays where it is."""
        out: list[Any] = []
        failed: list[BaseException] = []

        def run() -> None:
            try:
                fd = os.open(f"{NETNS_DIR}/{self.ns}", os.O_RDONLY)
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    if libc.setns(fd, _CLONE_NEWNET) != 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"setns {self.ns}: {os.strerror(err)}")
                finally:
                    os.close(fd)
                out.append(fn(*args))
            except BaseException as exc:  # handed to the caller
                failed.append(exc)

        thread = threading.Thread(target=run, name=f"in-{self.role}", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"{fn!r} in {self.role} took over {timeout}s")
        if failed:
            raise failed[0]
        return out[0]  # type: ignore[no-any-return]

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)


class Lan:
    """A switch and its hosts; a context manager that always tears everything down."""

    def __init__(self, subnet: str = SUBNET) -> None:
        reason = unavailable()
        if reason:
            raise RuntimeError(reason)
        _forget_dead_runs()
        self.tag = f"{PREFIX}-{os.getpid()}-{next(_counter)}"
        self.net = ipaddress.ip_network(subnet)
        self._addresses = self.net.hosts()
        next(self._addresses)  # .1 stays free (a router's address, by habit)
        self.hosts: list[Host] = []
        self.switch = f"{self.tag}-switch"
        self._namespaces: list[str] = []
        self._add_ns(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")

    def _add_ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def host(self, role: str) -> Host:
        """A new host named ``role`` with the next free address of the subnet."""
        index = len(self.hosts)
        ns = f"{self.tag}-{role}"
        address = str(next(self._addresses))
        port = f"p{index}"  # the switch-side end, in the switch's namespace
        self._add_ns(ns)
        _ip("link", "add", port, "netns", self.switch, "type", "veth",
            "peer", "name", "eth0", "netns", ns)
        _ip("-n", self.switch, "link", "set", port, "master", "br0")
        _ip("-n", self.switch, "link", "set", port, "up")
        _ip("-n", ns, "addr", "add", f"{address}/{self.net.prefixlen}", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        host = Host(self, role, ns, address, port)
        self.hosts.append(host)
        return host

    # -- faults ----------------------------------------------------------------------------
    def unplug(self, host: Host) -> None:
        """The host's cable is pulled at the switch: its carrier goes, nothing reaches it."""
        _ip("-n", self.switch, "link", "set", host.port, "down")

    def plug(self, host: Host) -> None:
        _ip("-n", self.switch, "link", "set", host.port, "up")

    def silence(self, host: Host) -> None:
        """Every frame to and from ``host`` is dropped at the switch; carriers stay up, so
        neither end notices anything but silence (a link that drops packets silently)."""
        self._port_state(host, "0")

    def unsilence(self, host: Host) -> None:
        self._port_state(host, "3")  # forwarding

    def _port_state(self, host: Host, state: str) -> None:
        result = subprocess.run(["bridge", "-n", self.switch, "link", "set", "dev", host.port,
                                 "state", state], capture_output=True, text=True, timeout=20)
        if result.returncode != 0:
            raise RuntimeError(f"bridge link set {host.port} state {state}: {result.stderr}")

    # -- teardown ------------------------------------------------------------------------------
    def close(self) -> None:
        for host in self.hosts:
            host.kill_all()
        for name in reversed(self._namespaces):  # hosts first (their veths go), then the switch
            _ip("netns", "del", name, check=False)
        self._namespaces.clear()

    def __enter__(self) -> Lan:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def leftovers() -> list[str]:
    """Namespaces of this process still listed (a test checks that teardown left none)."""
    mine = f"{PREFIX}-{os.getpid()}-"
    return [n for n in _ip("netns", "list", check=False).stdout.split() if n.startswith(mine)]
