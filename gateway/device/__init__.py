"""The device: bridges between two raw sockets, translating envelopes across families.

:class:`Bridge` (``bridge.py``) opens the two sides (``sides.py``) and runs one forwarder
(``forward_async.py``, ``forward_poll.py``, ``forward_proxy.py``); translation is
:class:`gateway.envelope.Translator`'s and accounting the :class:`Ledger`'s (``ledger.py``),
the same on every route.
"""

from gateway.device.bridge import Bridge
from gateway.device.ledger import Ledger
from gateway.device.sides import NativeRaw, default_backends

__all__ = ["Bridge", "Ledger", "NativeRaw", "default_backends"]
