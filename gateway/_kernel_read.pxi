# Included by gateway/_kernel.pyx (one compiled module): one message of a read, parsed in place
# (plain ZMTP, SP, CURVE boxes opened), and what the tables keep of it (tuples of bytes).


cdef struct Frame:
    Py_ssize_t start
    Py_ssize_t size


cdef inline Py_ssize_t _zmtp_message(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                                     Py_ssize_t limit, Frame* frames, int* count) noexcept nogil:
    """The end of the whole plain ZMTP message at ``pos`` (its frames in ``frames``), or -1:
    not one the kernel takes (incomplete, a command, reserved flags, past ``limit`` bytes in
    all, each frame counting at least FRAME_FLOOR, more than MAX_FRAMES frames)."""
    cdef int n = 0
    cdef Py_ssize_t total = 0, start
    cdef uint64_t size, cost
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
        cost = size if size > FRAME_FLOOR else FRAME_FLOOR  # (an empty frame is not free)
        if cost > <uint64_t>(limit - total) or size > <uint64_t>(end - start) or n == MAX_FRAMES:
            return -1
        frames[n].start = start
        frames[n].size = <Py_ssize_t>size
        n += 1
        total += <Py_ssize_t>cost
        pos = start + <Py_ssize_t>size
        if not flags & 0x01:
            count[0] = n
            return pos


cdef Py_ssize_t _incomplete(const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t limit,
                            int framing) noexcept nogil:
    """The bytes from ``pos`` to ``end`` begin a message the kernel parses once it is whole
    (plain ZMTP or SP, no command, within the limit and MAX_FRAMES), and its end is still to
    come: the pipe waits for more (the reads that follow append to the receive buffer, or land
    behind it in the read buffer) without the codec's Python, which would take its frames
    apart. Its length from ``pos`` as far as the headers so far say (more than ``end - pos``:
    the next header's least when the headers end with the bytes; 0: anything else, the
    reference's)."""
    cdef int n = 0
    cdef Py_ssize_t total = 0, start, head, at = pos
    cdef uint64_t size, cost
    cdef uint8_t flags
    if framing == F_SP or framing == F_SP_IPC:
        head = 9 if framing == F_SP_IPC else 8
        if framing == F_SP_IPC and end > pos and p[pos] != 1:
            return 0
        if end - pos < head:
            return head
        size = _be64(p + pos + head - 8)
        if size <= <uint64_t>limit and size > <uint64_t>(end - pos - head):
            return head + <Py_ssize_t>size
        return 0
    if framing != F_ZMTP:
        return 0
    while True:
        if pos >= end:
            return pos - at + 2  # (its next frame to come: at least a short header)
        flags = p[pos]
        if flags & 0xFC:
            return 0
        head = 9 if flags & 0x02 else 2
        if end - pos < head:
            return pos - at + head
        size = _be64(p + pos + 1) if flags & 0x02 else p[pos + 1]
        start = pos + head
        cost = size if size > FRAME_FLOOR else FRAME_FLOOR
        if cost > <uint64_t>(limit - total) or n == MAX_FRAMES:
            return 0
        if size > <uint64_t>(end - start):
            return start - at + <Py_ssize_t>size
        n += 1
        total += <Py_ssize_t>cost
        pos = start + <Py_ssize_t>size
        if not flags & 0x01:
            return 0  # a whole message: the kernel stopped before it for another reason


cdef inline const uint8_t* _buffer_of(object data, Py_ssize_t* size):
    """The bytes of a receive buffer's ``data`` (bytes or bytearray; NULL: another type)."""
    if type(data) is bytes:
        size[0] = PyBytes_GET_SIZE(data)
        return <const uint8_t*>PyBytes_AS_STRING(data)
    if type(data) is bytearray:
        size[0] = PyByteArray_GET_SIZE(data)
        return <const uint8_t*>PyByteArray_AS_STRING(data)
    return NULL


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


cdef inline Py_ssize_t _hops_size(Frame* frames, int nhops, bytes rid) noexcept:
    """envelope_bytes of ``_hops(p, frames, nhops, rid)``, without making it."""
    cdef Py_ssize_t cost = nhops + 1 + PyBytes_GET_SIZE(rid)
    cdef int i
    for i in range(nhops):
        cost += frames[i].size
    return cost


cdef bytes _flat_frames(const uint8_t* p, Frame* frames, int n, bytes rid):
    """The in-flight key (flat, see ``_flat``) of ``rid`` (if any) and the read's first ``n``
    frames."""
    cdef Py_ssize_t total = 0, r = 0 if rid is None else PyBytes_GET_SIZE(rid)
    cdef int i
    if rid is not None:
        total = _flat_size(r)
    for i in range(n):
        total += _flat_size(frames[i].size)
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t* at = <uint8_t*>PyBytes_AS_STRING(out)
    if rid is not None:
        at = _flat_put(at, <const uint8_t*>PyBytes_AS_STRING(rid), r)
    for i in range(n):
        at = _flat_put(at, p + frames[i].start, frames[i].size)
    return out


cdef bytes _flat_words(const uint8_t* p, Py_ssize_t start, Py_ssize_t words, bytes rid,
                       bint delimiter):
    """The in-flight key (flat) of an SP backtrace as hops: ``rid`` (if any), its 4-byte
    words, ``""`` (if asked)."""
    cdef Py_ssize_t r = 0 if rid is None else PyBytes_GET_SIZE(rid), off
    cdef Py_ssize_t total = (words // 4) * 5 + delimiter + (0 if rid is None else _flat_size(r))
    cdef bytes out = PyBytes_FromStringAndSize(NULL, total)
    cdef uint8_t* at = <uint8_t*>PyBytes_AS_STRING(out)
    if rid is not None:
        at = _flat_put(at, <const uint8_t*>PyBytes_AS_STRING(rid), r)
    for off in range(0, words, 4):
        at[0] = 4
        memcpy(at + 1, p + start + off, 4)
        at += 5
    if delimiter:
        at[0] = 0
    return out


cdef bytes _flat_token(bytes token):
    """The in-flight key (flat) of ``(token,)``."""
    cdef bytes out = PyBytes_FromStringAndSize(NULL, 5)
    cdef uint8_t* at = <uint8_t*>PyBytes_AS_STRING(out)
    at[0] = 4
    memcpy(at + 1, PyBytes_AS_STRING(token), 4)
    return out


cdef bint _matches(const uint8_t* p, Frame* frames, int count, tuple prefixes) except -1:
    """``b"".join(frames[:count]).startswith(prefixes)``, without the join."""
    cdef Py_ssize_t total = 0, n, done, take
    cdef int i, f
    cdef const uint8_t* want
    for i in range(count):
        total += frames[i].size
    for prefix in prefixes:
        if type(prefix) is not bytes:  # (the reference's startswith raises the same)
            raise TypeError(f"a subscription prefix is bytes, not {type(prefix).__name__}")
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


#: what a codec's ``kernel_framing`` (gateway.wire.KernelSeam) may say, and what it means here
cdef dict FRAMINGS = {"zmtp": F_ZMTP, "zmtp-curve": F_CURVE, "sp": F_SP, "sp-ipc": F_SP_IPC}


cdef int _framing(object codec) except -1:
    """What the kernel writes and reads for a pipe with ``codec``: what the codec declares
    (``kernel_framing``, whatever its class); 0: nothing, its wire is the reference's (a codec
    that declares none, WebSocket, another prefix, a CURVE session not open)."""
    framing = getattr(codec, "kernel_framing", None)
    if framing is None:
        return 0
    return FRAMINGS.get(framing, 0)


cdef Py_ssize_t _open(bytearray plain_buf, const uint8_t* p, Py_ssize_t pos, Py_ssize_t end,
                      Py_ssize_t limit, Frame* frames, int* count, bytes key, bytes prefix,
                      uint64_t* nonce) except -2:
    """The end of the whole CURVE message at ``pos``, its MESSAGE boxes opened into
    ``plain_buf`` (``frames``: offsets there) and ``nonce`` moved to the last one's; -1:
    not one the kernel takes (incomplete, a command inside a box, a box that does not open,
    a nonce that does not grow, the size limit: the reference's, which refuses or handles
    it)."""
    cdef Py_ssize_t flimit = limit + 64 + 1 + 32, start, used = 0, total = 0, clen
    cdef uint64_t size, short
    cdef uint8_t flags, inner
    cdef int n = 0
    cdef uint8_t full[24]
    cdef uint8_t* plain
    memcpy(full, PyBytes_AS_STRING(prefix), 16)
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
        if size > <uint64_t>flimit or size > <uint64_t>(end - start) or n == MAX_FRAMES:
            return -1
        if size < CURVE_OVERHEAD or memcmp(p + start, b"\x07MESSAGE", 8) != 0:
            return -1
        short = _be64(p + start + 8)
        if short <= nonce[0]:
            return -1
        clen = <Py_ssize_t>size - 16
        if PyByteArray_GET_SIZE(plain_buf) < used + clen:
            PyByteArray_Resize(plain_buf, max(used + clen, 2 * PyByteArray_GET_SIZE(plain_buf)))
        plain = <uint8_t*>PyByteArray_AS_STRING(plain_buf)
        memcpy(full + 16, p + start + 8, 8)
        if crypto_box_open_easy_afternm(plain + used, p + start + 16, clen, full,
                                        <const uint8_t*>PyBytes_AS_STRING(key)) != 0:
            return -1
        inner = plain[used]
        if inner & 0x02:  # a command inside the box (PING ...): the reference's
            return -1
        total += clen - 17 if clen - 17 > FRAME_FLOOR else FRAME_FLOOR
        if total > limit:
            return -1
        frames[n].start = used + 1
        frames[n].size = clen - 17
        n += 1
        used += clen - 16
        nonce[0] = short
        pos = start + <Py_ssize_t>size
        if not inner & 0x01:
            count[0] = n
            return pos
