# Included by gateway/_kernel.pyx (one compiled module): the engine's slotted attributes that
# the kernel touches on every read, read and written where their slots keep them.
#
# From C, ``pipe.reading`` is a generic attribute look-up: the type's method cache, the slot's
# descriptor, its getter (about 120 instructions, where specialised bytecode spends 15). A slot
# is a fixed offset in the object, the same for every instance of the class and of its
# subclasses; the descriptor says which. A _Layout learns the offsets of one class's slots from
# their descriptors, once, and the kernel then reads and writes them at those offsets (what the
# descriptor does, without the look-up). An object whose class keeps them elsewhere (a subclass
# that hid a slot behind a class attribute, another class) does not ``fit``: the kernel leaves
# it to the reference.

cdef extern from *:
    """
    #include <structmember.h>
    /* the offset of a writable object slot, from its descriptor; -1: not one */
    static Py_ssize_t gw_slot_offset(PyObject *descr) {
        PyMemberDef *m;
        if (Py_TYPE(descr) != &PyMemberDescr_Type)
            return -1;
        m = ((PyMemberDescrObject *)descr)->d_member;
        return (m->type == T_OBJECT_EX && !(m->flags & READONLY)) ? m->offset : -1;
    }
    /* what the slot holds (a new reference), or NULL with AttributeError: never set */
    static inline PyObject *gw_get(PyObject *o, Py_ssize_t off) {
        PyObject *v = *(PyObject **)((char *)o + off);
        if (v == NULL) {
            PyErr_Format(PyExc_AttributeError, "a slot of '%.100s' is not set",
                         Py_TYPE(o)->tp_name);
            return NULL;
        }
        Py_INCREF(v);
        return v;
    }
    static inline void gw_set(PyObject *o, Py_ssize_t off, PyObject *v) {
        PyObject **at = (PyObject **)((char *)o + off), *old = *at;
        Py_INCREF(v);
        *at = v;
        Py_XDECREF(old);
    }
    """
    Py_ssize_t gw_slot_offset(object descr)
    object gw_get(object o, Py_ssize_t off)
    void gw_set(object o, Py_ssize_t off, object v)


cdef enum:
    MAX_SLOTS = 16


cdef class _Layout:
    """Where the objects of one class keep the slots ``names`` (``off``, in that order)."""

    cdef readonly tuple names
    cdef type cls  # the last class that fit (None: none yet)
    cdef Py_ssize_t off[MAX_SLOTS]

    def __init__(self, *names: str) -> None:
        if len(names) > MAX_SLOTS:
            raise ValueError(f"at most {MAX_SLOTS} slots")
        self.names = names
        self.cls = None

    cdef inline bint fits(self, object o) except -1:
        """``o`` keeps the slots at ``off`` (its class is the last one that did: one compare)."""
        if type(o) is self.cls:
            return True
        return self._learn(type(o))

    cdef bint _learn(self, type cls) except -1:
        """``cls`` keeps every slot, where the first class that fit keeps it (the first sets
        ``off``): it becomes the one ``fits`` compares with."""
        cdef Py_ssize_t offs[MAX_SLOTS]
        cdef Py_ssize_t i
        for i, name in enumerate(self.names):
            offs[i] = gw_slot_offset(getattr(cls, name, None))
            if offs[i] < 0 or (self.cls is not None and offs[i] != self.off[i]):
                return False
        for i in range(len(self.names)):
            self.off[i] = offs[i]
        self.cls = cls
        return True

    def fit(self, o: object) -> bool:
        """``fits``, for the tests."""
        return self.fits(o)


# each layout's names, in the order of its enum
cdef enum:
    P_BATCH = 0
    P_HIGH
    P_LOOP
    P_WATCH
    P_WBUF_SIZE
    P_CLOSE_REASON
    P_KERNEL_STATE
    P_READING
    P_ROUTING_ID
    P_RX_CHUNKS
    P_TRANSPORT
    P_WBUF
    P_WRITABLE
    RX_DATA = 0
    RX_POS
    B_DEPTH = 0
    B_DIRTY
    B_SCHEDULED
    R_CLOSED = 0
    R_OUT
    R_RR
    H_SUM = 0
    L_IN_FLIGHT = 0
    L_PAIRS_REPLIES

#: gateway.engine.pipe.Pipe (its _KERNEL_READS), gateway.wire._buffer.ReceiveBuffer,
#: gateway.engine.writes.Batch, gateway.engine.send.Routing, gateway.metrics.Histogram,
#: gateway.device.ledger.Ledger
PIPE = _Layout("_batch", "_high", "_loop", "_watch", "_wbuf_size", "close_reason",
               "kernel_state", "reading", "routing_id", "rx_chunks", "transport", "wbuf",
               "writable")
RX = _Layout("data", "pos")
BATCH = _Layout("depth", "dirty", "scheduled")
ROUTING = _Layout("closed", "out", "rr")
HISTOGRAM = _Layout("sum")
LEDGER = _Layout("in_flight", "pairs_replies")
cdef _Layout _PIPE = PIPE
cdef _Layout _RX = RX
cdef _Layout _BATCH = BATCH
cdef _Layout _ROUTING = ROUTING
cdef _Layout _HIST = HISTOGRAM
cdef _Layout _LEDGER = LEDGER


cdef inline object _pget(object pipe, int slot):
    """A slot of ``pipe`` (one that fits PIPE)."""
    return gw_get(pipe, _PIPE.off[slot])


cdef inline void _pset(object pipe, int slot, object value) noexcept:
    gw_set(pipe, _PIPE.off[slot], value)


cdef inline Py_ssize_t _size(object data) except -1:
    """len() of a receive buffer's bytes or bytearray."""
    return PyBytes_GET_SIZE(data) if type(data) is bytes else PyByteArray_GET_SIZE(data)


cdef inline void _add(object histogram, double value) except *:
    """``histogram.sum += value`` (one that fits HISTOGRAM)."""
    gw_set(histogram, _HIST.off[H_SUM], gw_get(histogram, _HIST.off[H_SUM]) + value)


cdef inline void _fitting(_Layout layout, object o) except *:
    """``o`` fits ``layout``, else TypeError: the engine's own classes (a developer's slip)."""
    if not layout.fits(o):
        raise TypeError(f"{type(o).__name__} does not keep the slots {', '.join(layout.names)}")
