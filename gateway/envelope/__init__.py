"""Envelope translation between the ZMTP and SP worlds (docs/design.md, "Translation"). Pure: no
I/O, no clock (``now`` is passed in, seconds of a monotonic clock).

The package, bottom up (no module imports the one above it):

* :mod:`~gateway.envelope.errors`: :class:`EnvelopeError` (the peer's message cannot cross),
  :class:`UnknownToken`, and :class:`TableFull` (our own limit: a drop, not the peer's fault);
* :mod:`~gateway.envelope.tokens`: :class:`TokenTable`, the ZeroMQ envelopes parked while an
  SP server answers;
* :mod:`~gateway.envelope.reqrep`: request-reply envelopes as pure functions
  (:func:`sp_to_zmtp`, :func:`zmtp_to_sp_reply`, :func:`zmtp_to_sp_request`,
  :func:`sp_to_zmtp_reply`);
* :mod:`~gateway.envelope.patterns`: pub/sub, pipeline and pair (:class:`Subscriptions`,
  :func:`flatten`, :func:`relay_to_sp`, pair1's hop word);
* :mod:`~gateway.envelope.translators`: what a bridge does to each message, the
  :class:`Translation` protocol and its three independent implementations,
  :class:`Translator` (request-reply), :class:`MixedTranslator` (an ``any+`` front) and
  :class:`PatternTranslator`.

Every refusal carries a ``reason``, a word of :data:`gateway.errors.DROP_REASONS` (the one
table of what each means; the device counts and logs it under that word). The words this
package raises, and where:

========================  ====================================================================
reason                    raised by
========================  ====================================================================
no-request-id             :func:`sp_to_zmtp`, :func:`zmtp_to_sp_reply`, :func:`sp_to_zmtp_reply`
not-4-bytes               :func:`zmtp_to_sp_reply`, :func:`sp_to_zmtp_reply`
bad-backtrace             :func:`zmtp_to_sp_reply`, :func:`sp_to_zmtp_reply`
no-delimiter              :func:`zmtp_to_sp_reply`
multi-frame-body          the request-reply functions and translators, :func:`relay_to_sp`
no-body                   the same, and :func:`flatten`
probe                     :func:`zmtp_to_sp_request` (ZMQ_PROBE_ROUTER's empty message)
no-envelope               a same-family or ``any+`` translation of a message without a hop
table-full                :meth:`TokenTable.mint` (:class:`TableFull`)
unknown-token             :meth:`TokenTable.pop` (:class:`UnknownToken`)
expired-token             :meth:`TokenTable.pop` (:class:`UnknownToken`)
not-a-subscription        :meth:`Subscriptions.apply`
unknown-subscription      :meth:`Subscriptions.apply`
bad-hop-header            :func:`pair1_strip`
========================  ====================================================================

(:class:`MixedTranslator` also raises :class:`~gateway.errors.PeerGone` for a client that
left, which the device counts as ``client-gone``.)
"""

from __future__ import annotations

from gateway.envelope.errors import EnvelopeError, TableFull, UnknownToken
from gateway.envelope.patterns import (
    CANCEL,
    PAIR1_HEADER,
    SUBSCRIBE,
    BodyCodec,
    Subscriptions,
    cancel,
    flatten,
    pair1_add,
    pair1_strip,
    relay_to_sp,
    subscription,
)
from gateway.envelope.reqrep import (
    same_family,
    same_family_reply,
    sp_to_zmtp,
    sp_to_zmtp_reply,
    zmtp_to_sp_reply,
    zmtp_to_sp_request,
)
from gateway.envelope.tokens import TokenTable
from gateway.envelope.translators import (
    MixedTranslator,
    PatternTranslator,
    Translation,
    Translator,
)

__all__ = [
    "CANCEL",
    "PAIR1_HEADER",
    "SUBSCRIBE",
    "BodyCodec",
    "EnvelopeError",
    "MixedTranslator",
    "PatternTranslator",
    "Subscriptions",
    "TableFull",
    "TokenTable",
    "Translation",
    "Translator",
    "UnknownToken",
    "cancel",
    "flatten",
    "pair1_add",
    "pair1_strip",
    "relay_to_sp",
    "same_family",
    "same_family_reply",
    "sp_to_zmtp",
    "sp_to_zmtp_reply",
    "subscription",
    "zmtp_to_sp_reply",
    "zmtp_to_sp_request",
]
