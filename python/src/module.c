/* txc._C: txc arrays and environments for Python (CPython C API over the
 * public C API of libtxc: include/txc/*.h). Arrays cross to torch and numpy
 * through DLPack (the array API standard's __dlpack__ / __dlpack_device__,
 * dlpack.h's DLManagedTensor, version 0.8 ABI), zero copy both ways. */
#include "txc_py.h"

#include <string.h>

PyObject *TxcError;

PyObject *txcpy_raise(const char *fallback)
{
    const char *msg = txc_last_error();
    PyErr_SetString(TxcError, msg && *msg ? msg : fallback);
    txc_clear_error();
    return NULL;
}

PyObject *txcpy_wrap(txc_tensor *t)
{
    if (!t)
        return txcpy_raise("txc: op failed");
    TxcArrayObject *o = PyObject_New(TxcArrayObject, &TxcArray_Type);
    if (!o) {
        txc_tensor_release(t);
        return NULL;
    }
    o->t = t;
    return (PyObject *)o;
}

int txcpy_dtype(PyObject *o, txc_dtype *out)
{
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (!s || !txc_dtype_parse(s, out)) {
        PyErr_Format(PyExc_TypeError, "txc: not a dtype name: %R", o);
        return -1;
    }
    return 0;
}

int txcpy_shape(PyObject *o, int *ndim, int64_t *shape)
{
    PyObject *seq = PySequence_Fast(o, "txc: a shape is a sequence of ints");
    if (!seq)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n > TXC_MAX_DIMS) {
        Py_DECREF(seq);
        PyErr_Format(PyExc_ValueError, "txc: %zd dims (at most %d)", n, TXC_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        shape[i] = v;
    }
    *ndim = (int)n;
    Py_DECREF(seq);
    return 0;
}

/* ---- strided copy (Tensor.copy_) --------------------------------------- */

static void copy_rec(int d, int nd, const int64_t *shape, txc_dtype sdt, const char *s, const int64_t *ss,
                     txc_dtype ddt, char *dp, const int64_t *ds)
{
    size_t se = txc_dtype_size(sdt), de = txc_dtype_size(ddt);
    if (nd == 0) {
        txc_dtype_convert(sdt, s, ddt, dp, 1);
        return;
    }
    if (d == nd - 1) {
        txc_dtype_convert_strided(sdt, s, ss[d] * (int64_t)se, ddt, dp, ds[d] * (int64_t)de, shape[d]);
        return;
    }
    for (int64_t i = 0; i < shape[d]; i++)
        copy_rec(d + 1, nd, shape, sdt, s + i * ss[d] * (int64_t)se, ss, ddt, dp + i * ds[d] * (int64_t)de, ds);
}

int txcpy_copy_strided(txc_tensor *dst, txc_tensor *src)
{
    if (txc_tensor_is_traced(dst) || txc_tensor_is_traced(src)) {
        PyErr_SetString(TxcError, "txc: copy_ into a traced tensor: under txc.jit only index_copy_ writes an "
                                  "input in place (the StaticCache's update)");
        return -1;
    }
    if (txc_storage_is_readonly(txc_array_storage(txc_tensor_array(dst)))) {
        PyErr_SetString(TxcError, "txc: copy_: the destination is read-only (a memory-mapped weight)");
        return -1;
    }
    if (txc_dtype_is_quantized(txc_tensor_dtype(dst)) || txc_dtype_is_quantized(txc_tensor_dtype(src))) {
        PyErr_SetString(TxcError, "txc: copy_ of a block-quantized tensor");
        return -1;
    }
    int nd = txc_tensor_ndim(dst);
    const int64_t *shape = txc_tensor_shape(dst);
    /* src's strides broadcast to dst's shape (numpy rules, from the right) */
    int ns = txc_tensor_ndim(src);
    if (ns > nd) {
        PyErr_SetString(TxcError, "txc: copy_: source has more dims than the destination");
        return -1;
    }
    int64_t ss[TXC_MAX_DIMS] = {0};
    for (int i = 0; i < ns; i++) {
        int64_t sz = txc_tensor_shape(src)[i];
        int di = nd - ns + i;
        if (sz == shape[di])
            ss[di] = txc_tensor_strides(src)[i];
        else if (sz == 1)
            ss[di] = 0;
        else {
            PyErr_Format(TxcError, "txc: copy_: source dim %d of size %lld does not broadcast to %lld", i,
                         (long long)sz, (long long)shape[di]);
            return -1;
        }
    }
    if (txc_tensor_numel(dst) == 0)
        return 0;
    /* a source overlapping the destination: copy it out first */
    txc_tensor *tmp = NULL;
    if (txc_tensor_array(src) == txc_tensor_array(dst)) {
        txc_env *senv = txc_tensor_env(src);
        int mark = txc_env_scope_begin(senv); /* from_data's result belongs to an open scope */
        tmp = txc_tensor_retain(txc_tensor_from_data(senv, txc_tensor_dtype(src), ns, txc_tensor_shape(src), NULL));
        txc_env_scope_end(senv, mark);
        if (!tmp) {
            txcpy_raise("txc: copy_: out of memory");
            return -1;
        }
        copy_rec(0, ns, txc_tensor_shape(src), txc_tensor_dtype(src), txc_tensor_data_ptr(src),
                 txc_tensor_strides(src), txc_tensor_dtype(tmp), txc_tensor_data_ptr(tmp),
                 txc_tensor_strides(tmp));
        for (int i = 0; i < ns; i++)
            if (ss[nd - ns + i] != 0)
                ss[nd - ns + i] = txc_tensor_strides(tmp)[i];
        src = tmp;
    }
    copy_rec(0, nd, shape, txc_tensor_dtype(src), txc_tensor_data_ptr(src), ss, txc_tensor_dtype(dst),
             txc_tensor_data_ptr(dst), txc_tensor_strides(dst));
    txc_tensor_release(tmp);
    return 0;
}

/* ---- DLPack (dlpack.h, ABI of v0.8: DLManagedTensor, capsule "dltensor") */

typedef struct {
    int32_t device_type; /* kDLCPU = 1 */
    int32_t device_id;
} DLDevice;
typedef struct {
    uint8_t code; /* kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6 */
    uint8_t bits;
    uint16_t lanes;
} DLDataType;
typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL = compact row-major */
    uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct {
    DLManagedTensor m;
    int64_t shape[TXC_MAX_DIMS];
    int64_t strides[TXC_MAX_DIMS];
    txc_tensor *t;
} ExportCtx;

static int dl_dtype(txc_dtype dt, DLDataType *out)
{
    static const DLDataType map[] = {
        [TXC_F32] = {2, 32, 1}, [TXC_F16] = {2, 16, 1}, [TXC_BF16] = {4, 16, 1},
        [TXC_I32] = {0, 32, 1}, [TXC_I64] = {0, 64, 1}, [TXC_BOOL] = {6, 8, 1},
    };
    if ((int)dt < 0 || dt > TXC_BOOL)
        return -1;
    *out = map[dt];
    return 0;
}

static int txc_from_dl(DLDataType d, txc_dtype *out)
{
    if (d.lanes != 1)
        return -1;
    if (d.code == 2 && d.bits == 32) *out = TXC_F32;
    else if (d.code == 2 && d.bits == 16) *out = TXC_F16;
    else if (d.code == 4 && d.bits == 16) *out = TXC_BF16;
    else if (d.code == 0 && d.bits == 32) *out = TXC_I32;
    else if (d.code == 0 && d.bits == 64) *out = TXC_I64;
    else if ((d.code == 6 || d.code == 1) && d.bits == 8) *out = TXC_BOOL; /* numpy's bool: uint8 or bool */
    else return -1;
    return 0;
}

static void export_deleter(DLManagedTensor *m)
{
    ExportCtx *c = (ExportCtx *)m;
    txc_tensor_release(c->t);
    PyMem_RawFree(c);
}

static void capsule_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "dltensor")) { /* never consumed */
        DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
        if (m && m->deleter)
            m->deleter(m);
    }
}

static PyObject *array_dlpack(TxcArrayObject *self, PyObject *args, PyObject *kw)
{
    /* stream, max_version, dl_device, copy: accepted; a CPU array has no stream */
    txc_tensor *t = self->t;
    if (txc_tensor_is_traced(t)) {
        PyErr_SetString(TxcError, "txc: a traced tensor (inside txc.jit) has no data to export");
        return NULL;
    }
    if (kw) {
        PyObject *cp = PyDict_GetItemString(kw, "copy");
        if (cp && cp != Py_None && PyObject_IsTrue(cp)) {
            PyErr_SetString(PyExc_BufferError, "txc: __dlpack__(copy=True) is not supported; it shares memory");
            return NULL;
        }
    }
    ExportCtx *c = PyMem_RawCalloc(1, sizeof *c);
    if (!c)
        return PyErr_NoMemory();
    if (dl_dtype(txc_tensor_dtype(t), &c->m.dl_tensor.dtype) != 0) {
        PyMem_RawFree(c);
        PyErr_Format(PyExc_BufferError, "txc: dtype %s has no DLPack type", txc_dtype_name(txc_tensor_dtype(t)));
        return NULL;
    }
    int nd = txc_tensor_ndim(t);
    for (int i = 0; i < nd; i++) {
        c->shape[i] = txc_tensor_shape(t)[i];
        c->strides[i] = txc_tensor_strides(t)[i];
    }
    c->t = txc_tensor_retain(t);
    c->m.dl_tensor.data = txc_tensor_data_ptr(t);
    c->m.dl_tensor.device = (DLDevice){1, 0};
    c->m.dl_tensor.ndim = nd;
    c->m.dl_tensor.shape = c->shape;
    c->m.dl_tensor.strides = c->strides;
    c->m.dl_tensor.byte_offset = 0;
    c->m.manager_ctx = c;
    c->m.deleter = export_deleter;
    PyObject *cap = PyCapsule_New(&c->m, "dltensor", capsule_destructor);
    if (!cap)
        export_deleter(&c->m);
    return cap;
}

static PyObject *array_dlpack_device(TxcArrayObject *self, PyObject *noargs)
{
    return Py_BuildValue("(ii)", 1, 0);
}

typedef struct {
    DLManagedTensor *m;
} ImportCtx;

static void import_deleter(void *ctx, void *data)
{
    DLManagedTensor *m = ctx;
    if (m && m->deleter) {
        PyGILState_STATE g = PyGILState_Ensure();
        m->deleter(m);
        PyGILState_Release(g);
    }
}

/* from_dlpack(obj, env, copy): a txc array over any DLPack producer's CPU
 * memory (zero copy when compact row-major and not copy). */
static PyObject *mod_from_dlpack(PyObject *mod, PyObject *args)
{
    PyObject *obj, *envo;
    int copy = 0;
    if (!PyArg_ParseTuple(args, "OO!|p", &obj, &TxcEnv_Type, &envo, &copy))
        return NULL;
    txc_env *env = ((TxcEnvObject *)envo)->env;
    PyObject *cap;
    if (PyCapsule_CheckExact(obj)) {
        cap = obj;
        Py_INCREF(cap);
    } else {
        PyObject *dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
        if (!dev)
            return NULL;
        int dt = -1;
        if (!PyArg_ParseTuple(dev, "i|i", &dt, &(int){0})) {
            Py_DECREF(dev);
            return NULL;
        }
        Py_DECREF(dev);
        if (dt != 1 && dt != 3) { /* kDLCPU, kDLCUDAHost */
            PyErr_Format(PyExc_BufferError, "txc.from_dlpack: device type %d is not CPU memory", dt);
            return NULL;
        }
        cap = PyObject_CallMethod(obj, "__dlpack__", NULL);
        if (!cap)
            return NULL;
    }
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (!m) {
        Py_DECREF(cap);
        return NULL;
    }
    DLTensor *d = &m->dl_tensor;
    txc_dtype dtype;
    if (d->device.device_type != 1 && d->device.device_type != 3) {
        Py_DECREF(cap);
        PyErr_SetString(PyExc_BufferError, "txc.from_dlpack: not CPU memory");
        return NULL;
    }
    if (txc_from_dl(d->dtype, &dtype) != 0 || d->ndim < 0 || d->ndim > TXC_MAX_DIMS) {
        Py_DECREF(cap);
        PyErr_Format(PyExc_BufferError, "txc.from_dlpack: unsupported dtype (code %d, %d bits) or %d dims",
                     d->dtype.code, d->dtype.bits, d->ndim);
        return NULL;
    }
    int64_t numel = txc_shape_numel(d->ndim, d->shape);
    bool compact = true;
    int64_t expect = 1;
    for (int i = d->ndim - 1; i >= 0 && d->strides; i--) {
        if (d->shape[i] != 1 && d->strides[i] != expect)
            compact = false;
        expect *= d->shape[i];
    }
    char *base = (char *)d->data + d->byte_offset;
    txc_tensor *t = NULL;
    /* results of txc_tensor_wrap/from_data belong to an open scope (a jit's trace has one):
     * make them in a scope of ours and keep one reference */
    int mark = txc_env_scope_begin(env);
    if (compact && !copy && numel > 0) {
        size_t nbytes = (size_t)numel * txc_dtype_size(dtype);
        txc_storage *s = txc_storage_from_external(base, nbytes, import_deleter, m);
        if (!s) {
            txc_env_scope_end(env, mark);
            Py_DECREF(cap);
            return txcpy_raise("txc.from_dlpack: storage");
        }
        PyCapsule_SetName(cap, "used_dltensor"); /* the storage owns it now */
        txc_array *a = txc_array_from_storage(s, 0, dtype, d->ndim, d->shape);
        txc_storage_release(s);
        if (!a) {
            txc_env_scope_end(env, mark);
            Py_DECREF(cap);
            return txcpy_raise("txc.from_dlpack: array");
        }
        t = txc_tensor_retain(txc_tensor_wrap(env, a));
        txc_array_release(a);
    } else {
        /* a copy, through the strided copy (shape as given, any strides) */
        t = txc_tensor_retain(txc_tensor_from_data(env, dtype, d->ndim, d->shape, NULL));
        if (t && numel > 0) {
            int64_t st[TXC_MAX_DIMS];
            int64_t e = 1;
            for (int i = d->ndim - 1; i >= 0; i--) {
                st[i] = d->strides ? d->strides[i] : e;
                e *= d->shape[i];
            }
            copy_rec(0, d->ndim, d->shape, dtype, base, st, dtype, txc_tensor_data_ptr(t), txc_tensor_strides(t));
        }
    }
    txc_env_scope_end(env, mark);
    Py_DECREF(cap); /* a consumed capsule's destructor does nothing */
    if (!t)
        return txcpy_raise("txc.from_dlpack failed");
    return txcpy_wrap(t);
}

/* ---- Array type ---------------------------------------------------------- */

static void array_dealloc(TxcArrayObject *self)
{
    txc_tensor_release(self->t);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *tuple_of(int n, const int64_t *v)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++)
        PyTuple_SET_ITEM(t, i, PyLong_FromLongLong(v[i]));
    return t;
}

static PyObject *array_shape(TxcArrayObject *s, void *c) { return tuple_of(txc_tensor_ndim(s->t), txc_tensor_shape(s->t)); }
static PyObject *array_strides(TxcArrayObject *s, void *c) { return tuple_of(txc_tensor_ndim(s->t), txc_tensor_strides(s->t)); }
static PyObject *array_dtype(TxcArrayObject *s, void *c) { return PyUnicode_FromString(txc_dtype_name(txc_tensor_dtype(s->t))); }
static PyObject *array_ndim(TxcArrayObject *s, void *c) { return PyLong_FromLong(txc_tensor_ndim(s->t)); }
static PyObject *array_offset(TxcArrayObject *s, void *c) { return PyLong_FromLongLong(txc_tensor_offset(s->t)); }
static PyObject *array_traced(TxcArrayObject *s, void *c) { return PyBool_FromLong(txc_tensor_is_traced(s->t)); }
static PyObject *array_contig(TxcArrayObject *s, void *c) { return PyBool_FromLong(txc_tensor_is_contiguous(s->t)); }
static PyObject *array_data_ptr(TxcArrayObject *s, void *c)
{
    return PyLong_FromVoidPtr(txc_tensor_is_traced(s->t) ? NULL : txc_tensor_data_ptr(s->t));
}
/* identity of the backing txc_array (views of one array share it) */
static PyObject *array_base_id(TxcArrayObject *s, void *c) { return PyLong_FromVoidPtr(txc_tensor_array(s->t)); }
static PyObject *array_env(TxcArrayObject *s, void *c) { return txcpy_env_object(txc_tensor_env(s->t)); }

static PyObject *array_item(TxcArrayObject *self, PyObject *noargs)
{
    if (txc_tensor_is_traced(self->t)) {
        PyErr_SetString(TxcError, "txc: .item() of a traced tensor inside txc.jit: the value is not known "
                                  "while tracing (data-dependent Python control flow cannot be compiled)");
        return NULL;
    }
    if (txc_tensor_numel(self->t) != 1) {
        PyErr_SetString(PyExc_RuntimeError, "a Tensor with more than one element cannot be converted to Scalar");
        return NULL;
    }
    double v = txc_tensor_item(self->t);
    txc_dtype dt = txc_tensor_dtype(self->t);
    if (dt == TXC_BOOL)
        return PyBool_FromLong(v != 0);
    if (dt == TXC_I32 || dt == TXC_I64)
        return PyLong_FromLongLong((long long)v);
    return PyFloat_FromDouble(v);
}

static PyObject *array_copy_(TxcArrayObject *self, PyObject *arg)
{
    if (!PyObject_TypeCheck(arg, &TxcArray_Type)) {
        PyErr_SetString(PyExc_TypeError, "copy_: a txc Array");
        return NULL;
    }
    if (txcpy_copy_strided(self->t, ((TxcArrayObject *)arg)->t) != 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *array_repr(TxcArrayObject *self)
{
    PyObject *sh = array_shape(self, NULL);
    PyObject *r = PyUnicode_FromFormat("txc.Array(shape=%R, dtype=%s)", sh, txc_dtype_name(txc_tensor_dtype(self->t)));
    Py_XDECREF(sh);
    return r;
}

static PyGetSetDef array_getset[] = {
    {"shape", (getter)array_shape, NULL, "shape (tuple of ints)", NULL},
    {"strides", (getter)array_strides, NULL, "strides in elements", NULL},
    {"dtype", (getter)array_dtype, NULL, "torch's dtype name", NULL},
    {"ndim", (getter)array_ndim, NULL, NULL, NULL},
    {"offset", (getter)array_offset, NULL, "offset in elements into the array", NULL},
    {"data_ptr", (getter)array_data_ptr, NULL, "address of element [0,...,0]", NULL},
    {"base_id", (getter)array_base_id, NULL, "identity of the backing txc_array", NULL},
    {"is_traced", (getter)array_traced, NULL, NULL, NULL},
    {"is_contiguous", (getter)array_contig, NULL, NULL, NULL},
    {"env", (getter)array_env, NULL, NULL, NULL},
    {NULL},
};

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS, "DLPack capsule"},
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS, "(kDLCPU, 0)"},
    {"item", (PyCFunction)array_item, METH_NOARGS, NULL},
    {"copy_", (PyCFunction)array_copy_, METH_O, "write another array into this one's elements"},
    {NULL},
};

PyTypeObject TxcArray_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "txc._C.Array",
    .tp_basicsize = sizeof(TxcArrayObject),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_repr = (reprfunc)array_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A txc array (a txc_tensor: array + torch view metadata)",
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};

/* ---- Env type ------------------------------------------------------------ */

PyObject *txcpy_env_object(txc_env *env)
{
    TxcEnvObject *o = PyObject_New(TxcEnvObject, &TxcEnv_Type);
    if (!o)
        return NULL;
    o->env = env;
    o->owned = 0;
    return (PyObject *)o;
}

static void env_dealloc(TxcEnvObject *self)
{
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *env_enter(TxcEnvObject *self, PyObject *noargs)
{
    if (txc_env_enter(self->env) != TXC_OK)
        return txcpy_raise("txc_env_enter failed");
    Py_RETURN_NONE;
}

static PyObject *env_exit(TxcEnvObject *self, PyObject *noargs)
{
    if (txc_env_exit(self->env) != TXC_OK)
        return txcpy_raise("txc_env_exit failed");
    Py_RETURN_NONE;
}

static PyObject *env_is_active(TxcEnvObject *self, PyObject *noargs)
{
    return PyBool_FromLong(txc_env_active() == self->env);
}

static PyObject *env_name(TxcEnvObject *s, void *c) { return PyUnicode_FromString(txc_env_name(s->env)); }
static PyObject *env_op_count(TxcEnvObject *s, void *c) { return PyLong_FromUnsignedLongLong(txc_env_op_count(s->env)); }
static PyObject *env_id(TxcEnvObject *s, void *c) { return PyLong_FromVoidPtr(s->env); }

static PyGetSetDef env_getset[] = {
    {"name", (getter)env_name, NULL, NULL, NULL},
    {"op_count", (getter)env_op_count, NULL, "ops dispatched since creation", NULL},
    {"id", (getter)env_id, NULL, NULL, NULL},
    {NULL},
};

static PyMethodDef env_methods[] = {
    {"enter", (PyCFunction)env_enter, METH_NOARGS, "txc_env_enter"},
    {"exit", (PyCFunction)env_exit, METH_NOARGS, "txc_env_exit"},
    {"is_active", (PyCFunction)env_is_active, METH_NOARGS, NULL},
    {NULL},
};

PyTypeObject TxcEnv_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "txc._C.Env",
    .tp_basicsize = sizeof(TxcEnvObject),
    .tp_dealloc = (destructor)env_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A txc environment (txc_env)",
    .tp_methods = env_methods,
    .tp_getset = env_getset,
};

/* ---- module functions ---------------------------------------------------- */

static PyObject *mod_default_env(PyObject *m, PyObject *noargs)
{
    txc_env *e = txc_env_default();
    if (!e)
        return txcpy_raise("txc_env_default failed");
    return txcpy_env_object(e);
}

static PyObject *mod_full(PyObject *m, PyObject *args)
{
    PyObject *envo, *shapeo, *dto;
    double v;
    if (!PyArg_ParseTuple(args, "O!OdO", &TxcEnv_Type, &envo, &shapeo, &v, &dto))
        return NULL;
    int nd;
    int64_t shape[TXC_MAX_DIMS];
    txc_dtype dt;
    if (txcpy_shape(shapeo, &nd, shape) || txcpy_dtype(dto, &dt))
        return NULL;
    txc_env *env = ((TxcEnvObject *)envo)->env;
    txc_clear_error();
    int mark = txc_env_scope_begin(env);
    txc_tensor *t = txc_tensor_retain(txc_full(env, nd, shape, v, dt));
    txc_env_scope_end(env, mark);
    return txcpy_wrap(t);
}

static PyObject *mod_arange(PyObject *m, PyObject *args)
{
    PyObject *envo, *dto;
    double a, b, s;
    if (!PyArg_ParseTuple(args, "O!dddO", &TxcEnv_Type, &envo, &a, &b, &s, &dto))
        return NULL;
    txc_dtype dt;
    if (txcpy_dtype(dto, &dt))
        return NULL;
    txc_env *env = ((TxcEnvObject *)envo)->env;
    txc_clear_error();
    int mark = txc_env_scope_begin(env);
    txc_tensor *t = txc_tensor_retain(txc_arange(env, a, b, s, dt));
    txc_env_scope_end(env, mark);
    return txcpy_wrap(t);
}

static PyMethodDef module_methods[] = {
    {"default_env", mod_default_env, METH_NOARGS, "the process's default txc environment"},
    {"full", mod_full, METH_VARARGS, "full(env, shape, value, dtype)"},
    {"arange", mod_arange, METH_VARARGS, "arange(env, start, end, step, dtype)"},
    {"from_dlpack", mod_from_dlpack, METH_VARARGS, "from_dlpack(obj_or_capsule, env, copy=False)"},
    {"call", txcpy_call, METH_VARARGS, "call(name, *args): a frontend of txc/ops.h by name"},
    {"op_names", txcpy_op_names, METH_NOARGS, "names call() accepts, with their signatures"},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "txc._C", "txc's C extension: arrays, envs, the op frontends, the jit", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__C(void)
{
    if (PyType_Ready(&TxcArray_Type) < 0 || PyType_Ready(&TxcEnv_Type) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    TxcError = PyErr_NewException("txc._C.TxcError", PyExc_RuntimeError, NULL);
    Py_INCREF(TxcError);
    PyModule_AddObject(m, "TxcError", TxcError);
    Py_INCREF(&TxcArray_Type);
    PyModule_AddObject(m, "Array", (PyObject *)&TxcArray_Type);
    Py_INCREF(&TxcEnv_Type);
    PyModule_AddObject(m, "Env", (PyObject *)&TxcEnv_Type);
    if (txcpy_jit_init(m) != 0)
        return NULL;
    return m;
}
