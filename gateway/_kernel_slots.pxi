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
    /* the offset of a writable object slot of ``cls``'s instances, from its descriptor; -1: not
       one (not a slot's descriptor, or one of a class ``cls`` does not derive from, whose
       offset means nothing in ``cls``'s objects: a descriptor can be any class's attribute) */
    static Py_ssize_t gw_slot_offset(PyObject *cls, PyObject *descr) {
        PyMemberDef *m;
        PyTypeObject *t = (PyTypeObject *)cls;
        if (Py_TYPE(descr) != &PyMemberDescr_Type)
            return -1;
        m = ((PyMemberDescrObject *)descr)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY)
                || !PyType_IsSubtype(t, PyDescr_TYPE(descr))
                || m->offset < (Py_ssize_t)sizeof(PyObject)
                || m->offset + (Py_ssize_t)sizeof(PyObject *) > t->tp_basicsize)
            return -1;
        return m->offset;
    }
    /* ``cls``'s attribute version (0: none valid): changes whenever ``cls`` or a base gains,
       loses or replaces an attribute (PyType_Modified), such as a slot's descriptor */
    static inline unsigned int gw_type_tag(PyObject *cls) {
        PyTypeObject *t = (PyTypeObject *)cls;
        return PyType_HasFeature(t, Py_TPFLAGS_VALID_VERSION_TAG) ? t->tp_version_tag : 0;
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
    Py_ssize_t gw_slot_offset(object cls, object descr)
    unsigned int gw_type_tag(object cls)
    object gw_get(object o, Py_ssize_t off)
    void gw_set(object o, Py_ssize_t off, object v)


cdef enum:
    MAX_SLOTS = 16


cdef class _Layout:
    """Where the objects of one class keep the slots ``names`` (``off``, in that order)."""

    cdef readonly tuple names
    cdef bint learned  # ``off`` is set (by the first class that fit; it never changes)
    # the last two classes that fit and their attribute versions (a class changed since, say
    # a slot's descriptor replaced, is looked at again): a pipe's class and a subclass's
    # (SniffingPipe) alternate on a one-port bridge
    cdef readonly type cls, cls2
    cdef unsigned int tag, tag2
    cdef Py_ssize_t off[MAX_SLOTS]

    def __cinit__(self, *names: str) -> None:
        # (__cinit__, not __init__: the names and offsets of a layout are set once for life)
        if len(names) > MAX_SLOTS:
            raise ValueError(f"at most {MAX_SLOTS} slots")
        self.names = names
        self.cls = self.cls2 = None

    cdef inline bint fits(self, object o) except -1:
        """``o`` keeps the slots at ``off`` (its class is one of the last two that did, as it
        was then: a compare or two)."""
        cdef type t = type(o)
        if t is self.cls and self.tag and gw_type_tag(t) == self.tag:
            return True
        if t is self.cls2 and self.tag2 and gw_type_tag(t) == self.tag2:
            return True
        return self._learn(t)

    cdef bint _learn(self, type cls) except -1:
        """``cls`` keeps every slot, where the first class that fit keeps it (the first sets
        ``off``): it becomes one of the two ``fits`` compares with."""
        cdef Py_ssize_t offs[MAX_SLOTS]
        cdef Py_ssize_t i
        for i, name in enumerate(self.names):
            offs[i] = gw_slot_offset(cls, getattr(cls, name, None))
            if offs[i] < 0 or (self.learned and offs[i] != self.off[i]):
                return False
        for i in range(len(self.names)):
            self.off[i] = offs[i]
        self.learned = True
        if cls is not self.cls:
            self.cls2, self.tag2 = self.cls, self.tag
        self.cls, self.tag = cls, gw_type_tag(cls)  # (the look-ups above gave it one)
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
    P_FAST_READ
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
               "fast_read", "kernel_state", "reading", "routing_id", "rx_chunks", "transport", "wbuf",
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
    """len() of a receive buffer's bytes or bytearray (anything else: len())."""
    if type(data) is bytes:
        return PyBytes_GET_SIZE(data)
    return PyByteArray_GET_SIZE(data) if type(data) is bytearray else len(data)


cdef inline void _add(object histogram, double value) except *:
    """``histogram.sum += value`` (one that fits HISTOGRAM)."""
    gw_set(histogram, _HIST.off[H_SUM], gw_get(histogram, _HIST.off[H_SUM]) + value)


cdef inline void _fitting(_Layout layout, object o) except *:
    """``o`` fits ``layout``, else TypeError: the engine's own classes (a developer's slip)."""
    if not layout.fits(o):
        raise TypeError(f"{type(o).__name__} does not keep the slots {', '.join(layout.names)}")
