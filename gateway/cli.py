"""``gateway``: bridge, run, check, plugins, and the tools' commands (bench, matrix).

The tools' commands come from the ``gateway.commands`` entry-point group (``pyproject.toml``):
each entry names an object with ``help``, ``configure(parser)`` and ``run(args) -> int``. The
core never imports the tools; a tool that fails to load is listed as unavailable, with why.

Bad input (a bad URL, an unknown scheme, a port in use, an unreadable config) is one line on
stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import Any

from gateway import __version__
from gateway.config import UNKNOWN_PEERS, BridgeSpec, Config
from gateway.engine import allocator
from gateway.engine.loop import run as run_loop
from gateway.errors import ConfigError, GatewayError
from gateway.logging import get_logger

#: the entry-point group of the tools' subcommands (``gateway bench``, ``gateway matrix``)
COMMANDS_GROUP = "gateway.commands"


def _add_limits(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("limits")
    g.add_argument("--max-message-size", type=int, metavar="BYTES", help="default 1 MiB")
    g.add_argument("--hop-limit", type=int, metavar="N", help="SP TTL, 1..15, default 8")
    g.add_argument("--pending-tokens", type=int, metavar="N", help="token table size, default 100000")
    g.add_argument("--pending-bytes", type=int, metavar="BYTES",
                   help="bytes of envelopes each pending table may hold, default 64 MiB")
    g.add_argument("--token-ttl", type=float, metavar="S", help="token lifetime, default 60 s")
    g.add_argument("--grace", type=float, metavar="S", help="drain time on SIGINT/SIGTERM, default 2 s")
    g.add_argument("--message-timeout", type=float, metavar="S",
                   help="close a pipe whose started message is incomplete after S, default 10 s")
    g.add_argument("--backlog", type=int, metavar="N",
                   help="listen backlog of native fronts, default the system maximum")


def _add_workers(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="run N gateway processes sharing each front's port (SO_REUSEPORT; "
                        "native tcp fronts, connecting backs), metrics summed on one endpoint, "
                        "signals passed to all (default 1; see the docs: design, Operating)")


def _add_logging(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log-format", choices=("console", "json"), default=None,
                   help="log lines on stderr: console (for people) or json (one object per "
                        "line; default console, or the config's [gateway] log_format)")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default=None,
                   help="the least level logged (default info, or the config's)")
    p.add_argument("--metrics", metavar="HOST:PORT",
                   help="serve /metrics (Prometheus), /healthz and /readyz over HTTP, "
                        "e.g. 127.0.0.1:9100 (port 0: any; the READY line says which)")
    p.add_argument("--unknown-peers", choices=tuple(UNKNOWN_PEERS), default=None,
                   help="what /readyz makes of a back end that cannot tell its peers (-1): "
                        + "; ".join(f"{k}: {v}" for k, v in UNKNOWN_PEERS.items()))


class _Strict(argparse.ArgumentParser):
    """A (sub)command parser that takes no abbreviated options."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]


def options_help() -> str:
    from gateway.settings.schema import help_text

    return help_text()


def _version() -> str:
    """``gateway --version``: the version and which forwarding path runs, then the Python and
    the libraries under the library backends (what ``gateway_build_info`` says, and nng's own
    version), one per line."""
    from gateway import kernel
    from gateway.metrics import build_labels

    labels = build_labels()
    nng = ""
    try:
        from pynng import ffi, lib

        nng = ffi.string(lib.nng_version()).decode()
    except Exception:  # noqa: BLE001 - pynng missing or built otherwise: said as such
        pass
    import platform

    def pair(lib_name: str, lib_version: str, c_name: str, c_version: str) -> str:
        if not lib_version:
            return f"{lib_name}: not installed (?backend={lib_name} unavailable)"
        return f"{lib_name} {lib_version}, {c_name} {c_version or 'unknown'}"

    return "\n".join([
        f"gateway {__version__} ({kernel.why()})",
        f"Python {labels['python']} ({platform.python_implementation()})",
        pair("pyzmq", labels["pyzmq"], "libzmq", labels["libzmq"]),
        pair("pynng", labels["pynng"], "nng", nng)])


class _Version(argparse.Action):
    """``--version``: :func:`_version`'s lines as they are (argparse's own would refill them)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest, nargs=0, default=default,
                         help=help or "print the version, the Python and the libraries, and "
                                      "whether the compiled kernel runs, then exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        try:  # one write: `gateway --version | head -1` closes the pipe after one line
            sys.stdout.write(_version() + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            # nobody reads: no traceback; stdout to /dev/null so that the exit's flush is quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        parser.exit()


def tool_commands() -> dict[str, Any]:
    """The subcommands of the ``gateway.commands`` entry points, by name: the loaded object,
    or (it failed to load) the reason as a string."""
    out: dict[str, Any] = {}
    for ep in entry_points(group=COMMANDS_GROUP):
        try:
            out[ep.name] = ep.load()
        except Exception as exc:  # noqa: BLE001 - a broken tool must not break the CLI
            out.setdefault(ep.name, f"{ep.name} unavailable: {type(exc).__name__}: {exc}")
    return out


def build_parser(active: str | None = None) -> argparse.ArgumentParser:
    """The parser; ``active`` names the tool command to configure in full (the one run; ``"*"``:
    every one, for the reference pages)."""
    parser = argparse.ArgumentParser(
        prog="gateway", allow_abbrev=False,
        description="Bridges ZeroMQ (ZMTP) and nanomsg/nng (SP) applications, both ways: "
                    "request-reply, pub/sub, pipeline and pair, with exact envelope "
                    "translation, on a native engine that speaks both wires (or on libzmq "
                    "and nng themselves), with Prometheus metrics and health checks.",
        epilog="Endpoints: [@|>]wire+transport://address[?key=value&...]. "
               "Wire: zmq, or sp (aliases nng, nanomsg), or any (a bound front that takes "
               "both wires on one port). Transport: tcp, ipc or inproc; for sp also tls+tcp, "
               "ws and wss; and any a plugin adds. '@' binds, '>' connects. "
               "?pattern=reqrep (default), pubsub, pipeline, pair or pair1; "
               "?backend=native (default), pyzmq, pynng or a plugin's; ZeroMQ security CURVE "
               "(?curve_server=1&curve_cert=FILE...) or PLAIN (?plain_server=1&"
               "plain_passwords=FILE...). `gateway bridge --help` lists every setting.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND",
                                parser_class=_Strict)  # no --metric for --metrics

    p = sub.add_parser("bridge", help="run one bridge in the foreground until SIGINT/SIGTERM",
                       description="Clients connect to FRONT (default: bind); the gateway talks "
                                   "to servers through BACK (default: connect).",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="endpoint settings, as ?key=value&key=value on FRONT or BACK "
                              "(intervals in ms,\nor with a unit: 250ms, 2s; TOML: "
                              "front_options / back_options):\n" + options_help())
    p.add_argument("front", metavar="FRONT", help="e.g. @zmq+tcp://127.0.0.1:5555")
    p.add_argument("back", metavar="BACK", help="e.g. >sp+tcp://127.0.0.1:6000?backend=native")
    p.add_argument("--name", default=None,
                   help="the bridge's name in logs, metrics and READY lines (default bridge; "
                        "the READY line shows it when given)")
    p.add_argument("--forwarder", choices=("auto", "proxy"), default="auto",
                   help="proxy: libzmq's own zmq_proxy for a zmq->zmq bridge on pyzmq "
                        "(fastest; counts frames, not messages, and no hop latency)")
    p.add_argument("--control", default="", metavar="URL",
                   help="bind zmq_proxy_steerable's control endpoint, e.g. "
                        "@zmq+tcp://127.0.0.1:7001 (a REP; sp+: an SP rep0): PAUSE, RESUME, "
                        "TERMINATE, STATISTICS, as libzmq answers them")
    p.add_argument("--capture", default="", metavar="URL",
                   help="bind a PUB that publishes every forwarded message, both ways, e.g. "
                        "@zmq+tcp://127.0.0.1:7002 (never slows forwarding: a slow reader "
                        "loses copies, counted); see `gateway capture`")
    p.add_argument("--capture-format", choices=("frames", "records"), default="frames",
                   help="frames: each message as forwarded (libzmq's capture socket); "
                        "records: with a header and both sides' forms (for gateway capture)")
    _add_workers(p)
    _add_logging(p)
    _add_limits(p)

    p = sub.add_parser("run", help="run the bridges of a TOML config file (SIGHUP reloads it)")
    p.add_argument("config", metavar="CONFIG.toml")
    _add_workers(p)
    _add_logging(p)

    p = sub.add_parser("check", help="validate a TOML config file without starting anything",
                       description="Every mistake at once (file, section or bridge, key), "
                                   "two bridges binding one address among them; exit 0 when "
                                   "the config would start, 2 otherwise. It binds nothing "
                                   "unless --ports: check a running gateway's file before "
                                   "a reload as it is.")
    p.add_argument("config", metavar="CONFIG.toml")
    p.add_argument("--ports", action="store_true",
                   help="also bind each address (and the metrics address) for a moment, to "
                        "find one another process holds: before a start (systemd's "
                        "ExecStartPre), not against the running gateway, whose own ports "
                        "would fail")

    sub.add_parser("plugins", help="list loaded plugins and what each provides")
    p = sub.add_parser("completion", help="print a shell completion script (bash or zsh), "
                                          "e.g. eval \"$(gateway completion bash)\"")
    p.add_argument("shell", choices=("bash", "zsh"), metavar="SHELL", help="bash or zsh")
    sub.add_parser("settings", help="print the settings reference: every endpoint setting "
                                    "and limit, with its default (the docs' Settings page)")

    for name, command in sorted(tool_commands().items()):
        p = sub.add_parser(name, help=getattr(command, "help", None) or "unavailable")
        p.set_defaults(tool=command)
        if active in (name, "*") and not isinstance(command, str):  # only the one being run
            command.configure(p)
    return parser


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _limits(args: argparse.Namespace, base=None):  # type: ignore[no-untyped-def]
    """The limits the flags set; a mistake names the flag (``--grace must be ...``)."""
    import re

    from gateway.config import limits_from

    given = {k: getattr(args, k, None) for k in
             ("max_message_size", "hop_limit", "pending_tokens", "pending_bytes", "token_ttl",
              "grace", "message_timeout", "backlog")}
    try:
        return limits_from({k: v for k, v in given.items() if v is not None}, base)
    except ConfigError as exc:
        lines = [re.sub(r"^limit (\w+)", lambda m: _flag(m.group(1)), line)
                 for line in str(exc).splitlines()]
        raise ConfigError("\n".join(lines)) from None


def _metrics_flag(args: argparse.Namespace) -> list[str]:
    """``--metrics``'s mistake, naming the flag (``--metrics 9100``: no host)."""
    from gateway.url import split_host_port

    if args.metrics is None:
        return []
    try:
        split_host_port(args.metrics)
    except ConfigError as exc:
        return [f"--metrics {args.metrics}: {exc} (e.g. --metrics 127.0.0.1:9100)"]
    return []


MAX_WORKERS = 64


def _workers_flag(args: argparse.Namespace) -> list[str]:
    """``--workers``' mistake (out of 1..MAX_WORKERS), reported with the others."""
    n = args.workers
    return [] if 1 <= n <= MAX_WORKERS else [f"--workers must be 1..{MAX_WORKERS}, not {n}"]


def _workers(args: argparse.Namespace, shapes: list, metrics: str | None,  # type: ignore[type-arg]
             grace: float, fixed_ports: bool) -> int | None:
    """``--workers N`` (N > 1): run the parent of N workers and return its exit status; None
    when this process is to run the bridges itself (N = 1, or it is a worker)."""
    from gateway import workers

    n, bad = args.workers, _workers_flag(args)
    if bad:  # (bridge and run report it with the rest first)
        raise ConfigError("\n".join(bad))
    if workers.worker_index() is not None:
        from gateway.transport import share_ports

        share_ports()
        import structlog

        structlog.contextvars.bind_contextvars(worker=workers.worker_index())
        return None
    if n == 1:
        return None
    errors = workers.check_shareable(shapes, fixed_ports=fixed_ports)
    if errors:
        raise ConfigError("\n".join(errors))
    return workers.Parent(args.argv, n, shapes, metrics, grace).run()


def _load(path: str) -> Config:
    """The config file, read; its mistakes with those the rules find in the bridges that
    could be read (and the addresses two of them bind), at once."""
    from gateway.config import ConfigFileError, load
    from gateway.device import check
    from gateway.device.ports import clashes, ipc_paths

    try:
        return load(path)
    except ConfigFileError as exc:
        found = (check(exc.readable, path) + clashes(exc.readable, path)
                 + ipc_paths(exc.readable, path))
        more = [e for e in found if e not in str(exc).splitlines()]
        raise ConfigError("\n".join([str(exc), *more])) from None


def _file_log_format(path: str) -> str | None:
    """``[gateway] log_format`` of a config file with mistakes elsewhere (None: unreadable)."""
    import tomllib

    try:
        with open(path, "rb") as fh:
            value = tomllib.load(fh).get("gateway", {}).get("log_format")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def _checked(specs: list[BridgeSpec], where: str = "", more: list[str] | None = None,
             metrics: str | None = None) -> list[BridgeSpec]:
    """The specs, once every rule of every bridge holds (the plugins say the transports and
    backends; the settings' files are read; no two bind one address, ``metrics`` among them):
    the same check for bridge, run and check; ``more``: the flags' mistakes, reported with
    them."""
    from gateway.device import planned
    from gateway.device.ports import clashes, ipc_paths

    made, errors = planned(specs, where)
    errors = (more or []) + errors + clashes(specs, where, metrics) + ipc_paths(specs, where)
    if errors:
        raise ConfigError("\n".join(errors))
    return made


def _cmd_bridge(args: argparse.Namespace) -> int:
    from gateway.logging import configure

    configure(args.log_format or "console", args.log_level or "info")
    from gateway.supervisor import Supervisor
    from gateway.workers import shared_front

    flags = _metrics_flag(args) + _workers_flag(args)
    try:
        limits = _limits(args)
    except ConfigError as exc:  # with the other mistakes, at once
        flags += str(exc).splitlines()
        limits = _limits(argparse.Namespace())
    name = args.name or "bridge"
    extras = (args.control, args.capture, args.capture_format)
    spec = BridgeSpec(name, args.front, args.back, limits, args.forwarder, (), (), *extras)
    rc = _workers(args, _checked([spec], more=flags, metrics=args.metrics), args.metrics, limits.grace,
                  fixed_ports=False)
    if rc is not None:
        return rc
    front = shared_front(name, args.front)  # worker 0's real port, for the others
    spec = BridgeSpec(name, front, args.back, limits, args.forwarder, (), (), *extras)
    return _serve(Supervisor([spec], args.metrics, unknown_peers=args.unknown_peers or
                             "waiting", show_names=args.name is not None))


def _serve(supervisor: Any) -> int:
    """Run the bridges until a signal, in a process whose allocator keeps freed memory for the
    next large message (:mod:`gateway.engine.allocator`). Once drained, a SIGINT that lands
    while the loop closes (a thread may take it while the loop's handlers are removed) ends
    nothing and kills nothing: exit 0, and the three signals stay ignored until the process
    ends."""
    tuned = allocator.tune()
    log = get_logger("gateway.engine")
    (log.warning if tuned == "refused" else log.debug)("allocator", result=tuned)
    try:
        return int(run_loop(supervisor.run()))
    except KeyboardInterrupt:
        if not supervisor.drained:
            raise
        return 0
    finally:
        if supervisor.drained:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)


def _cmd_run(args: argparse.Namespace) -> int:
    from gateway.logging import configure

    flags = _metrics_flag(args) + _workers_flag(args)  # (with the file's mistakes, at once)
    try:
        cfg = _load(args.config)
    except ConfigError as exc:
        args.log_format = args.log_format or _file_log_format(args.config)
        raise ConfigError("\n".join([*flags, str(exc)])) from None
    args.log_format = args.log_format or cfg.log_format  # (its errors too)
    configure(args.log_format, args.log_level or cfg.log_level)
    from gateway.plugins import manager

    manager().hook.gateway_configure.call_historic(kwargs={"config": cfg.raw})
    from gateway.supervisor import Supervisor

    metrics = args.metrics or cfg.metrics
    specs = _checked(cfg.bridges, args.config, flags, metrics)
    rc = _workers(args, specs, metrics, cfg.limits.grace, fixed_ports=True)
    if rc is not None:
        return rc

    def reload() -> tuple[list[BridgeSpec], str]:  # SIGHUP: the file again, all or nothing
        again = _load(args.config)
        return (_checked(again.bridges, args.config, metrics=metrics),
                args.unknown_peers or again.unknown_peers)

    return _serve(Supervisor(specs, metrics, reload, args.unknown_peers or cfg.unknown_peers))


def _cmd_check(args: argparse.Namespace) -> int:
    from gateway.device.ports import in_use

    cfg = _load(args.config)  # every syntax and schema mistake, at once
    _checked(cfg.bridges, args.config, metrics=cfg.metrics)  # then every rule (and clashes)
    if args.ports:  # what `run` would fail to bind (opt-in: a running gateway holds its own)
        busy = in_use(cfg.bridges, args.config, cfg.metrics)
        if busy:
            raise ConfigError("\n".join(busy))
    names = ", ".join(b.name for b in cfg.bridges)
    print(f"{args.config}: ok, {len(cfg.bridges)} bridge(s): {names}")
    return 0


def _cmd_plugins(args: argparse.Namespace) -> int:
    from gateway.plugins import manager, registry

    reg = registry()
    rows = [(name or "", getattr(plugin, "__name__", type(plugin).__name__),
             ", ".join(reg.provided_by.get(name or "", [])) or "hooks only")
            for name, plugin in manager().list_name_plugin()]
    w1, w2 = (max((len(r[i]) for r in rows), default=0) for i in (0, 1))
    for name, where, provides in rows:
        print(f"{name:<{max(w1, 10)}} {where:<{max(w2, 28)}} {provides}")
    return 0


def _report(lines: list[str], as_json: bool, event: str = GatewayError.event) -> None:
    """The mistakes on stderr, one per line: ``gateway: error: ...``, or with ``--log-format
    json`` one JSON object each, as the log lines (``event``: the error's, ``level``,
    ``timestamp``)."""
    if not as_json:
        for line in lines:
            print(f"gateway: error: {line}", file=sys.stderr)
        return
    import json
    from datetime import UTC, datetime

    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    for line in lines:
        print(json.dumps({"error": line, "event": event, "level": "error",
                          "timestamp": now}), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(active=argv[0] if argv else None)
    args = parser.parse_args(argv)
    args.argv = argv  # --workers starts its workers with the same arguments
    try:
        if args.command == "bridge":
            return _cmd_bridge(args)
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "plugins":
            return _cmd_plugins(args)
        if args.command == "check":
            return _cmd_check(args)
        if args.command == "completion":
            from gateway.completion import script

            print(script(args.shell, build_parser(active="*")), end="")
            return 0
        if args.command == "settings":
            from gateway.settings.reference import NOTE, settings_page

            print(settings_page(parser).removeprefix(NOTE).lstrip("\n"), end="")
            return 0
        tool = getattr(args, "tool", None)
        if isinstance(tool, str):  # its entry point failed to load
            raise ConfigError(tool)
        if tool is not None:
            return int(tool.run(args))
        parser.print_help()
        return 2
    except GatewayError as exc:  # every mistake on its own line, no traceback
        _report(str(exc).splitlines() or [type(exc).__name__],
                getattr(args, "log_format", None) == "json", exc.event)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
