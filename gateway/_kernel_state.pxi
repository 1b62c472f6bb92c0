# Included by gateway/_kernel.pyx (one compiled module): the compiled twins of the engine's hot
# state. Each is a whole class with typed fields of its own and the reference's interface; its
# reference is the pure-Python class gateway.kernel.TWINS names, and gateway.kernel picks one of
# the two when an object is made. The kernel reads and writes these fields directly (C struct
# members, no attribute look-up) after one type check; an object of the reference's class is the
# reference's to handle. tests/test_kernel_seam.py holds each pair to the same fields and methods.


cdef class PipeState:
    """A pipe's hot state (the reference: :class:`gateway.engine.pipe_state.PipeState`), the
    compiled pipe's base (:func:`gateway.engine.pipe.pipe_class` puts the pipe's methods on
    top): what the kernel reads or writes of a pipe on every read, and ``data_received``."""

    cdef public object _batch, _loop, codec, fast_read, kernel_state
    cdef public ReadBuffer rbuf
    cdef object _transport, _t_write, _t_closing  # (the transport's write, is_closing: bound once)
    cdef public bint _t_held, _watch, reading, writable
    cdef public Py_ssize_t _high, _wbuf_size, queued_msgs, rx_chunks
    cdef public str close_reason
    cdef public bytes routing_id
    cdef public list wbuf

    @property
    def transport(self):
        """The pipe's transport (None: none yet, or gone); its ``write`` and ``is_closing``
        are bound once, when it is set, for :func:`flush_batch`."""
        return self._transport

    @transport.setter
    def transport(self, transport) -> None:
        self._transport = transport
        self._t_write = getattr(transport, "write", None)
        self._t_closing = getattr(transport, "is_closing", None)

    def data_received(self, data) -> None:
        """``Pipe.data_received``, compiled: the read to the kernel when one forwards for the
        pipe, else the reference's steps, kept to the same lines."""
        fast_read = self.fast_read
        if fast_read is not None:
            if type(fast_read) is _WholeRead:  # the kernel's own: a C call
                if (<_WholeRead>fast_read).take(self, data):
                    return  # the kernel took the read (and Pipe.process what it left)
            elif fast_read(self, data):
                return
        self.rx_chunks += 1
        me = <object>self  # (the pipe's other attributes live in its dict)
        if not me.ready:
            me.received_before_handshake += len(data)
        self.codec.receive_data(data)
        me.process()

    def get_buffer(self, sizehint):
        """``Pipe.get_buffer``, compiled: room in the pipe's read buffer."""
        return self.rbuf.room()

    def buffer_updated(self, Py_ssize_t nbytes) -> None:
        """``Pipe.buffer_updated``, compiled: the kernel takes the read's whole messages where
        they lie, when it forwards for the pipe; else the reference's steps. Then nothing the
        read left stays in the thread's scratch (``ReadBuffer.settle``)."""
        cdef ReadBuffer rb = self.rbuf
        rb.filled(nbytes)
        fast_read = self.fast_read
        if type(fast_read) is _WholeRead and (<_WholeRead>fast_read).take_buffer(self, rb):
            rb.settled()  # (a read it lent views of is the pipe's already: ReadBuffer.lend)
            return
        data = rb.take()
        rb.settled()
        (<object>self).data_received(data)


#: an idle pipe's ``ReadBuffer.data`` (no buffer of its own: gateway.engine.read_buffer.EMPTY)
cdef bytearray RB_EMPTY = bytearray()


cdef list _new_slot():
    """:func:`gateway.engine.read_buffer.new_slot`: no scratch yet."""
    return [None]


cdef extern from "Python.h":
    # a list's item, borrowed (no count): a ReadBuffer's slot, a one-item list checked when set
    PyObject* _slot_item "PyList_GET_ITEM" (PyObject* slot, Py_ssize_t i) nogil


@cython.final
cdef class ReadBuffer:
    """A pipe's read buffer (the reference: :class:`gateway.engine.read_buffer.ReadBuffer`,
    whose doc says how its room is given, held and grown, and when the thread's scratch is
    read into)."""

    cdef public bytearray data
    cdef public Py_ssize_t start, end, wanted, size
    cdef public bint lent
    cdef list _shared  # (read borrowed on every read: never None, one item)

    def __init__(self, list shared=None) -> None:
        self.data = RB_EMPTY
        self.start = self.end = self.wanted = 0
        self.lent = False
        self.size = RB_MIN_SIZE
        self.shared = _new_slot() if shared is None else shared

    @property
    def shared(self):
        """The scratch slot this buffer reads into while it holds nothing."""
        return self._shared

    @shared.setter
    def shared(self, list slot) -> None:
        if slot is None or len(slot) != 1:
            raise ValueError("a read buffer's scratch slot is a list of one item")
        self._shared = slot

    cpdef object room(self):
        """Where the next read goes (``get_buffer``): writable, never empty."""
        cdef bytearray data = self.data
        cdef Py_ssize_t end = self.end, held, rest, ahead, need, cap = PyByteArray_GET_SIZE(data)
        if self.start == end:  # nothing held: the thread's scratch (a buffer kept is let go)
            if _slot_item(<PyObject*>self._shared, 0) == <PyObject*>None:  # (lent to writes)
                self._shared[0] = PyByteArray_FromStringAndSize(NULL, RB_CHUNK)
            if <PyObject*>data != <PyObject*>RB_EMPTY:  # (usually so already: settled)
                self.data = RB_EMPTY  # the scratch once the read came (filled)
                self.lent = False
            return <object>_slot_item(<PyObject*>self._shared, 0)
        held = end - self.start
        ahead = self._ahead(held)
        rest = self.wanted - held
        # the whole rest behind it, else at least RB_MIN_SIZE (the reference's ``need``)
        need = ahead if ahead >= rest else min(ahead, RB_MIN_SIZE)
        if end + need > cap:  # it does not fit behind: a new buffer
            return self._move(held, ahead)
        return memoryview(data)[end:]

    cdef inline Py_ssize_t _ahead(self, Py_ssize_t held) noexcept:
        """The room a held message's rest is given (the reference's ``_ahead``)."""
        cdef Py_ssize_t rest = self.wanted - held, ahead = max(RB_AHEAD, held)
        if rest < ahead:
            ahead = rest if rest > 1 else 1
        return ahead

    cdef object _move(self, Py_ssize_t held, Py_ssize_t ahead):
        """The held bytes to a new buffer of the pipe's (the reference's ``_move``)."""
        cdef bytearray new = PyByteArray_FromStringAndSize(
            NULL, max(held + max(ahead, RB_MIN_SIZE), self.size))
        memcpy(PyByteArray_AS_STRING(new), PyByteArray_AS_STRING(self.data) + self.start, held)
        self.data, self.start, self.end, self.lent = new, 0, held, False
        return memoryview(new)[held:]

    cpdef void filled(self, Py_ssize_t nbytes) except *:
        """``nbytes`` were read into the room (``buffer_updated``)."""
        if <PyObject*>self.data == <PyObject*>RB_EMPTY:  # into the scratch (room, just before)
            if _slot_item(<PyObject*>self._shared, 0) == <PyObject*>None:
                raise ValueError("filled without a room given")
            self.data = <bytearray?><object>_slot_item(<PyObject*>self._shared, 0)
            self.start = self.end = 0
        self.end += nbytes
        if self.end == PyByteArray_GET_SIZE(self.data) and self.size < RB_CHUNK:
            self.size *= 2  # it filled all: the next one bigger

    cpdef bytes take(self):
        """The bytes read and not taken, as one ``bytes`` (for the codec); none held after."""
        out = PyBytes_FromStringAndSize(PyByteArray_AS_STRING(self.data) + self.start,
                                        self.end - self.start)
        self.start = self.end
        self.wanted = 0
        return out

    cdef inline int lend(self) except -1:
        """The kernel wrote views of ``data`` (at the end of its read, even one that raised):
        ``lent``, and a read in the thread's scratch leaves the slot at once (settle's first
        rule: no other pipe's read lands on the views, whatever follows)."""
        self.lent = True
        if <PyObject*>self.data == _slot_item(<PyObject*>self._shared, 0):
            self._shared[0] = None  # the views' now: the thread's next read, a new scratch
        return 0

    cdef inline int settled(self) except -1:
        """:meth:`settle` from the compiled ``buffer_updated``, its usual case inline: all
        taken from the scratch, nothing lent (the pipe keeps no buffer)."""
        if (self.start == self.end and not self.lent
                and <PyObject*>self.data == _slot_item(<PyObject*>self._shared, 0)):
            self.data = RB_EMPTY
            return 0
        self.settle()
        return 0

    cpdef void settle(self) except *:
        """The read was processed: nothing it left stays in the scratch, nothing is kept but
        a message still arriving (the reference's)."""
        cdef bytearray data = self.data
        cdef list shared = self._shared
        cdef Py_ssize_t cap
        if <object>data is shared[0]:
            if self.lent:  # views lent of it: the views' now (lend did it already)
                shared[0] = None
            elif self.start < self.end:  # a message still arriving: to a buffer of its own
                self._move(self.end - self.start, self._ahead(self.end - self.start))
                return
        if self.start < self.end:  # a message held in a buffer of the pipe's: kept
            return
        cap = PyByteArray_GET_SIZE(data)
        if not self.lent and shared[0] is None and RB_CHUNK <= cap <= RB_AHEAD:
            shared[0] = data  # its own, done with, no view of it: the thread's scratch
        self.data = RB_EMPTY
        self.lent = False

    def __len__(self) -> int:
        """Bytes held (read and not taken)."""
        return self.end - self.start


@cython.final
cdef class Batch:
    """Write coalescing, per thread (the reference: :class:`gateway.engine.writes.Batch`);
    its flush is :func:`flush_batch`."""

    cdef public Py_ssize_t depth
    cdef public list dirty
    #: the loop a flush is scheduled on (None: none)
    cdef public object scheduled
    cdef object _soon_loop, _call_soon  # the last loop scheduled on and its call_soon, bound

    def __init__(self) -> None:
        self.depth = 0
        self.dirty = []
        self.scheduled = None

    def close(self, loop) -> None:
        """Leave one dispatch level; the outermost schedules the flush of what it buffered."""
        self.depth -= 1
        self.schedule(loop)

    cpdef void schedule(self, object loop) except *:
        """The flush, once this iteration's reads ran: the batch holds writes, no dispatch is
        open and none is scheduled on ``loop`` yet."""
        if not self.depth and self.dirty and self.scheduled is not loop:
            self.scheduled = loop
            if loop is not self._soon_loop:  # (its call_soon bound once, not looked up each time)
                self._soon_loop, self._call_soon = loop, loop.call_soon
            self._call_soon(flush_batch, self)


def flush_batch(Batch batch) -> None:
    """``gateway.engine.writes.flush`` with ``Writes.flush`` inlined, compiled: what every pipe
    of ``batch`` buffered, one write each. The reference's twin, kept to the same lines."""
    batch.scheduled = None
    cdef list dirty = batch.dirty
    batch.dirty = []
    cdef list chunks
    cdef PipeState state
    cdef Py_ssize_t size
    for pipe in dirty:
        if not isinstance(pipe, PipeState):
            pipe.flush()  # (a reference pipe: its own flush)
            continue
        state = <PipeState>pipe
        transport = state._transport
        if not state.wbuf or transport is None:
            continue
        if state._t_held or (transport.is_closing() if state._t_closing is None
                             else state._t_closing()):
            pipe.flush()  # held: it waits for resume_writing; closing: connection_lost counts it
            continue
        chunks = state.wbuf
        state.wbuf = []
        size = state._wbuf_size
        state._wbuf_size = 0
        state.queued_msgs = 0
        if len(chunks) == 1:  # (writes.write_chunks, inline)
            data = chunks[0]
        elif size < JOIN_BELOW:
            data = b"".join(chunks)
        else:  # one writelines (uvloop: one writev; a large body, a view of its read)
            transport.writelines(chunks)
            continue
        if state._t_write is None:  # (not a transport's: its own)
            transport.write(data)
        else:
            state._t_write(data)


cdef class ReceiveBuffer:
    """A codec's receive buffer (the reference: :class:`gateway.wire._buffer.ReceiveBuffer`,
    whose doc says how ``data`` and ``pos`` move)."""

    cdef public object data
    cdef public Py_ssize_t pos

    def __init__(self) -> None:
        self.data = b""
        self.pos = 0

    def feed(self, chunk) -> None:
        """Append received bytes, first dropping what was consumed. Never raises."""
        data = self.data
        if self.pos >= len(data):  # nothing left over: the chunk itself, no copy
            self.data = chunk if type(chunk) is bytes else bytes(chunk)
            self.pos = 0
            return
        if type(data) is bytearray:
            try:
                if self.pos:
                    del data[:self.pos]
                data += chunk
                self.pos = 0
                return
            except BufferError:  # a view of it is still to be written (the kernel's, of a body)
                pass  # (nothing changed): the tail to a new buffer, as below
        # a tail left over: from now on, a buffer to append to
        with memoryview(data) as view:
            data = bytearray(view[self.pos:])
        self.data = data
        self.pos = 0
        data += chunk

    def copy(self, Py_ssize_t start, Py_ssize_t stop) -> bytes:
        """``bytes(data[start:stop])`` through a memoryview (one copy: for big frames)."""
        with memoryview(self.data) as view:
            return bytes(view[start:stop])

    def __len__(self) -> int:
        """Bytes not consumed yet."""
        return len(self.data) - self.pos


cdef class Routing:
    """A socket's ready pipes (the reference: :class:`gateway.engine.send.Routing`)."""

    cdef public bint closed
    cdef public str name
    cdef public list out
    cdef public list room
    cdef public dict routes
    cdef public Py_ssize_t rr

    def __init__(self, str name) -> None:
        self.name = name
        self.routes = {}
        self.out = []
        self.rr = 0
        self.closed = False
        self.room = [False]

    def pick(self):
        """The next writable pipe, round robin (None: none is)."""
        cdef list out = self.out
        cdef Py_ssize_t n = len(out), i, idx
        for i in range(n):
            idx = (self.rr + i) % n
            pipe = out[idx]
            if _writable(pipe):
                self.rr = idx + 1
                return pipe
        return None

    def has_room(self) -> bool:
        """True when a balanced send would go out now (a pipe is writable)."""
        for pipe in self.out:
            if _writable(pipe):
                return True
        return False

    def recount(self) -> None:
        """Bring ``room`` up to date: ``out`` or a pipe's writability changed."""
        self.room[0] = self.has_room()

    def add(self, pipe) -> None:
        """A pipe is ready: sends may go out on it."""
        self.out.append(pipe)
        self.recount()

    def discard(self, pipe) -> None:
        """Nothing more goes out on ``pipe`` (if it was one of ``out``)."""
        try:
            self.out.remove(pipe)
        except ValueError:
            pass
        self.recount()

    def check_open(self) -> None:
        if self.closed:
            raise Closed(f"{self.name} socket is closed")


cdef inline bint _writable(object pipe) except -1:
    if isinstance(pipe, PipeState):
        return (<PipeState>pipe).writable
    return pipe.writable


cdef class Tally:
    """A bridge's hot counters (the reference: :class:`gateway.device.ledger.Tally`): requests
    in flight, whether replies pair with requests, and the cells of the forwarded counters and
    of the hop-latency histograms (``*_counts``: per bucket; ``*_total``: the sum, one cell),
    made here for ``buckets`` buckets. The cells are C numbers of this object (:class:`Cells`:
    indexed as the reference's lists are, by the ledger's Python and the registry's readers),
    which the kernel adds to without a Python int or float."""

    cdef public Py_ssize_t in_flight
    cdef public bint pairs_replies
    cdef readonly Cells n_req, n_rep, req_counts, req_total, rep_counts, rep_total
    #: messages the kernel forwarded (what a capture endpoint did not see: gateway.device.tap)
    cdef public Py_ssize_t by_kernel
    # the cells' numbers, per direction (0: request, 1: reply)
    cdef Py_ssize_t k_n[2]
    cdef Py_ssize_t k_counts[2][MAX_BUCKETS + 1]
    cdef double k_total[2]

    def __init__(self, int buckets) -> None:
        if not 0 < buckets <= MAX_BUCKETS:
            raise ValueError(f"1 to {MAX_BUCKETS} hop-latency buckets, not {buckets}")
        self.in_flight = 0
        self.pairs_replies = True
        self.by_kernel = 0
        self.n_req = Cells._of(self, &self.k_n[0], NULL, 1)
        self.n_rep = Cells._of(self, &self.k_n[1], NULL, 1)
        self.req_counts = Cells._of(self, self.k_counts[0], NULL, buckets + 1)
        self.rep_counts = Cells._of(self, self.k_counts[1], NULL, buckets + 1)
        self.req_total = Cells._of(self, NULL, &self.k_total[0], 1)
        self.rep_total = Cells._of(self, NULL, &self.k_total[1], 1)

    cdef inline void count(self, int d, int bucket, Py_ssize_t n, double dt) noexcept:
        """``n`` messages forwarded in direction ``d`` (0: request), each ``dt`` seconds in
        the middle (``bucket``: its histogram bucket)."""
        self.k_n[d] += n
        self.k_counts[d][bucket] += n
        self.k_total[d] += dt * n


@cython.final
cdef class Cells:
    """Cells of a compiled :class:`Tally` (its C numbers), as the reference's lists are used:
    ``cells[i]``, ``cells[i] = v`` (so ``cells[i] += v``), ``len``, iteration. Integers, or
    one float (a histogram's sum)."""

    cdef Tally owner  # (keeps the numbers alive)
    cdef Py_ssize_t* ints
    cdef double* floats
    cdef Py_ssize_t n

    @staticmethod
    cdef Cells _of(Tally owner, Py_ssize_t* ints, double* floats, Py_ssize_t n):
        cdef Cells c = Cells.__new__(Cells)
        c.owner, c.ints, c.floats, c.n = owner, ints, floats, n
        return c

    def __len__(self) -> int:
        return self.n

    cdef Py_ssize_t _index(self, Py_ssize_t i) except -1:
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError("cell index out of range")
        return i

    def __getitem__(self, Py_ssize_t i):
        i = self._index(i)
        if self.floats != NULL:
            return self.floats[i]
        return self.ints[i]

    def __setitem__(self, Py_ssize_t i, value) -> None:
        i = self._index(i)
        if self.floats != NULL:
            self.floats[i] = value
        else:
            self.ints[i] = value

    def __iter__(self):
        return iter([self[i] for i in range(self.n)])

    def __repr__(self) -> str:
        return repr(list(self))
