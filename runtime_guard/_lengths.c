/* The guard's per-entry check of host cumulative-length lists, in C.
 *
 * cumulative(lengths, total) answers runtime_guard.fast_paths.cumulative_py's question: is
 * lengths a list of exact ints, from >= 0, never decreasing, ending (non-zero) at total? Each
 * entry's type is read from its header, so no entry's own code ever runs: a tensor entry is
 * never compared, let alone read back from its device. In Python that type check costs as much
 * as the comparison it guards; here a 64-entry list takes well under a microsecond.
 * False means "not sure" (the general validator then judges and words the call); it never
 * raises for bad input.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A length is a small int: its value is read from the int's header, a few times faster than
 * PyLong_AsLongLongAndOverflow, which is what a long list spends its time on. */
#if PY_VERSION_HEX >= 0x030C0000
#define IS_COMPACT(item) PyUnstable_Long_IsCompact((PyLongObject *)(item))
#define COMPACT_VALUE(item) ((long long)PyUnstable_Long_CompactValue((PyLongObject *)(item)))
#else
#define IS_COMPACT(item) (Py_SIZE(item) >= -1 && Py_SIZE(item) <= 1)
#define COMPACT_VALUE(item) ((long long)Py_SIZE(item) * (long long)((PyLongObject *)(item))->ob_digit[0])
#endif

static PyObject *
cumulative(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "cumulative(lengths, total) takes exactly 2 arguments");
        return NULL;
    }
    PyObject *lengths = args[0], *total = args[1];
    if (!PyList_CheckExact(lengths) || !PyLong_CheckExact(total) || PyList_GET_SIZE(lengths) == 0)
        Py_RETURN_FALSE;
    /* Only exact ints are ever compared below, so nothing calls back into Python: no entry's
     * code runs and the list cannot change while it is read. */
    Py_ssize_t n = PyList_GET_SIZE(lengths);
    PyObject *previous = NULL;
    long long previous_value = 0, value;
    int overflow = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(lengths, i);
        if (!PyLong_CheckExact(item))
            Py_RETURN_FALSE;
        if (!overflow && IS_COMPACT(item)) {
            value = COMPACT_VALUE(item);
            if (value < previous_value)
                Py_RETURN_FALSE;
            previous_value = value;
            previous = item;
            continue;
        }
        if (!overflow) {
            value = PyLong_AsLongLongAndOverflow(item, &overflow);
            if (!overflow) {
                if (value < previous_value)
                    Py_RETURN_FALSE;
                previous_value = value;
                previous = item;
                continue;
            }
        }
        /* Past 64 bits: compare as Python ints from here on, as the pure-Python check does. */
        int decreases = previous ? PyObject_RichCompareBool(item, previous, Py_LT) : overflow < 0;  /* first entry: overflow is -1 below the range, +1 above */
        if (decreases != 0) {
            PyErr_Clear();
            Py_RETURN_FALSE;
        }
        previous = item;
    }
    /* A last entry of 0 is EOD padding, which the general validator judges. */
    if (PyObject_IsTrue(previous) == 1 && PyObject_RichCompareBool(previous, total, Py_EQ) == 1)
        Py_RETURN_TRUE;
    PyErr_Clear();
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"cumulative", (PyCFunction)(void (*)(void))cumulative, METH_FASTCALL,
     "cumulative(lengths, total) -> bool: exact ints, from >= 0, non-decreasing, ending non-zero at total."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "runtime_guard._lengths", NULL, 0, methods};

PyMODINIT_FUNC
PyInit__lengths(void)
{
    return PyModule_Create(&module);
}
