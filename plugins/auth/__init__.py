"""Built-in authentication (``gateway_authenticate``): CZMQ zauth's habits.

``curve_allow=DIR``: a client whose public key is in a ``*.key`` certificate there may connect;
``plain_passwords=FILE``: ``user=password`` lines. Registered before any third-party plugin,
so pluggy asks it last: a plugin that answers first decides.
"""

from __future__ import annotations

from typing import Any

from gateway.hookspecs import hookimpl
from gateway.security import builtin_authenticate


@hookimpl
def gateway_authenticate(mechanism: str, address: str, socket: str,
                         credentials: dict[str, str], policy: Any) -> Any:
    return builtin_authenticate(mechanism, credentials, policy)
