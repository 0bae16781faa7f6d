/*
 * Idle time of a device's gaps attributed to the host calls around them, in one sweep.
 *
 * The numpy path (analyzers/timeline.py: _HostSlicer.coverage + attribute) builds, per
 * slice of gaps and per cause, the union of that cause's calls and a cumulative-measure
 * table, then binary-searches both ends of every gap in it: about twenty passes over
 * arrays of millions. Gaps are disjoint and in order, and so are the merged calls of one
 * cause, so the measure of their intersection is a merge of two sorted lists. This does
 * that merge for the four causes and applies the same priority rule: each cause takes
 * min(its overlap with the gap, what the causes before it left). Same numbers, tested
 * against the numpy path, which stays the fallback when this is not built.
 *
 * The same pass can also measure each gap's time inside any call at all (every code, cause or
 * none: the union of the process's calls), over its own gap ends (the whole gaps, where the
 * causes read only each gap's host part): what the idle-by-host pass (host_activity.py)
 * needs, so it does not sweep the calls a second time.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define CAUSES 4 /* sync, memcpy_sync, launch, other_cuda; then host and unknown */

static inline int64_t code_at(const char *codes, int width, Py_ssize_t k) {
    switch (width) {
    case 1: return ((const int8_t *)codes)[k];
    case 2: return ((const int16_t *)codes)[k];
    case 4: return ((const int32_t *)codes)[k];
    default: return ((const int64_t *)codes)[k];
    }
}

/* Adds the measure of [s, e) ∩ each gap to ov, from gap *g on; gaps ending at or before s
 * are skipped for good (later merged intervals start later still). */
static inline void add_overlap(int64_t s, int64_t e, const int64_t *gs, const int64_t *ge, Py_ssize_t n, Py_ssize_t *g,
                               int64_t *ov) {
    while (*g < n && ge[*g] <= s) (*g)++;
    for (Py_ssize_t h = *g; h < n && gs[h] < e; h++) {
        int64_t a = gs[h] > s ? gs[h] : s, b = ge[h] < e ? ge[h] : e;
        if (b > a) ov[h] += b - a;
    }
}

/* attribute(gap_s, gap_e, call_s, call_e, codes, cause_of, i, j, out[, whole_e, in_calls]) -> 0,
 * or -1 when the calls [i, j) are not in start order or the gaps not disjoint in order (the
 * caller then takes the numpy path). out: int64[6 * n], cause after cause (host, then
 * unknown = 0). With whole_e (int64[n], each at or after its gap_e) and in_calls (int64[n]):
 * in_calls[h] = the measure of [gap_s[h], whole_e[h]) inside the union of the calls [i, j). */
static PyObject *attribute(PyObject *self, PyObject *args) {
    Py_buffer gsb, geb, csb, ceb, codeb, causeb, outb, web = {0}, anyb = {0};
    Py_ssize_t i, j;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*nnw*|y*w*", &gsb, &geb, &csb, &ceb, &codeb, &causeb, &i, &j, &outb, &web,
                          &anyb))
        return NULL;
    int status = 0;
    Py_ssize_t n = gsb.len / 8, m = csb.len / 8;
    int width = m ? (int)(codeb.len / m) : 1;
    Py_ssize_t ncause = causeb.len; /* one int8 per category, the last for code -1 */
    int whole = web.obj != NULL;
    if (geb.len != gsb.len || ceb.len != csb.len || (m && codeb.len != (Py_ssize_t)width * m) ||
        !(width == 1 || width == 2 || width == 4 || width == 8) || ncause < 1 || outb.len != 6 * 8 * n || i < 0 ||
        j > m || i > j || (whole != (anyb.obj != NULL)) || (whole && (web.len != gsb.len || anyb.len != gsb.len))) {
        status = -1;
        goto done;
    }
    const int64_t *gs = gsb.buf, *ge = geb.buf, *cs = csb.buf, *ce = ceb.buf;
    const int8_t *cause_of = causeb.buf;
    const char *codes = codeb.buf;
    int64_t *out = outb.buf;
    const int64_t *we = whole ? web.buf : NULL;
    int64_t *in_calls = whole ? anyb.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t h = 0; h < n && status == 0; h++)
        if (ge[h] < gs[h] || (h && gs[h] < ge[h - 1])) status = -1;
    for (Py_ssize_t h = 0; whole && h < n && status == 0; h++)
        if (we[h] < ge[h] || (h + 1 < n && gs[h + 1] < we[h])) status = -1;
    for (Py_ssize_t k = i + 1; k < j && status == 0; k++)
        if (cs[k] < cs[k - 1]) status = -1;
    if (status == 0) {
        memset(out, 0, 6 * 8 * (size_t)n);
        /* One pass over the calls for the four causes: each cause merges its own calls (a running
         * interval and a gap cursor per cause), as four passes would, reading each call once. */
        Py_ssize_t g[CAUSES] = {0}, g_any = 0;
        int have[CAUSES] = {0}, have_any = 0;
        int64_t run_s[CAUSES] = {0}, run_e[CAUSES] = {0}, any_s = 0, any_e = 0;
        if (whole) memset(in_calls, 0, 8 * (size_t)n);
        for (Py_ssize_t k = i; k < j; k++) {
            if (whole) { /* every call, whatever its cause: the union of them all */
                int64_t s = cs[k], e = ce[k] > s ? ce[k] : s;
                if (have_any && s <= any_e) {
                    if (e > any_e) any_e = e;
                } else {
                    if (have_any) add_overlap(any_s, any_e, gs, we, n, &g_any, in_calls);
                    any_s = s, any_e = e, have_any = 1;
                }
            }
            int64_t code = code_at(codes, width, k);
            Py_ssize_t slot = (code < 0 || code >= ncause - 1) ? ncause - 1 : (Py_ssize_t)code;
            int c = cause_of[slot];
            if (c < 0 || c >= CAUSES) continue;
            int64_t s = cs[k], e = ce[k] > s ? ce[k] : s; /* an end before its start: empty */
            if (have[c] && s <= run_e[c]) { /* overlapping or touching calls merge */
                if (e > run_e[c]) run_e[c] = e;
                continue;
            }
            if (have[c]) add_overlap(run_s[c], run_e[c], gs, ge, n, &g[c], out + (Py_ssize_t)c * n);
            run_s[c] = s, run_e[c] = e, have[c] = 1;
        }
        for (int c = 0; c < CAUSES; c++)
            if (have[c]) add_overlap(run_s[c], run_e[c], gs, ge, n, &g[c], out + (Py_ssize_t)c * n);
        if (have_any) add_overlap(any_s, any_e, gs, we, n, &g_any, in_calls);
        int64_t *host = out + 4 * n;
        for (Py_ssize_t h = 0; h < n; h++) { /* each cause takes what the ones before it left */
            int64_t remaining = ge[h] - gs[h];
            for (int c = 0; c < CAUSES; c++) {
                int64_t *v = out + (Py_ssize_t)c * n + h;
                if (*v > remaining) *v = remaining;
                remaining -= *v;
            }
            host[h] = remaining;
        }
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&gsb);
    PyBuffer_Release(&geb);
    PyBuffer_Release(&csb);
    PyBuffer_Release(&ceb);
    PyBuffer_Release(&codeb);
    PyBuffer_Release(&causeb);
    PyBuffer_Release(&outb);
    if (web.obj) PyBuffer_Release(&web);
    if (anyb.obj) PyBuffer_Release(&anyb);
    return PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"attribute", attribute, METH_VARARGS, "Idle ns per cause of sorted disjoint gaps, from start-ordered host calls."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_sweep", .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__sweep(void) { return PyModule_Create(&module); }
