# Included by gateway/_kernel.pyx (one compiled module): compiled twins of the token table
# (gateway.envelope.TokenTable) and the in-flight table (gateway.device.inflight.InFlight).


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

    cdef readonly Py_ssize_t max_entries, max_bytes
    cdef readonly double ttl
    cdef public Py_ssize_t expired_total
    cdef readonly Py_ssize_t held_bytes  # what the parked hops cost (envelope_bytes)
    cdef dict _entries  # token -> (hops, deadline, seq, cost)
    cdef uint32_t _counter
    cdef uint64_t _seq
    cdef _Fifo _order

    def __init__(self, max_entries: int = 100_000, ttl: float = 60.0, *,
                 max_bytes: int = NO_BYTE_BOUND, start: int | None = None) -> None:
        if not 1 <= max_entries <= COUNTER_MASK:
            raise ValueError(f"max_entries must be in 1..{COUNTER_MASK}, not {max_entries}")
        if not ttl > 0:
            raise ValueError(f"ttl must be > 0, not {ttl}")
        if not 1 <= max_bytes <= NO_BYTE_BOUND:
            raise ValueError(f"max_bytes must be in 1..2**62, not {max_bytes}")
        import random

        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.held_bytes = 0
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

    cdef inline bint room(self, Py_ssize_t cost) noexcept:
        """An envelope costing ``cost`` fits (neither the count nor the bytes full)."""
        return (len(self._entries) < self.max_entries
                and self.held_bytes + cost <= self.max_bytes)

    def mint(self, hops: tuple, now: float) -> bytes:
        """Park ``hops`` until ``now + ttl``; return the new 4-byte token (top bit set)."""
        # the hops as bytes (the kernel copies them as bytes when it answers), not empty
        hops = tuple([h if type(h) is bytes else bytes(h) for h in hops])
        if not hops:
            raise ValueError("an envelope of at least one hop (the client's routing id)")
        cdef Py_ssize_t cost = _hops_cost(hops)
        if not self.room(cost):
            self.expire(now)
            if len(self._entries) >= self.max_entries:
                raise TableFull(f"{len(self._entries)} pending requests")
            if self.held_bytes + cost > self.max_bytes:
                raise TableFull(f"{self.held_bytes} bytes of envelopes pending, {cost} more "
                                f"would pass pending_bytes ({self.max_bytes})")
        return self.c_mint(hops, now, cost)

    cdef bytes c_mint(self, tuple hops, double now, Py_ssize_t cost):
        """mint, the table known to have room for ``hops`` (a tuple of bytes, not empty)
        costing ``cost``."""
        cdef uint32_t c = self._counter
        cdef bytes token = _token(c)
        while token in self._entries:  # terminates: fewer than 2**31 entries
            c = (c + 1) & COUNTER_MASK
            token = _token(c)
        self._counter = (c + 1) & COUNTER_MASK
        self._seq += 1
        self._entries[token] = (hops, now + self.ttl, self._seq, cost)
        self.held_bytes += cost
        self._order.push(c, self._seq)
        self._compact()
        return token

    def pop(self, token: bytes, now: float) -> tuple:
        """Remove and return the hops parked under ``token``; :class:`UnknownToken` if none."""
        entry = self._entries.pop(token, None)
        if entry is None:
            raise UnknownToken("unknown-token", f"token {token!r}")
        self.held_bytes -= <Py_ssize_t>entry[3]
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
        self.held_bytes -= <Py_ssize_t>(<tuple><object>entry)[3]
        del self._entries[token]
        return hops

    def discard(self, token: bytes) -> None:
        """Forget ``token`` (its request was counted lost some other way)."""
        entry = self._entries.pop(token, None)
        if entry is not None:
            self.held_bytes -= <Py_ssize_t>entry[3]

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
            self.held_bytes -= <Py_ssize_t>(<tuple><object>entry)[3]
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


cdef Py_ssize_t _hops_cost(tuple hops) except -1:
    """gateway.envelope.tokens.envelope_bytes of ``hops`` (a tuple of bytes)."""
    cdef Py_ssize_t cost = PyTuple_GET_SIZE(hops)
    for hop in hops:
        cost += PyBytes_GET_SIZE(hop)
    return cost


cdef inline bytes _token(uint32_t c):
    cdef uint32_t v = c | TOKEN_BIT
    cdef char b[4]
    b[0] = <char>((v >> 24) & 0xFF)
    b[1] = <char>((v >> 16) & 0xFF)
    b[2] = <char>((v >> 8) & 0xFF)
    b[3] = <char>(v & 0xFF)
    return PyBytes_FromStringAndSize(b, 4)


@cython.freelist(256)
cdef class _Req:
    """One request in flight (:class:`InFlight`'s entry)."""
    cdef bytes key  # flat (``_flat``)
    cdef bytes pipe
    cdef double deadline
    cdef Py_ssize_t cost  # what its key costs the byte budget (_flat_cost)
    cdef bint live
    cdef _Req later  # the next request in flight with the same key (answered after this one)
    cdef _Req last  # the first of a key only: the latest with it (None: itself)


cdef class InFlight:
    """:class:`gateway.device.inflight.InFlight`, compiled, with the same results: requests in
    flight in send order (which is deadline order) and by key, the oldest first. A key is kept
    flat (:func:`_flat`): one bytes object, hashed once and compared with one ``memcmp``,
    which the kernel builds straight from the read; the interface gives and takes tuples.

    One dict operation per request and two per reply: ``_where`` holds each key's oldest
    request, which links to the later ones with that key; ``_order`` holds them all in send
    order, an answered one left in place (``live`` off) until it is skipped from the front or
    compacted away once the dead outnumber the living."""

    cdef readonly Py_ssize_t max_entries, max_bytes
    cdef readonly double ttl
    cdef readonly Py_ssize_t held_bytes  # what the keys in flight cost (envelope_bytes)
    cdef dict _where  # flat key -> its oldest _Req
    cdef list _order  # _Req in send order; _order[:_head] is gone
    cdef Py_ssize_t _head, _live

    def __init__(self, max_entries: int = 100_000, ttl: float = 60.0,
                 max_bytes: int = NO_BYTE_BOUND) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.held_bytes = 0
        self.ttl = ttl
        self._where = {}
        self._order = []
        self._head = self._live = 0

    def __len__(self) -> int:
        return self._live

    cdef inline bint room(self, Py_ssize_t cost) noexcept:
        """A key costing ``cost`` fits without evicting (the reference's business)."""
        return self._live < self.max_entries and self.held_bytes + cost <= self.max_bytes

    def sent(self, key: tuple, pipe: bytes, now: float) -> list | None:
        """Record a request sent on ``pipe``; return the keys evicted to stay bounded."""
        evicted = None
        cdef bytes flat = _flat(key)
        cdef Py_ssize_t cost = _flat_cost(flat)
        if not self.room(cost):
            evicted = []
            while self._live and not self.room(cost):
                evicted.append(self._remove(self._oldest()))
        self.c_sent(flat, pipe, now, cost)
        return evicted

    cdef int c_sent(self, bytes key, bytes pipe, double now, Py_ssize_t cost) except -1:
        """sent, of a flat key costing ``cost``, the table known to have room."""
        cdef _Req r = _Req.__new__(_Req)
        r.key = key
        r.pipe = pipe
        r.cost = cost
        self.held_bytes += cost
        r.deadline = now + self.ttl
        r.live = True
        cdef _Req first = <_Req>PyDict_SetDefault(self._where, key, r)
        if first is not r:  # the key is in flight already: r goes last in its line
            (first if first.last is None else first.last).later = r
            first.last = r
        self._order.append(r)
        self._live += 1
        if len(self._order) >= 2 * self._live + 64:  # (the skipped front counts too)
            self._order = [x for x in self._order[self._head:] if (<_Req>x).live]
            self._head = 0
        return 0

    def answered(self, key: tuple) -> bool:
        """A reply came back with ``key``: the oldest request with that key is done."""
        return self.c_answered(_flat(key))

    cdef bint c_answered(self, bytes key) except -1:
        """answered, of a flat key."""
        cdef PyObject* first = PyDict_GetItem(self._where, key)
        if first == NULL:
            return False
        self._unlink_first(<_Req>first, key)
        return True

    cdef void _unlink_first(self, _Req r, bytes key) except *:
        """``r``, the oldest request with ``key``, is done."""
        cdef _Req nxt = r.later
        if nxt is None:
            del self._where[key]
        else:  # the next in line becomes the first
            nxt.last = None if r.last is nxt else r.last
            self._where[key] = nxt
        r.live = False
        r.later = r.last = None
        self._live -= 1
        self.held_bytes -= r.cost

    def lost(self, pipe: bytes) -> list:
        """``pipe`` went away: every request waiting on it, once per request."""
        gone = [r for r in self._order[self._head:] if (<_Req>r).live and (<_Req>r).pipe == pipe]
        return [self._remove(r) for r in gone]

    def expire(self, now: float) -> list:
        """The requests whose deadline passed (send order is deadline order)."""
        out = []
        cdef _Req r
        while self._head < len(self._order):
            r = self._order[self._head]
            if r.live:
                if r.deadline > now:
                    break
                out.append(self._remove(r))
            self._head += 1
        return out

    def items(self) -> list:
        """``[(key, pipe, deadline)]`` in send order (what tests compare)."""
        return [(_unflat((<_Req>r).key), (<_Req>r).pipe, (<_Req>r).deadline)
                for r in self._order[self._head:] if (<_Req>r).live]

    cdef _Req _oldest(self):
        cdef _Req r
        while self._head < len(self._order):
            r = self._order[self._head]
            if r.live:
                return r
            self._head += 1
        raise KeyError("empty")

    cdef tuple _remove(self, _Req r):
        """``r`` leaves, wherever it is in its key's line; its key, as a tuple."""
        cdef _Req first = <_Req>self._where[r.key], prev
        if first is r:
            self._unlink_first(r, r.key)
        else:
            prev = first
            while prev.later is not r:
                prev = prev.later
            prev.later = r.later
            if first.last is r:
                first.last = None if prev is first else prev
            r.live = False
            r.later = None
            self._live -= 1
            self.held_bytes -= r.cost
        return _unflat(r.key)


# -- flat keys: each part's length (one byte; past 254: 255 and eight bytes), then its bytes --

cdef inline Py_ssize_t _flat_size(Py_ssize_t n) noexcept nogil:
    return n + (1 if n < 255 else 9)


cdef inline uint8_t* _flat_put(uint8_t* at, const uint8_t* data, Py_ssize_t n) noexcept nogil:
    if n < 255:
        at[0] = <uint8_t>n
        at += 1
    else:
        at[0] = 255
        _put64(at + 1, <uint64_t>n)
        at += 9
    if n:
        memcpy(at, data, n)
    return at + n


cdef Py_ssize_t _flat_cost(bytes flat) noexcept:
    """envelope_bytes of the key ``flat`` holds: its parts' bytes and one per part."""
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(flat)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(flat), pos = 0, n, cost = 0
    while pos < end:
        n = p[pos]
        pos += 1
        if n == 255:
            n = <Py_ssize_t>_be64(p + pos)
            pos += 8
        cost += n + 1
        pos += n
    return cost


cdef bytes _flat(tuple key):
    """``key`` (a tuple of bytes) as one bytes object."""
    cdef Py_ssize_t total = 0
    cdef list parts = [part if type(part) is bytes else bytes(part) for part in key]
    for part in parts:
        total += _flat_size(PyBytes_GET_SIZE(part))
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t* at = <uint8_t*>PyBytes_AS_STRING(out)
    for part in parts:
        at = _flat_put(at, <const uint8_t*>PyBytes_AS_STRING(part), PyBytes_GET_SIZE(part))
    return out


cdef tuple _unflat(bytes flat):
    """The tuple :func:`_flat` made ``flat`` from."""
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(flat)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(flat), pos = 0, n
    cdef list parts = []
    while pos < end:
        n = p[pos]
        pos += 1
        if n == 255:
            n = <Py_ssize_t>_be64(p + pos)
            pos += 8
        parts.append(PyBytes_FromStringAndSize(<const char*>p + pos, n))
        pos += n
    return tuple(parts)
