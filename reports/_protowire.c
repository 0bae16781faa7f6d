/*
 * Rows of byte fields joined into one byte string: the last step of reports/protowire.py.
 *
 * Each column is a (rows, width) uint8 matrix, left-aligned, with each row's length in an
 * int64 array; a row of the output is its columns' first `length` bytes, in column order.
 * numpy does this with a mask over the padded matrices (two passes over every padded byte
 * and a boolean compaction); here it is one memcpy per field. Optional like the other C
 * parts: protowire.join falls back to numpy, with the same bytes (tested).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* join(n, columns) -> bytes; columns: a sequence of (matrix, row_stride, lengths), the matrix
 * a contiguous buffer whose row r starts at r * row_stride (0: one row for all), lengths n int64. */
static PyObject *join(PyObject *self, PyObject *args) {
    Py_ssize_t n;
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "nO", &n, &seq)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "columns must be a sequence");
    if (!fast) return NULL;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    Py_buffer *mats = PyMem_Calloc(k ? k : 1, sizeof(Py_buffer));
    Py_buffer *lens = PyMem_Calloc(k ? k : 1, sizeof(Py_buffer));
    Py_ssize_t *strides = PyMem_Calloc(k ? k : 1, sizeof(Py_ssize_t));
    PyObject *out = NULL;
    Py_ssize_t got = 0;
    if (!mats || !lens || !strides) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < k; got++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, got);
        PyObject *m, *l;
        Py_ssize_t stride;
        if (!PyArg_ParseTuple(item, "OnO", &m, &stride, &l)) goto done;
        if (PyObject_GetBuffer(m, &mats[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (PyObject_GetBuffer(l, &lens[got], PyBUF_C_CONTIGUOUS) < 0) {
            PyBuffer_Release(&mats[got]);
            goto done;
        }
        strides[got] = stride;
        if (lens[got].len != n * (Py_ssize_t)sizeof(int64_t) || stride < 0) {
            PyErr_SetString(PyExc_ValueError, "a column's lengths do not match the rows");
            got++;
            goto done;
        }
    }
    /* bounds: every field lies inside its matrix */
    int64_t total = 0;
    for (Py_ssize_t c = 0; c < k; c++) {
        const int64_t *ln = lens[c].buf;
        Py_ssize_t width = strides[c] ? strides[c] : mats[c].len;
        for (Py_ssize_t r = 0; r < n; r++) {
            int64_t off = (int64_t)r * strides[c];
            if (ln[r] < 0 || ln[r] > width || off + ln[r] > mats[c].len) {
                PyErr_SetString(PyExc_ValueError, "a field runs past its column");
                goto done;
            }
            total += ln[r];
        }
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (!out) goto done;
    char *dst = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        for (Py_ssize_t c = 0; c < k; c++) {
            int64_t ln = ((const int64_t *)lens[c].buf)[r];
            const char *src = (const char *)mats[c].buf + (Py_ssize_t)r * strides[c];
            if (ln <= 16) { /* most fields are a tag and a varint: a call to memcpy costs more */
                for (int64_t b = 0; b < ln; b++) dst[b] = src[b];
            } else {
                memcpy(dst, src, (size_t)ln);
            }
            dst += ln;
        }
    }
    Py_END_ALLOW_THREADS
done:
    for (Py_ssize_t c = 0; c < got; c++) {
        if (mats[c].obj) PyBuffer_Release(&mats[c]);
        if (lens[c].obj) PyBuffer_Release(&lens[c]);
    }
    PyMem_Free(mats);
    PyMem_Free(lens);
    PyMem_Free(strides);
    Py_DECREF(fast);
    if (PyErr_Occurred()) {
        Py_XDECREF(out);
        return NULL;
    }
    return out;
}

static PyMethodDef methods[] = {
    {"join", join, METH_VARARGS, "join(n, columns) -> bytes: each row's fields, in column order"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_protowire",
    .m_doc = "Rows of byte fields joined into one byte string (reports/protowire.py).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__protowire(void) { return PyModule_Create(&module); }
