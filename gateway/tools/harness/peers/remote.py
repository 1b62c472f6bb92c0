"""Peers in a process of their own (:mod:`~gateway.tools.harness.peers.peerd`), for the
implementations that cannot live in the matrix's process: other generations of libzmq and nng
than the ones it imports, and libraries with a runtime of their own.

Each implementation has a :class:`Runtime`: the peer program's driver, the interpreter that
runs it and the packages that interpreter needs. ``python -m gateway.tools.harness.peers.remote
install`` makes the virtual environments (``make env`` runs it) under :func:`peers_dir`; an
implementation whose interpreter or package is missing on a machine is *unavailable*, with the
reason (:func:`unavailable`), and the matrix reports its cells as skipped with that reason.
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.tools.harness.peers import SERVER_ID, Peer, Reply, Security, Seen, remaining
from gateway.tools.harness.procs import Proc, Unavailable

PEERD = Path(__file__).with_name("peerd.py")


@dataclass(frozen=True)
class Runtime:
    """How to run one implementation's peers: ``driver`` of the peer program, the interpreter
    (``base``: ``self`` for the running one, a command name such as ``python3.6``, or a path),
    and ``packages`` to install into a virtual environment made from it (none: the
    interpreter as it is, its packages from Debian: ``apt``)."""

    impl: str
    wire: str
    driver: str
    base: str
    packages: tuple[str, ...] = ()
    apt: str = ""
    what: str = ""  # the wire implementation inside, for people
    kinds: frozenset[str] = frozenset()

    @property
    def venv(self) -> Path:
        return peers_dir() / self.impl

    def python(self) -> str | None:
        """The interpreter that runs this implementation's peer program (None: not here)."""
        if not self.packages:
            return find_python(self.base)
        exe = self.venv / "bin" / "python"
        return str(exe) if exe.is_file() else None


_ZMTP_KINDS = frozenset({"REQ", "REP", "DEALER", "ROUTER", "PUB", "SUB", "XPUB", "XSUB",
                         "PUSH", "PULL", "PAIR"})
_SP_KINDS = frozenset({"REQ", "REP", "PUB", "SUB", "PUSH", "PULL", "PAIR0", "PAIR1"})

RUNTIMES: dict[str, Runtime] = {r.impl: r for r in (
    Runtime("libzmq-4.3.4", "zmq", "pyzmq", "/usr/bin/python3", apt="python3-zmq",
            what="libzmq 4.3.4 (Debian's libzmq5, through Debian's python3-zmq)",
            kinds=_ZMTP_KINDS),
    Runtime("libzmq-4.1", "zmq", "pyzmq", "python3.6", ("pyzmq==16.0.4",),
            what="libzmq 4.1.6, bundled in pyzmq 16.0.4 on Python 3.6: ZMTP 3.0, no heartbeats",
            kinds=_ZMTP_KINDS),
    Runtime("omq", "zmq", "pyomq", "self", ("pyomq==0.21.0",),
            what="omq.rs 0.21 (a ZeroMQ implementation in Rust, its own ZMTP code), "
                 "through pyomq", kinds=_ZMTP_KINDS),
    Runtime("nng-2.0", "sp", "nng", "self", ("nng==0.2.0",),
            what="nng 2.0.0-dev, bundled in python-nng 0.2.0", kinds=_SP_KINDS),
    Runtime("nng-1.1", "sp", "pynng", "python3.7", ("pynng==0.4.1",),
            what="nng 1.1.1, bundled in pynng 0.4.1 on Python 3.7", kinds=_SP_KINDS),
)}


def peers_dir() -> Path:
    """Where the peers' virtual environments live: ``$GATEWAY_PEERS``, else ``peers/`` in the
    running environment (``.venv/peers`` in a checkout)."""
    return Path(os.environ.get("GATEWAY_PEERS") or Path(sys.prefix) / "peers")


def find_python(base: str) -> str | None:
    """An interpreter by path or command name (``python3.6``), also among pyenv's versions."""
    if base == "self":
        return sys.executable
    if os.sep in base:
        return base if os.access(base, os.X_OK) else None
    version = base.removeprefix("python")
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv")]
    candidates = [hit for root in filter(None, roots)
                  for hit in sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"),
                                    reverse=True)]
    candidates.append(shutil.which(base) or "")  # last: a pyenv shim may name a missing one
    for exe in filter(None, candidates):
        try:
            subprocess.run([exe, "-c", "pass"], check=True, capture_output=True, timeout=30)
        except (subprocess.SubprocessError, OSError):
            continue
        return exe
    return None


_STATUS: dict[str, str | None] = {}


def unavailable(impl: str) -> str | None:
    """Why ``impl``'s peers cannot run here (None: they can); checked once per process."""
    if impl in _STATUS:
        return _STATUS[impl]
    rt = RUNTIMES[impl]
    python = rt.python()
    why: str | None = None
    if python is None:
        why = (f"{impl}: no interpreter ({rt.base})" if not rt.packages else
               f"{impl}: {rt.venv} not installed (python -m gateway.tools.harness.peers.remote "
               "install, or make env)")
    else:
        probe = subprocess.run([python, "-c", f"import {_MODULE[rt.driver]}"],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode:
            hint = f" (apt-get install {rt.apt})" if rt.apt else ""
            why = f"{impl}: {python} cannot import {_MODULE[rt.driver]}{hint}"
    _STATUS[impl] = why
    return why


_MODULE = {"pyzmq": "zmq", "pyomq": "pyomq", "pynng": "pynng", "nng": "nng"}


def install(impls: list[str] | None = None, log: Callable[[str], None] = print) -> int:
    """Make the virtual environments of the runtimes that need packages; how many failed."""
    failed = 0
    for rt in RUNTIMES.values():
        if impls and rt.impl not in impls or not rt.packages:
            continue
        base = find_python(rt.base)
        if base is None:
            log(f"peers: {rt.impl}: skipped, no {rt.base} on this machine")
            continue
        marker = rt.venv / ".installed"
        if marker.is_file() and marker.read_text() == " ".join(rt.packages):
            log(f"peers: {rt.impl}: up to date ({rt.venv})")
            continue
        log(f"peers: {rt.impl}: installing {' '.join(rt.packages)} for {base}")
        shutil.rmtree(rt.venv, ignore_errors=True)
        try:
            subprocess.run([base, "-m", "venv", str(rt.venv)], check=True, timeout=600,
                           capture_output=True)
            subprocess.run([str(rt.venv / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--disable-pip-version-check", "--only-binary=:all:", *rt.packages],
                           check=True, timeout=900, capture_output=True)
        except (subprocess.SubprocessError, OSError) as exc:
            err = getattr(exc, "stderr", b"") or b""
            log(f"peers: {rt.impl}: FAILED: {exc} {err.decode(errors='replace')[-300:]}")
            failed += 1
            continue
        marker.write_text(" ".join(rt.packages))
    return failed


class RemotePeer(Peer):
    """A socket in a peer process of its implementation's runtime (one process per peer)."""

    _seen: list[Seen]
    _serving = False
    _seq = 0

    def __init__(self, impl: str, kind: str, wire: str, side: str, workdir: str = "", *,
                 heartbeat: bool = False, sec: Security | None = None, **options: Any) -> None:
        super().__init__(impl, kind, wire, side, workdir, **options)
        why = unavailable(impl)
        if why:
            raise Unavailable(why)
        rt = RUNTIMES[impl]
        python = rt.python()
        assert python is not None
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        self.proc = Proc(f"{impl}-{side}", [python, "-I", "-u", str(PEERD), rt.driver], env=env,
                         stderr_path=os.path.join(workdir, f"{side}-{impl}.err") if workdir
                         else None)
        try:
            self.library = self.proc.wait_ready(20)
        except Unavailable as exc:  # installed, but it did not start: an error, said as such
            self.proc.stop(grace=1.0)
            raise RuntimeError(str(exc)) from None
        opts: dict[str, Any] = {"topics": [t.hex() for t in self.topics]}
        if kind in ("DEALER", "ROUTER") and side == "server":
            opts["identity"] = SERVER_ID.hex()
        if kind == "ROUTER":
            opts["router_mandatory"] = True
        if heartbeat:
            from gateway.tools.harness.peers import HEARTBEAT

            opts["heartbeat"] = [HEARTBEAT["ivl_ms"], HEARTBEAT["timeout_ms"]]
        if sec is not None and sec.zmtp:
            from gateway.tools.harness import security as keys

            opts.update(keys.remote_options(sec.zmtp, self.role, sec.bad and side == "client"))
        self._ask("open", kind=kind, side=side, options=opts)

    def _ask(self, op: str, wait: float = 10.0, **cmd: Any) -> dict[str, Any]:
        """One command and its result; a result of an earlier command this peer stopped
        waiting for (its ``seq`` is older) is skipped, not taken for this one's."""
        self._seq += 1
        deadline = time.monotonic() + wait
        try:  # a peer that does not answer is a finding (an error), not a missing runtime
            self.proc.send(op=op, sock=1, seq=self._seq, **cmd)
            while True:
                res = self.proc.result(max(0.01, deadline - time.monotonic()))
                if res.get("seq", self._seq) == self._seq:
                    break
        except Unavailable as exc:
            raise RuntimeError(f"{self.label}: {op}: {exc}") from None
        if "error" in res:
            raise RuntimeError(f"{self.label}: {op}: {res['error']}")
        return res

    def bind(self, url: str) -> str:
        return str(self._ask("bind", url=url)["url"])

    def connect(self, url: str) -> None:
        self._ask("connect", url=url)

    def evidence(self) -> str | None:
        try:
            ev = self._ask("evidence", wait=5).get("evidence")
        except RuntimeError:
            return None
        return str(ev) if ev else None

    def request(self, payload: bytes, deadline: float, abort: Callable[[], bool],
                peer_id: bytes = SERVER_ID) -> Reply | None:
        from gateway.tools.harness.peers import request_frames

        frames = request_frames(self.kind, payload, peer_id) if self.wire == "zmq" else [payload]
        res = self._ask("request", wait=remaining(deadline) + 5,
                        frames=[f.hex() for f in frames], timeout=remaining(deadline))
        if "frames" not in res:
            return None
        got = tuple(bytes.fromhex(f) for f in res["frames"])
        return Reply(body=got[-1], frames=got if self.wire == "zmq" else ())

    def serve(self, reply_fn: Callable[[bytes], bytes]) -> None:
        """The peer process answers by itself with the matrix's rule (every body byte + 1);
        ``seen`` asks it what it got."""
        self._ask("serve")
        self._serving = True

    @property  # type: ignore[override]
    def seen(self) -> list[Seen]:
        if self._serving and self.proc.alive():
            try:
                got = self._ask("seen", wait=10)["seen"]
            except RuntimeError:
                return self._seen
            self._seen = [Seen(body=bytes.fromhex(f[-1]),
                               frames=tuple(bytes.fromhex(x) for x in f[:-1])) for f in got]
        return self._seen

    @seen.setter
    def seen(self, value: list[Seen]) -> None:
        self._seen = value

    def subscribe(self, topic: bytes) -> None:
        self._ask("subscribe", topic=topic.hex())

    def unsubscribe(self, topic: bytes) -> None:
        self._ask("unsubscribe", topic=topic.hex())

    def send(self, msg: bytes) -> None:
        self._ask("send", data=msg.hex())

    def drain(self, quiet: float, deadline: float) -> list[bytes]:
        res = self._ask("drain", wait=remaining(deadline) + 5, quiet=quiet,
                        timeout=remaining(deadline))
        return [bytes.fromhex(m) for m in res["messages"]]

    def close(self) -> None:
        _ = self.seen  # what it got, before the process goes
        self._serving = False
        self.proc.stop(grace=2.0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gateway.tools.harness.peers.remote",
                                description="the matrix's peer runtimes: install or list them")
    sub = p.add_subparsers(dest="action", required=True)
    inst = sub.add_parser("install", help="make the virtual environments (idempotent)")
    inst.add_argument("impl", nargs="*", help="only these (default: all)")
    sub.add_parser("list", help="each runtime, its wire implementation and whether it runs here")
    args = p.parse_args(argv)
    if args.action == "install":
        t0 = time.monotonic()
        failed = install(args.impl or None)
        print(f"peers: done in {time.monotonic() - t0:.0f}s under {peers_dir()}"
              + (f", {failed} failed" if failed else ""))
        return 0  # a missing runtime is reported by the matrix as skipped cells, with why
    for rt in RUNTIMES.values():
        why = unavailable(rt.impl)
        print(f"{rt.impl:<14} {'ok' if why is None else 'UNAVAILABLE'}  {rt.what}"
              + (f"\n{'':<14} {why}" if why else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
