"""The tools wing: programs that drive the gateway from outside (``gateway.tools.soak``).

Never imported by the core (``gateway`` and its packages outside ``tools``)."""
