"""The soak's peer processes: servers the soak restarts, and one load process with every client.

Run as ``python -m gateway.tools.soak_peers ROLE JSON``; the first stdout line is ``READY``,
then each stdin line is a command answered with one JSON line: ``stats`` (counts so far) and
``stop`` (the load: clients finish what they have in flight, then the final counts; a server:
its counts, then it exits). EOF on stdin is ``stop``. Every loop is bounded by ``lifetime``.

Roles (``JSON`` holds the settings):

* ``rep-nng`` ``{"port"}``: a cooked nng rep0 that echoes (``re:`` + body);
* ``router-zmq`` ``{"port"}``: a libzmq ROUTER that echoes with the envelope it got;
* ``pub-zmq`` ``{"port", "rate"}``: a libzmq XPUB that publishes ``t.<seq>:...`` at ``rate``
  once a subscriber (the gateway) subscribed and the command ``go`` came, until ``stop``;
* ``pull-zmq`` ``{"port"}``: a libzmq PULL that counts what it receives;
* ``load`` ``{"reqrep": [...], "subs": {...}, "pushers": {...}, "timeout"}``: request-reply
  clients (libzmq DEALERs with request ids, nng cooked req0) that each live a random time and
  are replaced (churn; a client closes only when its request in flight ended), nng sub0
  subscribers, nng push0 pushers (also replaced, idle 0.5 s before closing).

A request ends ``ok``, ``lost`` (no reply within ``timeout``) or ``late`` (a DEALER's reply
after its timeout: counted lost first, then moved; nng's cooked req0 drops such replies itself).
"""

from __future__ import annotations

import json
import queue
import random
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

LOCAL = "127.0.0.1"


def _say(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def stdin_commands() -> queue.Queue[str]:
    """Lines of stdin, read by a daemon thread; EOF reads as ``stop``."""
    q: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            q.put(line.strip())
        q.put("stop")

    threading.Thread(target=read, daemon=True).start()
    return q


def _serve(step: Callable[[], None], stats: Callable[[], dict[str, Any]], lifetime: float,
           on_command: Callable[[str], None] | None = None) -> None:
    """Run ``step`` (which waits briefly itself) until ``stop``; every command (``stats``,
    ``stop``, or one of the role's own, given to ``on_command`` first) is answered with the
    ``stats``."""
    commands = stdin_commands()
    _say_ready()
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline:
        step()
        try:
            cmd = commands.get_nowait()
        except queue.Empty:
            continue
        if on_command is not None:
            on_command(cmd)
        _say(stats())
        if cmd == "stop":
            return


def _say_ready() -> None:
    sys.stdout.write("READY\n")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# servers

def rep_nng(cfg: dict[str, Any]) -> None:
    import pynng

    sock = pynng.Rep0(recv_timeout=50)
    sock.listen(f"tcp://{LOCAL}:{cfg['port']}")
    n = [0]

    def step() -> None:
        try:
            body = sock.recv()
        except pynng.Timeout:
            return
        sock.send(b"re:" + body)
        n[0] += 1

    _serve(step, lambda: {"replied": n[0]}, cfg.get("lifetime", 7200))
    sock.close()


def _bound(kind: int, port: int, **options: int) -> tuple[Any, Any]:
    """A libzmq context and a socket of ``kind`` bound on the local ``port``."""
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(kind)
    sock.linger = 0
    for name, value in options.items():
        sock.setsockopt(getattr(zmq, name.upper()), value)
    sock.bind(f"tcp://{LOCAL}:{port}")
    return ctx, sock


def router_zmq(cfg: dict[str, Any]) -> None:
    import zmq

    ctx, sock = _bound(zmq.ROUTER, cfg["port"])
    n = [0]

    def step() -> None:
        if not sock.poll(50, zmq.POLLIN):
            return
        frames = sock.recv_multipart()
        sock.send_multipart([*frames[:-1], b"re:" + frames[-1]])
        n[0] += 1

    _serve(step, lambda: {"replied": n[0]}, cfg.get("lifetime", 7200))
    sock.close(0)
    ctx.term()


def pub_zmq(cfg: dict[str, Any]) -> None:
    import zmq

    # no send limit: nothing dropped on this side, the gateway's counters tell the rest
    ctx, sock = _bound(zmq.XPUB, cfg["port"], sndhwm=0)
    interval = 1.0 / cfg["rate"]
    state = {"subscribed": False, "sent": 0, "next": 0.0, "running": True, "go": False}
    pad = b"." * 64

    def step() -> None:
        if sock.poll(5, zmq.POLLIN):
            sub = sock.recv()
            if sub[:1] == b"\x01" and not state["subscribed"]:
                state["subscribed"], state["next"] = True, time.monotonic()
        now = time.monotonic()
        while state["running"] and state["subscribed"] and state["go"] and state["next"] <= now:
            sock.send(b"t.%d:" % state["sent"] + pad)
            state["sent"] += 1
            state["next"] += interval
            if state["next"] < now - 1.0:
                state["next"] = now

    def command(cmd: str) -> None:
        if cmd == "go":  # the subscribers are in place: from now on every message counts
            state["go"], state["next"] = True, time.monotonic()
        elif cmd == "stop":
            state["running"] = False

    _serve(step, lambda: {"sent": state["sent"], "subscribed": state["subscribed"]},
           cfg.get("lifetime", 7200), command)
    sock.close(0)
    ctx.term()


def pull_zmq(cfg: dict[str, Any]) -> None:
    import zmq

    ctx, sock = _bound(zmq.PULL, cfg["port"])
    n = [0]

    def step() -> None:
        if sock.poll(50, zmq.POLLIN):
            while True:
                try:
                    sock.recv(zmq.NOBLOCK)
                except zmq.Again:
                    return
                n[0] += 1

    _serve(step, lambda: {"received": n[0]}, cfg.get("lifetime", 7200))
    sock.close(0)
    ctx.term()


# ---------------------------------------------------------------------------------------------
# the load

class Counts:
    """Per bridge: what its clients did; updated by their threads under one lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by: dict[str, dict[str, int]] = {}

    def add(self, bridge: str, key: str, n: int = 1) -> None:
        with self.lock:
            row = self.by.setdefault(bridge, {})
            row[key] = row.get(key, 0) + n

    def snapshot(self) -> dict[str, dict[str, int]]:
        with self.lock:
            return {b: dict(row) for b, row in self.by.items()}


class Client(threading.Thread):
    """One client slot: a client that lives a random time, then the next one, until stopped."""

    def __init__(self, bridge: str, url: str, rate: float, life: tuple[float, float],
                 counts: Counts, stop: threading.Event, timeout: float) -> None:
        super().__init__(daemon=True, name=f"{bridge}-client")
        self.bridge, self.url, self.rate, self.life = bridge, url, rate, life
        self.counts, self.stop_event, self.timeout = counts, stop, timeout

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.counts.add(self.bridge, "connections")
            self.one_life(time.monotonic() + random.uniform(*self.life))

    def one_life(self, until: float) -> None:
        raise NotImplementedError

    def ticks(self, until: float) -> Any:
        """Yield once per request slot at ``rate`` until ``until`` or the stop."""
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self.stop_event.is_set() and time.monotonic() < until:
            wait = next_at - time.monotonic()
            if wait > 0:
                self.stop_event.wait(wait)
                continue
            next_at = max(next_at + interval, time.monotonic() - 1.0)
            yield


class ZmqReqClient(Client):
    """A libzmq DEALER (delimiter + body, as a REQ), one request at a time, with ids."""

    def one_life(self, until: float) -> None:
        import zmq

        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.connect(self.url)
        seq = 0
        try:
            for _ in self.ticks(until):
                seq += 1
                tag = b"%s:%d:" % (self.name.encode(), seq)
                sock.send_multipart([b"", tag + b"x" * random.randint(10, 1000)])
                self.counts.add(self.bridge, "sent")
                deadline = time.monotonic() + self.timeout
                answered = False
                while not answered and time.monotonic() < deadline:
                    if not sock.poll(max(1, int((deadline - time.monotonic()) * 1000))):
                        break
                    body = sock.recv_multipart()[-1]
                    if body.startswith(b"re:" + tag):
                        answered = True
                    else:  # an earlier request's reply, after its timeout
                        self.counts.add(self.bridge, "late")
                        self.counts.add(self.bridge, "lost", -1)
                self.counts.add(self.bridge, "ok" if answered else "lost")
        finally:
            sock.close(0)


class NngReqClient(Client):
    """An nng cooked req0, one request at a time (no resend within the timeout)."""

    def one_life(self, until: float) -> None:
        import pynng

        sock = pynng.Req0(recv_timeout=int(self.timeout * 1000), send_timeout=2000,
                          resend_time=3_600_000)
        sock.dial(self.url, block=False)
        try:
            for _ in self.ticks(until):
                try:
                    sock.send(b"x" * random.randint(10, 1000))
                except pynng.Timeout:
                    self.counts.add(self.bridge, "unsent")  # no pipe yet: not a request
                    continue
                self.counts.add(self.bridge, "sent")
                try:
                    sock.recv()
                except pynng.Timeout:
                    self.counts.add(self.bridge, "lost")
                else:
                    self.counts.add(self.bridge, "ok")
        finally:
            sock.close()


class Pusher(Client):
    """An nng push0 sending at ``rate``; idle 0.5 s before it closes (its queue drains)."""

    def one_life(self, until: float) -> None:
        import pynng

        sock = pynng.Push0(send_timeout=2000)
        sock.dial(self.url, block=False)
        try:
            for _ in self.ticks(until):
                try:
                    sock.send(b"p:" + b"x" * random.randint(10, 1000))
                except pynng.Timeout:
                    self.counts.add(self.bridge, "unsent")
                    continue
                self.counts.add(self.bridge, "sent")
            time.sleep(0.5)
        finally:
            sock.close()


class Subscriber(threading.Thread):
    """An nng sub0 of everything, for the whole run: counts messages and gaps in sequence."""

    def __init__(self, bridge: str, url: str, counts: Counts, stop: threading.Event) -> None:
        super().__init__(daemon=True, name=f"{bridge}-sub")
        self.bridge, self.url, self.counts, self.stop_event = bridge, url, counts, stop

    def run(self) -> None:
        import pynng

        sock = pynng.Sub0(recv_timeout=100, topics=b"")
        sock.dial(self.url, block=False)
        self.counts.add(self.bridge, "subscribers")
        last = -1
        try:
            while not self.stop_event.is_set():
                try:
                    msg = sock.recv()
                except pynng.Timeout:
                    continue
                seq = int(msg[2:msg.index(b":")])
                self.counts.add(self.bridge, "received")
                if last >= 0 and seq > last + 1:
                    self.counts.add(self.bridge, "gap", seq - last - 1)
                last = seq
        finally:
            sock.close()


def load(cfg: dict[str, Any]) -> None:
    counts, stop = Counts(), threading.Event()
    timeout = cfg.get("timeout", 10.0)
    threads: list[threading.Thread] = []
    kinds = {"zmq": ZmqReqClient, "sp": NngReqClient}
    for spec in cfg.get("reqrep", []):
        for _ in range(spec["clients"]):
            threads.append(kinds[spec["wire"]](spec["bridge"], spec["url"], spec["rate"],
                                               tuple(spec["life"]), counts, stop, timeout))
    subs = cfg.get("subs")
    if subs:
        threads += [Subscriber(subs["bridge"], subs["url"], counts, stop)
                    for _ in range(subs["count"])]
    pushers = cfg.get("pushers")
    if pushers:
        threads += [Pusher(pushers["bridge"], pushers["url"], pushers["rate"],
                           tuple(pushers["life"]), counts, stop, timeout)
                    for _ in range(pushers["count"])]
    for t in threads:
        t.start()

    def finish(cmd: str) -> None:
        if cmd != "stop":
            return
        stop.set()
        for t in threads:
            t.join(timeout + 5)

    _serve(lambda: time.sleep(0.05), counts.snapshot, cfg.get("lifetime", 7200), finish)


ROLES: dict[str, Callable[[dict[str, Any]], None]] = {
    "rep-nng": rep_nng, "router-zmq": router_zmq, "pub-zmq": pub_zmq, "pull-zmq": pull_zmq,
    "load": load,
}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    ROLES[args[0]](json.loads(args[1]) if len(args) > 1 else {})


if __name__ == "__main__":
    main()
