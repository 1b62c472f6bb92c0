"""A native socket's endpoints: :meth:`Endpoints.bind` listens through the transport (its
connections pass the socket's :class:`~gateway.engine.listener.Admission` when they arrive),
:meth:`Endpoints.connect` starts a :class:`~gateway.engine.dialer.Dialer`; both make
:class:`~gateway.engine.pipe.Pipe` s with the wire codec the registry and the transport's
declared framing say, and the security mechanism of the socket's options. What a transport
allows is checked once per endpoint (:func:`gateway.settings.checks.transport_rules`)."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from gateway.engine.codecs import make_codec
from gateway.engine.dialer import Dialer
from gateway.engine.listener import Admission
from gateway.engine.pipe import Pipe, PipeOwner, pipe_class
from gateway.errors import ConfigError, TransportError
from gateway.logging import get_logger
from gateway.patterns.pairing import SP_ONLY_KINDS
from gateway.plugins import WireSpec, registry
from gateway.security import hook_authenticator
from gateway.settings.checks import transport_rules
from gateway.transport import TransportSpec
from gateway.url import Endpoint, parse
from gateway.wire.sniff import ANY

log = get_logger("gateway.engine")


class Endpoints:
    """The listeners and dialers of one socket (``owner``), and the pipes they made."""

    def __init__(self, owner: PipeOwner, kind: str, raw: bool, options: Any,
                 admission: Admission) -> None:
        self.owner = owner
        self.kind = kind
        self.raw = raw
        self.options = options
        self.name = options.name
        self.admission = admission
        self.pipes: set[Pipe] = set()
        self.closed = False
        self._listeners: list[Any] = []
        self._dialers: list[Dialer] = []

    def _endpoint(self, url: str) -> tuple[Endpoint, WireSpec, TransportSpec]:
        reg = registry()
        ep = parse(url, transports=frozenset(reg.transports))
        if ep.backend not in (None, "native"):
            raise ConfigError(f"{url}: a native Socket cannot use backend={ep.backend}")
        if ep.options:
            raise ConfigError(f"{ep.url}: settings go to the Socket (gateway.Socket(..., "
                              f"{ep.options[0][0]}=...)), not to its URLs")
        transport = reg.transport(ep.transport)
        errors = transport_rules(ep.family, ep.transport, transport,
                                 secured=self.options.security is not None,
                                 tls=self.options.tls is not None,
                                 sp_only_kind=self.kind in SP_ONLY_KINDS,
                                 curve=getattr(self.options.security, "mechanism", "") == "CURVE",
                                 origin=self.options.origin is not None,
                                 buffers=self.options.buffers.explicit)
        if errors:
            raise ConfigError("\n".join(f"{ep.url}: {e}" for e in errors))
        if ep.family == ANY:
            return ep, WireSpec(ANY, ANY, reg.wire("zmtp").codec_factory), transport
        return ep, reg.wire_for(ep.family, transport.framing), transport

    def bind(self, url: str) -> str:
        """Listen on ``url`` now; return it with the real address (``:0`` -> the real port)."""
        ep, wire, transport = self._endpoint(url)
        asyncio.get_running_loop()  # a clear error outside asyncio
        shown = [ep.url]  # accepted pipes log the real address, not ":0"
        opts = self.options
        try:
            listener = transport.listen(
                ep.address, lambda: self.new_pipe(wire, transport, shown[0], ep.address,
                                                  accepted=True),
                backlog=opts.backlog, keepalive=opts.keepalive, buffers=opts.buffers,
                tls=opts.tls)
        except OSError as exc:
            raise TransportError(f"cannot bind {url}: {exc.strerror or exc}") from exc
        self._listeners.append(listener)
        real = shown[0] = ep.with_address(listener.address).url
        log.info("listening", url=real, socket=self.name)
        return real

    def connect(self, url: str) -> None:
        """Dial ``url`` in the background, redialling with backoff until closed."""
        ep, wire, transport = self._endpoint(url)
        if ep.family == ANY:
            raise ConfigError(f"{ep.url}: any+ listens for both wires; a dial says which: "
                              f"zmq+{ep.transport}:// or sp+{ep.transport}://")
        asyncio.get_running_loop()
        self._dialers.append(Dialer(
            ep.url, ep.address, transport, self.options,
            partial(self.new_pipe, wire, transport, ep.url, ep.address), self.name))

    def new_pipe(self, wire: WireSpec, transport: TransportSpec, endpoint: str, address: str,
                 lost: asyncio.Future[bool] | None = None, accepted: bool = False) -> Pipe:
        opts = self.options
        pipe: Pipe
        if wire.family == ANY:
            pipe = pipe_class(sniffing=True)(self.owner, partial(self._codec_of, transport),
                                             endpoint, opts)
        else:
            made: list[Pipe] = []  # the authenticator asks the pipe for the peer's address
            mechanism = None
            if opts.security is not None:
                mechanism = opts.security.mechanism_for(hook_authenticator(
                    opts.security, self.name, lambda: made[0].peer if made else ""))
            codec = make_codec(wire.codec_factory, wire.family, self.kind, self.raw,
                               identity=opts.identity, max_message_size=opts.max_message_size,
                               transport=transport, mechanism=mechanism, address=address,
                               client=not accepted, origins=opts.origin)
            pipe = pipe_class()(self.owner, codec, wire.family, endpoint, opts, lost)
            made.append(pipe)
        if accepted:
            pipe.admit = self.admission.admit
        if self.closed:
            pipe.close(0)  # aborts as soon as it is connected
        else:
            self.pipes.add(pipe)
        return pipe

    def _codec_of(self, transport: TransportSpec, family: str) -> Any:
        """A codec of ``family`` for a pipe of an ``any+`` listener (no security there)."""
        return make_codec(registry().wire_for(family).codec_factory, family, self.kind,
                          self.raw, identity=self.options.identity,
                          max_message_size=self.options.max_message_size, transport=transport)

    def close(self, linger: float) -> None:
        """Close listeners, dialers and pipes (pending writes get ``linger`` seconds)."""
        self.closed = True
        for listener in self._listeners:
            listener.close()
        for dialer in self._dialers:
            dialer.close()
        for pipe in list(self.pipes):
            pipe.close(linger)


__all__ = ["Endpoints"]
