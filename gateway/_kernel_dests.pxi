# Included by gateway/_kernel.pyx (one compiled module): where one read's messages go, a
# buffer (_Out, gateway/_kernel_write.pxi) per destination pipe, and how they reach the pipes'
# write batches at the end of the read.


cdef class _Dests:
    """Where one read's messages go: a buffer (:class:`_Out`) per destination pipe, made when
    first written to and given to the pipe's write batch once, at the end of the read
    (``flush``); the round robin over the back's writable pipes (``pick``) and the front pipe
    a reply goes to (``front_out``), each looked up once per read. Within one read nothing is
    written to a transport and no pipe comes or goes, so neither answer changes."""

    cdef Routing b_routing  # the back's (its out list, its round robin)
    cdef dict f_routes  # the front's pipes by routing id
    cdef uint64_t epoch  # this read's number
    cdef list order  # the _Out written to in this read, in the order of their first message
    cdef Py_ssize_t picked, rr  # (rr: this read's round robin; -1: none picked yet)
    cdef bytes r_target  # this read's last reply destination (routing id) and its buffer
    cdef _Out r_out
    # the read's buffer (bytes, or the codec's bytearray), for views of large bodies
    cdef object src
    cdef object view  # memoryview(src), made at the read's first view
    cdef const uint8_t* base
    cdef Py_ssize_t end
    cdef bytes k_target  # the last reply destination's routing id, kept across reads (a key)

    def __init__(self, Routing b_routing, dict f_routes) -> None:
        self.b_routing, self.f_routes = b_routing, f_routes
        self.epoch = 1
        self.order = []
        self.rr = -1

    cdef _Out pick(self):
        """The next writable back pipe, round robin (Routing.pick), or None; ``picked`` is
        its place, for the caller to move the round robin on (``moved``) once it sent.
        Within one read nothing is written, so which back pipes are writable does not change:
        the first pick of a read takes the round robin, ``flush`` gives it back; each pick
        walks the back's pipes from there (no list of its own: one message a read is usual)."""
        cdef list pipes = self.b_routing.out
        cdef Py_ssize_t n = len(pipes), i, idx
        if self.rr < 0:
            self.rr = self.b_routing.rr
        for i in range(n):
            idx = (self.rr + i) % n
            pipe = pipes[idx]
            if not isinstance(pipe, PipeState) or not (<PipeState>pipe).writable:
                continue
            item = self.out(pipe)
            if item is None:
                return None  # a wire the kernel does not write
            self.picked = idx
            return <_Out>item
        return None

    cdef inline void moved(self) noexcept:
        """The message went to the picked pipe: the round robin moves past it."""
        self.rr = self.picked + 1

    cdef _Out out(self, object pipe):
        """This read's buffer for ``pipe`` (None: a wire the kernel does not write)."""
        if not isinstance(pipe, PipeState):
            return None
        cdef PipeState ps = <PipeState>pipe
        cdef _Out out = _state(ps)
        if out.framing == 0:
            return None
        if out.epoch != self.epoch or out.dests is not self:  # its first message of this read
            out.dests, out.epoch = self, self.epoch
            out.size = out.wire = out.big = out.msgs = 0
            out.room = ps._high - ps._wbuf_size
            if out.framing == F_CURVE:
                out.precom, out.prefix, _, out.nonce, _ = out.mech.session()
            self.order.append(out)
        return out

    cdef void flush(self) except *:
        """Each destination's bytes into its pipe's write batch (Writes.write_frames), once;
        CURVE destinations get their frames sealed here, in order (their nonces go up)."""
        cdef _Out out
        cdef PipeState pipe
        cdef list wbuf
        for out in self.order:
            if out.size or out.parts is not None:
                pipe = out.pipe
                wbuf = pipe.wbuf
                if not wbuf:
                    batch = pipe._batch
                    if type(batch) is Batch:
                        (<Batch>batch).dirty.append(pipe)
                    else:
                        batch.dirty.append(pipe)  # (a reference batch)
                if out.parts is not None:  # (never CURVE: a view is never sealed)
                    wbuf.extend(out.parts)
                    out.parts = None
                if out.size:
                    if out.framing == F_CURVE:
                        data = _seal(out)
                    else:
                        PyByteArray_Resize(out.data, out.size)
                        data = out.data
                    wbuf.append(data)
                    out.data = None  # the pipe's now
                pipe._wbuf_size += out.wire
                pipe.queued_msgs += out.msgs  # (Writes.write_frames counts its own)
                if out.big > out.unit:  # a message past the mark's unit (Writes.fit_mark)
                    out.unit = out.big
                    (<object>pipe).fit_mark(out.big)
        del self.order[:]
        self.src = self.view = None
        self.epoch += 1
        if self.rr >= 0:  # the round robin, as the reference's picks leave it
            self.b_routing.rr = self.rr
            self.rr = -1
        self.r_target = self.r_out = None

    cdef _Out front_out(self, const uint8_t* tp, Py_ssize_t tn, bytes target):
        """The buffer for the front pipe a reply goes to (its routing id: ``tn`` bytes at
        ``tp``, or ``target``), or None: gone, at its mark (the reference counts those) or a
        wire the kernel does not write. Within one read no pipe comes, goes or changes its
        writability: the last answer is kept for the read's next reply to the same pipe."""
        cdef bytes last = self.r_target
        if (last is not None and PyBytes_GET_SIZE(last) == tn
                and memcmp(PyBytes_AS_STRING(last), tp, tn) == 0):
            return self.r_out
        if target is None:  # the last read's key when it is the same id (no new bytes)
            last = self.k_target
            if (last is not None and PyBytes_GET_SIZE(last) == tn
                    and memcmp(PyBytes_AS_STRING(last), tp, tn) == 0):
                target = last
            else:
                target = self.k_target = PyBytes_FromStringAndSize(<const char*>tp, tn)
        fpipe = self.f_routes.get(target)
        if fpipe is None or not isinstance(fpipe, PipeState) or not (<PipeState>fpipe).writable:
            return None
        cdef _Out out = self.out(fpipe)
        if out is not None:
            self.r_target, self.r_out = target, out
        return out
