/*
 * Integer columns of a SQLite table read straight from its b-tree pages.
 *
 * The file format (https://www.sqlite.org/fileformat2.html) fixes everything this reads:
 * a table b-tree's interior pages (type 0x05) hold child page numbers, its leaf pages
 * (type 0x0D) hold cells of (payload size, rowid, record), and a record is a header of
 * serial types followed by the values they describe. SQLite's own scan pays for its
 * virtual machine and one call per value; the analysis only needs a few integer columns
 * of two big tables, which this decodes in one pass per page with the GIL released.
 *
 * The bytes are untrusted: every offset is checked against the page before it is read,
 * and anything outside the plain case (a value that is not an integer or NULL, a record
 * that spills onto overflow pages, a page that is not a table leaf) returns a negative
 * status, on which the caller reads the table through SQLite instead. Nothing here
 * allocates more than a lookup table of the requested field numbers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define UNSUPPORTED -1 /* a value SQLite would return as real, text or blob */
#define OVERFLOW -2    /* a record longer than its page holds */
#define MALFORMED -3   /* offsets or types the format does not allow */
#define SHORT -4       /* a record with fewer fields than asked, where the column has a default */
#define CAPACITY -5    /* more cells than the caller counted */

#define LEAF 0x0D
#define INTERIOR 0x05

/* One varint (1-9 bytes, big-endian groups of 7 bits, the ninth byte whole). */
static inline int varint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    const uint8_t *p = *pp;
    uint64_t x = 0;
    for (int i = 0; i < 8; i++) {
        if (p >= end) return 0;
        uint8_t b = *p++;
        x = (x << 7) | (b & 0x7f);
        if (!(b & 0x80)) {
            *v = x;
            *pp = p;
            return 1;
        }
    }
    if (p >= end) return 0;
    x = (x << 8) | *p++;
    *v = x;
    *pp = p;
    return 1;
}

static inline uint32_t be16(const uint8_t *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

/* Bytes a value of this serial type takes in the record body; -1 for the reserved types. */
static inline int64_t serial_size(uint64_t st) {
    static const int8_t small[12] = {0, 1, 2, 3, 4, 6, 8, 8, 0, 0, -1, -1};
    if (st < 12) return small[st];
    return (int64_t)((st - 12) >> 1);
}

/* A big-endian two's-complement integer of 1-8 bytes. */
static inline int64_t be_int(const uint8_t *p, int n) {
    uint64_t x = (p[0] & 0x80) ? ~(uint64_t)0 : 0;
    for (int i = 0; i < n; i++) x = (x << 8) | p[i];
    return (int64_t)x;
}

static int check_geometry(Py_ssize_t len, Py_ssize_t npages, Py_ssize_t page_size, Py_ssize_t usable) {
    return page_size >= 512 && page_size <= 65536 && usable >= 480 && usable <= page_size && npages >= 0 &&
           len >= npages * page_size;
}

/* Cells in a run of leaf pages, each checked to be a table leaf whose cell pointers fit. */
static PyObject *leaf_cells(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t npages, page_size, usable;
    if (!PyArg_ParseTuple(args, "y*nnn", &buf, &npages, &page_size, &usable)) return NULL;
    long long total = 0;
    if (!check_geometry(buf.len, npages, page_size, usable)) {
        total = MALFORMED;
    } else {
        const uint8_t *base = buf.buf;
        for (Py_ssize_t k = 0; k < npages; k++) {
            const uint8_t *page = base + k * page_size;
            uint32_t n = be16(page + 3);
            if (page[0] != LEAF || 8 + 2 * (Py_ssize_t)n > usable) {
                total = MALFORMED;
                break;
            }
            total += n;
        }
    }
    PyBuffer_Release(&buf);
    return PyLong_FromLongLong(total);
}

/* Child page numbers of one interior table page, in key order, the right-most last.
 * Returns (page type, children as bytes of big-endian uint32); children empty for a leaf. */
static PyObject *children(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t usable;
    if (!PyArg_ParseTuple(args, "y*n", &buf, &usable)) return NULL;
    const uint8_t *page = buf.buf;
    PyObject *result = NULL;
    if (buf.len < 12 || usable > buf.len || usable < 12) {
        result = Py_BuildValue("(iy#)", MALFORMED, "", (Py_ssize_t)0);
        goto done;
    }
    int type = page[0];
    if (type != INTERIOR) {
        result = Py_BuildValue("(iy#)", type, "", (Py_ssize_t)0);
        goto done;
    }
    uint32_t n = be16(page + 3);
    if (12 + 2 * (Py_ssize_t)n > usable) {
        result = Py_BuildValue("(iy#)", MALFORMED, "", (Py_ssize_t)0);
        goto done;
    }
    uint8_t *out = malloc(4 * ((size_t)n + 1));
    if (!out) {
        PyErr_NoMemory();
        goto done;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = be16(page + 12 + 2 * i);
        if (at + 4 > (uint32_t)usable) {
            free(out);
            result = Py_BuildValue("(iy#)", MALFORMED, "", (Py_ssize_t)0);
            goto done;
        }
        memcpy(out + 4 * i, page + at, 4);
    }
    memcpy(out + 4 * n, page + 8, 4);
    result = Py_BuildValue("(iy#)", type, (const char *)out, (Py_ssize_t)(4 * ((size_t)n + 1)));
    free(out);
done:
    PyBuffer_Release(&buf);
    return result;
}

typedef struct {
    const int32_t *fields;  /* record field number of each output column */
    const int64_t *nulls;   /* value a NULL takes in each column */
    const uint8_t *missing; /* 1: a record too short to hold the field reads as NULL */
    int64_t *out;           /* ncols columns of `capacity` values, column after column */
    int64_t *rowids;
    Py_ssize_t ncols, capacity;
    int32_t *column_of; /* output column of each field number up to the last asked, or -1 */
    int32_t last_field;
} Job;

/* Bytes of the value of each one-byte serial type (the integer types all are); -1 reserved. */
static int8_t small_size[128];

static void init_sizes(void) {
    for (int st = 0; st < 128; st++) small_size[st] = (int8_t)serial_size((uint64_t)st);
}

static inline int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
    if (*pp < end && **pp < 0x80) { /* the one-byte case: every serial type of a small value */
        *v = *(*pp)++;
        return 1;
    }
    return varint(pp, end, v);
}

static long long decode_page(const uint8_t *page, Py_ssize_t usable, const Job *job, long long row) {
    if (page[0] != LEAF) return MALFORMED;
    uint32_t n = be16(page + 3);
    if (8 + 2 * (Py_ssize_t)n > usable) return MALFORMED;
    const uint8_t *end = page + usable;
    const uint64_t max_local = (uint64_t)usable - 35;
    const Py_ssize_t capacity = job->capacity;
    const int32_t last_field = job->last_field;
    const int32_t *column_of = job->column_of;
    const int64_t *nulls = job->nulls;
    int64_t *const out = job->out;
    int64_t *const rowids = job->rowids;
    for (uint32_t c = 0; c < n; c++, row++) {
        if (row >= capacity) return CAPACITY;
        uint32_t at = be16(page + 8 + 2 * c);
        if (at < 8 || at >= (uint32_t)usable) return MALFORMED;
        const uint8_t *p = page + at;
        uint64_t payload, rowid, header;
        if (!read_varint(&p, end, &payload) || !varint(&p, end, &rowid)) return MALFORMED;
        if (payload > max_local) return OVERFLOW;
        if (payload > (uint64_t)(end - p)) return MALFORMED;
        const uint8_t *rec = p, *rec_end = p + payload;
        const uint8_t *h = rec;
        if (!read_varint(&h, rec_end, &header) || header > payload || header < (uint64_t)(h - rec)) return MALFORMED;
        const uint8_t *h_end = rec + header, *body = h_end;
        rowids[row] = (int64_t)rowid;
        int32_t f = 0;
        for (; f <= last_field && h < h_end; f++) {
            uint64_t st;
            int64_t size;
            if (*h < 0x80) {
                st = *h++;
                size = small_size[st];
            } else {
                if (!varint(&h, h_end, &st)) return MALFORMED;
                size = serial_size(st);
            }
            if (size < 0 || (uint64_t)size > (uint64_t)(rec_end - body)) return MALFORMED;
            int32_t col = column_of[f];
            if (col >= 0) {
                int64_t v;
                switch (st) {
                case 0: v = nulls[col]; break;
                case 1: v = (int8_t)body[0]; break;
                case 2: v = (int16_t)be16(body); break;
                case 3: v = be_int(body, 3); break;
                case 4: v = (int32_t)be32(body); break;
                case 5: v = (int64_t)(((uint64_t)(int64_t)(int16_t)be16(body) << 32) | be32(body + 2)); break;
                case 6: v = (int64_t)(((uint64_t)be32(body) << 32) | be32(body + 4)); break;
                case 8: v = 0; break;
                case 9: v = 1; break;
                default: return UNSUPPORTED;
                }
                out[col * capacity + row] = v;
            }
            body += size;
        }
        if (f <= last_field) { /* a record written before its table grew columns */
            for (Py_ssize_t col = 0; col < job->ncols; col++) {
                if (job->fields[col] >= f) {
                    if (!job->missing[col]) return SHORT;
                    out[col * capacity + row] = nulls[col];
                }
            }
        }
    }
    return row;
}

/* decode(pages, npages, page_size, usable, fields int32, nulls int64, missing uint8,
 *        out int64[ncols * capacity], rowids int64[capacity]) -> rows decoded or a status < 0 */
static PyObject *decode(PyObject *self, PyObject *args) {
    Py_buffer buf, fields, nulls, missing, out, rowids;
    Py_ssize_t npages, page_size, usable;
    if (!PyArg_ParseTuple(args, "y*nnny*y*y*w*w*", &buf, &npages, &page_size, &usable, &fields, &nulls, &missing,
                          &out, &rowids))
        return NULL;
    long long status = 0;
    int out_of_memory = 0;
    Job job = {0};
    job.ncols = fields.len / 4;
    job.capacity = rowids.len / 8;
    job.fields = fields.buf;
    job.nulls = nulls.buf;
    job.missing = missing.buf;
    job.out = out.buf;
    job.rowids = rowids.buf;
    if (!check_geometry(buf.len, npages, page_size, usable) || job.ncols == 0 || nulls.len != job.ncols * 8 ||
        missing.len != job.ncols || out.len != job.ncols * job.capacity * 8) {
        status = MALFORMED;
        goto done;
    }
    job.last_field = -1;
    for (Py_ssize_t c = 0; c < job.ncols; c++) {
        if (job.fields[c] < 0 || job.fields[c] > 32767) {
            status = MALFORMED;
            goto done;
        }
        if (job.fields[c] > job.last_field) job.last_field = job.fields[c];
    }
    job.column_of = malloc(sizeof(int32_t) * ((size_t)job.last_field + 1));
    if (!job.column_of) {
        out_of_memory = 1;
        goto done;
    }
    for (int32_t f = 0; f <= job.last_field; f++) job.column_of[f] = -1;
    for (Py_ssize_t c = 0; c < job.ncols; c++) {
        if (job.column_of[job.fields[c]] >= 0) {
            status = MALFORMED; /* one field asked twice */
            goto done;
        }
        job.column_of[job.fields[c]] = (int32_t)c;
    }
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *base = buf.buf;
    long long row = 0;
    for (Py_ssize_t k = 0; k < npages && row >= 0; k++) row = decode_page(base + k * page_size, usable, &job, row);
    status = row;
    Py_END_ALLOW_THREADS
done:
    free(job.column_of);
    PyBuffer_Release(&buf);
    PyBuffer_Release(&fields);
    PyBuffer_Release(&nulls);
    PyBuffer_Release(&missing);
    PyBuffer_Release(&out);
    PyBuffer_Release(&rowids);
    return out_of_memory ? PyErr_NoMemory() : PyLong_FromLongLong(status);
}

static PyMethodDef methods[] = {
    {"leaf_cells", leaf_cells, METH_VARARGS, "Cells in a run of table leaf pages, or a negative status."},
    {"children", children, METH_VARARGS, "(page type, child page numbers) of one table b-tree page."},
    {"decode", decode, METH_VARARGS, "Integer columns of a run of table leaf pages into int64 buffers."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_btree", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__btree(void) {
    init_sizes();
    return PyModule_Create(&module);
}
