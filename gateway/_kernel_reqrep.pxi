# Included by gateway/_kernel.pyx (one compiled module): the request-reply kernel.


cdef class Kernel(_Reader):
    """A request-reply bridge's forwarding: requests front -> back (the envelope translated,
    the token or in-flight entry recorded), replies back -> front (routed by the routing id or
    the token). ``translator`` and ``loss`` are the reference's, whose tables (compiled twins,
    :func:`gateway.kernel.token_table`) this shares."""

    cdef TokenTable table
    cdef InFlight inflight
    cdef bint tokens  # zmtp -> sp: requests park their envelope under a token
    cdef int ttl  # the front's hop limit (SP)

    def __init__(self, fwd, front, back, translator, loss, tally, buckets) -> None:
        super().__init__(fwd, front, back, translator, tally, buckets)
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
        if zmtp != self.front_zmtp or rid is None:
            return False  # a wire not the translator's (or no routing id): the reference's
        if zmtp:  # [identity, ...] "" body...: hops up to the first empty frame
            for i in range(count):
                if frames[i].size == 0:
                    nhops = i + 1
                    break
            nbody = count - nhops
        else:  # the SP backtrace, up to the request id
            if PyBytes_GET_SIZE(rid) != 4:
                return False  # not an SP pipe id (the encoders copy 4 bytes)
            payload = frames[0]
            nhops = _sp_backtrace(p, payload, self.ttl, &words)
            if nhops < 0:
                return False
            nbody = 1
        cdef _Out out = self.dests.pick()
        if out is None:
            return False
        cdef int dest_zmtp = _zmtp_framing(out.framing)
        if not dest_zmtp and nbody != 1:
            return False  # SP carries one body frame (the reference refuses and counts)
        cdef bytes key, token
        cdef Py_ssize_t cost = TOKEN_KEY_COST, hcost
        if self.tokens:  # zmtp -> sp: [token][body]
            hcost = _hops_size(frames, nhops, rid)
            if not self.table.room(hcost) or not self.inflight.room(TOKEN_KEY_COST):
                return False
            hops = _hops(p, frames, nhops, rid)
            if not out.fits((out.framing == F_SP_IPC) + 8 + 4 + frames[nhops].size):
                return False
            token = self.table.c_mint(hops, now, hcost)
            out.sp_token(token, p + frames[nhops].start, frames[nhops].size)
            key = _flat_token(token)
        elif zmtp:  # zmtp -> zmtp: untouched
            cost = _hops_size(frames, nhops, rid)  # (_flat_cost of the key, without reading it)
            if not self.inflight.room(cost):
                return False
            key = _flat_frames(p, frames, nhops, rid)
            if not out.zmtp_frames(rid, p, frames, 0, count):
                return False
        else:  # sp -> zmtp (pipe id, words..., "", body) or sp -> sp (untouched)
            cost = 5 + words // 4 * 5 + dest_zmtp  # (_flat_cost: the pipe id, words, "")
            if not self.inflight.room(cost):
                return False
            key = _flat_words(p, payload.start, words, rid, dest_zmtp)
            if dest_zmtp:
                if not out.sp_to_zmtp(rid, p, payload, words):
                    return False
            elif not out.sp_forward(rid, p, payload):
                return False
        self.dests.moved()
        self.inflight.c_sent(key, out.pipe.routing_id, now, cost)
        return True

    cdef int _reply(self, const uint8_t* p, Frame* frames, int count, bint zmtp,
                    double now) except -2:
        cdef int i, nhops = 0
        cdef Py_ssize_t words = 0
        cdef Frame payload
        cdef bytes key, target = None
        cdef const uint8_t* tp = NULL  # the front pipe's routing id, in the read
        cdef Py_ssize_t tn = 0
        if zmtp != self.back_zmtp:
            return False  # a wire not the translator's: the reference's
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
            parked = (<tuple><object>entry)[0]  # (TokenTable.mint: a tuple of bytes)
            if PyTuple_GET_SIZE(parked) == 0:
                return False
            target = parked[0]
            tp, tn = <const uint8_t*>PyBytes_AS_STRING(target), PyBytes_GET_SIZE(target)
        cdef _Out out = self.dests.front_out(tp, tn, target)
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
