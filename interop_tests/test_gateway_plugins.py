"""A third-party plugin, examples/plugin-skeleton: the ``abstract`` transport, added through the
entry-point group ``gateway`` without touching the core.

The skeleton's ``zmq+abstract://name`` is libzmq's ``ipc://@name`` and nng's
``abstract://name`` (Linux abstract Unix sockets), so the native engine meets real pyzmq and
pynng peers on it. The end-to-end tests need the distribution installed
(``pip install -e examples/plugin-skeleton``, which ``make env`` does); the registration test
loads the module from its source tree and runs anywhere.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import uuid
from importlib.metadata import entry_points

import pytest

from gateway.tools.harness.gateway import Gateway, bridge_args, url
from gateway.tools.harness.peers.servers import NngServer, ZmqServer, nng_req, zmq_client
from gateway.tools.harness.procs import LOCAL, PY, lib_url, run_cli
from gateway.tools.harness.procs import SOURCE_ROOT as REPO
from gateway.tools.harness.procs import child_env as env

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract sockets: Linux"),
]

SKELETON_SRC = REPO / "examples" / "plugin-skeleton" / "src"
installed = any(ep.name == "abstract" and ep.value == "gateway_plugin_skeleton"
                for ep in entry_points(group="gateway"))
needs_install = pytest.mark.skipif(
    not installed, reason="pip install -e examples/plugin-skeleton (make env does it)")


def _name() -> str:
    return f"gw-test-{uuid.uuid4().hex[:12]}"


def test_skeleton_registers_its_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """The module, registered like an entry point would be, provides transport "abstract"."""
    from gateway.plugins import collect, make_manager

    spec = importlib.util.spec_from_file_location(
        "gateway_plugin_skeleton_src", SKELETON_SRC / "gateway_plugin_skeleton" / "__init__.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("GATEWAY_DISABLE_PLUGIN_AUTOLOAD", "1")
    pm = make_manager()
    pm.register(module, name="abstract")
    pm.check_pending()
    reg = collect(pm)
    assert type(reg.transport("abstract").transport).__name__ == "AbstractTransport"
    assert reg.provided_by["abstract"] == ["transport abstract"]
    assert {"tcp", "ipc", "inproc"} <= set(reg.transports)  # built-ins untouched


def test_skeleton_distribution_declares_the_entry_point() -> None:
    import tomllib

    meta = tomllib.loads((REPO / "examples" / "plugin-skeleton" / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["gateway"] == {
        "abstract": "gateway_plugin_skeleton", "skeleton": "gateway_plugin_skeleton.adapter"}
    assert (REPO / "examples" / "plugin-skeleton" / "README.md").is_file()


@needs_install
def test_gateway_plugins_lists_the_skeleton() -> None:
    r = run_cli("plugins")
    assert r.returncode == 0, r.stderr
    lines = [line.split(None, 2) for line in r.stdout.splitlines()]
    assert ["abstract", "gateway_plugin_skeleton", "transport abstract"] in lines
    names = [line[0] for line in lines]
    assert names.index("abstract") > names.index("pynng")  # after the built-ins


@needs_install
def test_zmq_clients_on_abstract_socket_to_nng_server() -> None:
    name = _name()
    with NngServer() as server, Gateway(*bridge_args(
            f"@zmq+abstract://{name}?backend=native", url("sp", f"{LOCAL}:{server.port}"))) as gw:
        assert gw.front == f"zmq+abstract://{name}"
        with zmq_client("DEALER", f"ipc://@{name}") as dealer:  # libzmq's spelling
            dealer.send_multipart([b"app", b"", b"over abstract"])
            assert dealer.recv_multipart() == [b"app", b"", b"re:over abstract"]
        assert server.received == [b"over abstract"]


@needs_install
def test_abstract_back_to_zmq_rep_server() -> None:
    name = _name()
    with ZmqServer("REP", address=f"ipc://@{name}") as server, Gateway(*bridge_args(
            url("sp", f"{LOCAL}:0"), f"zmq+abstract://{name}?backend=native")) as gw:
        with nng_req(gw.front.split("+", 1)[1]) as req:
            req.send(b"to zmq")
            assert req.recv() == b"re:to zmq"
        assert server.received == [[b"to zmq"]]


@needs_install
def test_sp_over_abstract_between_two_gateways() -> None:
    """zmq REQ -> A (zmq -> sp+abstract) -> B (sp+abstract -> zmq) -> zmq REP.

    SP between two native engines. (nng's own ipc/abstract transports frame each message with
    an extra message-type byte that the native SP codec does not write: a native
    ``sp+abstract://`` or ``sp+ipc://`` endpoint does not reach a pynng peer; see the report
    of the gateway issue.)
    """
    name = _name()
    with ZmqServer("REP") as server, Gateway(*bridge_args(
            f"@sp+abstract://{name}?backend=native", url("zmq", f"{LOCAL}:{server.port}"),
            "--name", "B")) as gw_b, Gateway(*bridge_args(
                url("zmq", f"{LOCAL}:0"), f">sp+abstract://{name}?backend=native",
                "--name", "A")) as gw_a:
        assert gw_b.front == f"sp+abstract://{name}"
        with zmq_client("REQ", gw_a.front.split("+", 1)[1]) as req:
            req.send(b"through an abstract socket")
            assert req.recv() == b"re:through an abstract socket"
        assert server.received == [[b"through an abstract socket"]]


@needs_install
def test_abstract_name_in_use_exit_2() -> None:
    name = _name()
    with NngServer(address=f"abstract://{name}"):
        r = run_cli("bridge", f"zmq+abstract://{name}?backend=native", "sp+tcp://127.0.0.1:1")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "in use" in r.stderr.lower()


def test_without_the_plugin_the_scheme_is_unknown() -> None:
    """GATEWAY_DISABLE_PLUGIN_AUTOLOAD skips entry points: the core knows no "abstract"."""
    r = subprocess.run([PY, "-m", "gateway", "bridge", f"zmq+abstract://{_name()}",
                        "sp+tcp://127.0.0.1:1"], cwd=REPO, text=True, capture_output=True,
                       env=env(GATEWAY_DISABLE_PLUGIN_AUTOLOAD="1"), timeout=20)
    assert r.returncode == 2
    assert r.stderr.startswith("gateway: error: bridge 'bridge' front: unknown transport 'abstract'")
    assert r.stderr.count("\n") == 1


# ---------------------------------------------------------------------------------------------
# the skeleton's adapter: ?backend=skeleton, a backend the core has never heard of

adapter_installed = any(ep.name == "skeleton" and ep.value == "gateway_plugin_skeleton.adapter"
                        for ep in entry_points(group="gateway"))
needs_adapter = pytest.mark.skipif(
    not adapter_installed, reason="pip install -e examples/plugin-skeleton (make env does it)")


@needs_adapter
def test_plugins_lists_the_third_party_adapter() -> None:
    out = run_cli("plugins").stdout
    row = next(line for line in out.splitlines() if line.startswith("skeleton "))
    assert row.split()[1:] == ["gateway_plugin_skeleton.adapter", "adapter", "skeleton", "(zmtp)"]


@needs_adapter
@pytest.mark.parametrize("side", ["front", "back"])
def test_third_party_adapter_selected_by_backend_name(side: str) -> None:
    """zmq REQ -> gateway -> nng REP with the skeleton's adapter as the front, and nng REQ ->
    gateway -> zmq REP with it as the back: the exchange works and the bridge's accounting
    (the ledger's, whatever the backend) counts it."""
    if side == "front":
        server_cm = NngServer()
    else:
        server_cm = ZmqServer("REP")
    with server_cm as server:
        if side == "front":
            front, back = (url("zmq", f"{LOCAL}:0", "skeleton"),
                           url("sp", f"{LOCAL}:{server.port}", "native"))
        else:
            front, back = (url("sp", f"{LOCAL}:0", "native"),
                           url("zmq", f"{LOCAL}:{server.port}", "skeleton"))
        with Gateway(*bridge_args(front, back), metrics=True) as gw:
            if side == "front":
                with zmq_client("REQ", lib_url(gw.front)) as req:
                    for i in range(3):
                        req.send(b"q%d" % i)
                        assert req.recv() == b"re:q%d" % i
            else:
                with nng_req(lib_url(gw.front)) as req:
                    for i in range(3):
                        req.send(b"q%d" % i)
                        assert req.recv() == b"re:q%d" % i
            assert gw.wait_metric("gateway_forwarded_messages_total", 3, direction="reply") == 3
            assert gw.metric("gateway_hop_latency_seconds_count", direction="request") == 3


def test_unknown_backend_names_the_loaded_ones() -> None:
    result = run_cli("bridge", "@zmq+tcp://127.0.0.1:0?backend=nosuch", ">sp+tcp://127.0.0.1:1")
    assert result.returncode == 2
    line = result.stderr.strip()
    assert "unknown backend 'nosuch'" in line and "native" in line and "pyzmq" in line
    assert "\n" not in line and "Traceback" not in result.stderr
