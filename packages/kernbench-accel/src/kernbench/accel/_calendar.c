/*
 * kernbench.accel._calendar: the engine's event calendar and its packet-hop step, in C.
 *
 * A Calendar holds the entries GraphEngine schedules itself, (t, priority, event id, callback, value), in a binary
 * heap keyed by (t, priority, event id), the key SimPy orders its own queue by. Event ids are unique, so any correct
 * heap pops the entries in the one order the pure-Python calendar (a list under heapq) pops them.
 *
 * Calendar.run(n) takes n steps of GraphEngine._drive's loop: each step runs the earliest of the calendar's top and
 * SimPy's queue top (a SimPy step through env.step()), setting env._now to the entry's time object first. A data
 * packet's hop past its first wire, when the engine records no hop trace for it, is computed here with the wire
 * formula of kernbench.sim.fabric.cross, operation for operation in the same order on IEEE doubles (built with
 * -ffp-contract=off, so no fused multiply-add changes a rounding). Every other entry calls its Python callback.
 *
 * The Packet, Wire and Route classes are plain Python classes with __slots__; their slots are read at the offsets
 * their member descriptors give (bind() checks each), so a slot read is a pointer load.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

typedef struct {
    double t;
    long long prio;
    long long eid;
    PyObject *tobj; /* the time as scheduled (an int or a float), what env._now becomes */
    PyObject *cb;
    PyObject *val;
} Item;

/* slot offsets of the fabric's classes, filled by bind() */
static PyTypeObject *Packet_T, *Wire_T, *Route_T, *Transfer_T;
static Py_ssize_t T_packets, T_ready, T_nbytes, T_route, P_offset;
static Py_ssize_t P_transfer, P_route, P_hop, P_index, P_nbytes, P_nflits, P_delta, P_t_head, P_t_tail;
static Py_ssize_t W_bw, W_flit_ns, W_free_at, W_latency_ns, W_max_wait_ns, W_busy_ns, W_bytes, W_packets, W_messages;
static Py_ssize_t R_wires, R_overheads, R_hops;

static PyObject *str_now, *str_events, *str_queue, *str_step;

#define SLOT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

typedef struct {
    PyObject_HEAD
    Item *heap;
    Py_ssize_t size, cap;
    PyObject *engine;  /* GraphEngine: its events counter is advanced by the hops run here */
    PyObject *env;     /* simpy.Environment */
    PyObject *queue;   /* env._queue, SimPy's heap list */
    PyObject *step;    /* env.step */
    PyObject *eids;    /* env._eid, SimPy's event-id counter */
    PyObject *hop_cb;  /* engine._on_hop */
    PyObject *arrive_cb; /* engine._on_arrive */
    int record_hops;
    long long hops_run; /* hops computed in C (a diagnostic) */
} Calendar;

static inline int item_lt(const Item *a, const Item *b) {
    if (a->t != b->t) return a->t < b->t;
    if (a->prio != b->prio) return a->prio < b->prio;
    return a->eid < b->eid;
}

static int heap_push(Calendar *c, double t, long long prio, long long eid, PyObject *tobj, PyObject *cb,
                     PyObject *val) {
    if (c->size == c->cap) {
        Py_ssize_t cap = c->cap ? c->cap * 2 : 1024;
        Item *h = PyMem_Realloc(c->heap, cap * sizeof(Item));
        if (!h) { PyErr_NoMemory(); return -1; }
        c->heap = h;
        c->cap = cap;
    }
    Item it = {t, prio, eid, tobj, cb, val};
    Py_INCREF(tobj); Py_INCREF(cb); Py_INCREF(val);
    Py_ssize_t i = c->size++;
    Item *h = c->heap;
    while (i > 0) {
        Py_ssize_t p = (i - 1) >> 1;
        if (!item_lt(&it, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = it;
    return 0;
}

/* Remove the top; the caller owns its three references. */
static Item heap_pop(Calendar *c) {
    Item *h = c->heap;
    Item top = h[0];
    Item last = h[--c->size];
    Py_ssize_t n = c->size, i = 0;
    if (n) {
        for (;;) {
            Py_ssize_t l = 2 * i + 1;
            if (l >= n) break;
            Py_ssize_t r = l + 1, m = (r < n && item_lt(&h[r], &h[l])) ? r : l;
            if (!item_lt(&h[m], &last)) break;
            h[i] = h[m];
            i = m;
        }
        h[i] = last;
    }
    return top;
}

static int as_double(PyObject *o, double *out) {
    if (!o) {
        PyErr_SetString(PyExc_AttributeError, "kernbench.accel: a slot the hop reads is not set");
        return -1;
    }
    if (PyFloat_CheckExact(o)) { *out = PyFloat_AS_DOUBLE(o); return 0; }
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

static int set_float(PyObject *obj, Py_ssize_t off, double v) {
    PyObject *f = PyFloat_FromDouble(v);
    if (!f) return -1;
    Py_XSETREF(SLOT(obj, off), f);
    return 0;
}

static int add_int(PyObject *obj, Py_ssize_t off, long long d) {
    PyObject *cur = SLOT(obj, off);
    if (!cur) {
        PyErr_SetString(PyExc_AttributeError, "kernbench.accel: a counter the hop adds to is not set");
        return -1;
    }
    long long v = PyLong_AsLongLong(cur);
    if (v == -1 && PyErr_Occurred()) return -1;
    PyObject *n = PyLong_FromLongLong(v + d);
    if (!n) return -1;
    Py_SETREF(SLOT(obj, off), n);
    return 0;
}

/* ------------------------------------------------------------------ Calendar methods */

static void Calendar_clear_heap(Calendar *c) {
    while (c->size) {
        Item it = c->heap[--c->size];
        Py_DECREF(it.tobj); Py_DECREF(it.cb); Py_DECREF(it.val);
    }
}

static int Calendar_traverse(Calendar *c, visitproc visit, void *arg) {
    for (Py_ssize_t i = 0; i < c->size; i++) {
        Py_VISIT(c->heap[i].tobj); Py_VISIT(c->heap[i].cb); Py_VISIT(c->heap[i].val);
    }
    Py_VISIT(c->engine); Py_VISIT(c->env); Py_VISIT(c->queue); Py_VISIT(c->step); Py_VISIT(c->eids);
    Py_VISIT(c->hop_cb); Py_VISIT(c->arrive_cb);
    return 0;
}

static int Calendar_tp_clear(Calendar *c) {
    Calendar_clear_heap(c);
    Py_CLEAR(c->engine); Py_CLEAR(c->env); Py_CLEAR(c->queue); Py_CLEAR(c->step); Py_CLEAR(c->eids);
    Py_CLEAR(c->hop_cb); Py_CLEAR(c->arrive_cb);
    return 0;
}

static void Calendar_dealloc(Calendar *c) {
    PyObject_GC_UnTrack(c);
    Calendar_tp_clear(c);
    PyMem_Free(c->heap);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int Calendar_init(Calendar *c, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"engine", "env", "hop", "arrive", "record_hops", NULL};
    PyObject *engine, *env, *hop, *arrive;
    int record;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOp", kw, &engine, &env, &hop, &arrive, &record)) return -1;
    PyObject *queue = PyObject_GetAttr(env, str_queue);
    if (!queue) return -1;
    if (!PyList_CheckExact(queue)) {
        Py_DECREF(queue);
        PyErr_SetString(PyExc_TypeError, "env._queue is not a list");
        return -1;
    }
    PyObject *step = PyObject_GetAttr(env, str_step);
    if (!step) { Py_DECREF(queue); return -1; }
    PyObject *eids = PyObject_GetAttrString(env, "_eid");
    if (!eids) { Py_DECREF(queue); Py_DECREF(step); return -1; }
    Calendar_tp_clear(c);
    c->engine = Py_NewRef(engine);
    c->env = Py_NewRef(env);
    c->queue = queue;
    c->step = step;
    c->eids = eids;
    c->hop_cb = Py_NewRef(hop);
    c->arrive_cb = Py_NewRef(arrive);
    c->record_hops = record;
    return 0;
}

/* push(entry): entry is (t, priority, event id, callback, value), as the pure-Python calendar's list holds. */
static PyObject *Calendar_push(Calendar *c, PyObject *entry) {
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 5) {
        PyErr_SetString(PyExc_TypeError, "a calendar entry is a tuple (t, priority, event id, callback, value)");
        return NULL;
    }
    PyObject *tobj = PyTuple_GET_ITEM(entry, 0);
    double t;
    if (as_double(tobj, &t) < 0) return NULL;
    long long prio = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 1));
    if (prio == -1 && PyErr_Occurred()) return NULL;
    long long eid = PyLong_AsLongLong(PyTuple_GET_ITEM(entry, 2));
    if (eid == -1 && PyErr_Occurred()) return NULL;
    if (heap_push(c, t, prio, eid, tobj, PyTuple_GET_ITEM(entry, 3), PyTuple_GET_ITEM(entry, 4)) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Whether the calendar's top comes before SimPy's queue top (or SimPy's queue is empty). */
static int cal_first(Calendar *c, int *first) {
    if (!c->size) { *first = 0; return 0; }
    if (!PyList_GET_SIZE(c->queue)) { *first = 1; return 0; }
    PyObject *q = PyList_GET_ITEM(c->queue, 0);
    if (!PyTuple_Check(q) || PyTuple_GET_SIZE(q) < 3) {
        PyErr_SetString(PyExc_TypeError, "SimPy's queue holds an entry that is not (t, priority, id, event)");
        return -1;
    }
    double qt;
    if (as_double(PyTuple_GET_ITEM(q, 0), &qt) < 0) return -1;
    const Item *top = &c->heap[0];
    if (top->t != qt) { *first = top->t < qt; return 0; }
    long long qp = PyLong_AsLongLong(PyTuple_GET_ITEM(q, 1));
    if (qp == -1 && PyErr_Occurred()) return -1;
    if (top->prio != qp) { *first = top->prio < qp; return 0; }
    long long qe = PyLong_AsLongLong(PyTuple_GET_ITEM(q, 2));
    if (qe == -1 && PyErr_Occurred()) return -1;
    *first = top->eid < qe;
    return 0;
}

/* Schedule (t, NORMAL, next event id, cb, val): what GraphEngine._at does, counted by the caller. */
static int schedule(Calendar *c, PyObject *tobj, double t, PyObject *cb, PyObject *val) {
    PyObject *eid_o = PyIter_Next(c->eids);
    if (!eid_o) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "SimPy's event-id counter ended");
        return -1;
    }
    long long eid = PyLong_AsLongLong(eid_o);
    Py_DECREF(eid_o);
    if (eid == -1 && PyErr_Occurred()) return -1;
    return heap_push(c, t, 1, eid, tobj, cb, val);
}

/*
 * One packet hop, as GraphEngine._hop computes it, for every hop the engine does not record in a hop trace (with
 * record_hops, a transfer's first packet and control messages go to the Python hop). Returns the number of entries
 * it scheduled (1 or 2), 0 when the packet is not such a hop (the caller then calls the Python hop), -1 on error.
 */
static int fast_hop(Calendar *c, PyObject *pkt, PyObject *now_obj) {
    if (Py_TYPE(pkt) != Packet_T) return 0;
    PyObject *route = SLOT(pkt, P_route), *hop_o = SLOT(pkt, P_hop), *nflits_o = SLOT(pkt, P_nflits);
    PyObject *index_o = SLOT(pkt, P_index);
    if (!route || !hop_o || !nflits_o || !index_o || Py_TYPE(route) != Route_T) return 0;
    if (!PyLong_CheckExact(hop_o) || !PyLong_CheckExact(nflits_o) || !PyLong_CheckExact(index_o)) return 0;
    long h = PyLong_AsLong(hop_o);
    long m = PyLong_AsLong(nflits_o);
    long index = PyLong_AsLong(index_o);
    if (h < 0 || m < 0 || (c->record_hops && (index == 0 || m == 0))) return 0;
    PyObject *wires = SLOT(route, R_wires), *overheads = SLOT(route, R_overheads), *hops_o = SLOT(route, R_hops);
    if (!wires || !overheads || !hops_o || !PyTuple_CheckExact(wires) || !PyTuple_CheckExact(overheads)) return 0;
    if (h >= PyTuple_GET_SIZE(wires) || h >= PyTuple_GET_SIZE(overheads)) return 0;
    PyObject *wire = PyTuple_GET_ITEM(wires, h);
    if (Py_TYPE(wire) != Wire_T) return 0;
    PyObject *tr = NULL, *packets = NULL, *ready_list = NULL, *pace_next = NULL;
    if (h == 0 && m > 0) {  /* the first wire also releases the transfer's next packet */
        tr = SLOT(pkt, P_transfer);
        if (!tr || Py_TYPE(tr) != Transfer_T) return 0;
        packets = SLOT(tr, T_packets);
        ready_list = SLOT(tr, T_ready);
        if (!packets || !ready_list || !PyList_CheckExact(packets)) return 0;
        if (ready_list != Py_None) {  /* the next packet's pacing, checked before anything changes */
            if (!PyList_CheckExact(ready_list)) return 0;
            Py_ssize_t n = PyList_GET_SIZE(packets);
            if (index + 1 < n) {
                PyObject *nxt = PyList_GET_ITEM(packets, index + 1), *k_o;
                if (Py_TYPE(nxt) != Packet_T || !(k_o = SLOT(nxt, P_index)) || !PyLong_CheckExact(k_o)) return 0;
                Py_ssize_t k = PyLong_AsSsize_t(k_o);
                if (k < 0 || k >= PyList_GET_SIZE(ready_list)) return 0;
                PyObject *pace = PyList_GET_ITEM(ready_list, k);
                if (!PyTuple_CheckExact(pace) || PyTuple_GET_SIZE(pace) != 2) return 0;
                pace_next = pace;
            }
        }
    }
    long hops = PyLong_AsLong(hops_o);
    if (hops == -1 && PyErr_Occurred()) return -1;
    PyObject *next_cb = h + 1 < hops ? c->hop_cb : c->arrive_cb;

    /* ready = now + route.overheads[h] past the first wire: Python's own addition (int + int stays an int) */
    double ready;
    if (h) {
        PyObject *ready_o = PyNumber_Add(now_obj, PyTuple_GET_ITEM(overheads, h));
        if (!ready_o) return -1;
        int bad = as_double(ready_o, &ready);
        Py_DECREF(ready_o);
        if (bad < 0) return -1;
    } else if (as_double(now_obj, &ready) < 0) {
        return -1;
    }
    PyObject *nh = PyLong_FromLong(h + 1);
    if (!nh) return -1;
    Py_SETREF(SLOT(pkt, P_hop), nh);
    double lat;
    if (as_double(SLOT(wire, W_latency_ns), &lat) < 0) return -1;

    if (m == 0) {  /* a control message: kernbench.sim.fabric.cross_control */
        PyObject *th = PyFloat_FromDouble(ready + lat);
        if (!th) return -1;
        Py_XSETREF(SLOT(pkt, P_t_head), Py_NewRef(th));
        Py_XSETREF(SLOT(pkt, P_t_tail), Py_NewRef(th));
        int rc = add_int(wire, W_messages, 1);
        if (rc == 0) rc = schedule(c, th, PyFloat_AS_DOUBLE(th), next_cb, pkt);
        Py_DECREF(th);
        return rc < 0 ? -1 : 1;
    }

    /* the wire formula (kernbench.sim.fabric.cross), step for step */
    double flit_ns, free, delta_in, bw, max_wait, busy;
    if (as_double(SLOT(wire, W_flit_ns), &flit_ns) < 0 || as_double(SLOT(wire, W_free_at), &free) < 0 ||
        as_double(SLOT(pkt, P_delta), &delta_in) < 0 || as_double(SLOT(wire, W_bw), &bw) < 0 ||
        as_double(SLOT(wire, W_max_wait_ns), &max_wait) < 0 || as_double(SLOT(wire, W_busy_ns), &busy) < 0)
        return -1;
    PyObject *nbytes_o = SLOT(pkt, P_nbytes);
    if (!nbytes_o || !PyLong_CheckExact(nbytes_o)) {
        PyErr_SetString(PyExc_TypeError, "kernbench.accel: a packet's nbytes is not an int");
        return -1;
    }
    long long nbytes = PyLong_AsLongLong(nbytes_o);
    if (nbytes == -1 && PyErr_Occurred()) return -1;
    double start, d_in;
    if (free > ready) {
        start = free;
        double wait = free - ready;
        if (wait > max_wait && set_float(wire, W_max_wait_ns, wait) < 0) return -1;
        d_in = m > 1 ? delta_in - wait / (double)(m - 1) : 0.0;
    } else {
        start = ready;
        d_in = delta_in;
    }
    double delta = d_in > flit_ns ? d_in : flit_ns;
    double serial = (double)nbytes / bw;
    double end, head;
    if (m > 1) {
        end = start + (double)(m - 1) * (delta - flit_ns) + serial;
        head = start + flit_ns;
    } else {
        end = head = start + serial;
    }
    if (set_float(wire, W_free_at, end) < 0 || set_float(wire, W_busy_ns, busy + (end - start)) < 0) return -1;
    if (add_int(wire, W_bytes, nbytes) < 0 || add_int(wire, W_packets, 1) < 0) return -1;
    if (index == 0 && add_int(wire, W_messages, 1) < 0) return -1;
    if (set_float(pkt, P_delta, delta) < 0 || set_float(pkt, P_t_tail, end + lat) < 0) return -1;
    PyObject *th = PyFloat_FromDouble(head + lat);
    if (!th) return -1;
    Py_XSETREF(SLOT(pkt, P_t_head), Py_NewRef(th));
    int scheduled = 1;
    if (packets && index + 1 < PyList_GET_SIZE(packets)) {  /* release the next packet, before this one moves on */
        PyObject *nxt = PyList_GET_ITEM(packets, index + 1);
        PyObject *t_next = SLOT(wire, W_free_at);
        double tn = end;
        if (pace_next) {
            PyObject *r0 = PyTuple_GET_ITEM(pace_next, 0);
            double r0d;
            if (as_double(r0, &r0d) < 0) { Py_DECREF(th); return -1; }
            Py_XSETREF(SLOT(nxt, P_delta), Py_NewRef(PyTuple_GET_ITEM(pace_next, 1)));
            if (r0d > tn) { t_next = r0; tn = r0d; }
        }
        if (schedule(c, t_next, tn, c->hop_cb, nxt) < 0) { Py_DECREF(th); return -1; }
        scheduled = 2;
    }
    int rc = schedule(c, th, head + lat, next_cb, pkt);
    Py_DECREF(th);
    return rc < 0 ? -1 : scheduled;
}

static int flush_events(Calendar *c, long long pushed) {
    if (!pushed) return 0;
    PyObject *cur = PyObject_GetAttr(c->engine, str_events);
    if (!cur) return -1;
    PyObject *d = PyLong_FromLongLong(pushed);
    if (!d) { Py_DECREF(cur); return -1; }
    PyObject *n = PyNumber_Add(cur, d);
    Py_DECREF(cur); Py_DECREF(d);
    if (!n) return -1;
    int rc = PyObject_SetAttr(c->engine, str_events, n);
    Py_DECREF(n);
    return rc;
}

/* run(n): take n steps of the engine's loop; SimPy's StopSimulation / EmptySchedule and callbacks' errors pass. */
static PyObject *Calendar_run(Calendar *c, PyObject *arg) {
    Py_ssize_t n = PyLong_AsSsize_t(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    long long pushed = 0;
    int failed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int first;
        if (cal_first(c, &first) < 0) { failed = 1; break; }
        if (first) {
            Item it = heap_pop(c);
            if (PyObject_SetAttr(c->env, str_now, it.tobj) < 0) {
                failed = 1;
            } else {
                int done = 0;
                if (it.cb == c->hop_cb) {
                    done = fast_hop(c, it.val, it.tobj);
                    if (done > 0) {
                        pushed += done;
                        c->hops_run++;
                    }
                }
                if (done < 0) {
                    failed = 1;
                } else if (!done) {
                    if (pushed) {  /* Python code may read engine.events: it is exact before every call */
                        if (flush_events(c, pushed) < 0) failed = 1;
                        pushed = 0;
                    }
                    PyObject *r = failed ? NULL : PyObject_CallOneArg(it.cb, it.val);
                    if (!r) failed = 1;
                    else Py_DECREF(r);
                }
            }
            Py_DECREF(it.tobj); Py_DECREF(it.cb); Py_DECREF(it.val);
        } else {
            if (pushed) {
                if (flush_events(c, pushed) < 0) { failed = 1; break; }
                pushed = 0;
            }
            PyObject *r = PyObject_CallNoArgs(c->step);
            if (!r) failed = 1;
            else Py_DECREF(r);
        }
        if (failed) break;
    }
    if (failed) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (flush_events(c, pushed) < 0) {
            Py_XDECREF(type); Py_XDECREF(value); Py_XDECREF(tb);
            return NULL;
        }
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (flush_events(c, pushed) < 0) return NULL;
    Py_RETURN_NONE;
}

static Py_ssize_t Calendar_len(Calendar *c) { return c->size; }

static PyObject *Calendar_get_hops_run(Calendar *c, void *closure) { return PyLong_FromLongLong(c->hops_run); }

static PyMethodDef Calendar_methods[] = {
    {"push", (PyCFunction)Calendar_push, METH_O, "push(entry): schedule (t, priority, event id, callback, value)."},
    {"run", (PyCFunction)Calendar_run, METH_O, "run(n): take n steps of the engine's loop."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Calendar_getset[] = {
    {"hops_run", (getter)Calendar_get_hops_run, NULL, "Packet hops computed in C so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods Calendar_as_sequence = {.sq_length = (lenfunc)Calendar_len};

static PyTypeObject Calendar_T = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "kernbench.accel._calendar.Calendar",
    .tp_doc = "Calendar(engine, env, hop, arrive, record_hops): the engine's event calendar and packet-hop step.",
    .tp_basicsize = sizeof(Calendar),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Calendar_init,
    .tp_dealloc = (destructor)Calendar_dealloc,
    .tp_traverse = (traverseproc)Calendar_traverse,
    .tp_clear = (inquiry)Calendar_tp_clear,
    .tp_methods = Calendar_methods,
    .tp_getset = Calendar_getset,
    .tp_as_sequence = &Calendar_as_sequence,
};

/* ------------------------------------------------------------------ bind(): the fabric's classes */

static int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *out) {
    PyObject *d = PyDict_GetItemString(type->tp_dict, name);
    if (!d || !PyObject_TypeCheck(d, &PyMemberDescr_Type)) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ member", type->tp_name, name);
        return -1;
    }
    PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
    if (m->type != T_OBJECT_EX) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not an object slot", type->tp_name, name);
        return -1;
    }
    *out = m->offset;
    return 0;
}

/* bind(Packet, Wire, Route, Transfer): every offset is read first and all are set together, so a refused class
 * leaves the classes bound before (and their offsets) as they were. Until bind() succeeds, every hop runs in
 * Python (fast_hop checks each object's exact class). */
static PyObject *bind(PyObject *mod, PyObject *args) {
    PyObject *p, *w, *r, *t;
    if (!PyArg_ParseTuple(args, "O!O!O!O!", &PyType_Type, &p, &PyType_Type, &w, &PyType_Type, &r, &PyType_Type, &t))
        return NULL;
    PyTypeObject *P = (PyTypeObject *)p, *W = (PyTypeObject *)w, *R = (PyTypeObject *)r, *T = (PyTypeObject *)t;
    Py_ssize_t o[22];
    if (slot_offset(P, "transfer", &o[0]) || slot_offset(P, "route", &o[1]) || slot_offset(P, "hop", &o[2]) ||
        slot_offset(P, "index", &o[3]) || slot_offset(P, "nbytes", &o[4]) || slot_offset(P, "nflits", &o[5]) ||
        slot_offset(P, "delta", &o[6]) || slot_offset(P, "t_head", &o[7]) || slot_offset(P, "t_tail", &o[8]) ||
        slot_offset(W, "bw", &o[9]) || slot_offset(W, "flit_ns", &o[10]) || slot_offset(W, "free_at", &o[11]) ||
        slot_offset(W, "latency_ns", &o[12]) || slot_offset(W, "max_wait_ns", &o[13]) ||
        slot_offset(W, "busy_ns", &o[14]) || slot_offset(W, "bytes", &o[15]) || slot_offset(W, "packets", &o[16]) ||
        slot_offset(W, "messages", &o[17]) || slot_offset(R, "wires", &o[18]) ||
        slot_offset(R, "overheads", &o[19]) || slot_offset(R, "hops", &o[20]) || slot_offset(T, "packets", &o[21]))
        return NULL;
    Py_ssize_t ready, t_nbytes, t_route, p_offset;
    if (slot_offset(T, "ready", &ready) || slot_offset(T, "nbytes", &t_nbytes) || slot_offset(T, "route", &t_route) ||
        slot_offset(P, "offset", &p_offset))
        return NULL;
    T_nbytes = t_nbytes; T_route = t_route; P_offset = p_offset;
    P_transfer = o[0]; P_route = o[1]; P_hop = o[2]; P_index = o[3]; P_nbytes = o[4]; P_nflits = o[5];
    P_delta = o[6]; P_t_head = o[7]; P_t_tail = o[8];
    W_bw = o[9]; W_flit_ns = o[10]; W_free_at = o[11]; W_latency_ns = o[12]; W_max_wait_ns = o[13];
    W_busy_ns = o[14]; W_bytes = o[15]; W_packets = o[16]; W_messages = o[17];
    R_wires = o[18]; R_overheads = o[19]; R_hops = o[20]; T_packets = o[21]; T_ready = ready;
    Py_XSETREF(Packet_T, (PyTypeObject *)Py_NewRef(p));
    Py_XSETREF(Wire_T, (PyTypeObject *)Py_NewRef(w));
    Py_XSETREF(Route_T, (PyTypeObject *)Py_NewRef(r));
    Py_XSETREF(Transfer_T, (PyTypeObject *)Py_NewRef(t));
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ the HBM controller's write service */

/*
 * The arguments the HBM services share: exactly `want` of them, args[0] a non-empty list of channel times, and
 * the n integers at positions ints[] into v[], each in [0, 2**62] (else OverflowError: the caller serves the
 * request in Python). Returns 0, or -1 with an exception set.
 */
static int channel_args(const char *who, PyObject *const *args, Py_ssize_t nargs, Py_ssize_t want, const int *ints,
                        int n, long long *v) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", who, want);
        return -1;
    }
    if (!PyList_CheckExact(args[0]) || !PyList_GET_SIZE(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s: free must be a non-empty list of channel times", who);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        v[i] = PyLong_AsLongLong(args[ints[i]]);
        if (v[i] == -1 && PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
            PyErr_Clear();
        }
        if (v[i] < 0 || v[i] > (1LL << 62)) {
            PyErr_Format(PyExc_OverflowError, "%s: an integer argument is negative or too large", who);
            return -1;
        }
    }
    return 0;
}

/*
 * One burst on channel ch of an HBM slice: it starts when both it (at `ready`) and the channel (free[ch]) are
 * ready and takes (nbytes * ns_per_byte) ns; free[ch] becomes its finish, which is also returned in *finish.
 * The float operations of both services' Python loops, in their order. Returns 0, or -1 with an exception set.
 */
static int take_channel(PyObject *free, Py_ssize_t ch, double ready, long long nbytes, double npb, double *finish) {
    double fr;
    if (as_double(PyList_GET_ITEM(free, ch), &fr) < 0) return -1;
    double start = fr > ready ? fr : ready;
    *finish = start + (double)nbytes * npb;
    PyObject *fo = PyFloat_FromDouble(*finish);
    if (!fo) return -1;
    PyObject *old = PyList_GET_ITEM(free, ch);
    PyList_SET_ITEM(free, ch, fo);
    Py_DECREF(old);
    return 0;
}

/*
 * serve_write(free, addr, off, n, pkt_offset, burst, ns_per_byte, a0, delta, t_last, flit, last_flit, done):
 * kernbench.components.memory.HbmCtrl._write's loop over one address-contiguous piece of a written packet, step for
 * step: burst by burst, the burst arrives with the flit holding its last byte (a0 + f * delta, the last flit at
 * t_last), waits for its channel (burst index mod len(free)) and takes (bytes * ns_per_byte) ns there; free[ch] is
 * updated in place. Returns the latest finish, at least done (returned as given when no burst finishes later).
 * Integer arguments must fit in 62 bits (else OverflowError, and the caller serves the piece in Python).
 */
static PyObject *serve_write(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    long long v[7];
    const int ints[7] = {1, 2, 3, 4, 5, 10, 11};
    if (channel_args("serve_write", args, nargs, 13, ints, 7, v) < 0) return NULL;
    PyObject *free = args[0];
    long long addr = v[0], off = v[1], n = v[2], pkt_offset = v[3], burst = v[4], flit = v[5], last_flit = v[6];
    if (burst <= 0 || flit <= 0) {
        PyErr_SetString(PyExc_ValueError, "serve_write: burst and flit must be positive");
        return NULL;
    }
    double npb, a0, delta, t_last, done;
    if (as_double(args[6], &npb) < 0 || as_double(args[7], &a0) < 0 || as_double(args[8], &delta) < 0 ||
        as_double(args[9], &t_last) < 0 || as_double(args[12], &done) < 0)
        return NULL;
    long long k = PyList_GET_SIZE(free);
    PyObject *done_o = args[12];
    int moved = 0;
    long long x = addr, end = addr + n;
    while (x < end) {
        long long y = (x / burst + 1) * burst;
        if (y > end) y = end;
        long long f = (off + (y - 1 - addr) - pkt_offset);
        f = f >= 0 ? f / flit : -((-f + flit - 1) / flit); /* Python's floor division */
        double arrive = f >= last_flit ? t_last : a0 + (double)f * delta;
        double finish;
        if (take_channel(free, (Py_ssize_t)((x / burst) % k), arrive, y - x, npb, &finish) < 0) return NULL;
        if (finish > done) {
            done = finish;
            moved = 1;
        }
        x = y;
    }
    if (!moved) return Py_NewRef(done_o);
    return PyFloat_FromDouble(done);
}

/*
 * serve_read(free, addr, nbytes, row_bytes, pitch, burst, ns_per_byte, a0, flit, per_packet, flit_ns, late_ns):
 * kernbench.components.memory.HbmCtrl._read's service of one read command, step for step: the bursts of each row
 * (a 2-D read when row_bytes > 0; one contiguous segment otherwise) in order, each waiting for its channel (burst
 * index mod len(free); free[ch] updated in place) from a0 and taking (bytes * ns_per_byte) ns; per packet the
 * ready time of its first flit, of its latest flit and the (finish, flit in packet) of its bursts that end after
 * its first flit is ready; then each packet's (first flit time, spacing), re-paced as _read does. Returns
 * (ready, last): the list of (t, spacing) per packet and the latest ready time. Integer arguments must be
 * non-negative, fit in 62 bits, and nbytes, burst, flit and per_packet be positive (else OverflowError before
 * anything changed, and the caller serves the command in Python).
 */
typedef struct { double fin; long long g; long long next; } Held;

static PyObject *serve_read(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    long long v[7];
    const int ints[7] = {1, 2, 3, 4, 5, 8, 9};
    if (channel_args("serve_read", args, nargs, 12, ints, 7, v) < 0) return NULL;
    PyObject *free = args[0];
    long long base = v[0], nbytes = v[1], row_bytes = v[2], pitch = v[3], burst = v[4], flit = v[5];
    long long per_packet = v[6];
    if (nbytes <= 0 || burst <= 0 || flit <= 0 || per_packet <= 0 || burst > (1LL << 40) || flit > (1LL << 40) ||
        per_packet > (1LL << 40) || nbytes > (1LL << 62) - base) {
        PyErr_SetString(PyExc_OverflowError, "serve_read: nbytes, burst, flit and per_packet must be positive, "
                                             "the sizes below 2**40 and the addresses in 62 bits");
        return NULL;
    }
    if (!row_bytes) {
        row_bytes = nbytes;
        pitch = 0;
    }
    /* the last row's end must stay in 62 bits too */
    if ((nbytes - 1) / row_bytes > 0 && pitch > ((1LL << 62) - base - row_bytes) / ((nbytes - 1) / row_bytes)) {
        PyErr_SetString(PyExc_OverflowError, "serve_read: the read's addresses do not fit in 62 bits");
        return NULL;
    }
    double npb, a0, phi, late;
    if (as_double(args[6], &npb) < 0 || as_double(args[7], &a0) < 0 || as_double(args[10], &phi) < 0 ||
        as_double(args[11], &late) < 0)
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(free);
    for (Py_ssize_t c = 0; c < k; c++) {
        PyObject *o = PyList_GET_ITEM(free, c);
        if (!PyFloat_Check(o) && !PyLong_Check(o)) {
            PyErr_SetString(PyExc_TypeError, "serve_read: free must hold channel times (float)");
            return NULL;
        }
    }
    long long nflits = (nbytes + flit - 1) / flit;
    long long npk = (nflits + per_packet - 1) / per_packet;
    double *first = PyMem_Malloc(sizeof(double) * 2 * (size_t)npk);
    long long *head = PyMem_Malloc(sizeof(long long) * 2 * (size_t)npk);
    Py_ssize_t cap = 64, used = 0;
    Held *held = PyMem_Malloc(sizeof(Held) * (size_t)cap);
    PyObject *ready = NULL, *out = NULL;
    if (!first || !head || !held) {
        PyErr_NoMemory();
        goto done;
    }
    double *worst = first + npk;
    long long *tail = head + npk;
    for (long long p = 0; p < npk; p++) {
        first[p] = worst[p] = a0;
        head[p] = tail[p] = -1;
    }
    for (long long off = 0; off < nbytes; off += row_bytes) {
        long long x = base + (off / row_bytes) * pitch;
        long long end = x + (row_bytes < nbytes - off ? row_bytes : nbytes - off);
        long long o = off - x;
        while (x < end) {
            long long b = x / burst;
            long long y = (b + 1) * burst;
            if (y > end) y = end;
            double finish;
            if (take_channel(free, (Py_ssize_t)(b % k), a0, y - x, npb, &finish) < 0) goto done;
            long long f0 = (x + o) / flit, f1 = (y - 1 + o) / flit;
            long long p = f0 / per_packet, q1 = f1 / per_packet;
            for (long long q = p; q <= q1; q++) {
                if (finish > worst[q]) worst[q] = finish;
                if (f0 <= q * per_packet) {
                    if (finish > first[q]) first[q] = finish;
                } else if (finish > first[q]) {
                    if (used == cap) {
                        Held *grown = PyMem_Realloc(held, sizeof(Held) * (size_t)(cap * 2));
                        if (!grown) {
                            PyErr_NoMemory();
                            goto done;
                        }
                        held = grown;
                        cap *= 2;
                    }
                    held[used].fin = finish;
                    held[used].g = f0 - q * per_packet;
                    held[used].next = -1;
                    if (tail[q] < 0) head[q] = used; else held[tail[q]].next = used;
                    tail[q] = used++;
                }
            }
            x = y;
        }
    }
    ready = PyList_New((Py_ssize_t)npk);
    if (!ready) goto done;
    double last = a0;
    for (long long p = 0; p < npk; p++) {
        double r0 = first[p], r1 = worst[p];
        long long n1 = (per_packet < nflits - p * per_packet ? per_packet : nflits - p * per_packet) - 1;
        if (r1 > last) last = r1;
        double d = n1 > 0 ? (r1 - r0) / (double)n1 : 0.0;
        if (r1 > r0) {
            double t = r0 + late;
            for (long long i = head[p]; i >= 0; i = held[i].next) {
                if (held[i].fin > t + (double)held[i].g * d && held[i].g < n1) {
                    for (long long j = head[p]; j >= 0; j = held[j].next) {
                        if (held[j].g < n1) {
                            double w = (r1 - held[j].fin) / (double)(n1 - held[j].g);
                            if (w < d) d = w;
                        }
                    }
                    if (d >= phi) {
                        r0 = r1 - (double)n1 * d;
                    } else {
                        d = phi;
                        for (long long j = head[p]; j >= 0; j = held[j].next) {
                            double w = held[j].fin - (double)held[j].g * phi;
                            if (w > r0) r0 = w;
                        }
                    }
                    break;
                }
            }
        }
        PyObject *pair = Py_BuildValue("(dd)", r0, d);
        if (!pair) goto done;
        PyList_SET_ITEM(ready, (Py_ssize_t)p, pair);
    }
    out = Py_BuildValue("(Od)", ready, last);
done:
    Py_XDECREF(ready);
    PyMem_Free(first);
    PyMem_Free(head);
    PyMem_Free(held);
    return out;
}

/* ------------------------------------------------------------------ cutting a transfer into packets */

static int set_new(PyObject *obj, Py_ssize_t off, PyObject *value) {
    if (!value) return -1;
    Py_XSETREF(SLOT(obj, off), value);
    return 0;
}

/*
 * split_packets(transfer, packet_bytes, flit_bytes): kernbench.sim.fabric.split_packets, the same Packets with the
 * same slots (what Packet.__init__ sets): packets of at most packet_bytes, the last one short, a control transfer
 * (0 bytes) one empty packet.
 */
static PyObject *split_packets(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "split_packets(transfer, packet_bytes, flit_bytes)");
        return NULL;
    }
    PyObject *tr = args[0];
    if (!Packet_T || Py_TYPE(tr) != Transfer_T) {
        PyErr_SetString(PyExc_TypeError, "split_packets: not a bound Transfer");
        return NULL;
    }
    long long packet_bytes = PyLong_AsLongLong(args[1]), flit = PyLong_AsLongLong(args[2]);
    if ((packet_bytes == -1 || flit == -1) && PyErr_Occurred()) return NULL;
    PyObject *nbytes_o = SLOT(tr, T_nbytes), *route = SLOT(tr, T_route);
    if (!nbytes_o || !route || !PyLong_CheckExact(nbytes_o) || packet_bytes <= 0 || flit <= 0) {
        PyErr_SetString(PyExc_ValueError, "split_packets: a transfer needs an int nbytes, a route and positive sizes");
        return NULL;
    }
    long long left = PyLong_AsLongLong(nbytes_o);
    if (left == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t count = left < 0 ? 0 : left == 0 ? 1 : (Py_ssize_t)((left + packet_bytes - 1) / packet_bytes);
    PyObject *out = PyList_New(count);
    if (!out) return NULL;
    long long offset = 0;
    for (Py_ssize_t index = 0; index < count; index++) {
        long long n = left > packet_bytes ? packet_bytes : left;
        long long m = n ? (n + flit - 1) / flit : 0;
        PyObject *p = Packet_T->tp_alloc(Packet_T, 0);
        if (!p) { Py_DECREF(out); return NULL; }
        PyList_SET_ITEM(out, index, p);
        if (set_new(p, P_transfer, Py_NewRef(tr)) || set_new(p, P_route, Py_NewRef(route)) ||
            set_new(p, P_hop, PyLong_FromLong(0)) || set_new(p, P_index, PyLong_FromSsize_t(index)) ||
            set_new(p, P_nbytes, PyLong_FromLongLong(n)) || set_new(p, P_nflits, PyLong_FromLongLong(m)) ||
            set_new(p, P_offset, PyLong_FromLongLong(offset)) || set_new(p, P_delta, PyFloat_FromDouble(0.0)) ||
            set_new(p, P_t_head, PyFloat_FromDouble(0.0)) || set_new(p, P_t_tail, PyFloat_FromDouble(0.0))) {
            Py_DECREF(out);
            return NULL;
        }
        offset += n;
        left -= n;
    }
    return out;
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_VARARGS, "bind(Packet, Wire, Route, Transfer): the fabric classes whose slots the hop step reads."},
    {"split_packets", (PyCFunction)(void (*)(void))split_packets, METH_FASTCALL,
     "split_packets(transfer, packet_bytes, flit_bytes): kernbench.sim.fabric.split_packets, in C."},
    {"serve_write", (PyCFunction)(void (*)(void))serve_write, METH_FASTCALL,
     "serve_write(free, addr, off, n, pkt_offset, burst, ns_per_byte, a0, delta, t_last, flit, last_flit, done): "
     "the HBM controller's per-burst write service of one contiguous piece; returns the latest finish."},
    {"serve_read", (PyCFunction)(void (*)(void))serve_read, METH_FASTCALL,
     "serve_read(free, addr, nbytes, row_bytes, pitch, burst, ns_per_byte, a0, flit, per_packet, flit_ns, late_ns): "
     "the HBM controller's service of one read command; returns (ready, last)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kernbench.accel._calendar",
    "The engine's event calendar and packet-hop step in C (kernbench.accel).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__calendar(void) {
    if (PyType_Ready(&Calendar_T) < 0) return NULL;
    str_now = PyUnicode_InternFromString("_now");
    str_events = PyUnicode_InternFromString("events");
    str_queue = PyUnicode_InternFromString("_queue");
    str_step = PyUnicode_InternFromString("step");
    if (!str_now || !str_events || !str_queue || !str_step) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "Calendar", (PyObject *)&Calendar_T) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
