"""gateway.engine.writes: write coalescing. Messages a pipe dispatches write into per-pipe buffers;
the buffers go out once every read of the loop iteration ran (one write per pipe), and a
direct write never overtakes what a pipe still holds."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway.engine.options import SocketOptions
from gateway.engine.pipe import Pipe, pipe_class


class Transport:
    """Records every write (stands for asyncio's transport)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0


class Codec:
    """Hands out queued messages (one frame each) and encodes a message as its frames."""

    partial = False

    def __init__(self) -> None:
        self.queue: list[tuple[bytes, ...]] = []

    def receive_data(self, data: bytes) -> None:
        self.queue.append((data,))

    def next_event(self) -> Any:
        return self.queue.pop(0) if self.queue else None

    def data_to_send(self) -> bytes:
        return b""

    def send_message(self, parts: tuple[bytes, ...]) -> bytes:
        return b"".join(parts)


class Forwarding:
    """An owner that writes every message it gets to ``target`` (as a device does)."""

    def __init__(self, target: Pipe) -> None:
        self.target = target

    def pipe_messages(self, pipe: Pipe, batch: list[tuple[bytes, ...]]) -> None:
        for parts in batch:
            self.target.write_frames(parts)


def _pipe(owner: Any) -> tuple[Pipe, Transport]:
    pipe = pipe_class()(owner, Codec(), "zmtp", "test", SocketOptions())
    transport = Transport()
    pipe.transport = transport  # type: ignore[assignment]
    return pipe, transport


def test_reads_of_one_iteration_share_one_write_per_pipe() -> None:
    async def main() -> None:
        back, wire = _pipe(None)
        clients = [_pipe(Forwarding(back))[0] for _ in range(3)]
        for i, client in enumerate(clients):  # three reads in the same loop iteration
            client.data_received(b"r%d;" % i)
        assert wire.writes == []  # held until every read of this iteration ran
        await asyncio.sleep(0)
        assert wire.writes == [b"r0;r1;r2;"]
        clients[0].data_received(b"r3;")
        await asyncio.sleep(0)
        assert wire.writes == [b"r0;r1;r2;", b"r3;"]

    asyncio.run(main())


def test_a_direct_write_comes_after_what_the_pipe_holds() -> None:
    async def main() -> None:
        back, wire = _pipe(None)
        client, _ = _pipe(Forwarding(back))
        client.data_received(b"first;")
        back.write_frames((b"second;",))  # outside a batch (an application's send)
        assert wire.writes == [b"first;", b"second;"]
        await asyncio.sleep(0)
        assert wire.writes == [b"first;", b"second;"]  # nothing written twice

    asyncio.run(main())


def test_a_loop_closed_before_its_flush_does_not_stop_the_next_one() -> None:
    loop = asyncio.new_event_loop()
    back, old_wire = _pipe(None)
    client, _ = _pipe(Forwarding(back))

    def read_then_stop() -> None:
        client.data_received(b"x;")  # its flush is scheduled for the next iteration...
        loop.stop()  # ...which never comes

    loop.call_soon(read_then_stop)
    loop.run_forever()
    loop.close()
    assert old_wire.writes == []

    async def second() -> None:
        back, wire = _pipe(None)
        client, _ = _pipe(Forwarding(back))
        client.data_received(b"y;")
        await asyncio.sleep(0)
        assert wire.writes == [b"y;"]

    asyncio.run(second())


class Replying(Codec):
    """A codec with bytes of its own to send after a read (a PONG to a PING)."""

    def data_to_send(self) -> bytes:
        return b"pong;"


class Echo:
    """An owner that answers each message on the pipe it came from (a ROUTER's reply)."""

    def pipe_messages(self, pipe: Pipe, batch: list[tuple[bytes, ...]]) -> None:
        for parts in batch:
            pipe.write_frames(parts)


def test_the_codecs_own_bytes_go_after_the_messages_the_pipe_holds() -> None:
    """A CURVE peer refuses a nonce lower than the last one: a PONG sealed after a message must
    not overtake it on the wire."""

    async def main() -> None:
        pipe = pipe_class()(Echo(), Replying(), "zmtp", "test", SocketOptions())
        wire = Transport()
        pipe.transport = wire  # type: ignore[assignment]
        pipe.data_received(b"msg;")
        await asyncio.sleep(0)
        assert wire.writes == [b"msg;pong;"]

    asyncio.run(main())


def test_each_thread_coalesces_on_its_own_loop() -> None:
    """Two threads, a loop each, both forwarding at once: a pipe takes its thread's batch at
    ``connection_made`` (in the loop's thread), so neither thread flushes, holds or counts the
    other's writes."""
    import threading

    from gateway.engine.writes import thread_batch as _thread_batch

    class Connection(Transport):
        def set_write_buffer_limits(self, high: int, low: int) -> None:
            pass

        def get_extra_info(self, key: str, default: Any = None) -> Any:
            return default

    class Greeting(Codec):
        def initiate(self) -> bytes:
            return b""

    def connected(owner: Any) -> tuple[Pipe, Connection]:
        pipe, transport = (pipe_class()(owner, Greeting(), "zmtp", "test", SocketOptions()),
                           Connection())
        pipe.connection_made(transport)  # type: ignore[arg-type]
        return pipe, transport

    results: dict[str, list[bytes]] = {}
    batches: dict[str, object] = {}
    both = threading.Barrier(2, timeout=10)

    def run(name: str) -> None:
        async def main() -> None:
            back, wire = connected(None)
            client, _ = connected(Forwarding(back))
            batches[name] = client._batch
            both.wait()  # both threads hold their reads' writes at the same time
            client.data_received(name.encode() + b"1;")
            client.data_received(name.encode() + b"2;")
            held = [w for w in wire.writes if w]
            await asyncio.sleep(0)
            results[name] = held + [w for w in wire.writes if w]

        asyncio.run(main())

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {"a": [b"a1;a2;"], "b": [b"b1;b2;"]}
    assert batches["a"] is not batches["b"] and _thread_batch() not in batches.values()
