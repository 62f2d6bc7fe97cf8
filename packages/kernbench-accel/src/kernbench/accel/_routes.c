/*
 * kernbench.accel._routes: the route search's inner loop in C.
 *
 * settle(search, goal) runs kernbench.topology.routing._Search.settle: Dijkstra from the search's source, resumed
 * from its heap of (distance, sequence, node) and paused once `goal` is settled. The steps are the Python loop's,
 * in the same order: pop, skip a settled node, settle it (noting when the search first leaves the source's cube
 * or SIP), relax its neighbours in adjacency order (skipping those outside the search's area), push with the next
 * sequence number. Distances are the same IEEE double additions. A node's neighbour list, made on first use, is
 * the one the adjacency's __missing__ makes (made here in C, kept in the same dict). The heap is the search's own list, kept with
 * heapq's algorithm (its sift-down and sift-up), so Python's heapq may take over from any point.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *s_heap, *s_dist, *s_prev, *s_done, *s_adj, *s_corridor, *s_ends, *s_cube_of, *s_seq, *s_frames,
    *s_origin, *s_left_cube, *s_left_sip, *s_graph, *s_excluded, *s_out_edges, *s_kind, *s_dst, *s_weight;

/* The heap's order: (distance, sequence); sequences are unique, so nodes are never compared. */
static int entry_lt(PyObject *a, PyObject *b, int *lt) {
    double da = PyFloat_AsDouble(PyTuple_GET_ITEM(a, 0)), db = PyFloat_AsDouble(PyTuple_GET_ITEM(b, 0));
    if ((da == -1.0 || db == -1.0) && PyErr_Occurred()) return -1;
    if (da != db) { *lt = da < db; return 0; }
    int r = PyObject_RichCompareBool(PyTuple_GET_ITEM(a, 1), PyTuple_GET_ITEM(b, 1), Py_LT);
    if (r < 0) return -1;
    *lt = r;
    return 0;
}

/* heapq._siftdown(heap, startpos, pos) */
static int siftdown(PyObject *heap, Py_ssize_t startpos, Py_ssize_t pos) {
    PyObject **items = ((PyListObject *)heap)->ob_item;
    PyObject *newitem = items[pos];
    while (pos > startpos) {
        Py_ssize_t parentpos = (pos - 1) >> 1;
        PyObject *parent = items[parentpos];
        int lt;
        if (entry_lt(newitem, parent, &lt) < 0) return -1;
        if (!lt) break;
        items[pos] = parent;
        pos = parentpos;
    }
    items[pos] = newitem;
    return 0;
}

/* heapq._siftup(heap, pos) */
static int siftup(PyObject *heap, Py_ssize_t pos) {
    Py_ssize_t endpos = PyList_GET_SIZE(heap), startpos = pos;
    PyObject **items = ((PyListObject *)heap)->ob_item;
    PyObject *newitem = items[pos];
    Py_ssize_t childpos = 2 * pos + 1;
    while (childpos < endpos) {
        Py_ssize_t rightpos = childpos + 1;
        if (rightpos < endpos) {
            int lt;
            if (entry_lt(items[childpos], items[rightpos], &lt) < 0) return -1;
            if (!lt) childpos = rightpos;
        }
        items[pos] = items[childpos];
        pos = childpos;
        childpos = 2 * pos + 1;
    }
    items[pos] = newitem;
    return siftdown(heap, startpos, pos);
}

static PyObject *heappop(PyObject *heap) {
    Py_ssize_t n = PyList_GET_SIZE(heap);
    PyObject *last = PyList_GET_ITEM(heap, n - 1);
    Py_INCREF(last);
    if (PyList_SetSlice(heap, n - 1, n, NULL) < 0) { Py_DECREF(last); return NULL; }
    if (n == 1) return last;
    PyObject *top = PyList_GET_ITEM(heap, 0);
    PyList_SET_ITEM(heap, 0, last); /* steals last; top's reference moves to the caller */
    if (siftup(heap, 0) < 0) { Py_DECREF(top); return NULL; }
    return top;
}

static int heappush(PyObject *heap, PyObject *item) {
    if (PyList_Append(heap, item) < 0) return -1;
    return siftdown(heap, 0, PyList_GET_SIZE(heap) - 1);
}

static PyObject *get_attr(PyObject *o, PyObject *name) { return PyObject_GetAttr(o, name); }

/*
 * A node's neighbour list in one intent's adjacency (kernbench.topology.routing._Adjacency, a dict subclass):
 * the list kept in it, or the one its __missing__ makes, made here the same way: [(edge.dst,
 * edge.routing_weight_mm) for edge in graph.out_edges(node) if edge.kind not in excluded], kept in the dict.
 * A mapping that is not such an adjacency is asked with [] (its own __missing__, if any). New reference.
 */
static PyObject *neighbours(PyObject *adj, PyObject *node) {
    PyObject *got = PyDict_GetItemWithError(adj, node);
    if (got) return Py_NewRef(got);
    if (PyErr_Occurred()) return NULL;
    PyObject *graph = PyObject_GetAttr(adj, s_graph);
    PyObject *excluded = graph ? PyObject_GetAttr(adj, s_excluded) : NULL;
    if (!excluded || !PyAnySet_Check(excluded)) {
        Py_XDECREF(graph);
        Py_XDECREF(excluded);
        PyErr_Clear();
        return PyObject_GetItem(adj, node);
    }
    PyObject *edges = PyObject_CallMethodOneArg(graph, s_out_edges, node);
    PyObject *list = NULL, *seq = NULL;
    if (!edges) goto done;
    if (!(seq = PySequence_Fast(edges, "out_edges must give a sequence"))) goto done;
    if (!(list = PyList_New(0))) goto done;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *e = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *kind = PyObject_GetAttr(e, s_kind);
        if (!kind) goto fail;
        int skip = PySet_Contains(excluded, kind);
        Py_DECREF(kind);
        if (skip < 0) goto fail;
        if (skip) continue;
        PyObject *dst = PyObject_GetAttr(e, s_dst);
        PyObject *w = dst ? PyObject_GetAttr(e, s_weight) : NULL;
        PyObject *pair = w ? PyTuple_Pack(2, dst, w) : NULL;
        Py_XDECREF(dst);
        Py_XDECREF(w);
        if (!pair) goto fail;
        int bad = PyList_Append(list, pair);
        Py_DECREF(pair);
        if (bad < 0) goto fail;
    }
    if (PyDict_SetItem(adj, node, list) < 0) goto fail;
    goto done;
fail:
    Py_CLEAR(list);
done:
    Py_XDECREF(seq);
    Py_XDECREF(edges);
    Py_DECREF(graph);
    Py_DECREF(excluded);
    return list;
}

/* settle(search, goal): see the module comment. */
static PyObject *settle(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "settle(search, goal)");
        return NULL;
    }
    PyObject *search = args[0], *goal = args[1];
    PyObject *heap = NULL, *dist = NULL, *prev = NULL, *done = NULL, *adj = NULL, *corridor = NULL, *ends = NULL,
             *cube_of = NULL, *frames = NULL, *origin = NULL, *seq_o = NULL, *left_sip_o = NULL;
    PyObject *result = NULL;
    long long seq = 0;
    int track = 0, left_cube = 0, left_sip = 0, have_seq = 0;
    if (!(done = get_attr(search, s_done))) goto out;
    int in = PySet_Contains(done, goal);
    if (in < 0) goto out;
    if (in) { result = Py_NewRef(Py_None); goto out; }
    if (!(heap = get_attr(search, s_heap)) || !(dist = get_attr(search, s_dist)) ||
        !(prev = get_attr(search, s_prev)) || !(adj = get_attr(search, s_adj)) ||
        !(corridor = get_attr(search, s_corridor)) || !(ends = get_attr(search, s_ends)) ||
        !(cube_of = get_attr(search, s_cube_of)) || !(frames = get_attr(search, s_frames)) ||
        !(origin = get_attr(search, s_origin)) || !(seq_o = get_attr(search, s_seq)) ||
        !(left_sip_o = get_attr(search, s_left_sip)))
        goto out;
    if (!PyList_CheckExact(heap) || !PyDict_CheckExact(dist) || !PyDict_CheckExact(prev) ||
        !PyAnySet_Check(done) || !PyDict_Check(adj) || !PyTuple_Check(origin) || PyTuple_GET_SIZE(origin) != 2) {
        PyErr_SetString(PyExc_TypeError, "kernbench.accel._routes.settle: not a route search");
        goto out;
    }
    seq = PyLong_AsLongLong(seq_o);
    if (seq == -1 && PyErr_Occurred()) goto out;
    have_seq = 1;
    left_sip = PyObject_IsTrue(left_sip_o);
    if (left_sip < 0) goto out;
    track = !left_sip;
    int where = cube_of != Py_None;
    if (where && (!PyDict_Check(cube_of) || !PyAnySet_Check(corridor))) {
        PyErr_SetString(PyExc_TypeError, "kernbench.accel._routes.settle: an area without a corridor");
        goto out;
    }
    if (track && !PyDict_Check(frames)) {
        PyErr_SetString(PyExc_TypeError, "kernbench.accel._routes.settle: tracking frames without a frame map");
        goto out;
    }
    while (PyList_GET_SIZE(heap)) {
        PyObject *item = heappop(heap);
        if (!item) goto out;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 3) {
            Py_DECREF(item);
            PyErr_SetString(PyExc_TypeError, "kernbench.accel._routes.settle: a heap entry is not (d, seq, node)");
            goto out;
        }
        PyObject *node = PyTuple_GET_ITEM(item, 2);
        double d = PyFloat_AsDouble(PyTuple_GET_ITEM(item, 0));
        if (d == -1.0 && PyErr_Occurred()) { Py_DECREF(item); goto out; }
        int settled = PySet_Contains(done, node);
        if (settled < 0) { Py_DECREF(item); goto out; }
        if (settled) { Py_DECREF(item); continue; }
        if (PySet_Add(done, node) < 0) { Py_DECREF(item); goto out; }
        if (track) {
            PyObject *f = PyDict_GetItemWithError(frames, node);
            if (!f) {
                if (!PyErr_Occurred()) PyErr_SetObject(PyExc_KeyError, node);
                Py_DECREF(item);
                goto out;
            }
            int ne = PyObject_RichCompareBool(f, origin, Py_NE);
            if (ne < 0) { Py_DECREF(item); goto out; }
            if (ne) {
                left_cube = 1;
                int ne0 = PyObject_RichCompareBool(PyTuple_GET_ITEM(f, 0), PyTuple_GET_ITEM(origin, 0), Py_NE);
                if (ne0 < 0) { Py_DECREF(item); goto out; }
                if (ne0) { left_sip = 1; track = 0; }
            }
        }
        PyObject *nbrs = neighbours(adj, node);
        if (!nbrs) { Py_DECREF(item); goto out; }
        if (!PyList_Check(nbrs)) {
            Py_DECREF(nbrs); Py_DECREF(item);
            PyErr_SetString(PyExc_TypeError, "kernbench.accel._routes.settle: an adjacency entry is not a list");
            goto out;
        }
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(nbrs); k++) {
            PyObject *pair = PyList_GET_ITEM(nbrs, k);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                Py_DECREF(nbrs); Py_DECREF(item);
                PyErr_SetString(PyExc_TypeError, "kernbench.accel._routes.settle: a neighbour is not (node, weight)");
                goto out;
            }
            PyObject *nb = PyTuple_GET_ITEM(pair, 0), *w_o = PyTuple_GET_ITEM(pair, 1);
            if (where) {
                PyObject *c = PyDict_GetItemWithError(cube_of, nb);
                if (!c && PyErr_Occurred()) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
                if (c) {
                    if (!PyTuple_Check(c) || PyTuple_GET_SIZE(c) != 2) {
                        Py_DECREF(nbrs); Py_DECREF(item);
                        PyErr_SetString(PyExc_TypeError, "kernbench.accel._routes.settle: an area key is not a pair");
                        goto out;
                    }
                    int inside = PySet_Contains(corridor, PyTuple_GET_ITEM(c, 0));
                    if (inside < 0) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
                    if (!inside) continue;
                    PyObject *pe = PyTuple_GET_ITEM(c, 1);
                    if (pe != Py_None) {
                        int ok = PySet_Contains(ends, pe);
                        if (ok < 0) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
                        if (!ok) continue;
                    }
                }
            }
            double w = PyFloat_AsDouble(w_o);
            if (w == -1.0 && PyErr_Occurred()) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
            double nd = d + w;
            PyObject *cur = PyDict_GetItemWithError(dist, nb);
            if (!cur && PyErr_Occurred()) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
            if (cur) {
                double cd = PyFloat_AsDouble(cur);
                if (cd == -1.0 && PyErr_Occurred()) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
                if (!(nd < cd)) continue;
            }
            PyObject *nd_o = PyFloat_FromDouble(nd);
            if (!nd_o) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
            seq += 1;
            PyObject *seq_n = PyLong_FromLongLong(seq);
            PyObject *entry = seq_n ? PyTuple_Pack(3, nd_o, seq_n, nb) : NULL;
            Py_XDECREF(seq_n);
            int bad = !entry || PyDict_SetItem(dist, nb, nd_o) < 0 || PyDict_SetItem(prev, nb, node) < 0 ||
                      heappush(heap, entry) < 0;
            Py_DECREF(nd_o);
            Py_XDECREF(entry);
            if (bad) { Py_DECREF(nbrs); Py_DECREF(item); goto out; }
        }
        Py_DECREF(nbrs);
        int at_goal = PyObject_RichCompareBool(node, goal, Py_EQ);
        Py_DECREF(item);
        if (at_goal < 0) goto out;
        if (at_goal) break;
    }
    result = Py_NewRef(Py_None);
out:
    if (have_seq) {  /* as the Python loop's `finally`: the sequence and what the search has left, kept */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *sq = PyLong_FromLongLong(seq);
        if (sq) {
            if (PyObject_SetAttr(search, s_seq, sq) < 0) PyErr_Clear();
            Py_DECREF(sq);
        } else {
            PyErr_Clear();
        }
        if (left_cube && PyObject_SetAttr(search, s_left_cube, Py_True) < 0) PyErr_Clear();
        if (left_sip && PyObject_SetAttr(search, s_left_sip, Py_True) < 0) PyErr_Clear();
        PyErr_Restore(type, value, tb);
    }
    Py_XDECREF(heap); Py_XDECREF(dist); Py_XDECREF(prev); Py_XDECREF(done); Py_XDECREF(adj);
    Py_XDECREF(corridor); Py_XDECREF(ends); Py_XDECREF(cube_of); Py_XDECREF(frames); Py_XDECREF(origin);
    Py_XDECREF(seq_o); Py_XDECREF(left_sip_o);
    return result;
}

static PyMethodDef methods[] = {
    {"settle", (PyCFunction)(void (*)(void))settle, METH_FASTCALL,
     "settle(search, goal): run a route search (kernbench.topology.routing._Search) until goal is settled."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "kernbench.accel._routes", "The route search's inner loop in C (kernbench.accel).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__routes(void) {
    const char *names[] = {"heap", "dist", "prev", "done", "adj", "corridor", "ends", "cube_of", "seq", "frames",
                           "origin", "left_cube", "left_sip", "graph", "excluded", "out_edges", "kind", "dst",
                           "routing_weight_mm"};
    PyObject **slots[] = {&s_heap, &s_dist, &s_prev, &s_done, &s_adj, &s_corridor, &s_ends, &s_cube_of, &s_seq,
                          &s_frames, &s_origin, &s_left_cube, &s_left_sip, &s_graph, &s_excluded, &s_out_edges,
                          &s_kind, &s_dst, &s_weight};
    for (int i = 0; i < 19; i++) {
        *slots[i] = PyUnicode_InternFromString(names[i]);
        if (!*slots[i]) return NULL;
    }
    return PyModule_Create(&module);
}
