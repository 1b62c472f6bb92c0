# Included by gateway/_kernel.pyx (one compiled module): the kernel of pipeline and pub/sub
# bridges.


cdef class PatternKernel(_Reader):
    """Pipeline (front -> back) and pub/sub (published messages, back -> front; subscriptions
    stay the reference's)."""

    cdef list f_out
    cdef object f_pattern, b_pattern
    cdef tuple sub_prefixes  # pub/sub: what the back's XSUB lets through (filtering: True)
    cdef bint filtering
    cdef dict filters  # pub/sub: the front's subscribers' prefixes, by routing id
    cdef Py_ssize_t filtered
    cdef list matched
    cdef list subs  # pub/sub: this read's subscribers, (prefixes, where to); None: not yet

    def __init__(self, fwd, front, back, translator, tally, buckets) -> None:
        super().__init__(fwd, front, back, translator, tally, buckets)
        if self.pattern == REQREP:
            raise ValueError("request-reply is Kernel's")
        self.f_out = front.routing.out
        self.f_pattern, self.b_pattern = front.pattern, back.pattern
        self.matched = []

    cdef void _before_replies(self) except *:
        """Published messages (the only replies: ``replies`` is pub/sub's) are matched against
        the back's filter and the front's subscribers' prefixes as they stand at this read."""
        self.filtering = self.b_pattern.filter
        if self.filtering:
            self.sub_prefixes = self.b_pattern.prefixes()
        self.filters = self.f_pattern.filters
        self.filtered = 0
        self.subs = None

    cdef void _after_replies(self) except *:
        self.subs = None
        if self.filtered:
            self.b_pattern.filtered += self.filtered
            self.filtered = 0

    cdef int _take(self, const uint8_t* p, Frame* frames, int count, bint zmtp, bint request,
                   bytes rid, double now) except -2:
        if self.pattern == PIPELINE:
            return self._pipeline(p, frames, count)
        return self._publish(p, frames, count)

    cdef int _pipeline(self, const uint8_t* p, Frame* frames, int count) except -2:
        """Pipeline, front -> back: the message as it is (toward SP: one frame only), round
        robin over the writable back pipes."""
        cdef _Out out = self.dests.pick()
        if out is None:
            return 0
        if _zmtp_framing(out.framing):
            if not out.zmtp_frames(None, p, frames, 0, count):
                return 0
        elif count != 1 or not out.sp_payload(p, frames, 1):
            return 0  # several frames toward SP: the reference refuses and counts
        self.dests.moved()
        return FORWARDED

    cdef bint _subscribers(self) except -1:
        """This read's subscribers, once (each a Python attribute or two, which would
        otherwise be read per message and subscriber): the front pipes with prefixes, each
        with its buffer for this read, or the pipe itself when it is at its mark (a message
        it matches is lost there), or None (a wire the kernel does not write). Within one read
        nothing is written to a transport, no pipe comes or goes and no subscription changes
        (those come from the front's reads). False: a subscriber's prefixes are not a tuple
        (the filters are the pattern's, a public dict): the reference's read."""
        cdef list subs = []
        filters = self.filters
        for pipe in self.f_out:
            if not isinstance(pipe, PipeState):  # (the reference's, should it match)
                flt = filters.get(pipe.routing_id, ())
                if flt:
                    if type(flt) is not tuple:
                        return False
                    subs.append((flt, None))
                continue
            flt = filters.get((<PipeState>pipe).routing_id, ())
            if flt:
                if type(flt) is not tuple:
                    return False
                subs.append((flt, self.dests.out(pipe) if (<PipeState>pipe).writable else pipe))
        self.subs = subs
        return True

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
        cdef tuple sub
        del matched[:]
        if self.subs is None and not self._subscribers():
            return 0
        for sub in self.subs:
            if not _matches(p, frames, first, <tuple>sub[0]):
                continue
            item = sub[1]
            if item is None:
                return 0  # a wire the kernel does not write
            matched.append(item)
        # every destination's room first: all of it or nothing
        for i in range(count):
            size += frames[i].size
        for item in matched:
            if type(item) is _Out:
                out = <_Out>item
                if _zmtp_framing(out.framing):
                    need = 0
                    for i in range(count):
                        need += out.fsize(frames[i].size)
                else:
                    need = (out.framing == F_SP_IPC) + 8 + size
                if not out.fits(need):
                    return 0
        for item in matched:
            if type(item) is _Out:
                out = <_Out>item
                if _zmtp_framing(out.framing):
                    out.zmtp_frames(None, p, frames, 0, count)
                else:
                    out.sp_payload(p, frames, count)
            else:
                item.dropped("hwm")
        return FORWARDED
