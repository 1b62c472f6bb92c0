"""The device: bridges between two raw sockets, translating envelopes across families.

:class:`Bridge` (``bridge.py``) is planned from its description (``plan.py``), opens the two
sides (``sides.py``) and runs one forwarder (``forward_async.py``, ``forward_poll.py``,
``forward_proxy.py``); each message goes through one step per direction (``step.py``):
translation is :class:`gateway.envelope.Translation`'s and accounting the :class:`Ledger`'s
(``ledger.py``), the same on every route.
"""

from gateway.device.bridge import Bridge, check, planned
from gateway.device.ledger import Ledger
from gateway.device.sides import NativeSide, default_backends

__all__ = ["Bridge", "Ledger", "NativeSide", "check", "default_backends", "planned"]
