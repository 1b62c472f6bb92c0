"""The kernel's seam (issue 35): each compiled class is a whole twin of a pure-Python reference,
with the same public fields and methods, picked in one place (``gateway.kernel``); no code
outside that module imports the compiled module, and no code reads an object's memory layout.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

from gateway import kernel
from gateway.device.ledger import Ledger
from gateway.engine.pipe_state import FIELDS
from gateway.metrics import BUCKETS

ROOT = Path(__file__).resolve().parents[1]
needs_kernel = pytest.mark.skipif(kernel.compiled is None, reason="the kernel is not built")


def _surface(cls: type) -> set[str]:
    """The public fields, methods and properties of ``cls`` and what its instances hold in
    slots (a Cython class's fields are descriptors of the class: the same test sees both)."""
    names = set()
    for klass in cls.__mro__[:-1]:
        names |= {n for n in vars(klass) if not n.startswith("__")}
        names |= set(getattr(klass, "__slots__", ()))
    return {n for n in names if not n.startswith("_") or n in FIELDS}


@needs_kernel
@pytest.mark.parametrize("name", sorted(kernel.TWINS))
def test_each_twin_has_the_references_surface(name: str) -> None:
    """A field, method or counter one twin has and the other lacks fails here: adding one to
    a twin means adding it to both."""
    compiled = getattr(kernel.compiled, name)
    reference = kernel.reference(name)
    assert compiled.__name__ == reference.__name__ == name
    ours, theirs = _surface(compiled), _surface(reference)
    if name == "PipeState":  # (the reference pipe's reading methods are the pipe's own)
        theirs |= {"data_received", "get_buffer", "buffer_updated"}
    assert ours == theirs, (ours ^ theirs)


def test_the_pipe_state_fields_are_the_slots_of_the_reference() -> None:
    from gateway.engine.pipe_state import PipeState

    assert tuple(PipeState.__slots__) == FIELDS == tuple(sorted(FIELDS, key=str.lower))


@pytest.mark.parametrize("name", sorted(kernel.TWINS))
def test_twin_gives_the_reference_without_the_kernel(name: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel, "compiled", None)
    assert kernel.twin(name) is kernel.reference(name)
    assert kernel.reference(name).__module__.startswith("gateway.")


@needs_kernel
def test_what_a_pipe_is_made_of_follows_the_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every hot-state object made while the kernel runs is its twin, and the reference's when
    it does not: the choice is read when each object is made."""
    from gateway.engine.core import SocketCore
    from gateway.engine.pipe import pipe_class
    from gateway.engine.writes import thread_batch

    def made() -> list[type]:
        ledger = Ledger(f"seam-{uuid.uuid4().hex[:8]}")
        sock: Any = SocketCore("REP")
        try:
            return [type(ledger.tally), type(sock.routing), type(thread_batch()),
                    type(_codec_rx()),
                    pipe_class().__mro__[-2]]
        finally:
            sock.close(0)

    compiled = made()
    assert all(c.__module__ == "gateway._kernel" for c in compiled), compiled
    monkeypatch.setattr(kernel, "compiled", None)
    pure = made()
    assert all(c.__module__ != "gateway._kernel" for c in pure), pure
    assert [c.__name__ for c in compiled] == [c.__name__ for c in pure]


def _codec_rx() -> Any:
    from gateway.engine.codecs import sp_role
    from gateway.wire.sp import SpCodec

    return SpCodec(sp_role("REP"), max_message_size=1024).rx


@needs_kernel
def test_a_kernel_takes_only_its_own_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bridge whose ledger was made without the kernel (its tally the reference's) gets no
    kernel (for_bridge says None), and a kernel made by hand refuses a reference's tally."""
    from gateway.device.forward_async import AsyncForwarder
    from gateway.device.sides import NativeSide, SideOptions
    from gateway.envelope import Translator

    front = NativeSide("REP", SideOptions(), "seam/front")
    back = NativeSide("REQ", SideOptions(), "seam/back")
    try:
        with monkeypatch.context() as m:
            m.setattr(kernel, "compiled", None)
            pure_ledger = Ledger(f"seam-{uuid.uuid4().hex[:8]}")
        fwd = AsyncForwarder(front, back, Translator("zmtp", "zmtp", kernel.token_table(8, 1.0)),
                             pure_ledger)
        assert fwd.kernel is None
        with pytest.raises(TypeError):
            kernel.compiled.Kernel(fwd, front.socket, back.socket,  # type: ignore[union-attr]
                                   fwd.translator, fwd.loss, pure_ledger.tally, BUCKETS)
        good = AsyncForwarder(front, back,
                              Translator("zmtp", "zmtp", kernel.token_table(8, 1.0)),
                              Ledger(f"seam-{uuid.uuid4().hex[:8]}"))
        assert good.kernel is not None
    finally:
        front.close(0)
        back.close(0)


@needs_kernel
def test_a_codec_of_any_class_that_declares_the_framing_takes_the_fast_path() -> None:
    """The kernel reads a codec's declared ``kernel_framing`` (gateway.wire.KERNEL_FRAMINGS),
    not its class: the engine's codecs declare theirs; a word it does not know is none."""
    from gateway.engine.codecs import sp_role
    from gateway.wire import KERNEL_FRAMINGS
    from gateway.wire.sp import SpCodec

    assert SpCodec(sp_role("REP"), max_message_size=1).kernel_framing == "sp"
    assert SpCodec(sp_role("REP"), max_message_size=1,
                   message_prefix=b"\x01").kernel_framing == "sp-ipc"
    assert SpCodec(sp_role("REP"), max_message_size=1,
                   message_prefix=b"\x02").kernel_framing == ""
    assert set(KERNEL_FRAMINGS) == {"zmtp", "zmtp-curve", "sp", "sp-ipc"}
    text = (ROOT / "gateway" / "_kernel_read.pxi").read_text()
    assert all(f'"{word}"' in text for word in KERNEL_FRAMINGS)
    assert "ZmtpCodec" not in text and "SpCodec" not in text


def _sources() -> list[Path]:
    return sorted(p for p in (ROOT / "gateway").rglob("*")
                  if p.suffix in (".py", ".pyx", ".pxi") and "__pycache__" not in p.parts)


def test_only_gateway_kernel_imports_the_compiled_module() -> None:
    importer = re.compile(r"^\s*(from gateway\._kernel|from gateway import _kernel|"
                          r"import gateway\._kernel)|import_module\(\s*[\"']gateway\._kernel",
                          re.MULTILINE)
    found = [str(p.relative_to(ROOT)) for p in _sources() if importer.search(p.read_text())]
    assert found == ["gateway/kernel.py"]


def test_no_code_reads_an_objects_memory_layout() -> None:
    """No member-descriptor offsets, type version tags or slot layouts anywhere: the kernel
    reads its own twins' typed fields."""
    layout = re.compile(r"PyMemberDescr|tp_version_tag|d_member|_Layout|gw_get|gw_set|"
                        r"T_OBJECT_EX|tp_basicsize|_KERNEL_READS")
    found = [str(p.relative_to(ROOT)) for p in _sources() if layout.search(p.read_text())]
    assert found == []
