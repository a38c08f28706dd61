/* txc/_C: the CPython extension of the txc package (python/src/). Shared
 * declarations of its files: the Array and Env types, error conversion. */
#ifndef TXC_PY_H
#define TXC_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "txc/array.h"
#include "txc/env.h"
#include "txc/ops.h"
#include "txc/status.h"
#include "txc/tensor.h"

/* txc._C.Array: one reference to a txc_tensor (an array with torch's view
 * metadata: shape, strides, offset), what torchax's Tensor._elem is. */
typedef struct {
    PyObject_HEAD
    txc_tensor *t;
} TxcArrayObject;

/* txc._C.Env: a txc_env (the default env is borrowed, never freed). */
typedef struct {
    PyObject_HEAD
    txc_env *env;
    int owned;
} TxcEnvObject;

extern PyTypeObject TxcArray_Type;
extern PyTypeObject TxcEnv_Type;
extern PyObject *TxcError;

/* A new Array taking over one reference of t (NULL t: raises TxcError with
 * txc_last_error() and returns NULL). */
PyObject *txcpy_wrap(txc_tensor *t);
/* Raise TxcError with txc_last_error() (or `fallback`); returns NULL. */
PyObject *txcpy_raise(const char *fallback);
/* The Env object of a txc_env (a new reference). */
PyObject *txcpy_env_object(txc_env *env);
/* Parse a dtype name ("float32", "bfloat16", ...). -1 + exception. */
int txcpy_dtype(PyObject *o, txc_dtype *out);
/* Parse a sequence of ints (at most TXC_MAX_DIMS). -1 + exception. */
int txcpy_shape(PyObject *o, int *ndim, int64_t *shape);
/* Copy src (broadcast to dst's shape, any strides, dtype converted) into
 * dst's elements (any strides): Tensor.copy_ on concrete CPU tensors. */
int txcpy_copy_strided(txc_tensor *dst, txc_tensor *src);

/* ops.c */
PyObject *txcpy_call(PyObject *self, PyObject *args);
PyObject *txcpy_op_names(PyObject *self, PyObject *noargs);
/* jit.c */
int txcpy_jit_init(PyObject *module);

#endif
