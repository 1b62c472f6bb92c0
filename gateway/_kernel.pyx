# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: initializedcheck=False, freethreading_compatible=False
"""The compiled forwarding kernel: one call per read, for request-reply bridges whose two sides
run on the native engine (issue 22).

A bridge's :class:`Kernel` is called by a pipe once per read (``Pipe.process``). It takes the
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

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem
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


# -------------------------------------------------------------------------------------------------
# the token table and the in-flight table (compiled twins)

cdef class _Fifo:
    """A growable ring of (key, seq) in insertion order; stale items are skipped by the reader
    and compacted away once they outnumber the live ones."""

    cdef uint64_t* keys
    cdef uint64_t* seqs
    cdef Py_ssize_t head, size, cap

    def __cinit__(self) -> None:
        self.cap = 64
        self.keys = <uint64_t*>PyMem_Malloc(self.cap * sizeof(uint64_t))
        self.seqs = <uint64_t*>PyMem_Malloc(self.cap * sizeof(uint64_t))
        if self.keys == NULL or self.seqs == NULL:
            raise MemoryError()
        self.head = 0
        self.size = 0

    def __dealloc__(self) -> None:
        PyMem_Free(self.keys)
        PyMem_Free(self.seqs)

    cdef int push(self, uint64_t key, uint64_t seq) except -1:
        cdef Py_ssize_t i, n, j
        cdef uint64_t* nk
        cdef uint64_t* ns
        if self.size == self.cap:  # grow: unroll the ring into twice the room
            n = self.cap * 2
            nk = <uint64_t*>PyMem_Malloc(n * sizeof(uint64_t))
            ns = <uint64_t*>PyMem_Malloc(n * sizeof(uint64_t))
            if nk == NULL or ns == NULL:
                PyMem_Free(nk)
                PyMem_Free(ns)
                raise MemoryError()
            for i in range(self.size):
                j = (self.head + i) % self.cap
                nk[i] = self.keys[j]
                ns[i] = self.seqs[j]
            PyMem_Free(self.keys)
            PyMem_Free(self.seqs)
            self.keys, self.seqs, self.cap, self.head = nk, ns, n, 0
        i = (self.head + self.size) % self.cap
        self.keys[i] = key
        self.seqs[i] = seq
        self.size += 1
        return 0

    cdef inline void pop(self) noexcept:
        self.head = (self.head + 1) % self.cap
        self.size -= 1

    cdef inline uint64_t key_at(self, Py_ssize_t i) noexcept:
        return self.keys[(self.head + i) % self.cap]

    cdef inline uint64_t seq_at(self, Py_ssize_t i) noexcept:
        return self.seqs[(self.head + i) % self.cap]

    cdef void keep(self, Py_ssize_t i, Py_ssize_t at) noexcept:
        """Move item ``i`` to position ``at`` (``at <= i``): compaction in place."""
        cdef Py_ssize_t a = (self.head + at) % self.cap, b = (self.head + i) % self.cap
        self.keys[a] = self.keys[b]
        self.seqs[a] = self.seqs[b]


cdef class TokenTable:
    """:class:`gateway.envelope.TokenTable`, compiled: token -> (ZeroMQ hops, deadline), the
    same tokens in the same order, the same expiry and the same errors."""

    cdef readonly Py_ssize_t max_entries
    cdef readonly double ttl
    cdef public Py_ssize_t expired_total
    cdef dict _entries  # token -> (hops, deadline, seq)
    cdef uint32_t _counter
    cdef uint64_t _seq
    cdef _Fifo _order

    def __init__(self, max_entries: int = 100_000, ttl: float = 60.0, *,
                 start: int | None = None) -> None:
        if not 1 <= max_entries <= COUNTER_MASK:
            raise ValueError(f"max_entries must be in 1..{COUNTER_MASK}, not {max_entries}")
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0, not {ttl}")
        import random

        self.max_entries = max_entries
        self.ttl = float(ttl)
        self.expired_total = 0
        self._entries = {}
        self._counter = (random.getrandbits(31) if start is None else start) & COUNTER_MASK
        self._seq = 0
        self._order = _Fifo()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, token: object) -> bool:
        return token in self._entries

    cdef inline bint full(self):
        return len(self._entries) >= self.max_entries

    def mint(self, hops: tuple, now: float) -> bytes:
        """Park ``hops`` until ``now + ttl``; return the new 4-byte token (top bit set)."""
        if len(self._entries) >= self.max_entries:
            self.expire(now)
            if len(self._entries) >= self.max_entries:
                raise TableFull(f"{len(self._entries)} pending requests")
        return self.c_mint(hops, now)

    cdef bytes c_mint(self, tuple hops, double now):
        """mint, the table known not full."""
        cdef uint32_t c = self._counter
        cdef bytes token = _token(c)
        while token in self._entries:  # terminates: fewer than 2**31 entries
            c = (c + 1) & COUNTER_MASK
            token = _token(c)
        self._counter = (c + 1) & COUNTER_MASK
        self._seq += 1
        self._entries[token] = (hops, now + self.ttl, self._seq)
        self._order.push(c, self._seq)
        self._compact()
        return token

    def pop(self, token: bytes, now: float) -> tuple:
        """Remove and return the hops parked under ``token``; :class:`UnknownToken` if none."""
        entry = self._entries.pop(token, None)
        if entry is None:
            raise UnknownToken("unknown-token", f"token {token!r}")
        if entry[1] <= now:
            self.expired_total += 1
            raise UnknownToken("expired-token", f"token {token!r}")
        return entry[0]

    cdef object c_take(self, bytes token, double now):
        """The hops under ``token`` if it is there and not expired (removed), else None and
        nothing changes (the reference then counts what is wrong)."""
        cdef PyObject* entry = PyDict_GetItem(self._entries, token)
        if entry == NULL or (<tuple><object>entry)[1] <= now:
            return None
        hops = (<tuple><object>entry)[0]
        del self._entries[token]
        return hops

    def discard(self, token: bytes) -> None:
        """Forget ``token`` (its request was counted lost some other way)."""
        self._entries.pop(token, None)

    def expire(self, now: float) -> int:
        """Drop every entry whose deadline is ``<= now``; return how many were dropped."""
        cdef Py_ssize_t n = 0
        cdef _Fifo order = self._order
        cdef PyObject* entry
        cdef bytes token
        while order.size:
            token = _token(<uint32_t>order.key_at(0))
            entry = PyDict_GetItem(self._entries, token)
            if entry == NULL or (<tuple><object>entry)[2] != order.seq_at(0):
                order.pop()  # answered or discarded already
                continue
            if (<tuple><object>entry)[1] > now:
                break
            del self._entries[token]
            order.pop()
            n += 1
        self.expired_total += n
        return n

    cdef void _compact(self) noexcept:
        cdef _Fifo order = self._order
        cdef Py_ssize_t i, at = 0
        cdef PyObject* entry
        if order.size < 2 * len(self._entries) + 64:
            return
        for i in range(order.size):
            entry = PyDict_GetItem(self._entries, _token(<uint32_t>order.key_at(i)))
            if entry != NULL and (<tuple><object>entry)[2] == order.seq_at(i):
                order.keep(i, at)
                at += 1
        order.size = at

    def entries(self) -> list:
        """``[(token, hops, deadline)]`` in insertion order (what tests compare)."""
        live = [(_token(<uint32_t>self._order.key_at(i)), self._order.seq_at(i))
                for i in range(self._order.size)]
        return [(t, self._entries[t][0], self._entries[t][1]) for t, s in live
                if t in self._entries and self._entries[t][2] == s]

    def __repr__(self) -> str:
        return f"TokenTable({len(self)}/{self.max_entries}, ttl={self.ttl})"


cdef inline bytes _token(uint32_t c):
    cdef uint32_t v = c | TOKEN_BIT
    cdef char b[4]
    b[0] = <char>((v >> 24) & 0xFF)
    b[1] = <char>((v >> 16) & 0xFF)
    b[2] = <char>((v >> 8) & 0xFF)
    b[3] = <char>(v & 0xFF)
    return PyBytes_FromStringAndSize(b, 4)


cdef class InFlight:
    """:class:`gateway.device.inflight.InFlight`, compiled: requests in flight by sequence
    number (send order, which is deadline order) and by key; the same results."""

    cdef readonly Py_ssize_t max_entries
    cdef readonly double ttl
    cdef dict _entries  # seq -> (key, pipe, deadline)
    cdef dict _where  # key -> seq, or a list of seqs (oldest first)
    cdef uint64_t _seq
    cdef _Fifo _order

    def __init__(self, max_entries: int = 100_000, ttl: float = 60.0) -> None:
        self.max_entries = max_entries
        self.ttl = ttl
        self._entries = {}
        self._where = {}
        self._seq = 0
        self._order = _Fifo()

    def __len__(self) -> int:
        return len(self._entries)

    def sent(self, key: tuple, pipe: bytes, now: float) -> list | None:
        """Record a request sent on ``pipe``; return the keys evicted to stay bounded."""
        evicted = None
        if len(self._entries) >= self.max_entries:
            evicted = [self._remove(self._oldest())]
        self.c_sent(key, pipe, now)
        return evicted

    cdef void c_sent(self, tuple key, bytes pipe, double now) except *:
        """sent, the table known not full."""
        self._seq += 1
        seq = self._seq
        self._entries[seq] = (key, pipe, now + self.ttl)
        cdef PyObject* where = PyDict_GetItem(self._where, key)
        if where == NULL:
            self._where[key] = seq
        elif type(<object>where) is list:
            (<list>where).append(seq)
        else:
            self._where[key] = [<object>where, seq]
        self._order.push(0, self._seq)
        if self._order.size >= 2 * len(self._entries) + 64:
            self._compact()

    def answered(self, key: tuple) -> bool:
        """A reply came back with ``key``: the oldest request with that key is done."""
        return self.c_answered(key)

    cdef bint c_answered(self, tuple key) except -1:
        cdef PyObject* where = PyDict_GetItem(self._where, key)
        if where == NULL:
            return False
        if type(<object>where) is list:
            seq = (<list>where).pop(0)
            if not <list>where:
                del self._where[key]
        else:
            seq = <object>where
            del self._where[key]
        del self._entries[seq]
        return True

    def lost(self, pipe: bytes) -> list:
        """``pipe`` went away: every request waiting on it, once per request."""
        gone = [seq for seq, entry in self._entries.items() if entry[1] == pipe]
        gone.sort()
        return [self._remove(seq) for seq in gone]

    def expire(self, now: float) -> list:
        """The requests whose deadline passed (send order is deadline order)."""
        out = []
        cdef _Fifo order = self._order
        cdef PyObject* entry
        while order.size:
            seq = order.seq_at(0)
            entry = PyDict_GetItem(self._entries, seq)
            if entry == NULL:
                order.pop()
                continue
            if (<tuple><object>entry)[2] > now:
                break
            out.append(self._remove(seq))
        return out

    def items(self) -> list:
        """``[(key, pipe, deadline)]`` in send order (what tests compare)."""
        return [self._entries[s] for s in sorted(self._entries)]

    cdef object _oldest(self):
        cdef _Fifo order = self._order
        while order.size:
            seq = order.seq_at(0)
            if seq in self._entries:
                return seq
            order.pop()
        raise KeyError("empty")

    cdef tuple _remove(self, seq):
        key, _, _ = self._entries.pop(seq)
        where = self._where[key]
        if type(where) is list:
            (<list>where).remove(seq)
            if not where:
                del self._where[key]
        else:
            del self._where[key]
        return key

    cdef void _compact(self) noexcept:
        cdef _Fifo order = self._order
        cdef Py_ssize_t i, at = 0
        for i in range(order.size):
            if order.seq_at(i) in self._entries:
                order.keep(i, at)
                at += 1
        order.size = at


# -------------------------------------------------------------------------------------------------
# parsing one message of a read

cdef struct Frame:
    Py_ssize_t start
    Py_ssize_t size


cdef inline Py_ssize_t _zmtp_message(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                                     Py_ssize_t limit, Frame* frames, int* count) noexcept nogil:
    """The end of the whole plain ZMTP message at ``pos`` (its frames in ``frames``), or -1:
    not one the kernel takes (incomplete, a command, reserved flags, past ``limit`` bytes in
    all, more than MAX_FRAMES frames)."""
    cdef int n = 0
    cdef Py_ssize_t total = 0, start
    cdef uint64_t size
    cdef uint8_t flags
    while True:
        if end - pos < 2:
            return -1
        flags = p[pos]
        if flags & 0xFC:
            return -1
        if flags & 0x02:
            if end - pos < 9:
                return -1
            size = _be64(p + pos + 1)
            start = pos + 9
        else:
            size = p[pos + 1]
            start = pos + 2
        if size > <uint64_t>(limit - total) or size > <uint64_t>(end - start) or n == MAX_FRAMES:
            return -1
        frames[n].start = start
        frames[n].size = <Py_ssize_t>size
        n += 1
        total += <Py_ssize_t>size
        pos = start + <Py_ssize_t>size
        if not flags & 0x01:
            count[0] = n
            return pos


cdef inline Py_ssize_t _sp_message(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                                   Py_ssize_t limit, int ipc, Frame* payload) noexcept nogil:
    """The end of the whole SP message at ``pos`` (its payload in ``payload``), or -1."""
    cdef Py_ssize_t head = 9 if ipc else 8
    cdef uint64_t size
    if end - pos < head or (ipc and p[pos] != 1):
        return -1
    size = _be64(p + pos + head - 8)
    if size > <uint64_t>limit or size > <uint64_t>(end - pos - head):
        return -1
    payload.start = pos + head
    payload.size = <Py_ssize_t>size
    return pos + head + <Py_ssize_t>size


cdef inline int _sp_backtrace(const uint8_t* p, Frame payload, int limit,
                              Py_ssize_t* words) noexcept nogil:
    """How many 4-byte words (up to and including the one with the top bit set) lead the SP
    payload, or -1: none within ``limit`` words or before the payload ends (the reference
    drops or refuses those)."""
    cdef int n = 0
    cdef Py_ssize_t off = 0
    while n < limit:
        if off + 4 > payload.size:
            return -1
        n += 1
        if p[payload.start + off] & 0x80:
            words[0] = off + 4
            return n
        off += 4
    return -1


# -------------------------------------------------------------------------------------------------
# encoding into a destination's buffer

cdef class _Out:
    """What one read writes to one pipe: its encoded messages, in order."""
    cdef object pipe
    cdef bytearray data
    cdef Py_ssize_t size
    cdef Py_ssize_t room  # bytes the pipe's batch may still take (see Writes.write_frames)
    cdef int framing

    cdef uint8_t* grow(self, Py_ssize_t n) except NULL:
        cdef Py_ssize_t have = PyByteArray_GET_SIZE(self.data)
        if self.size + n > have:
            PyByteArray_Resize(self.data, max(self.size + n, 2 * have, 256))
        cdef uint8_t* at = <uint8_t*>PyByteArray_AS_STRING(self.data) + self.size
        self.size += n
        return at


cdef inline Py_ssize_t _zmtp_frame_size(Py_ssize_t size) noexcept nogil:
    return size + (2 if size <= 255 else 9)


cdef inline uint8_t* _zmtp_frame(uint8_t* at, const uint8_t* data, Py_ssize_t size,
                                 bint more) noexcept nogil:
    if size <= 255:
        at[0] = 1 if more else 0
        at[1] = <uint8_t>size
        at += 2
    else:
        at[0] = 3 if more else 2
        _put64(at + 1, <uint64_t>size)
        at += 9
    if size:
        memcpy(at, data, size)
    return at + size


# -------------------------------------------------------------------------------------------------
# the kernel

cdef enum:
    REQREP = 0
    PIPELINE = 1
    PUBSUB = 2
    # what one message came to (a method's answer; 0: stop, the reference takes it)
    FORWARDED = 1
    CONSUMED = 2  # taken and not forwarded (a subscription filter held it back)


cdef class Kernel:
    """One bridge's forwarding, per read: request-reply, pipeline (front -> back) and pub/sub
    (published messages, back -> front; subscriptions stay the reference's). ``fwd`` is the
    bridge's forwarder (its ``draining``, ``detour`` and ``back_detour`` flags say when the
    reference must take every message); ``front`` and ``back`` the two native sockets;
    ``translator``, ``loss`` and ``ledger`` the reference's state, shared."""

    cdef object fwd, front, back, ledger
    cdef object f_routing, b_routing
    cdef dict f_routes
    cdef list b_out
    cdef TokenTable table
    cdef InFlight inflight
    cdef bint tokens  # zmtp -> sp: requests park their envelope under a token
    cdef int front_zmtp, back_zmtp
    cdef int ttl  # the front's hop limit (SP)
    cdef list n_req, n_rep, h_req_counts, h_rep_counts
    cdef object h_req, h_rep
    cdef int pattern
    cdef list f_out
    cdef object f_pattern, b_pattern
    # per call
    cdef dict outs
    cdef list order
    cdef Py_ssize_t picked
    cdef tuple sub_prefixes  # pub/sub: what the back's XSUB lets through (filtering: True)
    cdef bint filtering
    cdef dict filters  # pub/sub: the front's subscribers' prefixes, by routing id
    cdef Py_ssize_t filtered
    cdef bytearray scratch
    cdef list matched

    def __init__(self, fwd, front, back, translator, loss, ledger, buckets) -> None:
        global _NBUCKETS
        if not 0 < len(buckets) <= 32:
            raise ValueError("1 to 32 hop-latency buckets")
        for i, b in enumerate(buckets):
            _BUCKETS[i] = b
        _NBUCKETS = len(buckets)
        self.fwd, self.front, self.back, self.ledger = fwd, front, back, ledger
        self.f_routing, self.b_routing = front.routing, back.routing
        self.f_routes = front.routing.routes
        self.b_out = back.routing.out
        self.tokens = translator.mode == "zmtp->sp" and translator.pattern == "reqrep"
        self.table = translator.table if self.tokens else None
        self.inflight = loss.inflight
        self.front_zmtp = translator.mode.startswith("zmtp")
        self.back_zmtp = translator.mode.endswith("zmtp")
        self.ttl = front.pattern.ttl
        self.n_req, self.n_rep = ledger._n_req, ledger._n_rep
        self.h_req, self.h_rep = ledger._h_req, ledger._h_rep
        self.h_req_counts, self.h_rep_counts = ledger._h_req.counts, ledger._h_rep.counts
        self.outs = {}
        self.order = []
        self.pattern = {"reqrep": REQREP, "pipeline": PIPELINE, "pubsub": PUBSUB}[
            translator.pattern]
        self.f_out = front.routing.out
        self.f_pattern, self.b_pattern = front.pattern, back.pattern
        self.scratch = bytearray()
        self.matched = []

    # -- the per-read entry points (Pipe.fast) ---------------------------------------------------
    def request(self, pipe) -> int:
        """The requests of one read of a front pipe; how many it took."""
        fwd = self.fwd
        if (self.pattern == PUBSUB or fwd.draining or fwd.detour or self.front._inbox
                or self.b_routing.closed):
            return 0  # (pub/sub: the front's messages are subscriptions: the reference's)
        return self._run(pipe, True)

    def reply(self, pipe) -> int:
        """The replies (published messages) of one read of a back pipe; how many it took."""
        if self.pattern == PIPELINE or self.fwd.back_detour or self.back._inbox \
                or self.f_routing.closed:
            return 0
        if self.pattern == PUBSUB:
            self.filtering = self.b_pattern.filter
            if self.filtering:
                self.sub_prefixes = self.b_pattern.prefixes()
            self.filters = self.f_pattern.filters
            self.filtered = 0
            n = self._run(pipe, False)
            if self.filtered:
                self.b_pattern.filtered += self.filtered
            return n
        return self._run(pipe, False)

    cdef Py_ssize_t _run(self, object pipe, bint request) except -1:
        codec = pipe.codec
        if pipe.close_reason or not codec.streaming:
            return 0
        cdef int framing = _framing(codec)
        if framing == 0:
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
        cdef bint zmtp = framing == F_ZMTP
        cdef bytes rid = pipe.routing_id
        try:
            while n < FAIR_SHARE:
                if zmtp:
                    nxt = _zmtp_message(p, pos, end, limit, frames, &count)
                else:
                    nxt = _sp_message(p, pos, end, limit, framing == F_SP_IPC, &frames[0])
                    count = 1
                if nxt < 0:
                    break
                if self.pattern == PIPELINE:
                    done = self._pipeline(p, frames, count)
                elif self.pattern == PUBSUB:
                    done = self._publish(p, frames, count)
                elif request:
                    done = self._request(p, frames, count, zmtp, rid, t0)
                else:
                    done = self._reply(p, frames, count, zmtp, t0)
                if not done:
                    break
                if done == FORWARDED:
                    sent += 1
                pos = nxt
                n += 1
        finally:
            rx.pos = pos
            self._flush()
        if sent:
            self._account(request, sent, _now() - t0)
        return n

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

    # -- requests ------------------------------------------------------------------------------
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
        cdef int dest_zmtp = out.framing == F_ZMTP
        if not dest_zmtp and nbody != 1:
            return False  # SP carries one body frame (the reference refuses and counts)
        cdef tuple key
        cdef bytes token
        if self.tokens:  # zmtp -> sp: [token][body]
            if self.table.full() or self.inflight.max_entries <= len(self.inflight._entries):
                return False
            hops = _hops(p, frames, nhops, rid)
            if not self._fits(out, 8 + 4 + frames[nhops].size):
                return False
            token = self.table.c_mint(hops, now)
            self._sp_write(out, token, p + frames[nhops].start, frames[nhops].size)
            key = (token,)
        elif zmtp:  # zmtp -> zmtp: untouched
            if len(self.inflight._entries) >= self.inflight.max_entries:
                return False
            key = _hops(p, frames, nhops, rid)
            if not self._zmtp_write(out, rid, p, frames, 0, count):
                return False
        else:  # sp -> zmtp (pipe id, words..., "", body) or sp -> sp (untouched)
            if len(self.inflight._entries) >= self.inflight.max_entries:
                return False
            key = _words(p, payload.start, words, rid, dest_zmtp)
            if dest_zmtp:
                if not self._sp_to_zmtp(out, rid, p, payload, words):
                    return False
            elif not self._sp_forward(out, rid, p, payload):
                return False
        self.b_routing.rr = self.picked + 1
        self.inflight.c_sent(key, out.pipe.routing_id, now)
        return True

    cdef _Out _pick(self):
        """The next writable back pipe, round robin (Routing.pick), or None; ``picked`` is
        its place, for :meth:`_request` to move the round robin on once it sent."""
        cdef list out = self.b_out
        cdef Py_ssize_t n = len(out), i, idx
        cdef Py_ssize_t rr = self.b_routing.rr
        for i in range(n):
            idx = (rr + i) % n
            pipe = out[idx]
            if pipe.writable:
                self.picked = idx
                return self._out(pipe)  # None: a wire the kernel does not write
        return None

    # -- replies -------------------------------------------------------------------------------
    cdef int _reply(self, const uint8_t* p, Frame* frames, int count, bint zmtp,
                    double now) except -2:
        cdef int i, nhops = 0
        cdef Py_ssize_t words = 0
        cdef Frame payload
        cdef bytes target
        cdef tuple key
        if zmtp:  # the back end's ZeroMQ server: hops up to the first empty frame
            for i in range(count):
                if frames[i].size == 0:
                    nhops = i + 1
                    break
            if nhops < 2:
                return False  # no envelope, or no routing hop before the delimiter
            target = PyBytes_FromStringAndSize(<char*>p + frames[0].start, frames[0].size)
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
                target = None
            else:  # sp -> sp: the first word is the front's pipe id
                target = PyBytes_FromStringAndSize(<char*>p + payload.start, 4)
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
        fpipe = self.f_routes.get(target)
        if fpipe is None or not fpipe.writable:
            return False  # gone or at its mark: the reference counts it
        cdef _Out out = self._out(fpipe)
        if out is None:
            return False
        cdef int dest_zmtp = out.framing == F_ZMTP
        if self.tokens:  # parked hops[1:] + body, to the ZeroMQ client
            if not self._zmtp_parked(out, parked, p, payload, words):
                return False
            key = (token,)
            self.table.c_take(token, now)
        elif zmtp and dest_zmtp:  # zmtp -> zmtp
            if not self._zmtp_write(out, None, p, frames, 1, count):
                return False
            key = _frames(p, frames, nhops)
        elif zmtp:  # sp -> zmtp: the SP client gets words (without the pipe id) + body
            if not self._zmtp_to_sp(out, p, frames, nhops, count):
                return False
            key = _frames(p, frames, nhops)
        else:  # sp -> sp
            if not self._sp_reply(out, p, payload):
                return False
            key = _words(p, payload.start, words, None, False)
        self.inflight.c_answered(key)
        return True

    # -- pipeline and pub/sub ------------------------------------------------------------------
    cdef int _pipeline(self, const uint8_t* p, Frame* frames, int count) except -2:
        """Pipeline, front -> back: the message as it is (toward SP: one frame only), round
        robin over the writable back pipes."""
        cdef _Out out = self._pick()
        if out is None:
            return 0
        if out.framing == F_ZMTP:
            if not self._zmtp_write(out, None, p, frames, 0, count):
                return 0
        elif count != 1 or not self._sp_payload(out, p, frames, 1):
            return 0  # several frames toward SP: the reference refuses and counts
        self.b_routing.rr = self.picked + 1
        return FORWARDED

    cdef int _publish(self, const uint8_t* p, Frame* frames, int count) except -2:
        """Pub/sub, back -> front: a published message past the back's filter to every
        subscriber whose prefixes match its first frame (toward SP: the frames concatenated);
        a matching subscriber at its mark loses it (counted by its pipe, as the reference)."""
        cdef Py_ssize_t size = 0, need, i
        if self.filtering and not _matches(p, frames, 1, self.sub_prefixes):
            self.filtered += 1
            return CONSUMED
        cdef bint to_sp = not self.front_zmtp
        cdef int first = count if to_sp else 1  # the frames the front's filters look at
        cdef _Out out
        cdef list matched = self.matched
        del matched[:]
        filters = self.filters
        for pipe in self.f_out:
            flt = filters.get(pipe.routing_id, ())
            if not flt or not _matches(p, frames, first, flt):
                continue
            if not pipe.writable:
                matched.append(pipe)  # loses it
                continue
            out = self._out(pipe)
            if out is None:
                return 0
            matched.append(out)
        # every destination's room first: all of it or nothing
        for i in range(count):
            size += frames[i].size
        for item in matched:
            if type(item) is _Out:
                out = <_Out>item
                if out.framing == F_ZMTP:
                    need = 0
                    for i in range(count):
                        need += _zmtp_frame_size(frames[i].size)
                else:
                    need = (out.framing == F_SP_IPC) + 8 + size
                if not self._fits(out, need):
                    return 0
        for item in matched:
            if type(item) is _Out:
                out = <_Out>item
                if out.framing == F_ZMTP:
                    self._zmtp_write(out, None, p, frames, 0, count)
                else:
                    self._sp_payload(out, p, frames, count)
            else:
                item.dropped("hwm")
        return FORWARDED

    # -- destinations ----------------------------------------------------------------------------
    cdef _Out _out(self, object pipe):
        """This read's buffer for ``pipe`` (None: a wire the kernel does not write)."""
        cdef _Out out = self.outs.get(pipe)
        if out is not None:
            return out
        cdef int framing = _framing(pipe.codec)
        if framing == 0:
            return None
        out = _Out.__new__(_Out)
        out.pipe = pipe
        out.data = bytearray()
        out.size = 0
        out.framing = framing
        out.room = pipe._high - pipe._wbuf_size
        self.outs[pipe] = out
        self.order.append(out)
        return out

    cdef inline bint _fits(self, _Out out, Py_ssize_t n) noexcept:
        """The pipe's batch takes ``n`` more bytes without reaching its mark (past it, the
        reference flushes, which may change what is writable: its business)."""
        return out.size + n < out.room

    cdef void _flush(self) except *:
        """Each destination's bytes into its pipe's write batch (Writes.write_frames), once."""
        cdef _Out out
        for out in self.order:
            if out.size:
                PyByteArray_Resize(out.data, out.size)
                pipe = out.pipe
                if not pipe.wbuf:
                    pipe._batch.dirty.append(pipe)
                pipe.wbuf.append(out.data)
                pipe._wbuf_size += out.size
        self.outs.clear()
        del self.order[:]

    # -- encoders (each checks the mark first; False: nothing written) ----------------------------
    cdef void _sp_write(self, _Out out, bytes token, const uint8_t* body,
                        Py_ssize_t size) except *:
        cdef int ipc = out.framing == F_SP_IPC
        cdef uint8_t* at = out.grow(ipc + 8 + 4 + size)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>(4 + size))
        memcpy(at + 8, PyBytes_AS_STRING(token), 4)
        if size:
            memcpy(at + 12, body, size)

    cdef bint _zmtp_write(self, _Out out, bytes rid, const uint8_t* p, Frame* frames,
                          int first, int count) except -1:
        """ZMTP frames: ``rid`` (if any), then ``frames[first:count]`` of the read."""
        cdef Py_ssize_t need = 0
        cdef int i
        if rid is not None:
            need += _zmtp_frame_size(len(rid))
        for i in range(first, count):
            need += _zmtp_frame_size(frames[i].size)
        if count - first + (rid is not None) == 0 or not self._fits(out, need):
            return False
        cdef uint8_t* at = out.grow(need)
        if rid is not None:
            at = _zmtp_frame(at, <const uint8_t*>PyBytes_AS_STRING(rid), len(rid),
                             count > first)
        for i in range(first, count):
            at = _zmtp_frame(at, p + frames[i].start, frames[i].size, i < count - 1)
        return True

    cdef bint _zmtp_parked(self, _Out out, tuple parked, const uint8_t* p, Frame payload,
                           Py_ssize_t words) except -1:
        """zmtp -> sp reply: the parked hops but the first (the front's routing id), then the
        SP body after the token."""
        cdef Py_ssize_t need = 0, n = PyTuple_GET_SIZE(parked), size = payload.size - words
        cdef Py_ssize_t i
        for i in range(1, n):
            need += _zmtp_frame_size(PyBytes_GET_SIZE(parked[i]))
        need += _zmtp_frame_size(size)
        if not self._fits(out, need):
            return False
        cdef uint8_t* at = out.grow(need)
        for i in range(1, n):
            hop = parked[i]
            at = _zmtp_frame(at, <const uint8_t*>PyBytes_AS_STRING(hop),
                             PyBytes_GET_SIZE(hop), True)
        _zmtp_frame(at, p + payload.start + words, size, False)
        return True

    cdef bint _sp_to_zmtp(self, _Out out, bytes rid, const uint8_t* p, Frame payload,
                          Py_ssize_t words) except -1:
        """sp -> zmtp request: the SP pipe id, each backtrace word, "", the body."""
        cdef Py_ssize_t need = 6 + 2 + _zmtp_frame_size(payload.size - words) + words // 4 * 6
        if not self._fits(out, need):
            return False
        cdef uint8_t* at = out.grow(need)
        cdef Py_ssize_t off
        at = _zmtp_frame(at, <const uint8_t*>PyBytes_AS_STRING(rid), 4, True)
        for off in range(0, words, 4):
            at = _zmtp_frame(at, p + payload.start + off, 4, True)
        at = _zmtp_frame(at, NULL, 0, True)
        _zmtp_frame(at, p + payload.start + words, payload.size - words, False)
        return True

    cdef bint _sp_payload(self, _Out out, const uint8_t* p, Frame* frames, int count) except -1:
        """One SP message whose payload is the read's ``count`` frames, concatenated."""
        cdef int ipc = out.framing == F_SP_IPC, i
        cdef Py_ssize_t size = 0
        for i in range(count):
            size += frames[i].size
        if not self._fits(out, ipc + 8 + size):
            return False
        cdef uint8_t* at = out.grow(ipc + 8 + size)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>size)
        at += 8
        for i in range(count):
            if frames[i].size:
                memcpy(at, p + frames[i].start, frames[i].size)
                at += frames[i].size
        return True

    cdef bint _sp_forward(self, _Out out, bytes rid, const uint8_t* p,
                          Frame payload) except -1:
        """sp -> sp request: the pipe id pushed in front of the payload."""
        cdef int ipc = out.framing == F_SP_IPC
        cdef Py_ssize_t need = ipc + 8 + 4 + payload.size
        if not self._fits(out, need):
            return False
        cdef uint8_t* at = out.grow(need)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>(4 + payload.size))
        memcpy(at + 8, PyBytes_AS_STRING(rid), 4)
        memcpy(at + 12, p + payload.start, payload.size)
        return True

    cdef bint _sp_reply(self, _Out out, const uint8_t* p, Frame payload) except -1:
        """sp -> sp reply: the payload without its first word (the front's pipe id)."""
        cdef int ipc = out.framing == F_SP_IPC
        cdef Py_ssize_t size = payload.size - 4
        if not self._fits(out, ipc + 8 + size):
            return False
        cdef uint8_t* at = out.grow(ipc + 8 + size)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>size)
        memcpy(at + 8, p + payload.start + 4, size)
        return True

    cdef bint _zmtp_to_sp(self, _Out out, const uint8_t* p, Frame* frames, int nhops,
                          int count) except -1:
        """sp -> zmtp reply: the words after the pipe id (not the delimiter), then the body,
        as one SP message."""
        cdef int ipc = out.framing == F_SP_IPC
        cdef Py_ssize_t size = (nhops - 2) * 4 + frames[count - 1].size
        if not self._fits(out, ipc + 8 + size):
            return False
        cdef uint8_t* at = out.grow(ipc + 8 + size)
        cdef int i
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>size)
        at += 8
        for i in range(1, nhops - 1):
            memcpy(at, p + frames[i].start, 4)
            at += 4
        memcpy(at, p + frames[count - 1].start, frames[count - 1].size)
        return True


cdef inline bytes _frame(const uint8_t* p, Frame f):
    if f.size == 0:
        return EMPTY
    return PyBytes_FromStringAndSize(<const char*>p + f.start, f.size)


cdef tuple _hops(const uint8_t* p, Frame* frames, int nhops, bytes rid):
    """(rid, the read's first ``nhops`` frames): a ZeroMQ request's envelope as the front's
    raw REP gives it (Pattern.receive)."""
    cdef tuple hops = PyTuple_New(nhops + 1)
    cdef int i
    Py_INCREF(rid)
    PyTuple_SET_ITEM(hops, 0, rid)
    for i in range(nhops):
        item = _frame(p, frames[i])
        Py_INCREF(item)
        PyTuple_SET_ITEM(hops, i + 1, item)
    return hops


cdef tuple _frames(const uint8_t* p, Frame* frames, int n):
    """The read's first ``n`` frames, as a tuple of bytes."""
    cdef tuple out = PyTuple_New(n)
    cdef int i
    for i in range(n):
        item = _frame(p, frames[i])
        Py_INCREF(item)
        PyTuple_SET_ITEM(out, i, item)
    return out


cdef tuple _words(const uint8_t* p, Py_ssize_t start, Py_ssize_t words, bytes rid,
                  bint delimiter):
    """An SP backtrace as hops: ``rid`` (if any), its 4-byte words, ``""`` (if asked)."""
    cdef Py_ssize_t n = words // 4 + (rid is not None) + delimiter, i = 0, off
    cdef tuple out = PyTuple_New(n)
    if rid is not None:
        Py_INCREF(rid)
        PyTuple_SET_ITEM(out, 0, rid)
        i = 1
    for off in range(0, words, 4):
        item = PyBytes_FromStringAndSize(<const char*>p + start + off, 4)
        Py_INCREF(item)
        PyTuple_SET_ITEM(out, i, item)
        i += 1
    if delimiter:
        Py_INCREF(EMPTY)
        PyTuple_SET_ITEM(out, i, EMPTY)
    return out


cdef bint _matches(const uint8_t* p, Frame* frames, int count, tuple prefixes) except -1:
    """``b"".join(frames[:count]).startswith(prefixes)``, without the join."""
    cdef Py_ssize_t total = 0, n, done, take
    cdef int i, f
    cdef const uint8_t* want
    for i in range(count):
        total += frames[i].size
    for prefix in prefixes:
        n = PyBytes_GET_SIZE(prefix)
        if n > total:
            continue
        want = <const uint8_t*>PyBytes_AS_STRING(prefix)
        done = 0
        f = 0
        while done < n:
            take = min(n - done, frames[f].size)
            if take and memcmp(p + frames[f].start, want + done, take) != 0:
                break
            done += take
            f += 1
        else:
            return True
    return False


cdef bint _valid_words(const uint8_t* p, Frame* frames, int n) noexcept:
    """zmtp_to_sp_reply's check of a ZeroMQ server's envelope (before the delimiter): 4-byte
    words, the top bit set on the last only."""
    cdef int i
    for i in range(n):
        if frames[i].size != 4:
            return False
        if (p[frames[i].start] & 0x80) != (0x80 if i == n - 1 else 0):
            return False
    return True


cdef int _framing(object codec) except -1:
    """What the kernel writes and reads for a pipe with ``codec`` (0: nothing, its wire is the
    reference's: CURVE's boxes, WebSocket, another prefix)."""
    cdef type kind = type(codec)
    if kind is ZmtpCodec:
        return 0 if codec.sealed else F_ZMTP
    if kind is SpCodec:
        prefix = codec.message_prefix
        if not prefix:
            return F_SP
        return F_SP_IPC if prefix == b"\x01" else 0
    return 0
