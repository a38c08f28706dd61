/* txc._C.Jit: txc_jit (txc/jit.h) over a Python function.
 *
 * The traced function is a Python callable trace(arrays, key) -> list of
 * Arrays: txc.jit.Jit passes the inputs (traced txc tensors while compiling)
 * through the torch function under the environment's dispatch, so every op
 * reaches the C op table, which records it through the env's trace hook.
 * A call binds concrete inputs; the plan's outputs (borrowed from its arena)
 * are cloned, so a result outlives the next call as a torch result does; an
 * output that is exactly one of the inputs (the same array, offset, shape,
 * strides and dtype: a donated cache written in place) comes back as that
 * input's index, so the caller hands back its own object without a copy or a
 * new wrapper.
 *
 * gather_elems: the per-call half of the frontend's flattening in C: the
 * txc arrays (`_elem`) of a dict's, list's or tuple's txc.Tensors, checked
 * against the layout the jit saw before (same keys, same count). */
#include "txc_py.h"

#include "txc/jit.h"

#include <string.h>

typedef struct {
    PyObject_HEAD
    txc_jit *jit;
    PyObject *trace; /* callable(list of Arrays, int key) -> list of Arrays */
    txc_env *env;
    /* the UTF-8 names of the last names list passed (the frontend passes one list per call
     * layout, never changed): reused while the same list object comes again */
    PyObject *names_obj;
    const char **names_c;
    Py_ssize_t names_n;
} JitObject;

static txc_status trace_cb(void *ctx, txc_tensor *const *inputs, int n_inputs, const void *static_args,
                           size_t static_len, txc_tensor **outputs, int max_outputs, int *n_outputs)
{
    JitObject *self = ctx;
    long long key = 0;
    if (static_len == sizeof key)
        memcpy(&key, static_args, sizeof key);
    PyObject *lst = PyList_New(n_inputs);
    if (!lst)
        return txc_error(TXC_ERR_NOMEM, "txc.jit: out of memory");
    for (int i = 0; i < n_inputs; i++) {
        TxcArrayObject *a = PyObject_New(TxcArrayObject, &TxcArray_Type);
        if (!a) {
            Py_DECREF(lst);
            return txc_error(TXC_ERR_NOMEM, "txc.jit: out of memory");
        }
        a->t = txc_tensor_retain(inputs[i]);
        PyList_SET_ITEM(lst, i, (PyObject *)a);
    }
    PyObject *res = PyObject_CallFunction(self->trace, "OL", lst, key);
    Py_DECREF(lst);
    if (!res) {
        /* the Python exception stays set: txc_jit_call's caller raises it */
        return txc_error(TXC_ERR_INVALID, "txc.jit: the traced function raised");
    }
    PyObject *seq = PySequence_Fast(res, "txc.jit: the trace returns a list of Arrays");
    Py_DECREF(res);
    if (!seq)
        return txc_error(TXC_ERR_INVALID, "txc.jit: bad trace result");
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > max_outputs) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "txc.jit: %zd outputs (at most %d)", n, max_outputs);
        return txc_error(TXC_ERR_CAPACITY, "txc.jit: too many outputs");
    }
    txc_env *env = txc_env_active();
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, &TxcArray_Type)) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "txc.jit: an output is not a txc Array");
            return txc_error(TXC_ERR_INVALID, "txc.jit: bad output");
        }
        /* one reference for the jit's scope (the Array keeps its own) */
        outputs[i] = txc_env_scope_adopt(env, txc_tensor_retain(((TxcArrayObject *)o)->t));
    }
    *n_outputs = (int)n;
    Py_DECREF(seq);
    return TXC_OK;
}

static int jit_init(JitObject *self, PyObject *args, PyObject *kw)
{
    PyObject *envo, *trace;
    const char *name = "txc.jit";
    if (!PyArg_ParseTuple(args, "O!O|s", &TxcEnv_Type, &envo, &trace, &name))
        return -1;
    if (!PyCallable_Check(trace)) {
        PyErr_SetString(PyExc_TypeError, "Jit(env, trace, name): trace must be callable");
        return -1;
    }
    self->env = ((TxcEnvObject *)envo)->env;
    Py_INCREF(trace);
    self->trace = trace;
    txc_clear_error();
    self->jit = txc_jit_new(self->env, name, trace_cb, self);
    if (!self->jit) {
        txcpy_raise("txc_jit_new failed");
        return -1;
    }
    return 0;
}

static void jit_dealloc(JitObject *self)
{
    if (self->jit)
        txc_jit_free(self->jit);
    Py_XDECREF(self->trace);
    Py_XDECREF(self->names_obj);
    PyMem_Free((void *)self->names_c);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* a and b are the same view of one array (an output that is an input) */
static int same_view(txc_tensor *a, txc_tensor *b)
{
    int nd = txc_tensor_ndim(a);
    if (txc_tensor_array(a) != txc_tensor_array(b) || txc_tensor_offset(a) != txc_tensor_offset(b) ||
        txc_tensor_dtype(a) != txc_tensor_dtype(b) || nd != txc_tensor_ndim(b))
        return 0;
    return memcmp(txc_tensor_shape(a), txc_tensor_shape(b), sizeof(int64_t) * (size_t)nd) == 0 &&
           memcmp(txc_tensor_strides(a), txc_tensor_strides(b), sizeof(int64_t) * (size_t)nd) == 0;
}

/* call(arrays, names, key, clone_outputs) -> list: per output an Array (a
 * copy of an arena output, or the plan's own header when not clone_outputs)
 * or an int: the index of the input it is */
static PyObject *jit_call(JitObject *self, PyObject *args)
{
    PyObject *arrs, *names;
    long long key;
    int clone = 1;
    if (!PyArg_ParseTuple(args, "OOL|p", &arrs, &names, &key, &clone))
        return NULL;
    PyObject *seq = PySequence_Fast(arrs, "a list of Arrays");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > TXC_JIT_MAX_IO) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "txc.jit: %zd inputs (at most %d)", n, TXC_JIT_MAX_IO);
        return NULL;
    }
    txc_tensor **in = PyMem_Calloc((size_t)n + 1, sizeof *in);
    txc_tensor **out = PyMem_Calloc(TXC_JIT_MAX_IO, sizeof *out);
    const char **nm = PyMem_Calloc((size_t)n + 1, sizeof *nm);
    PyObject *result = NULL;
    int entered = 0;
    if (!in || !out || !nm) {
        PyErr_NoMemory();
        goto done;
    }
    int same_names = names == self->names_obj && n == self->names_n;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyObject_TypeCheck(o, &TxcArray_Type)) {
            PyErr_SetString(PyExc_TypeError, "txc.jit: an input is not a txc Array");
            goto done;
        }
        in[i] = ((TxcArrayObject *)o)->t;
        if (same_names) {
            nm[i] = self->names_c[i];
            continue;
        }
        PyObject *s = PySequence_GetItem(names, i);
        nm[i] = s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : NULL;
        Py_XDECREF(s); /* the names list keeps the strings alive */
        if (!nm[i])
            PyErr_Clear();
    }
    if (!same_names && PyList_CheckExact(names)) { /* keep them for the next call with this list */
        const char **keep = PyMem_Calloc((size_t)n + 1, sizeof *keep);
        if (keep) {
            memcpy(keep, nm, sizeof *keep * (size_t)n);
            PyMem_Free((void *)self->names_c);
            Py_INCREF(names);
            Py_XSETREF(self->names_obj, names);
            self->names_c = keep;
            self->names_n = n;
        }
    }
    int n_out = 0;
    txc_clear_error();
    /* the jit's env is the active one while it runs (a trace also enters the torch modes) */
    if (txc_env_enter(self->env) != TXC_OK) {
        txcpy_raise("txc.jit: entering the environment failed");
        goto done;
    }
    entered = 1;
    txc_status st = txc_jit_call(self->jit, in, (int)n, nm, &key, sizeof key, out, TXC_JIT_MAX_IO, &n_out);
    if (st != TXC_OK) {
        if (PyErr_Occurred()) { /* the traced function's own exception */
            txc_clear_error();
            goto done;
        }
        txcpy_raise("txc.jit call failed");
        goto done;
    }
    result = PyList_New(n_out);
    if (!result)
        goto done;
    int mark = txc_env_scope_begin(self->env);
    for (int i = 0; i < n_out; i++) {
        txc_tensor *t = out[i];
        Py_ssize_t alias = -1;
        for (Py_ssize_t j = 0; j < n && alias < 0; j++)
            if (same_view(t, in[j]))
                alias = j;
        if (alias >= 0) {
            PyObject *ix = PyLong_FromSsize_t(alias);
            if (!ix) {
                txc_env_scope_end(self->env, mark);
                Py_CLEAR(result);
                goto done;
            }
            PyList_SET_ITEM(result, i, ix);
            continue;
        }
        txc_tensor *r = clone ? txc_tensor_retain(txc_clone(t)) : txc_tensor_retain(t);
        if (!r) {
            txc_env_scope_end(self->env, mark);
            Py_CLEAR(result);
            txcpy_raise("txc.jit: copying an output failed");
            goto done;
        }
        TxcArrayObject *a = PyObject_New(TxcArrayObject, &TxcArray_Type);
        if (!a) {
            txc_tensor_release(r);
            txc_env_scope_end(self->env, mark);
            Py_CLEAR(result);
            goto done;
        }
        a->t = r;
        PyList_SET_ITEM(result, i, (PyObject *)a);
    }
    txc_env_scope_end(self->env, mark);
done:
    if (entered)
        txc_env_exit(self->env);
    Py_DECREF(seq);
    PyMem_Free(in);
    PyMem_Free(out);
    PyMem_Free((void *)nm);
    return result;
}

/* one item of gather_elems: item must be a `cls` (txc.Tensor) whose _elem is an Array; out[k] = that.
 * With a snapshot list, an item that is the very object seen there last time, still holding the
 * array out[k] holds, is left as it is (no type check, no list write); its _elem is read all the
 * same, so a tensor whose contents were swapped in place (torch.utils.swap_tensors, as
 * Module.to does for wrapper subclasses) is seen too. A new item is recorded. */
static int gather_one(PyObject *item, PyObject *cls, PyObject *out, Py_ssize_t k, PyObject *snap, Py_ssize_t i)
{
    static PyObject *elem_name;
    if (!elem_name && !(elem_name = PyUnicode_InternFromString("_elem")))
        return -1;
    if (snap && PyList_GET_ITEM(snap, i) == item) {
        PyObject *e = PyObject_GetAttr(item, elem_name);
        if (!e) {
            PyErr_Clear();
            return 0;
        }
        int same = e == PyList_GET_ITEM(out, k);
        Py_DECREF(e);
        if (same)
            return 1;
    }
    if (!PyObject_TypeCheck(item, (PyTypeObject *)cls))
        return 0; /* not a txc.Tensor */
    PyObject *e = PyObject_GetAttr(item, elem_name);
    if (!e)
        return -1;
    if (!PyObject_TypeCheck(e, &TxcArray_Type)) {
        Py_DECREF(e);
        return 0;
    }
    if (PyList_SetItem(out, k, e) != 0) /* steals e */
        return -1;
    if (snap) {
        Py_INCREF(item);
        if (PyList_SetItem(snap, i, item) != 0)
            return -1;
    }
    return 1;
}

/* gather_elems(container, keys, cls, out, start, n[, snapshot]) -> bool: container is a dict
 * (its keys equal to the tuple `keys`, in order), a list or a tuple (keys None) of exactly n
 * `cls` instances; out[start + i] = item i's _elem. snapshot (a list of n, or None): the items
 * of the previous call, kept up to date; items found there again are not visited. False (out
 * and snapshot partly written) when the layout differs or an item is not a txc.Tensor: the
 * caller flattens the slow way. */
static PyObject *mod_gather_elems(PyObject *m, PyObject *args)
{
    PyObject *c, *keys, *cls, *out, *snap = Py_None;
    Py_ssize_t start, n;
    if (!PyArg_ParseTuple(args, "OOOO!nn|O", &c, &keys, &cls, &PyList_Type, &out, &start, &n, &snap))
        return NULL;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "gather_elems: cls must be a type");
        return NULL;
    }
    if (start < 0 || n < 0 || start > PyList_GET_SIZE(out) - n) {
        PyErr_SetString(PyExc_IndexError, "gather_elems: out of range");
        return NULL;
    }
    if (snap == Py_None)
        snap = NULL;
    else if (!PyList_Check(snap) || PyList_GET_SIZE(snap) != n) {
        PyErr_SetString(PyExc_TypeError, "gather_elems: snapshot must be a list of n items or None");
        return NULL;
    }
    if (PyDict_CheckExact(c)) {
        if (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) != n || PyDict_GET_SIZE(c) != n)
            Py_RETURN_FALSE;
        Py_ssize_t pos = 0, i = 0;
        PyObject *k, *v;
        while (i < n && PyDict_Next(c, &pos, &k, &v)) {
            PyObject *want = PyTuple_GET_ITEM(keys, i);
            if (k != want) {
                int eq = PyObject_RichCompareBool(k, want, Py_EQ);
                if (eq < 0)
                    return NULL;
                if (!eq)
                    Py_RETURN_FALSE;
            }
            int r = gather_one(v, cls, out, start + i, snap, i);
            if (r < 0)
                return NULL;
            if (!r)
                Py_RETURN_FALSE;
            i++;
        }
        return PyBool_FromLong(i == n);
    }
    if (PyList_CheckExact(c) || PyTuple_CheckExact(c)) {
        PyObject *seq = PySequence_Fast(c, "gather_elems");
        if (!seq)
            return NULL;
        int res = PySequence_Fast_GET_SIZE(seq) == n;
        for (Py_ssize_t i = 0; res == 1 && i < n; i++)
            res = gather_one(PySequence_Fast_GET_ITEM(seq, i), cls, out, start + i, snap, i);
        Py_DECREF(seq);
        if (res < 0)
            return NULL;
        return PyBool_FromLong(res);
    }
    Py_RETURN_FALSE;
}

static PyMethodDef jit_module_methods[] = {
    {"gather_elems", mod_gather_elems, METH_VARARGS,
     "gather_elems(container, keys, cls, out, start, n[, snapshot]) -> bool: the txc arrays of a "
     "dict/list/tuple of txc.Tensors into out[start:start+n]"},
    {NULL},
};

static PyObject *jit_stats(JitObject *self, PyObject *noargs)
{
    txc_jit_stats s = txc_jit_get_stats(self->jit);
    return Py_BuildValue("{s:K,s:K,s:K,s:d,s:d,s:i,s:K,s:L,s:i,s:i,s:i,s:s,s:s}", "calls", s.calls, "hits",
                         s.hits, "misses", s.misses, "compile_ms", s.compile_ms, "last_compile_ms",
                         s.last_compile_ms, "n_plans", s.n_plans, "evictions", s.evictions, "arena_bytes",
                         (long long)s.arena_bytes, "nodes_traced", s.nodes_traced, "nodes_compiled",
                         s.nodes_compiled, "linear_groups", s.linear_groups, "last_compile_source",
                         s.last_compile_source ? s.last_compile_source : "", "last_recompile_reason",
                         txc_jit_last_recompile_reason(self->jit));
}

static PyObject *jit_set_cache(JitObject *self, PyObject *args)
{
    const char *dir = NULL;
    if (!PyArg_ParseTuple(args, "z", &dir))
        return NULL;
    txc_clear_error();
    if (txc_jit_set_compile_cache(self->jit, dir) != TXC_OK)
        return txcpy_raise("txc_jit_set_compile_cache failed");
    Py_RETURN_NONE;
}

static PyObject *jit_cache_message(JitObject *self, PyObject *noargs)
{
    return PyUnicode_FromString(txc_jit_compile_cache_message(self->jit));
}

static PyObject *jit_set_profile(JitObject *self, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    txc_jit_set_profile(self->jit, on);
    Py_RETURN_NONE;
}

/* txc_jit_get_profile: [(op, calls, ms)], most time first */
static PyObject *jit_profile(JitObject *self, PyObject *noargs)
{
    txc_jit_op_time t[64];
    int n = txc_jit_get_profile(self->jit, t, 64);
    if (n > 64)
        n = 64;
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *row = Py_BuildValue("(sKd)", t[i].op, (unsigned long long)t[i].calls, t[i].ms);
        if (!row) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, row);
    }
    return l;
}

/* txc_jit_get_gemm_profile: [(op, M, N, K, parts, calls, ms)], most time first */
static PyObject *jit_gemm_profile(JitObject *self, PyObject *noargs)
{
    txc_jit_gemm_time t[TXC_JIT_PROFILE_GEMM_SHAPES + 1];
    int max = TXC_JIT_PROFILE_GEMM_SHAPES + 1;
    int n = txc_jit_get_gemm_profile(self->jit, t, max);
    if (n > max)
        n = max;
    PyObject *l = PyList_New(n);
    for (int i = 0; l && i < n; i++) {
        PyObject *row = Py_BuildValue("(sLLLiKd)", t[i].op, (long long)t[i].M, (long long)t[i].N, (long long)t[i].K,
                                      t[i].parts, (unsigned long long)t[i].calls, t[i].ms);
        if (!row) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, i, row);
    }
    return l;
}

/* txc_jit_dump_last_graph: the last compiled plan's graph (after the passes) on stderr */
static PyObject *jit_dump_graph(JitObject *self, PyObject *noargs)
{
    fflush(stderr);
    txc_jit_dump_last_graph(self->jit, stderr);
    fflush(stderr);
    Py_RETURN_NONE;
}

static PyMethodDef jit_methods[] = {
    {"dump_graph", (PyCFunction)jit_dump_graph, METH_NOARGS,
     "txc_jit_dump_last_graph: the last compiled graph (after the passes) on stderr"},
    {"set_profile", (PyCFunction)jit_set_profile, METH_O,
     "txc_jit_set_profile: time every kernel launch of the following calls"},
    {"profile", (PyCFunction)jit_profile, METH_NOARGS, "txc_jit_get_profile: [(op, calls, ms)], most time first"},
    {"gemm_profile", (PyCFunction)jit_gemm_profile, METH_NOARGS,
     "txc_jit_get_gemm_profile: [(op, M, N, K, parts, calls, ms)], most time first"},
    {"call", (PyCFunction)jit_call, METH_VARARGS, "call(arrays, names, key, clone_outputs=True)"},
    {"stats", (PyCFunction)jit_stats, METH_NOARGS, "txc_jit_get_stats + the last recompile reason"},
    {"set_compile_cache", (PyCFunction)jit_set_cache, METH_VARARGS, "folder or None"},
    {"compile_cache_message", (PyCFunction)jit_cache_message, METH_NOARGS, NULL},
    {NULL},
};

static PyTypeObject Jit_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "txc._C.Jit",
    .tp_basicsize = sizeof(JitObject),
    .tp_dealloc = (destructor)jit_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Jit(env, trace, name): a txc_jit over a Python trace function",
    .tp_methods = jit_methods,
    .tp_init = (initproc)jit_init,
    .tp_new = PyType_GenericNew,
};

int txcpy_jit_init(PyObject *module)
{
    if (PyType_Ready(&Jit_Type) < 0)
        return -1;
    if (PyModule_AddFunctions(module, jit_module_methods) < 0)
        return -1;
    Py_INCREF(&Jit_Type);
    return PyModule_AddObject(module, "Jit", (PyObject *)&Jit_Type);
}
