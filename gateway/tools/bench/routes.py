"""The routes measured side by side, as data.

A route = a server process, an optional middle process (``zmq.proxy``, ``nng_device`` or a
``gateway bridge``) and a client process. Servers bind on 127.0.0.1:0; middles bind their front
on 127.0.0.1:0 and dial the server (the bridge's default: FRONT binds, BACK connects).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

#: client family on the wire -> which library client speaks it
LIB_CLIENT = {"zmq": "zmq", "sp": "nng"}
#: client family on the wire -> the bench's byte-stream client (``peer_streams.StreamClient``):
#: never the bottleneck, so a route with a middle shows the middle's own ceiling
STREAM_CLIENT = {"zmq": "zmq-stream", "sp": "sp-stream"}
#: the server behind every middle (proxy, device, gateway): echoes that out-run any middle, so a
#: route's figure is the middle's own (``zmq-echo-direct`` / ``sp-echo-direct`` show them direct)
LIB_SERVER = {"zmq": "zmq-echo", "sp": "sp-echo"}
#: the direct route of each echo server: the hop baseline of the routes with a middle
ECHO_DIRECT = {"zmq": "zmq-echo-direct", "sp": "sp-echo-direct"}
#: the same with the stream clients: the hop baselines of the ``stream`` group
STREAM_DIRECT = {"zmq": "zmq-echo-stream", "sp": "sp-echo-stream"}
#: the ``cpeers`` group: C load clients and C echoes (gateway/tools/bench/c), and their directs
C_CLIENT = {"zmq": "c-zmq", "sp": "c-sp"}
C_SERVER = {"zmq": "c-zmq-echo", "sp": "c-sp-echo"}
C_DIRECT = {"zmq": "zmq-echo-c", "sp": "sp-echo-c"}
LIB_BACKEND = {"zmq": "pyzmq", "sp": "pynng"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    name: str
    group: str  # library | native | gateway
    description: str
    client: str  # zmq | nng | native | zmq-stream | sp-stream | c-zmq | c-nng
    server: str  # peer role
    middle: str | None = None  # zmq-proxy | nng-device | bridge | floor (relay_floor.c)
    front: str = "zmq"  # wire the client speaks
    back: str = "zmq"  # wire the server speaks
    backend: str = ""  # bridge backend: lib | native
    bridge_args: tuple[str, ...] = ()  # extra `gateway bridge` options for this route
    #: "curve": the client's hop uses CURVE (a libzmq client, the middle's front a CURVE
    #: server); "tls": SP over TLS (an nng client, the middle's front tls+tcp). The server hop
    #: stays plain, so the figure is the cost of the secured front.
    security: str = ""
    plain: str = ""  # the same route without security: the ratios' reference
    #: the ``real`` groups: the route of the clients' own C tool (zmq.proxy for libzmq
    #: clients, nng_device for nng ones: the throughput ratio's reference), zmq.proxy's route
    #: (the CPU ratio's) and the server's direct route (its ceiling: the clients straight to it)
    tool: str = ""
    cpu_ref: str = ""
    ceiling: str = ""
    #: the ``real`` group's gateway routes: the C floor relay's route between the same peers
    #: (``c/relay_floor.c``: the least any middle does there; the CPU ratio's floor)
    floor: str = ""

    @property
    def baseline(self) -> str:
        """What 'direct' means for this route's hop (see ``report.hop_us``)."""
        if self.middle is None:
            return self.name
        if self.ceiling:  # the real groups: the server's direct, and the front's for a cross
            front = next(r.ceiling for r in ROUTES if r.name == self.tool)
            return self.ceiling if front == self.ceiling else f"mean({front}, {self.ceiling})"
        direct = {"stream": STREAM_DIRECT, "cpeers": C_DIRECT}.get(self.group, ECHO_DIRECT)
        if self.front == self.back:
            return direct[self.front]
        return f"mean({direct['zmq']}, {direct['sp']})"


def _gateway_routes() -> list[Route]:
    out = []
    for backend in ("lib", "native"):
        for front in ("zmq", "sp"):
            for back in ("zmq", "sp"):
                what = ("pyzmq/pynng adapters" if backend == "lib" else "native engine")
                client = "libzmq REQ/DEALER" if front == "zmq" else "nng Req0/raw Req0"
                server = "zmq echo" if back == "zmq" else "SP echo"
                out.append(Route(
                    name=f"gw-{front}-{back}-{backend}", group="gateway",
                    description=f"{client} -> gateway bridge {front}->{back} ({what}) -> {server}",
                    client=LIB_CLIENT[front], server=LIB_SERVER[back], middle="bridge",
                    front=front, back=back, backend=backend))
    return out


def _middle_group(group: str, suffix: str, clients: dict[str, str], servers: dict[str, str],
                  shown: dict[str, str], echo: dict[str, str]) -> list[Route]:
    """A group that drives every middle with its own clients and echoes: the two directs
    (``zmq-echo-SUFFIX``, ``sp-echo-SUFFIX``: hop baselines and ceilings), ``zmq-proxy-SUFFIX``
    (the reference), ``nng-device-SUFFIX`` and the native gateway ``gw-F-B-SUFFIX``."""
    out = [
        Route(name=f"zmq-echo-{suffix}", group=group,
              description=f"{shown['zmq']} <-> {echo['zmq']}: the {group} routes' zmq direct",
              client=clients["zmq"], server=servers["zmq"]),
        Route(name=f"sp-echo-{suffix}", group=group,
              description=f"{shown['sp']} <-> {echo['sp']}: the {group} routes' SP direct",
              client=clients["sp"], server=servers["sp"], front="sp", back="sp"),
        Route(name=f"zmq-proxy-{suffix}", group=group,
              description=f"{shown['zmq']} -> zmq.proxy(ROUTER/DEALER) -> {echo['zmq']}",
              client=clients["zmq"], server=servers["zmq"], middle="zmq-proxy"),
        Route(name=f"nng-device-{suffix}", group=group,
              description=f"{shown['sp']} -> nng_device(raw Rep0/raw Req0) -> {echo['sp']}",
              client=clients["sp"], server=servers["sp"], middle="nng-device", front="sp",
              back="sp"),
    ]
    for front in ("zmq", "sp"):
        for back in ("zmq", "sp"):
            out.append(Route(
                name=f"gw-{front}-{back}-{suffix}", group=group,
                description=f"{shown[front]} -> gateway bridge {front}->{back} (native engine) "
                            f"-> {echo[back]}",
                client=clients[front], server=servers[back], middle="bridge", front=front,
                back=back, backend="native"))
    return out


def _stream_routes() -> list[Route]:
    """The throughput routes of issue 13: every middle driven by the byte-stream clients, so
    the figure is the middle's and ``zmq-proxy-stream`` is the reference of the ratios."""
    return _middle_group("stream", "stream", STREAM_CLIENT, LIB_SERVER,
                         {"zmq": "zmq stream client (DEALER)", "sp": "SP stream client (raw req0)"},
                         {"zmq": "zmq echo", "sp": "SP echo"})


def _c_routes() -> list[Route]:
    """Issue 22's measurement (``--routes cpeers``): C clients (libzmq DEALER; SP req0 on
    plain sockets; W in flight) and C echoes, direct (the ceilings), through zmq.proxy (the
    ratios' reference), nng_device and the native gateway; and nng's own C peers direct (the
    library's figure: too costly to drive the middles, see ``cpeers.ROLES``)."""
    return [*_middle_group("cpeers", "c", C_CLIENT, C_SERVER,
                           {"zmq": "C libzmq DEALER", "sp": "C SP req0 (plain sockets)"},
                           {"zmq": "C zmq ROUTER echo",
                            "sp": "C SP rep0 echo (idealised: a read's messages in one write)"}),
            Route(name="nng-echo-c", group="cpeers",
                  description="C nng raw req0 <-> C nng raw rep0 echo: nng's own C peers",
                  client="c-nng", server="c-nng-echo", front="sp", back="sp")]


#: the ``real`` groups' peers: a role and how the report shows it
REAL_PEERS = {
    "c-zmq": "C libzmq DEALER (W in flight)",
    "c-zmq-dealers": "C libzmq DEALERs (one per request in flight)",
    "c-nng-req": "C nng req0 sockets (one request in flight each, aio)",
    "c-zmq-echo": "C libzmq ROUTER echo",
    "c-nng-rep": "C nng rep0 server (one context per worker, aio)",
    "c-sp-echo": "SP stream echo (idealised: a read's messages in one write)",
}
#: the server behind a route -> its direct route in the ``real`` group (its ceiling)
REAL_CEILING = {"c-zmq-echo": "zmq-echo-real", "c-nng-rep": "nng-rep-real",
                "c-sp-echo": "sp-echo-ideal"}
REAL_GROUPS = ("real", "dealers")


def _real(name: str, client: str, server: str, middle: str | None = None, *, group: str = "real",
          tool: str = "", cpu_ref: str = "zmq-proxy-real", ceiling: str = "",
          floor: str = "") -> Route:
    """A route of the ``real`` groups between two :data:`REAL_PEERS`, through ``middle``."""
    front = "zmq" if client.startswith("c-zmq") else "sp"
    back = "zmq" if server == "c-zmq-echo" else "sp"
    via = {None: "", "zmq-proxy": " -> zmq.proxy(ROUTER/DEALER)",
           "nng-device": " -> nng_device(raw Rep0/raw Req0)",
           "bridge": f" -> gateway bridge {front}->{back} (native engine)",
           "floor": f" -> C floor relay {front}->{back} (one epoll loop, plain sockets)"}[middle]
    return Route(name=name, group=group,
                 description=f"{REAL_PEERS[client]}{via} -> {REAL_PEERS[server]}",
                 client=client, server=server, middle=middle, front=front, back=back,
                 backend="native" if middle == "bridge" else "",
                 tool=tool or ("" if middle is None else "zmq-proxy-real" if front == "zmq"
                               else "nng-device-real"),
                 cpu_ref=cpu_ref if middle else "",
                 ceiling=ceiling or REAL_CEILING[server], floor=floor)


def _real_routes() -> list[Route]:
    """Issue 36's measurement (``--routes real``): the C peers shaped as the libraries' users
    write them, direct (each server's ceiling) and through zmq.proxy, nng_device and the
    native gateway, and the C floor relay (``floor-F-B-real``: the least any middle does on
    that route, the gateway's floor); the SP stream echo beside them is the idealised server (one write per read,
    which no nng application does). ``--routes dealers`` adds libzmq clients of one DEALER per
    request in flight (each its own connection: one message per read for the middle too)."""
    zc, nc, zs, ns, ideal = "c-zmq", "c-nng-req", "c-zmq-echo", "c-nng-rep", "c-sp-echo"
    dz, dealers = "c-zmq-dealers", {"group": "dealers", "cpu_ref": "zmq-proxy-dealers"}
    return [
        _real("zmq-echo-real", zc, zs),
        _real("nng-rep-real", nc, ns),
        _real("sp-echo-ideal", nc, ideal),
        _real("zmq-proxy-real", zc, zs, "zmq-proxy"),
        _real("nng-device-real", nc, ns, "nng-device"),
        *(_real(f"floor-{f}-{b}-real", c, s, "floor")
          for f, c in (("zmq", zc), ("sp", nc)) for b, s in (("zmq", zs), ("sp", ns))),
        *(_real(f"gw-{f}-{b}-real", c, s, "bridge", floor=f"floor-{f}-{b}-real")
          for f, c in (("zmq", zc), ("sp", nc)) for b, s in (("zmq", zs), ("sp", ns))),
        _real("gw-zmq-sp-ideal", zc, ideal, "bridge"),
        _real("gw-sp-sp-ideal", nc, ideal, "bridge"),
        _real("zmq-echo-dealers", dz, zs, **dealers, ceiling="zmq-echo-dealers"),
        _real("zmq-proxy-dealers", dz, zs, "zmq-proxy", **dealers, tool="zmq-proxy-dealers",
              ceiling="zmq-echo-dealers"),
        _real("gw-zmq-zmq-dealers", dz, zs, "bridge", **dealers, tool="zmq-proxy-dealers",
              ceiling="zmq-echo-dealers"),
        _real("gw-zmq-sp-dealers", dz, ns, "bridge", **dealers, tool="zmq-proxy-dealers"),
    ]


def _secure_bridge(front: str, back: str) -> Route:
    """A native bridge whose front is secured: CURVE for a ZeroMQ front (a libzmq client),
    TLS for an SP one (an nng client); its plain twin is the ratios' reference."""
    security, client = ("curve", "zmq") if front == "zmq" else ("tls", "nng")
    shown = {"curve": "libzmq REQ/DEALER (CURVE)", "tls": "nng Req0 (TLS)"}[security]
    front_shown = "CURVE front" if front == "zmq" else "sp+tls+tcp front"
    echo = "zmq echo" if back == "zmq" else "SP echo"
    return Route(name=f"gw-{front}-{back}-{security}", group="security",
                 description=f"{shown} -> gateway bridge {front}->{back} (native, "
                             f"{front_shown}) -> {echo}",
                 client=client, server=LIB_SERVER[back], middle="bridge", front=front,
                 back=back, backend="native", security=security,
                 plain=f"gw-{front}-{back}-native")


ROUTES: list[Route] = [
    Route(name="zmq-direct", group="library", description="libzmq REQ <-> REP (pyzmq)",
          client="zmq", server="zmq-rep"),
    Route(name="nng-direct", group="library", description="nng Req0 <-> Rep0 (pynng)",
          client="nng", server="nng-rep", front="sp", back="sp"),
    Route(name="zmq-echo-direct", group="library",
          description="libzmq REQ/DEALER <-> zmq echo (zmq_proxy(ROUTER, ROUTER), in C): "
                      "the server of every zmq route with a middle",
          client="zmq", server="zmq-echo"),
    Route(name="sp-echo-direct", group="library",
          description="nng Req0 <-> SP echo (rep0 handshake, then the byte stream back): "
                      "the server of every SP route with a middle",
          client="nng", server="sp-echo", front="sp", back="sp"),
    Route(name="zmq-proxy", group="library",
          description="libzmq REQ -> zmq.proxy(ROUTER/DEALER) -> zmq echo",
          client="zmq", server=LIB_SERVER["zmq"], middle="zmq-proxy"),
    Route(name="nng-device", group="library",
          description="nng Req0 -> nng_device(raw Rep0/raw Req0) -> SP echo",
          client="nng", server=LIB_SERVER["sp"], middle="nng-device", front="sp", back="sp"),
    Route(name="native-zmq", group="native", description="native REQ <-> native REP, zmq+tcp",
          client="native", server="native-rep", front="zmq", back="zmq"),
    Route(name="native-sp", group="native", description="native REQ <-> native REP, sp+tcp",
          client="native", server="native-rep", front="sp", back="sp"),
    *_gateway_routes(),
    Route(name="gw-zmq-zmq-proxy", group="gateway",
          description="libzmq REQ/DEALER -> gateway bridge zmq->zmq (--forwarder proxy: "
                      "libzmq's zmq_proxy) -> zmq echo",
          client=LIB_CLIENT["zmq"], server=LIB_SERVER["zmq"], middle="bridge", front="zmq",
          back="zmq", backend="lib", bridge_args=("--forwarder", "proxy")),

    # security (``--routes security``): CURVE and TLS fronts beside their plain routes
    Route(name="zmq-proxy-curve", group="security",
          description="libzmq REQ (CURVE) -> zmq.proxy(ROUTER CURVE server/DEALER) -> zmq echo",
          client="zmq", server=LIB_SERVER["zmq"], middle="zmq-proxy", security="curve",
          plain="zmq-proxy"),
    *(_secure_bridge("zmq", back) for back in ("zmq", "sp")),
    Route(name="nng-device-tls", group="security",
          description="nng Req0 (TLS) -> nng_device(raw Rep0 on tls+tcp/raw Req0) -> SP echo",
          client="nng", server=LIB_SERVER["sp"], middle="nng-device", front="sp", back="sp",
          security="tls", plain="nng-device"),
    *(_secure_bridge("sp", back) for back in ("zmq", "sp")),

    # issue 13's throughput (``--routes stream``): the middles' own ceilings
    *_stream_routes(),

    # issue 22 (``--routes cpeers``): the same middles driven by C load peers
    *_c_routes(),

    # issue 36 (``--routes real``, ``dealers``): C peers shaped as applications write them
    *_real_routes(),
]

GROUPS = {"library", "native", "gateway", "security", "stream", "cpeers", *REAL_GROUPS, "all"}
#: run when ``--routes`` is not given (``security`` is asked for by name: it needs keys made)
DEFAULT_GROUPS = ("library", "native", "gateway", "stream")


def select(spec: str | None) -> list[Route]:
    """``--routes``: comma list of names, glob patterns (``gw-*-lib``) or groups; '-x' excludes."""
    if not spec:
        return [r for r in ROUTES if r.group in DEFAULT_GROUPS]
    include: list[str] = []
    exclude: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        (exclude if item.startswith("-") else include).append(item.lstrip("-"))
    if not include:
        include = ["all"]
    unknown = [p for p in include + exclude
               if p not in GROUPS and not any(fnmatch.fnmatchcase(r.name, p) for r in ROUTES)]
    if unknown:
        names = ", ".join(r.name for r in ROUTES)
        raise ValueError(f"unknown route(s) {', '.join(unknown)}; known: {names}; "
                         f"groups: {', '.join(sorted(GROUPS))}")

    def hit(route: Route, pats: list[str]) -> bool:
        return any(p == "all" or p == route.group or fnmatch.fnmatchcase(route.name, p)
                   for p in pats)

    chosen = [r for r in ROUTES if hit(r, include) and not hit(r, exclude)]
    # a secured route is compared with its plain one (and CURVE with libzmq's own): bring them
    wanted = {r.plain for r in chosen if r.plain}
    if any(r.security == "curve" for r in chosen):
        wanted |= {"zmq-proxy-curve", "zmq-proxy"}
    if wanted:
        wanted |= {"zmq-echo-direct", "sp-echo-direct"}  # the hop baselines
    if any(r.group == "stream" and r.middle for r in chosen):  # its reference and baselines
        wanted |= {"zmq-proxy-stream", *STREAM_DIRECT.values()}
    if any(r.group == "cpeers" and r.middle for r in chosen):  # the references and ceilings
        wanted |= {"zmq-proxy-c", "nng-device-c", *C_DIRECT.values()}
    for r in chosen:  # the real groups: the tools, zmq.proxy, the ceilings and the floors
        wanted |= {x for x in (r.tool, r.cpu_ref, r.ceiling, r.floor) if x}
    return [r for r in ROUTES if r in chosen or (r.name in wanted and not hit(r, exclude))]
