# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, freethreading_compatible=False
"""The compiled forwarding kernel: one call per read, for bridges whose two sides run on the
native engine (issue 22): request-reply (:class:`Kernel`), pipeline and pub/sub
(:class:`PatternKernel`). One compiled module from five files: this one (the shared reader and
request-reply), ``_kernel_tables.pxi`` (the compiled tables), ``_kernel_read.pxi`` (parsing a
read in place: ZMTP, SP, CURVE boxes opened through libsodium), ``_kernel_write.pxi`` (one
destination's buffer and its encoders, CURVE boxes sealed) and ``_kernel_patterns.pxi``.

A bridge's kernel is called by a pipe once per read (``Pipe.process``). It takes the
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
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
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
from gateway.wire.sp import SpCodec
from gateway.wire.zmtp import ZmtpCodec


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
    MAX_HOPS = 16            # SP backtrace words (the hop limit is at most 15, plus the pipe id)
    TOKEN_BIT = 0x80000000
    COUNTER_MASK = 0x7FFFFFFF
    # what a pipe's codec writes (Pipe.framing): 0 none the kernel knows
    F_ZMTP = 1
    F_SP = 2
    F_SP_IPC = 3
    F_CURVE = 4  # ZMTP frames in CURVE MESSAGE boxes
    CURVE_OVERHEAD = 33  # "\x07MESSAGE", the short nonce, the MAC, the flags byte


cdef Py_ssize_t FAIR_SHARE = 256
cdef bytes EMPTY = b""
cdef double _BUCKETS[32]
cdef int _NBUCKETS = 0  # the hop-latency buckets (gateway.metrics.BUCKETS, given to Kernel)


cdef inline uint64_t _be64(const uint8_t* p) noexcept nogil:
    return ((<uint64_t>p[0] << 56) | (<uint64_t>p[1] << 48) | (<uint64_t>p[2] << 40)
            | (<uint64_t>p[3] << 32) | (<uint64_t>p[4] << 24) | (<uint64_t>p[5] << 16)
            | (<uint64_t>p[6] << 8) | <uint64_t>p[7])


cdef inline void _put64(uint8_t* p, uint64_t v) noexcept nogil:
    cdef int i
    for i in range(8):
        p[7 - i] = <uint8_t>(v & 0xFF)
        v >>= 8


cdef inline int _bucket(double dt) noexcept nogil:
    """bisect_left(BUCKETS, dt)."""
    cdef int i = 0
    while i < _NBUCKETS and _BUCKETS[i] < dt:
        i += 1
    return i


include "_kernel_tables.pxi"
include "_kernel_read.pxi"
include "_kernel_write.pxi"


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
    ``fwd`` is the bridge's forwarder (its ``draining``, ``detour`` and ``back_detour`` flags
    say when the reference must take every message); ``front`` and ``back`` the two native
    sockets; ``ledger`` the reference's books, shared."""

    cdef object fwd, front, back, ledger
    cdef object f_routing, b_routing
    cdef list b_out
    cdef int front_zmtp, back_zmtp
    cdef list n_req, n_rep, h_req_counts, h_rep_counts
    cdef object h_req, h_rep
    cdef int pattern
    cdef bint requests, replies  # the directions this kernel forwards
    # per call
    cdef dict outs
    cdef list order
    cdef list picks  # this read's back pipes for _pick (None: none picked yet)
    cdef bytes r_target  # this read's last reply destination (routing id) and its buffer
    cdef _Out r_out
    cdef Py_ssize_t picked, rr
    cdef bytearray plain  # CURVE: the boxes of one message, opened

    def __init__(self, fwd, front, back, translator, ledger, buckets) -> None:
        global _NBUCKETS
        if not 0 < len(buckets) <= 32:
            raise ValueError("1 to 32 hop-latency buckets")
        for i, b in enumerate(buckets):
            _BUCKETS[i] = b
        _NBUCKETS = len(buckets)
        self.fwd, self.front, self.back, self.ledger = fwd, front, back, ledger
        self.f_routing, self.b_routing = front.routing, back.routing
        self.b_out = back.routing.out
        self.front_zmtp = translator.mode.startswith("zmtp")
        self.back_zmtp = translator.mode.endswith("zmtp")
        self.n_req, self.n_rep = ledger._n_req, ledger._n_rep
        self.h_req, self.h_rep = ledger._h_req, ledger._h_rep
        self.h_req_counts, self.h_rep_counts = ledger._h_req.counts, ledger._h_rep.counts
        self.pattern = {"reqrep": REQREP, "pipeline": PIPELINE, "pubsub": PUBSUB}[
            translator.pattern]
        self.requests = self.pattern != PUBSUB  # (pub/sub: the front's are subscriptions)
        self.replies = self.pattern != PIPELINE
        self.outs = {}
        self.order = []
        self.plain = bytearray(256)

    # -- the per-read entry points (Pipe.fast) ---------------------------------------------------
    def request(self, pipe) -> int:
        """The requests (pipeline: messages) of one read of a front pipe; how many it took."""
        fwd = self.fwd
        if (not self.requests or fwd.draining or fwd.detour or self.front._inbox
                or self.b_routing.closed):
            return 0
        return self._run(pipe, True)

    def reply(self, pipe) -> int:
        """The replies (published messages) of one read of a back pipe; how many it took."""
        if not self.replies or self.fwd.back_detour or self.back._inbox \
                or self.f_routing.closed:
            return 0
        return self._run(pipe, False)

    cdef Py_ssize_t _run(self, object pipe, bint request) except -1:
        codec = pipe.codec
        cdef int framing = _framing(codec)  # first: a plugin's codec has no ``streaming``
        if framing == 0 or pipe.close_reason or not codec.streaming:
            return 0
        rx = codec.rx
        data = rx.data
        cdef const uint8_t* p
        cdef Py_ssize_t end
        if type(data) is bytes:
            p = <const uint8_t*>PyBytes_AS_STRING(data)
            end = PyBytes_GET_SIZE(data)
        else:
            p = <const uint8_t*>PyByteArray_AS_STRING(data)
            end = PyByteArray_GET_SIZE(data)
        cdef Py_ssize_t pos = rx.pos, nxt, limit = codec.max_message_size, n = 0, sent = 0
        cdef double t0 = _now()
        cdef Frame frames[MAX_FRAMES]
        cdef int count = 0, done
        cdef bint curve = framing == F_CURVE
        cdef bint zmtp = framing == F_ZMTP or curve
        cdef bytes rid = pipe.routing_id
        # CURVE: the message's frames are its opened boxes (self.plain), not the read
        cdef const uint8_t* m = p
        cdef uint64_t peer_nonce = 0, opened = 0
        cdef bytes key = None, prefix = None
        if curve:
            key, _, prefix, _, peer_nonce = codec.security.session()
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
            rx.pos = pos
            if self.picks is not None:  # the round robin, as the reference's picks leave it
                self.picks = None
                self.b_routing.rr = self.rr
            self.r_target = self.r_out = None
            self._flush()
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
        ledger = self.ledger
        cdef int b = _bucket(dt)
        if request:
            if ledger.pairs_replies:
                ledger.in_flight += n
            self.n_req[0] += n
            self.h_req_counts[b] += n
            self.h_req.sum += dt * n
        else:
            ledger.in_flight = max(0, ledger.in_flight - n)
            self.n_rep[0] += n
            self.h_rep_counts[b] += n
            self.h_rep.sum += dt * n

    cdef _Out _pick(self):
        """The next writable back pipe, round robin (Routing.pick), or None; ``picked`` is
        its place, for the caller to move the round robin on (``_moved``) once it sent.
        Within one read nothing is written, so which back pipes are writable does not change:
        the first pick of a read takes the round robin and the writable pipes once (``picks``;
        each then becomes its buffer when first chosen), ``_run`` gives the round robin back."""
        cdef list picks = self.picks
        cdef Py_ssize_t n, i, idx
        if picks is None:
            picks = self.picks = [pipe if pipe.writable else None for pipe in self.b_out]
            self.rr = self.b_routing.rr
        n = len(picks)
        for i in range(n):
            idx = (self.rr + i) % n
            item = picks[idx]
            if item is None:
                continue
            if type(item) is not _Out:
                item = self._out(item)
                if item is None:
                    return None  # a wire the kernel does not write
                picks[idx] = item
            self.picked = idx
            return <_Out>item
        return None

    cdef inline void _moved(self) noexcept:
        """The message went to the picked pipe: the round robin moves past it."""
        self.rr = self.picked + 1

    # -- destinations ----------------------------------------------------------------------------
    cdef _Out _out(self, object pipe):
        """This read's buffer for ``pipe`` (None: a wire the kernel does not write)."""
        cdef _Out out = self.outs.get(pipe)
        if out is not None:
            return out
        codec = pipe.codec
        cdef int framing = _framing(codec)
        if framing == 0:
            return None
        out = _Out.__new__(_Out)
        out.pipe = pipe
        out.data = bytearray()
        out.size = out.wire = 0
        out.framing = framing
        out.room = pipe._high - pipe._wbuf_size
        if framing == F_CURVE:
            out.mech = codec.security
            out.precom, out.prefix, _, out.nonce, _ = out.mech.session()
        self.outs[pipe] = out
        self.order.append(out)
        return out

    cdef void _flush(self) except *:
        """Each destination's bytes into its pipe's write batch (Writes.write_frames), once;
        CURVE destinations get their frames sealed here, in order (their nonces go up)."""
        cdef _Out out
        for out in self.order:
            if out.size:
                if out.framing == F_CURVE:
                    data = _seal(out)
                else:
                    PyByteArray_Resize(out.data, out.size)
                    data = out.data
                pipe = out.pipe
                if not pipe.wbuf:
                    pipe._batch.dirty.append(pipe)
                pipe.wbuf.append(data)
                pipe._wbuf_size += out.wire
        self.outs.clear()
        del self.order[:]


cdef class Kernel(_Reader):
    """A request-reply bridge's forwarding: requests front -> back (the envelope translated,
    the token or in-flight entry recorded), replies back -> front (routed by the routing id or
    the token). ``translator`` and ``loss`` are the reference's, whose tables (compiled twins,
    :func:`gateway.kernel.token_table`) this shares."""

    cdef dict f_routes
    cdef TokenTable table
    cdef InFlight inflight
    cdef bint tokens  # zmtp -> sp: requests park their envelope under a token
    cdef int ttl  # the front's hop limit (SP)

    def __init__(self, fwd, front, back, translator, loss, ledger, buckets) -> None:
        super().__init__(fwd, front, back, translator, ledger, buckets)
        self.f_routes = front.routing.routes
        self.tokens = translator.mode == "zmtp->sp"
        self.table = translator.table if self.tokens else None
        self.inflight = loss.inflight
        self.ttl = front.pattern.ttl

    cdef int _take(self, const uint8_t* p, Frame* frames, int count, bint zmtp, bint request,
                   bytes rid, double now) except -2:
        if request:
            return self._request(p, frames, count, zmtp, rid, now)
        return self._reply(p, frames, count, zmtp, now)

    cdef int _request(self, const uint8_t* p, Frame* frames, int count, bint zmtp, bytes rid,
                      double now) except -2:
        """Forward one request (True), or leave it to the reference (False, nothing changed)."""
        cdef int i, nhops = 0, nbody
        cdef Py_ssize_t words = 0
        cdef Frame payload
        if zmtp:  # [identity, ...] "" body...: hops up to the first empty frame
            for i in range(count):
                if frames[i].size == 0:
                    nhops = i + 1
                    break
            nbody = count - nhops
        else:  # the SP backtrace, up to the request id
            payload = frames[0]
            nhops = _sp_backtrace(p, payload, self.ttl, &words)
            if nhops < 0:
                return False
            nbody = 1
        cdef _Out out = self._pick()
        if out is None:
            return False
        cdef int dest_zmtp = _zmtp_framing(out.framing)
        if not dest_zmtp and nbody != 1:
            return False  # SP carries one body frame (the reference refuses and counts)
        cdef bytes key, token
        if self.tokens:  # zmtp -> sp: [token][body]
            if self.table.full() or self.inflight.c_full():
                return False
            hops = _hops(p, frames, nhops, rid)
            if not out.fits(8 + 4 + frames[nhops].size):
                return False
            token = self.table.c_mint(hops, now)
            out.sp_token(token, p + frames[nhops].start, frames[nhops].size)
            key = _flat_token(token)
        elif zmtp:  # zmtp -> zmtp: untouched
            if self.inflight.c_full():
                return False
            key = _flat_frames(p, frames, nhops, rid)
            if not out.zmtp_frames(rid, p, frames, 0, count):
                return False
        else:  # sp -> zmtp (pipe id, words..., "", body) or sp -> sp (untouched)
            if self.inflight.c_full():
                return False
            key = _flat_words(p, payload.start, words, rid, dest_zmtp)
            if dest_zmtp:
                if not out.sp_to_zmtp(rid, p, payload, words):
                    return False
            elif not out.sp_forward(rid, p, payload):
                return False
        self._moved()
        self.inflight.c_sent(key, out.pipe.routing_id, now)
        return True

    cdef _Out _front_out(self, const uint8_t* tp, Py_ssize_t tn, bytes target):
        """The buffer for the front pipe a reply goes to (its routing id: ``tn`` bytes at
        ``tp``, or ``target``), or None: gone, at its mark (the reference counts those) or a
        wire the kernel does not write. Within one read no pipe comes, goes or changes its
        writability: the last answer is kept for the read's next reply to the same pipe."""
        cdef bytes last = self.r_target
        if (last is not None and PyBytes_GET_SIZE(last) == tn
                and memcmp(PyBytes_AS_STRING(last), tp, tn) == 0):
            return self.r_out
        if target is None:
            target = PyBytes_FromStringAndSize(<const char*>tp, tn)
        fpipe = self.f_routes.get(target)
        if fpipe is None or not fpipe.writable:
            return None
        cdef _Out out = self._out(fpipe)
        if out is not None:
            self.r_target, self.r_out = target, out
        return out

    cdef int _reply(self, const uint8_t* p, Frame* frames, int count, bint zmtp,
                    double now) except -2:
        cdef int i, nhops = 0
        cdef Py_ssize_t words = 0
        cdef Frame payload
        cdef bytes key, target = None
        cdef const uint8_t* tp = NULL  # the front pipe's routing id, in the read
        cdef Py_ssize_t tn = 0
        if zmtp:  # the back end's ZeroMQ server: hops up to the first empty frame
            for i in range(count):
                if frames[i].size == 0:
                    nhops = i + 1
                    break
            if nhops < 2:
                return False  # no envelope, or no routing hop before the delimiter
            tp, tn = p + frames[0].start, frames[0].size
            if not self.front_zmtp:  # sp -> zmtp: words, "" -> an SP backtrace
                if count - nhops != 1 or not _valid_words(p, frames, nhops - 1):
                    return False
        else:
            payload = frames[0]
            nhops = _sp_backtrace(p, payload, <int>(payload.size // 4 + 1), &words)
            if nhops < 0:
                return False
            if self.tokens:
                if nhops != 1:
                    return False
            else:  # sp -> sp: the first word is the front's pipe id
                tp, tn = p + payload.start, 4
        cdef bytes token = None
        cdef tuple parked = None
        cdef PyObject* entry
        if self.tokens:
            token = PyBytes_FromStringAndSize(<char*>p + payload.start, 4)
            entry = PyDict_GetItem(self.table._entries, token)
            if entry == NULL or (<tuple><object>entry)[1] <= now:
                return False
            parked = (<tuple><object>entry)[0]
            target = parked[0]
            tp, tn = <const uint8_t*>PyBytes_AS_STRING(target), PyBytes_GET_SIZE(target)
        cdef _Out out = self._front_out(tp, tn, target)
        if out is None:
            return False  # gone, at its mark, or a wire the kernel does not write
        cdef int dest_zmtp = _zmtp_framing(out.framing)
        if self.tokens:  # parked hops[1:] + body, to the ZeroMQ client
            if not out.zmtp_parked(parked, p, payload, words):
                return False
            key = _flat_token(token)
            self.table.c_take(token, now)
        elif zmtp and dest_zmtp:  # zmtp -> zmtp
            if not out.zmtp_frames(None, p, frames, 1, count):
                return False
            key = _flat_frames(p, frames, nhops, None)
        elif zmtp:  # sp -> zmtp: the SP client gets words (without the pipe id) + body
            if not out.zmtp_to_sp(p, frames, nhops, count):
                return False
            key = _flat_frames(p, frames, nhops, None)
        else:  # sp -> sp
            if not out.sp_reply(p, payload):
                return False
            key = _flat_words(p, payload.start, words, None, False)
        self.inflight.c_answered(key)
        return True


include "_kernel_patterns.pxi"
