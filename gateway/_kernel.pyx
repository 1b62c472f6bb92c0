# cython: language_level=3, cdivision=True, freethreading_compatible=False
# (boundscheck, wraparound, initializedcheck: setup.py's, off but on in the sanitizer build: a
# directive in this header would beat the one setup.py gives, as it once did)
"""The compiled forwarding kernel: one call per read, for bridges whose two sides run on the
native engine (issue 22): request-reply (:class:`Kernel`), pipeline and pub/sub
(:class:`PatternKernel`). One compiled module from seven files: this one (the shared reader),
``_kernel_tables.pxi`` (the compiled tables), ``_kernel_read.pxi`` (parsing a read in place:
ZMTP, SP, CURVE boxes opened through libsodium), ``_kernel_write.pxi`` (a destination's buffer
and its encoders, large bodies as views of the read, CURVE boxes sealed),
``_kernel_dests.pxi`` (a read's destinations and their flush into the pipes' batches),
``_kernel_reqrep.pxi`` and ``_kernel_patterns.pxi``.

A bridge's kernel is called by a pipe once per read: with the read's bytes before the
pipe's Python sees them (``read_request``/``read_reply``, from ``Pipe.data_received``), or
for what waits in the codec (``request``/``reply``, from ``Pipe.process``). It takes the
whole messages of the read straight from the codec's receive buffer (``codec.rx`` while
``codec.streaming``), translates their envelope as :class:`gateway.envelope.Translator` does,
chooses the destination pipe as the engine's strategies do (round robin over the writable back
pipes; the routing id for a reply), encodes the message for that pipe's wire into one buffer per
destination, and records what the reference records: the token and in-flight tables, the ledger's
counters. Every buffer goes to its pipe's open write batch once, at the end of the read.

It never raises on input and never decides anything unusual: it stops *before* the first message
it does not handle in the usual way (a command, reserved flags, a size past the limit, a partial
message, a body the other wire cannot carry, a hop limit, an unknown or expired token, a full
table, no writable pipe, a departed client, a batch at its mark, a socket that holds messages
already) and returns; the pure-Python engine, the reference, takes over at exactly that byte.
``tests/test_kernel.py`` feeds both the same streams and compares what they write and record.

Also here: compiled twins of :class:`gateway.envelope.TokenTable` and
:class:`gateway.device.inflight.InFlight` (same interface, same results), which the bridge uses
when this module is built.

Hop latency: the messages of one read are all given the read's processing time, one clock
reading before and one after (an upper bound of each message's own).
"""

cimport cython
from cpython.bytearray cimport (PyByteArray_AS_STRING, PyByteArray_FromStringAndSize,
                                PyByteArray_GET_SIZE, PyByteArray_Resize)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_SetDefault
from cpython.mem cimport PyMem_Free, PyMem_Malloc, PyMem_Realloc
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_GET_SIZE, PyTuple_New, PyTuple_SET_ITEM
from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from libc.time cimport timespec

from gateway.envelope import TableFull, UnknownToken
from gateway.errors import Closed


cdef extern from "sodium.h" nogil:
    int sodium_init()
    int crypto_box_easy_afternm(unsigned char* c, const unsigned char* m,
                                unsigned long long mlen, const unsigned char* n,
                                const unsigned char* k)
    int crypto_box_open_easy_afternm(unsigned char* m, const unsigned char* c,
                                     unsigned long long clen, const unsigned char* n,
                                     const unsigned char* k)

if sodium_init() < 0:
    raise ImportError("libsodium failed to initialise")


cdef extern from "<time.h>" nogil:
    int clock_gettime(int clk_id, timespec *tp)
    enum: CLOCK_MONOTONIC


cdef inline double _now() noexcept nogil:
    """time.monotonic(), without a call through Python."""
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <double>ts.tv_sec + <double>ts.tv_nsec * 1e-9


cdef enum:
    MAX_FRAMES = 32          # frames of one message the kernel takes (more: the reference's)
    MAX_BUCKETS = 32         # hop-latency buckets a kernel's histograms take
    MAX_HOPS = 16            # SP backtrace words (the hop limit is at most 15, plus the pipe id)
    TOKEN_BIT = 0x80000000
    COUNTER_MASK = 0x7FFFFFFF
    # what a pipe's codec writes (Pipe.framing): 0 none the kernel knows
    F_ZMTP = 1
    F_SP = 2
    F_SP_IPC = 3
    F_CURVE = 4  # ZMTP frames in CURVE MESSAGE boxes
    CURVE_OVERHEAD = 33  # "\x07MESSAGE", the short nonce, the MAC, the flags byte
    TOKEN_KEY_COST = 5  # an in-flight key of one token (envelope_bytes((token,)))
    FRAME_FLOOR = 2  # the least a ZMTP frame counts toward the size limit (its short header)


cdef Py_ssize_t FAIR_SHARE = 256
cdef Py_ssize_t NO_BYTE_BOUND = 1 << 62  # (gateway.envelope.tokens.NO_BYTE_BOUND)
cdef Py_ssize_t JOIN_BELOW = 16384  # (gateway.engine.writes.JOIN_BELOW)
cdef Py_ssize_t BYTES_PER_HWM = 1024  # (gateway.engine.writes.BYTES_PER_HWM)
cdef bytes EMPTY = b""
# a pipe's read buffer (gateway.engine.read_buffer's MIN_SIZE, CHUNK, AHEAD)
cdef Py_ssize_t RB_MIN_SIZE = 16 * 1024
cdef Py_ssize_t RB_CHUNK = 256 * 1024
cdef Py_ssize_t RB_AHEAD = 2 * 1024 * 1024


cdef inline uint64_t _be64(const uint8_t* p) noexcept nogil:
    return ((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40)
            | (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
            | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef inline void _put64(uint8_t* p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[7 - i] = <uint8_t>(v & 0xFF)
        v >>= 8


cdef inline int _bucket(const double* buckets, int n, double dt) noexcept nogil:
    """bisect_left(buckets[:n], dt)."""
    cdef int i = 0
    while i < n and buckets[i] < dt:
        i += 1
    return i


def _index_probe(list items, Py_ssize_t i):
    """``items[i]`` as the kernel indexes its lists: an IndexError past the end in the
    sanitizer build (Cython's bounds checks on), unchecked in the normal one (never call it
    so there). tests/test_kernel_findings.py asks the sanitizer build."""
    return items[i]


cdef class _WholeRead  # (below: a kernel's whole-read entry, which PipeState calls in C)

include "_kernel_state.pxi"
include "_kernel_tables.pxi"
include "_kernel_read.pxi"
include "_kernel_write.pxi"
include "_kernel_dests.pxi"


cdef inline void _read_done(PipeState ps, _Out state, Py_ssize_t n, bint left) except *:
    """The end of a whole read: the message deadline (``Pipe.process``'s rule) and the flush
    (as ``Batch.close``)."""
    if ps._watch:
        liveness = state.liveness if state.liveness is not None else (<object>ps).liveness
        if left or liveness.msg_timer is not None:  # (its ``watching``, inline)
            liveness.watch_partial(n)
    batch = ps._batch
    if type(batch) is Batch:
        (<Batch>batch).schedule(ps._loop)
    else:
        batch.schedule(ps._loop)  # (a reference batch: its own flush)


# -------------------------------------------------------------------------------------------------
# the kernels

cdef enum:
    REQREP = 0
    PIPELINE = 1
    PUBSUB = 2
    # what one message came to (a method's answer; 0: stop, the reference takes it)
    FORWARDED = 1
    CONSUMED = 2  # taken and not forwarded (a subscription filter held it back)


cdef class _Reader:
    """What every pattern's kernel does with one read: take its whole messages (``_take`` says
    what each one comes to), give each destination pipe its bytes once, count in the ledger.
    ``fwd`` is the bridge's forwarder (its ``hold`` and ``back_hold`` cells say when the
    reference must take every message: draining, a loop holding messages); ``front`` and
    ``back`` the two native
    sockets; ``ledger`` the reference's books, shared."""

    cdef object front, back
    cdef Tally tally  # the ledger's hot counters (its reference's books, shared)
    cdef object f_inbox, b_inbox  # the two sockets' inboxes (each a deque for life)
    cdef list hold, back_hold  # the forwarder's gates (AsyncForwarder.hold)
    cdef list watched  # the forwarder's: a capture reader takes copies (the step forwards)
    cdef Routing f_routing, b_routing
    cdef int front_zmtp, back_zmtp
    cdef double buckets[32]  # the hop-latency buckets (its own: each kernel its ledger's)
    cdef int nbuckets
    cdef int pattern
    cdef bint requests, replies  # the directions this kernel forwards
    # per call
    cdef _Dests dests  # this read's destination pipes
    cdef bytearray plain  # CURVE: the boxes of one message, opened

    def __init__(self, fwd, front, back, translator, Tally tally, buckets) -> None:
        """``tally``: the ledger's (a compiled one: :func:`gateway.kernel.for_bridge` makes the
        kernel only then); ``front`` and ``back``: the two native sockets, whose ``routing`` is
        compiled too (a TypeError otherwise: the engine's own objects, a developer's slip)."""
        if not 0 < len(buckets) <= 32:
            raise ValueError("1 to 32 hop-latency buckets")
        if not len(tally.req_counts) == len(tally.rep_counts) == len(buckets) + 1:
            raise ValueError(f"{len(buckets)} hop-latency buckets, but the ledger's histograms "
                             f"count {len(tally.req_counts)} and "
                             f"{len(tally.rep_counts)} (one more than the buckets)")
        if len(tally.req_total) != 1 or len(tally.rep_total) != 1:
            raise ValueError("a histogram's total is one cell")
        for i, b in enumerate(buckets):
            self.buckets[i] = b
        self.nbuckets = len(buckets)
        self.front, self.back, self.tally = front, back, tally
        self.f_inbox, self.b_inbox = front.inbox, back.inbox
        self.hold, self.back_hold = fwd.hold, fwd.back_hold
        self.watched = fwd.watched
        self.f_routing, self.b_routing = front.routing, back.routing
        self.front_zmtp = translator.mode.startswith("zmtp")
        self.back_zmtp = translator.mode.endswith("zmtp")
        self.pattern = {"reqrep": REQREP, "pipeline": PIPELINE, "pubsub": PUBSUB}[
            translator.pattern]
        self.requests = self.pattern != PUBSUB  # (pub/sub: the front's are subscriptions)
        self.replies = self.pattern != PIPELINE
        self.dests = _Dests(self.b_routing, self.f_routing.routes)
        self.plain = bytearray(256)
        self.read_request, self.read_reply = _WholeRead(self, True), _WholeRead(self, False)

    # -- the per-read entry points (Pipe.fast) ---------------------------------------------------
    def request(self, pipe) -> int:
        """The requests (pipeline: messages) of one read of a front pipe; how many it took."""
        return self._run(pipe, True) if self._open(True) else 0

    def reply(self, pipe) -> int:
        """The replies (published messages) of one read of a back pipe; how many it took."""
        return self._run(pipe, False) if self._open(False) else 0

    cdef bint _open(self, bint request) except -1:
        """This direction is the kernel's now: not draining, no loop holding messages (the
        detours, a socket's inbox), the destination socket open."""
        if self.watched[0]:
            return False  # every message through the Python step, which the tap sees
        if request:
            return (self.requests and not self.hold[0]
                    and not self.f_inbox and not self.b_routing.closed)
        return (self.replies and not self.back_hold[0] and not self.b_inbox
                and not self.f_routing.closed)

    cdef void _before_replies(self) except *:
        """Before a read of a back pipe (PatternKernel: pub/sub's filters, as they stand)."""

    cdef void _after_replies(self) except *:
        """After a read of a back pipe (PatternKernel: what the back's filter dropped)."""

    # -- whole reads (Pipe.fast_read): the read's bytes, before the pipe's Python sees them ------
    # ``read_request(pipe, data)`` / ``read_reply(pipe, data)``: a whole read of a front / back
    # pipe (see ``_read``); callables a pipe's ``data_received`` calls without Python's call
    cdef readonly _WholeRead read_request, read_reply

    cdef _Out _reading(self, object pipe):
        """The kernel's record of ``pipe`` when a whole read of it may be the kernel's: a pipe
        of the compiled twin, reading, not closing, whose codec the kernel frames and streams
        (None: the pipe's own way)."""
        if not isinstance(pipe, PipeState):
            return None
        cdef PipeState ps = <PipeState>pipe
        if not ps.reading or ps.close_reason:
            return None
        cdef _Out state = _state(ps)
        if state.framing == 0 or not state.codec.streaming:
            return None
        return state

    cdef bint _read(self, object pipe, object data, bint request) except -1:
        """The read as ``Pipe.data_received`` and ``Pipe.process`` take it, without their
        Python: the bytes become the codec's receive buffer (as ``ReceiveBuffer.feed`` does
        when it is empty), the kernel takes the whole messages, the flush is scheduled (as
        ``Batch.close``), and only a read it does not finish goes on to ``Pipe.process``,
        which gives the kernel its turn first and stops at once. A read that ends inside a
        message the kernel will take (``_incomplete``) waits for the next, which is appended
        to the buffer once; the codec's Python never takes its frames apart. False: nothing
        was done (a reference pipe, paused or closing, a tail of the last read that is not
        such a message): the pipe's own way."""
        if type(data) is not bytes:
            return False
        cdef _Out state = self._reading(pipe)
        if state is None:
            return False
        cdef PipeState ps = <PipeState>pipe
        cdef ReceiveBuffer rx = state.rx
        cdef Py_ssize_t size = 0
        cdef const uint8_t* buf = _buffer_of(rx.data, &size)
        if buf == NULL:
            size = len(rx.data)
        if rx.pos < size:  # a message begun in an earlier read, which the kernel waits for
            if buf == NULL or not _incomplete(buf, rx.pos, size, state.limit, state.framing):
                return False
            rx.feed(data)  # appended once (to a new buffer while views of the old wait)
        else:
            rx.data = data
            rx.pos = 0
        ps.rx_chunks += 1
        cdef Py_ssize_t n = self._messages(state, request, None)
        buf = _buffer_of(rx.data, &size)
        if buf == NULL:  # (a public slot: Python code may have put another buffer there)
            size = len(rx.data)
        cdef bint left = rx.pos < size
        if n >= FAIR_SHARE:
            pipe.yield_turn()  # the rest after the other pipes' turn (Pipe.process's rule)
        elif left and (buf == NULL
                       or not _incomplete(buf, rx.pos, size, state.limit, state.framing)):
            pipe.process(n)  # the rest, the reference's way, in the same FAIR_SHARE
            return True
        _read_done(ps, state, n, left)
        return True

    cdef bint _read_buffer(self, object pipe, ReadBuffer rb, bint request) except -1:
        """``_read`` of a read that landed in the pipe's read buffer (``Pipe.buffer_updated``),
        in place: the kernel takes the whole messages from ``rb`` itself (large bodies leave
        as views of it); a message it waits for (``_incomplete``) stays there, and the length
        its headers declare (``rb.wanted``) sizes the room of the next reads, so that its
        bytes land behind it; anything else left (a command, a message the kernel does not
        take, the rest after a FAIR_SHARE) goes to the codec's receive buffer as one
        ``bytes``, where the reference takes over at that byte. False: nothing was done (as
        ``_read``; the codec holding a tail of an earlier read among them): the pipe hands
        the bytes to ``data_received``."""
        cdef _Out state = self._reading(pipe)
        if state is None:
            return False
        cdef PipeState ps = <PipeState>pipe
        cdef ReceiveBuffer rx = state.rx
        cdef Py_ssize_t size = 0
        cdef const uint8_t* buf = _buffer_of(rx.data, &size)
        if buf == NULL or rx.pos < size:  # the codec holds bytes: they go first
            return False
        ps.rx_chunks += 1
        cdef Py_ssize_t n = self._messages(state, request, rb), wanted = 0
        cdef bint left = rb.start < rb.end
        if left and n < FAIR_SHARE:
            wanted = _incomplete(<const uint8_t*>PyByteArray_AS_STRING(rb.data), rb.start,
                                 rb.end, state.limit, state.framing)
        if left and not wanted:  # the rest is the codec's (the reference's way, from there)
            rx.data = rb.take()
            rx.pos = 0
            if n < FAIR_SHARE:
                pipe.process(n)  # in the same FAIR_SHARE
                return True
        rb.wanted = wanted
        if n >= FAIR_SHARE:
            pipe.yield_turn()  # the rest after the other pipes' turn (Pipe.process's rule)
        _read_done(ps, state, n, left)
        return True

    cdef Py_ssize_t _run(self, object pipe, bint request) except -1:
        if not isinstance(pipe, PipeState):
            return 0
        cdef _Out state = _state(<PipeState>pipe)
        # (framing first: a plugin's codec has no ``streaming``)
        if (state.framing == 0 or (<PipeState>pipe).close_reason
                or not state.codec.streaming):
            return 0
        return self._messages(state, request, None)

    cdef Py_ssize_t _messages(self, _Out state, bint request, ReadBuffer rb) except -1:
        """The whole messages in the receive buffer of ``state``'s pipe (a streaming codec),
        or in ``rb``, its read buffer (not None); replies between ``_before_replies`` and
        ``_after_replies``."""
        if request:
            return self._take_all(state, True, rb)
        self._before_replies()
        try:
            return self._take_all(state, False, rb)
        finally:
            self._after_replies()

    cdef Py_ssize_t _take_all(self, _Out state, bint request, ReadBuffer rb) except -1:
        pipe, codec = state.pipe, state.codec
        cdef ReceiveBuffer rx = state.rx
        cdef int framing = state.framing
        cdef const uint8_t* p
        cdef Py_ssize_t end, pos
        if rb is not None:  # the read buffer, where the read landed (start to end)
            data = rb.data
            p = <const uint8_t*>PyByteArray_AS_STRING(data)
            end, pos = rb.end, rb.start
        else:
            data = rx.data
            pos = rx.pos
            if type(data) is bytes:
                p = <const uint8_t*>PyBytes_AS_STRING(data)
                end = PyBytes_GET_SIZE(data)
            elif type(data) is bytearray:
                p = <const uint8_t*>PyByteArray_AS_STRING(data)
                end = PyByteArray_GET_SIZE(data)
            else:
                return 0  # another buffer (ReceiveBuffer.data is a public slot): the reference's
        cdef Py_ssize_t nxt, limit = state.limit, n = 0
        cdef Py_ssize_t sent = 0
        cdef double t0 = _now()
        cdef Frame frames[MAX_FRAMES]
        cdef int count = 0, done
        cdef bint curve = framing == F_CURVE
        cdef bint zmtp = framing == F_ZMTP or curve
        cdef bytes rid = (<PipeState>pipe).routing_id
        # CURVE: the message's frames are its opened boxes (self.plain), not the read
        cdef const uint8_t* m = p
        cdef uint64_t peer_nonce = 0, opened = 0
        cdef bytes key = None, prefix = None
        if curve:
            key, _, prefix, _, peer_nonce = codec.security.session()
        cdef _Dests dests = self.dests
        dests.src, dests.base, dests.end = data, p, end  # (views of large bodies: its own)
        try:
            while n < FAIR_SHARE:
                if curve:
                    opened = peer_nonce
                    nxt = _open(self.plain, p, pos, end, limit, frames, &count, key, prefix,
                                &opened)
                    m = <const uint8_t*>PyByteArray_AS_STRING(self.plain)
                elif zmtp:
                    nxt = _zmtp_message(p, pos, end, limit, frames, &count)
                else:
                    nxt = _sp_message(p, pos, end, limit, framing == F_SP_IPC, &frames[0])
                    count = 1
                if nxt < 0:
                    break
                done = self._take(m, frames, count, zmtp, request, rid, t0)
                if not done:
                    break
                if done == FORWARDED:
                    sent += 1
                pos = nxt
                peer_nonce = opened
                n += 1
        finally:
            if rb is None:
                rx.pos = pos
            else:
                rb.start = pos
                if dests.view is not None:  # bodies written as views of it: not reused yet
                    rb.lend()  # (a read in the thread's scratch leaves its slot)
            self.dests.flush()
            if curve and n:  # the boxes opened, up to the peer's nonce
                mech = codec.security
                mech.advance(mech.session()[3], peer_nonce)
        if sent:
            self._account(request, sent, _now() - t0)
        return n

    cdef int _take(self, const uint8_t* p, Frame* frames, int count, bint zmtp, bint request,
                   bytes rid, double now) except -2:
        """What one message comes to: 0 (left to the reference, nothing changed), FORWARDED or
        CONSUMED. Each pattern's kernel says."""
        return 0

    cdef void _account(self, bint request, Py_ssize_t n, double dt) except *:
        """``Ledger.request_forwarded`` / ``reply_forwarded`` for ``n`` messages at once."""
        cdef Tally tally = self.tally
        cdef int b = _bucket(self.buckets, self.nbuckets, dt)
        tally.by_kernel += n
        if request:
            if tally.pairs_replies:
                tally.in_flight += n
        else:
            tally.in_flight = max(0, tally.in_flight - n)
        tally.count(0 if request else 1, b, n, dt)  # (the cells' C numbers)


@cython.final
cdef class _WholeRead:
    """A kernel's whole-read entry for one direction (``read_request``, ``read_reply``): a
    pipe's ``fast_read``, called as ``entry(pipe, data) -> bool`` from Python and through
    :meth:`take` from the compiled ``data_received`` (a C call, no argument tuple)."""

    cdef _Reader reader
    cdef bint request

    def __cinit__(self, _Reader reader, bint request) -> None:
        self.reader, self.request = reader, request

    cdef inline bint take(self, object pipe, object data) except -1:
        return self.reader._open(self.request) and self.reader._read(pipe, data, self.request)

    cdef inline bint take_buffer(self, object pipe, ReadBuffer rb) except -1:
        return (self.reader._open(self.request)
                and self.reader._read_buffer(pipe, rb, self.request))

    def __call__(self, pipe, data) -> bool:
        return self.take(pipe, data)


include "_kernel_reqrep.pxi"
include "_kernel_patterns.pxi"
