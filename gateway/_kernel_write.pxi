# Included by gateway/_kernel.pyx (one compiled module): what one read writes to one pipe.

cdef inline bint _zmtp_framing(int framing) noexcept:
    return framing == F_ZMTP or framing == F_CURVE


cdef inline Py_ssize_t _zmtp_frame_size(Py_ssize_t size) noexcept nogil:
    return size + (2 if size <= 255 else 9)


cdef inline uint8_t* _zmtp_head(uint8_t* at, Py_ssize_t size, bint more) noexcept nogil:
    """A ZMTP frame's header (its flags and size), without the payload."""
    if size <= 255:
        at[0] = 1 if more else 0
        at[1] = <uint8_t>size
        return at + 2
    at[0] = 3 if more else 2
    _put64(at + 1, <uint64_t>size)
    return at + 9


cdef inline uint8_t* _zmtp_frame(uint8_t* at, const uint8_t* data, Py_ssize_t size,
                                 bint more) noexcept nogil:
    at = _zmtp_head(at, size, more)
    if size:
        memcpy(at, data, size)
    return at + size


#: a body at least this big goes to its pipe as a view of the read it came in (no copy: the
#: pipe's batch writes it with the bytes around it in one writev); smaller ones are copied
#: into the destination's buffer (a view and a chunk per message cost more than the copy)
cdef Py_ssize_t VIEW_FROM = 8192


cdef class _Out:
    """The kernel's record of one pipe (``Pipe.kernel_state``, made by :func:`_state` at the
    pipe's first read or write): what a read of it needs (its codec's receive buffer and
    framing, which are fixed once the pipe is ready) and what one read writes to it, its
    encoded messages in order (CURVE: plain frames, sealed at the end of the read)."""
    cdef PipeState pipe
    cdef object codec
    cdef ReceiveBuffer rx
    cdef object liveness  # the pipe's (Pipe.liveness, made with the pipe: one look-up)
    cdef int framing
    cdef Py_ssize_t limit  # the codec's max_message_size
    cdef object dests  # the _Dests (a kernel's) that last wrote here, in its read ``epoch``
    cdef uint64_t epoch
    cdef bytearray data  # (None between reads: the last one's went to the pipe's batch)
    cdef Py_ssize_t size  # bytes in data
    cdef Py_ssize_t wire  # the same on the pipe's wire (CURVE: sealed)
    cdef Py_ssize_t room  # bytes the pipe's batch may still take (see Writes.write_frames)
    cdef list parts  # this read's chunks before ``data`` (its views of the read), or None
    cdef Py_ssize_t big  # this read's largest message here, on the wire
    cdef Py_ssize_t unit  # the pipe's mark per message as last set (Writes.fit_mark)
    cdef Py_ssize_t msgs  # this read's messages here (to the pipe's ``queued_msgs``)
    # CURVE: the mechanism, its precomputed key, our nonce prefix and next short nonce
    cdef object mech
    cdef bytes precom, prefix
    cdef uint64_t nonce

    cdef uint8_t* grow(self, Py_ssize_t n, Py_ssize_t wire) except NULL:
        if self.data is None:
            self.data = bytearray()
        cdef Py_ssize_t have = PyByteArray_GET_SIZE(self.data)
        if self.size + n > have:
            PyByteArray_Resize(self.data, max(self.size + n, 2 * have, 256))
        cdef uint8_t* at = <uint8_t*>PyByteArray_AS_STRING(self.data) + self.size
        self.size += n
        self.wire += wire
        if wire > self.big:
            self.big = wire
        return at

    # -- bodies by reference: a large one is a view of the read, not a copy ------------------
    cdef inline bint viewable(self, const uint8_t* body, Py_ssize_t size) noexcept:
        """``size`` bytes at ``body`` go out as a view of the read: large enough, not sealed
        (CURVE: the box is made of a copy) and in the read's buffer (not an opened box)."""
        if size < VIEW_FROM or self.framing == F_CURVE:
            return False
        cdef _Dests d = <_Dests>self.dests
        return d.src is not None and body >= d.base and body + size <= d.base + d.end

    cdef int view(self, const uint8_t* body, Py_ssize_t size) except -1:
        """Append ``size`` bytes at ``body`` (``viewable``) as a view: the bytes written so
        far become a part, then the view; the next bytes go to a new buffer. (Its wire bytes
        were counted by the ``grow`` of the message's header.)"""
        cdef _Dests d = <_Dests>self.dests
        if self.parts is None:
            self.parts = []
        if self.size:
            PyByteArray_Resize(self.data, self.size)
            self.parts.append(self.data)
            self.data = None
            self.size = 0
        if d.view is None:
            d.view = memoryview(d.src)
        cdef Py_ssize_t off = body - d.base
        self.parts.append(d.view[off:off + size])
        return 0

    cdef int put(self, const uint8_t* body, Py_ssize_t size) except -1:
        """Append a payload after what the message's ``grow`` wrote: a view when
        ``viewable``, else a copy (``grow(size, 0)``: its wire bytes were counted)."""
        if self.viewable(body, size):
            return self.view(body, size)
        if size:
            memcpy(self.grow(size, 0), body, size)
        return 0

    cdef inline Py_ssize_t fsize(self, Py_ssize_t size) noexcept:
        """A ZMTP frame of ``size`` bytes on this pipe's wire (CURVE: its MESSAGE box)."""
        if self.framing == F_CURVE:
            size += CURVE_OVERHEAD
        return size + (2 if size <= 255 else 9)

    # -- encoders (each checks the mark first; False: nothing written) ----------------------------
    cdef inline bint fits(self, Py_ssize_t n) noexcept:
        """The pipe's batch takes ``n`` more bytes (on its wire) without reaching its mark
        (past it, the reference flushes, which may change what is writable: its business)."""
        return self.wire + n < self.room

    cdef bint sp_token(self, bytes token, const uint8_t* body,
                        Py_ssize_t size) except -1:
        """zmtp -> sp request: [token][body] as one SP message."""
        cdef int ipc = self.framing == F_SP_IPC
        if not self.fits(ipc + 8 + 4 + size):
            return False
        cdef bint view = self.viewable(body, size)
        cdef uint8_t* at = self.grow(ipc + 8 + 4 + (0 if view else size), ipc + 8 + 4 + size)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>(4 + size))
        memcpy(at + 8, PyBytes_AS_STRING(token), 4)
        if view:
            self.view(body, size)
        elif size:
            memcpy(at + 12, body, size)
        self.msgs += 1  # one whole message written
        return True

    cdef bint zmtp_frames(self, bytes rid, const uint8_t* p, Frame* frames,
                          int first, int count) except -1:
        """ZMTP frames: ``rid`` (if any), then ``frames[first:count]`` of the read."""
        cdef Py_ssize_t need = 0, wneed = 0
        cdef int i
        if rid is not None:
            need += _zmtp_frame_size(len(rid))
            wneed += self.fsize(len(rid))
        for i in range(first, count):
            need += _zmtp_frame_size(frames[i].size)
            wneed += self.fsize(frames[i].size)
        if count - first + (rid is not None) == 0 or not self.fits(wneed):
            return False
        if self.viewable(p + frames[count - 1].start, frames[count - 1].size):
            return self.zmtp_pieces(rid, p, frames, first, count, wneed)
        cdef uint8_t* at = self.grow(need, wneed)
        if rid is not None:
            at = _zmtp_frame(at, <const uint8_t*>PyBytes_AS_STRING(rid), len(rid),
                             count > first)
        for i in range(first, count):
            at = _zmtp_frame(at, p + frames[i].start, frames[i].size, i < count - 1)
        self.msgs += 1  # one whole message written
        return True

    cdef bint zmtp_pieces(self, bytes rid, const uint8_t* p, Frame* frames, int first, int count,
                          Py_ssize_t wneed) except -1:
        """``zmtp_frames`` (checked: it fits) with large frames as views of the read."""
        self.grow(0, wneed)
        cdef uint8_t* at
        cdef int i
        if rid is not None:
            at = self.grow(_zmtp_frame_size(len(rid)), 0)
            _zmtp_frame(at, <const uint8_t*>PyBytes_AS_STRING(rid), len(rid), count > first)
        for i in range(first, count):
            at = self.grow(9 if frames[i].size > 255 else 2, 0)
            _zmtp_head(at, frames[i].size, i < count - 1)
            self.put(p + frames[i].start, frames[i].size)
        self.msgs += 1  # one whole message written
        return True

    cdef bint zmtp_parked(self, tuple parked, const uint8_t* p, Frame payload,
                           Py_ssize_t words) except -1:
        """zmtp -> sp reply: the parked hops but the first (the front's routing id), then the
        SP body after the token."""
        cdef Py_ssize_t need = 0, wneed = 0, n = PyTuple_GET_SIZE(parked)
        cdef Py_ssize_t size = payload.size - words, i
        for i in range(1, n):
            if type(parked[i]) is not bytes:  # (TokenTable.mint makes them bytes)
                return False
            need += _zmtp_frame_size(PyBytes_GET_SIZE(parked[i]))
            wneed += self.fsize(PyBytes_GET_SIZE(parked[i]))
        need += _zmtp_frame_size(size)
        wneed += self.fsize(size)
        if not self.fits(wneed):
            return False
        cdef bint view = self.viewable(p + payload.start + words, size)
        cdef uint8_t* at = self.grow(need - size if view else need, wneed)
        for i in range(1, n):
            hop = parked[i]
            at = _zmtp_frame(at, <const uint8_t*>PyBytes_AS_STRING(hop),
                             PyBytes_GET_SIZE(hop), True)
        if view:
            _zmtp_head(at, size, False)
            self.view(p + payload.start + words, size)
        else:
            _zmtp_frame(at, p + payload.start + words, size, False)
        self.msgs += 1  # one whole message written
        return True

    cdef bint sp_to_zmtp(self, bytes rid, const uint8_t* p, Frame payload,
                          Py_ssize_t words) except -1:
        """sp -> zmtp request: the SP pipe id, each backtrace word, "", the body."""
        cdef Py_ssize_t body = payload.size - words, off
        cdef Py_ssize_t need = 6 + 2 + _zmtp_frame_size(body) + words // 4 * 6
        cdef Py_ssize_t wneed = (self.fsize(4) * (1 + words // 4) + self.fsize(0)
                                 + self.fsize(body))
        if not self.fits(wneed):
            return False
        cdef bint view = self.viewable(p + payload.start + words, body)
        cdef uint8_t* at = self.grow(need - body if view else need, wneed)
        at = _zmtp_frame(at, <const uint8_t*>PyBytes_AS_STRING(rid), 4, True)
        for off in range(0, words, 4):
            at = _zmtp_frame(at, p + payload.start + off, 4, True)
        at = _zmtp_frame(at, NULL, 0, True)
        if view:
            _zmtp_head(at, body, False)
            self.view(p + payload.start + words, body)
        else:
            _zmtp_frame(at, p + payload.start + words, body, False)
        self.msgs += 1  # one whole message written
        return True

    cdef bint sp_payload(self, const uint8_t* p, Frame* frames, int count) except -1:
        """One SP message whose payload is the read's ``count`` frames, concatenated."""
        cdef int ipc = self.framing == F_SP_IPC, i
        cdef Py_ssize_t size = 0
        for i in range(count):
            size += frames[i].size
        if not self.fits(ipc + 8 + size):
            return False
        cdef uint8_t* at
        if count == 1 and self.viewable(p + frames[0].start, size):
            at = self.grow(ipc + 8, ipc + 8 + size)
            if ipc:
                at[0] = 1
                at += 1
            _put64(at, <uint64_t>size)
            self.view(p + frames[0].start, size)
            self.msgs += 1  # one whole message written
            return True
        at = self.grow(ipc + 8 + size, ipc + 8 + size)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>size)
        at += 8
        for i in range(count):
            if frames[i].size:
                memcpy(at, p + frames[i].start, frames[i].size)
                at += frames[i].size
        self.msgs += 1  # one whole message written
        return True

    cdef bint sp_forward(self, bytes rid, const uint8_t* p,
                          Frame payload) except -1:
        """sp -> sp request: the pipe id pushed in front of the payload."""
        cdef int ipc = self.framing == F_SP_IPC
        cdef Py_ssize_t need = ipc + 8 + 4 + payload.size
        if not self.fits(need):
            return False
        cdef bint view = self.viewable(p + payload.start, payload.size)
        cdef uint8_t* at = self.grow(need - payload.size if view else need, need)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>(4 + payload.size))
        memcpy(at + 8, PyBytes_AS_STRING(rid), 4)
        if view:
            self.view(p + payload.start, payload.size)
        else:
            memcpy(at + 12, p + payload.start, payload.size)
        self.msgs += 1  # one whole message written
        return True

    cdef bint sp_reply(self, const uint8_t* p, Frame payload) except -1:
        """sp -> sp reply: the payload without its first word (the front's pipe id)."""
        cdef int ipc = self.framing == F_SP_IPC
        cdef Py_ssize_t size = payload.size - 4
        if not self.fits(ipc + 8 + size):
            return False
        cdef bint view = self.viewable(p + payload.start + 4, size)
        cdef uint8_t* at = self.grow(ipc + 8 + (0 if view else size), ipc + 8 + size)
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>size)
        if view:
            self.view(p + payload.start + 4, size)
        else:
            memcpy(at + 8, p + payload.start + 4, size)
        self.msgs += 1  # one whole message written
        return True

    cdef bint zmtp_to_sp(self, const uint8_t* p, Frame* frames, int nhops,
                          int count) except -1:
        """sp -> zmtp reply: the words after the pipe id (not the delimiter), then the body,
        as one SP message."""
        cdef int ipc = self.framing == F_SP_IPC
        cdef Py_ssize_t size = (nhops - 2) * 4 + frames[count - 1].size
        if not self.fits(ipc + 8 + size):
            return False
        cdef Frame last = frames[count - 1]
        cdef bint view = self.viewable(p + last.start, last.size)
        cdef uint8_t* at = self.grow(ipc + 8 + size - (last.size if view else 0), ipc + 8 + size)
        cdef int i
        if ipc:
            at[0] = 1
            at += 1
        _put64(at, <uint64_t>size)
        at += 8
        for i in range(1, nhops - 1):
            memcpy(at, p + frames[i].start, 4)
            at += 4
        if view:
            self.view(p + last.start, last.size)
        else:
            memcpy(at, p + last.start, last.size)
        self.msgs += 1  # one whole message written
        return True


cdef bytearray _seal(_Out out):
    """``out``'s plain ZMTP frames as CURVE MESSAGE boxes (RFC 26), in order, each with the next
    short nonce (what the reference's ``seal`` makes, frame by frame); the mechanism learns how
    far its nonce went."""
    cdef bytearray sealed = bytearray(out.wire)
    cdef uint8_t* src = <uint8_t*>PyByteArray_AS_STRING(out.data)
    cdef uint8_t* at = <uint8_t*>PyByteArray_AS_STRING(sealed)
    cdef const uint8_t* key = <const uint8_t*>PyBytes_AS_STRING(out.precom)
    cdef Py_ssize_t pos = 0, size, body
    cdef uint8_t flags
    cdef uint8_t full[24]
    memcpy(full, PyBytes_AS_STRING(out.prefix), 16)
    while pos < out.size:
        flags = src[pos]
        if flags & 0x02:
            size = <Py_ssize_t>_be64(src + pos + 1)
            pos += 9
        else:
            size = src[pos + 1]
            pos += 2
        body = CURVE_OVERHEAD + size
        if body <= 255:
            at[0] = 0
            at[1] = <uint8_t>body
            at += 2
        else:
            at[0] = 2
            _put64(at + 1, <uint64_t>body)
            at += 9
        memcpy(at, b"\x07MESSAGE", 8)
        _put64(at + 8, out.nonce)
        memcpy(full + 16, at + 8, 8)
        src[pos - 1] = flags & 0x01  # the byte before the payload: its flags, inside the box
        crypto_box_easy_afternm(at + 16, src + pos - 1, size + 1, full, key)
        at += 16 + 16 + 1 + size
        out.nonce += 1
        pos += size
    out.mech.advance(out.nonce, out.mech.session()[4])
    return sealed


#: what _state gives for a pipe whose ``kernel_state`` (a public slot) holds something else
#: than the kernel's record: framing 0, the reference's pipe
cdef _Out _FOREIGN = _Out.__new__(_Out)

#: the largest size limit the kernel keeps (a Py_ssize_t with room to add a box's overhead);
#: a larger ``max_message_size`` (the settings refuse one past it) means the same to the kernel,
#: as no message in a read can be larger
cdef Py_ssize_t LIMIT_CAP = 1 << 62


cdef _Out _state(PipeState pipe):
    """The kernel's record of ``pipe`` (a ready one), made at its first read or write."""
    state = pipe.kernel_state
    if state is not None:
        if type(state) is _Out:
            return <_Out>state
        return _FOREIGN
    cdef _Out out = _Out.__new__(_Out)
    codec = pipe.codec
    out.pipe, out.codec = pipe, codec
    out.unit = BYTES_PER_HWM
    out.liveness = getattr(pipe, "liveness", None)
    out.framing = _framing(codec)
    if out.framing:  # (a codec that declares its framing: gateway.wire.KernelSeam)
        rx = codec.rx
        limit = codec.max_message_size
        if type(rx) is not ReceiveBuffer or type(limit) is not int or limit < 0:
            out.framing = 0  # (a reference buffer, a limit Python code set: the reference's)
        else:
            out.rx = <ReceiveBuffer>rx
            out.limit = limit if limit < LIMIT_CAP else LIMIT_CAP
        if out.framing == F_CURVE:
            out.mech = codec.security
    pipe.kernel_state = out
    return out
