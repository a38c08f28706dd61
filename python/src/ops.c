/* txc._C.call(name, *args): the op frontends of include/txc/ops.h by name.
 *
 * One table row per frontend: its name, a signature string and the function.
 * The Python side's declarative table (txc/_ops_table.py) maps each aten
 * overload to one of these names and says which aten arguments fill the
 * signature's slots; nothing here knows torch.
 *
 * Signature letters: T tensor (Array), O optional tensor (None), d double,
 * i int64, b bool, S shape (sequence of ints), P permutation (one int per
 * dim of the first tensor), D dims (sequence of ints, may be empty),
 * L list of tensors, y dtype name. */
#include "txc_py.h"

#include <math.h>
#include <string.h>

typedef txc_tensor *(*f_T)(txc_tensor *);
typedef txc_tensor *(*f_TT)(txc_tensor *, txc_tensor *);
typedef txc_tensor *(*f_TTT)(txc_tensor *, txc_tensor *, txc_tensor *);
typedef txc_tensor *(*f_Td)(txc_tensor *, double);
typedef txc_tensor *(*f_Ti)(txc_tensor *, int);
typedef txc_tensor *(*f_Til)(txc_tensor *, int64_t);
typedef txc_tensor *(*f_Tb)(txc_tensor *, bool);
typedef txc_tensor *(*f_TS)(txc_tensor *, int, const int64_t *);
typedef txc_tensor *(*f_TP)(txc_tensor *, const int *);
typedef txc_tensor *(*f_Tii)(txc_tensor *, int, int);
typedef txc_tensor *(*f_Tiil)(txc_tensor *, int, int64_t);
typedef txc_tensor *(*f_Tiii)(txc_tensor *, int, int64_t, int64_t);
typedef txc_tensor *(*f_Tiiii)(txc_tensor *, int, int64_t, int64_t, int64_t);
typedef txc_tensor *(*f_Ty)(txc_tensor *, txc_dtype);
typedef txc_tensor *(*f_Tiy)(txc_tensor *, int, txc_dtype);
typedef txc_tensor *(*f_TTd)(txc_tensor *, txc_tensor *, double);
typedef txc_tensor *(*f_TDb)(txc_tensor *, int, const int *, bool);
typedef txc_tensor *(*f_Tib)(txc_tensor *, int, bool);
typedef txc_tensor *(*f_TTO)(txc_tensor *, txc_tensor *, txc_tensor *);
typedef txc_tensor *(*f_TOd)(txc_tensor *, txc_tensor *, double);
typedef txc_tensor *(*f_TOOd)(txc_tensor *, txc_tensor *, txc_tensor *, double);
typedef txc_tensor *(*f_Li)(txc_tensor *const *, int, int);
typedef txc_tensor *(*f_TiT)(txc_tensor *, int, txc_tensor *);
typedef txc_tensor *(*f_TiTT)(txc_tensor *, int, txc_tensor *, txc_tensor *);
typedef txc_status (*f_TiTT_)(txc_tensor *, int, txc_tensor *, txc_tensor *);
typedef txc_tensor *(*f_TTTObd)(txc_tensor *, txc_tensor *, txc_tensor *, txc_tensor *, bool, double);
typedef txc_tensor *(*f_TTTTd)(txc_tensor *, txc_tensor *, txc_tensor *, txc_tensor *, double);
typedef txc_tensor *(*f_TTTTdid)(txc_tensor *, txc_tensor *, txc_tensor *, txc_tensor *, double, int64_t, double);

typedef struct {
    const char *name;
    const char *sig; /* "!" suffix: in place, returns status; the result is the first argument */
    void (*fn)(void);
} op_row;

#define R(n, s, f) {n, s, (void (*)(void))f}

static const op_row OPS[] = {
    /* views and copies */
    R("view", "TS", txc_view), R("reshape", "TS", txc_reshape), R("permute", "TP", txc_permute),
    R("transpose", "Tii", txc_transpose), R("narrow", "Tiii", txc_narrow), R("slice", "Tiiii", txc_slice),
    R("select", "Til", txc_select), R("expand", "TS", txc_expand), R("unsqueeze", "Ti", txc_unsqueeze),
    R("squeeze", "Ti", txc_squeeze), R("squeeze_all", "T", txc_squeeze_all),
    R("contiguous", "T", txc_contiguous), R("to_dtype", "Ty", txc_to_dtype), R("clone", "T", txc_clone),
    /* binary */
    R("add", "TT", txc_add), R("sub", "TT", txc_sub), R("mul", "TT", txc_mul), R("div", "TT", txc_div),
    R("pow", "TT", txc_pow), R("maximum", "TT", txc_maximum), R("minimum", "TT", txc_minimum),
    R("add_scalar", "Td", txc_add_scalar), R("sub_scalar", "Td", txc_sub_scalar),
    R("mul_scalar", "Td", txc_mul_scalar), R("div_scalar", "Td", txc_div_scalar),
    R("pow_scalar", "Td", txc_pow_scalar), R("rsub_scalar", "Td", txc_rsub_scalar),
    /* unary */
    R("neg", "T", txc_neg), R("abs", "T", txc_abs), R("exp", "T", txc_exp), R("log", "T", txc_log),
    R("sqrt", "T", txc_sqrt), R("rsqrt", "T", txc_rsqrt), R("sin", "T", txc_sin), R("cos", "T", txc_cos),
    R("tanh", "T", txc_tanh), R("sigmoid", "T", txc_sigmoid), R("silu", "T", txc_silu),
    R("gelu", "Tb", txc_gelu), R("relu", "T", txc_relu),
    /* comparisons, logic, selection */
    R("eq", "TT", txc_eq), R("ne", "TT", txc_ne), R("lt", "TT", txc_lt), R("le", "TT", txc_le),
    R("gt", "TT", txc_gt), R("ge", "TT", txc_ge), R("logical_and", "TT", txc_logical_and),
    R("logical_or", "TT", txc_logical_or), R("bitwise_and", "TT", txc_bitwise_and),
    R("bitwise_or", "TT", txc_bitwise_or),
    R("logical_not", "T", txc_logical_not), R("where", "TTT", txc_where),
    R("masked_fill", "TTd", txc_masked_fill),
    /* reductions */
    R("sum", "TDb", txc_sum), R("mean", "TDb", txc_mean), R("max", "Tib", txc_max),
    R("argmax", "Tib", txc_argmax), R("max_all", "T", txc_max_all), R("argmax_all", "T", txc_argmax_all),
    R("cumsum", "Tiy", txc_cumsum), R("softmax", "Ti", txc_softmax), R("log_softmax", "Ti", txc_log_softmax),
    /* linear algebra, nn */
    R("matmul", "TT", txc_matmul), R("linear", "TTO", txc_linear), R("embedding", "TT", txc_embedding),
    R("rms_norm", "TOd", txc_rms_norm), R("layer_norm", "TOOd", txc_layer_norm),
    R("cat", "Li", txc_cat), R("stack", "Li", txc_stack), R("index_select", "TiT", txc_index_select),
    R("index_copy", "TiTT", txc_index_copy), R("index_copy_", "TiTT!", txc_index_copy_),
    R("tril", "Tl", txc_tril), R("triu", "Tl", txc_triu),
    R("scaled_dot_product_attention", "TTTObd", txc_scaled_dot_product_attention),
    R("causal_attention", "TTTTd", txc_causal_attention),
    R("causal_attention_ext", "TTTTdld", txc_causal_attention_ext),
    R("rotary_embedding", "TTT", txc_rotary_embedding),
};

static const op_row *find_op(const char *name)
{
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (strcmp(OPS[i].name, name) == 0)
            return &OPS[i];
    return NULL;
}

PyObject *txcpy_op_names(PyObject *self, PyObject *noargs)
{
    PyObject *d = PyDict_New();
    for (size_t i = 0; d && i < sizeof OPS / sizeof OPS[0]; i++) {
        PyObject *s = PyUnicode_FromString(OPS[i].sig);
        PyDict_SetItemString(d, OPS[i].name, s);
        Py_XDECREF(s);
    }
    return d;
}

#define MAXA 8

typedef struct {
    txc_tensor *t[MAXA];
    double d[MAXA];
    int64_t i[MAXA];
    bool b[MAXA];
    int nd[MAXA];
    int64_t shape[MAXA][TXC_MAX_DIMS];
    int dims[MAXA][TXC_MAX_DIMS];
    txc_dtype y[MAXA];
    txc_tensor *list[64];
    int nlist;
} argv_t;

static int parse_tensor(PyObject *o, txc_tensor **out, int optional, const char *op, int k)
{
    if (optional && o == Py_None) {
        *out = NULL;
        return 0;
    }
    if (!PyObject_TypeCheck(o, &TxcArray_Type)) {
        PyErr_Format(PyExc_TypeError, "txc op %s: argument %d must be a txc Array, not %s", op, k,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = ((TxcArrayObject *)o)->t;
    return 0;
}

PyObject *txcpy_call(PyObject *self, PyObject *args)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (n < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(args, 0))) {
        PyErr_SetString(PyExc_TypeError, "call(name, *args)");
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(args, 0));
    const op_row *op = find_op(name);
    if (!op) {
        PyErr_Format(PyExc_KeyError, "txc has no op frontend '%s'", name);
        return NULL;
    }
    size_t ns = strcspn(op->sig, "!");
    if ((size_t)(n - 1) != ns) {
        PyErr_Format(PyExc_TypeError, "txc op %s takes %zu arguments (%s), got %zd", name, ns, op->sig, n - 1);
        return NULL;
    }
    argv_t a;
    memset(&a, 0, sizeof a);
    for (size_t k = 0; k < ns; k++) {
        PyObject *o = PyTuple_GET_ITEM(args, (Py_ssize_t)k + 1);
        switch (op->sig[k]) {
        case 'T':
        case 'O':
            if (parse_tensor(o, &a.t[k], op->sig[k] == 'O', name, (int)k))
                return NULL;
            break;
        case 'd':
            a.d[k] = PyFloat_AsDouble(o);
            if (a.d[k] == -1.0 && PyErr_Occurred())
                return NULL;
            break;
        case 'i':
        case 'l':
            a.i[k] = PyLong_AsLongLong(o);
            if (a.i[k] == -1 && PyErr_Occurred())
                return NULL;
            break;
        case 'b':
            a.b[k] = PyObject_IsTrue(o) == 1;
            break;
        case 'S':
            if (txcpy_shape(o, &a.nd[k], a.shape[k]))
                return NULL;
            break;
        case 'P':
        case 'D': {
            int64_t v[TXC_MAX_DIMS];
            if (txcpy_shape(o, &a.nd[k], v))
                return NULL;
            for (int j = 0; j < a.nd[k]; j++)
                a.dims[k][j] = (int)v[j];
            if (op->sig[k] == 'P' && a.t[0] && a.nd[k] != txc_tensor_ndim(a.t[0])) {
                PyErr_Format(PyExc_ValueError, "txc op %s: %d dims for a %d-d tensor", name, a.nd[k],
                             txc_tensor_ndim(a.t[0]));
                return NULL;
            }
            break;
        }
        case 'L': {
            PyObject *seq = PySequence_Fast(o, "a list of txc Arrays");
            if (!seq)
                return NULL;
            Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
            if (m > 64) {
                Py_DECREF(seq);
                PyErr_SetString(PyExc_ValueError, "at most 64 tensors");
                return NULL;
            }
            for (Py_ssize_t j = 0; j < m; j++)
                if (parse_tensor(PySequence_Fast_GET_ITEM(seq, j), &a.list[j], 0, name, (int)k)) {
                    Py_DECREF(seq);
                    return NULL;
                }
            a.nlist = (int)m;
            Py_DECREF(seq); /* the Arrays stay referenced by the caller's list */
            break;
        }
        case 'y':
            if (txcpy_dtype(o, &a.y[k]))
                return NULL;
            break;
        default:
            PyErr_SetString(PyExc_SystemError, "bad op signature");
            return NULL;
        }
    }
    /* the env the op runs in: the first tensor's (the dispatcher checks it is active) */
    txc_env *env = txc_env_active();
    txc_clear_error();
    int mark = txc_env_scope_begin(env);
    txc_tensor *r = NULL;
    const char *s = op->sig;
    void (*fn)(void) = op->fn;
    txc_tensor **t = a.t;
    if (!strcmp(s, "T")) r = ((f_T)fn)(t[0]);
    else if (!strcmp(s, "TT")) r = ((f_TT)fn)(t[0], t[1]);
    else if (!strcmp(s, "TTT")) r = ((f_TTT)fn)(t[0], t[1], t[2]);
    else if (!strcmp(s, "Td")) r = ((f_Td)fn)(t[0], a.d[1]);
    else if (!strcmp(s, "Ti")) r = ((f_Ti)fn)(t[0], (int)a.i[1]);
    else if (!strcmp(s, "Tl")) r = ((f_Til)fn)(t[0], a.i[1]);
    else if (!strcmp(s, "Tb")) r = ((f_Tb)fn)(t[0], a.b[1]);
    else if (!strcmp(s, "TS")) r = ((f_TS)fn)(t[0], a.nd[1], a.shape[1]);
    else if (!strcmp(s, "TP")) r = ((f_TP)fn)(t[0], a.dims[1]);
    else if (!strcmp(s, "Tii")) r = ((f_Tii)fn)(t[0], (int)a.i[1], (int)a.i[2]);
    else if (!strcmp(s, "Til")) r = ((f_Tiil)fn)(t[0], (int)a.i[1], a.i[2]);
    else if (!strcmp(s, "Tiii")) r = ((f_Tiii)fn)(t[0], (int)a.i[1], a.i[2], a.i[3]);
    else if (!strcmp(s, "Tiiii")) r = ((f_Tiiii)fn)(t[0], (int)a.i[1], a.i[2], a.i[3], a.i[4]);
    else if (!strcmp(s, "Ty")) r = ((f_Ty)fn)(t[0], a.y[1]);
    else if (!strcmp(s, "Tiy")) r = ((f_Tiy)fn)(t[0], (int)a.i[1], a.y[2]);
    else if (!strcmp(s, "TTd")) r = ((f_TTd)fn)(t[0], t[1], a.d[2]);
    else if (!strcmp(s, "TDb")) r = ((f_TDb)fn)(t[0], a.nd[1], a.dims[1], a.b[2]);
    else if (!strcmp(s, "Tib")) r = ((f_Tib)fn)(t[0], (int)a.i[1], a.b[2]);
    else if (!strcmp(s, "TTO")) r = ((f_TTO)fn)(t[0], t[1], t[2]);
    else if (!strcmp(s, "TOd")) r = ((f_TOd)fn)(t[0], t[1], a.d[2]);
    else if (!strcmp(s, "TOOd")) r = ((f_TOOd)fn)(t[0], t[1], t[2], a.d[3]);
    else if (!strcmp(s, "Li")) r = ((f_Li)fn)(a.list, a.nlist, (int)a.i[1]);
    else if (!strcmp(s, "TiT")) r = ((f_TiT)fn)(t[0], (int)a.i[1], t[2]);
    else if (!strcmp(s, "TiTT")) r = ((f_TiTT)fn)(t[0], (int)a.i[1], t[2], t[3]);
    else if (!strcmp(s, "TiTT!")) r = ((f_TiTT_)fn)(t[0], (int)a.i[1], t[2], t[3]) == TXC_OK ? t[0] : NULL;
    else if (!strcmp(s, "TTTObd")) r = ((f_TTTObd)fn)(t[0], t[1], t[2], t[3], a.b[4], a.d[5]);
    else if (!strcmp(s, "TTTTd")) r = ((f_TTTTd)fn)(t[0], t[1], t[2], t[3], a.d[4]);
    else if (!strcmp(s, "TTTTdld")) r = ((f_TTTTdid)fn)(t[0], t[1], t[2], t[3], a.d[4], a.i[5], a.d[6]);
    else {
        txc_env_scope_end(env, mark);
        PyErr_Format(PyExc_SystemError, "txc op %s: signature %s not callable", name, s);
        return NULL;
    }
    txc_tensor_retain(r); /* ours: the scope drops its reference below */
    txc_env_scope_end(env, mark);
    return txcpy_wrap(r);
}
