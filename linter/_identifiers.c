/* The distinct identifiers of an ASCII text, in C, for the linter's pre-filter.
 *
 * identifiers(text) answers linter.prefilter.words.identifier_set's question for a str whose
 * characters are all ASCII: the frozenset of what [^\W\d]\w* finds, that is every maximal run
 * of letters, digits and underscores less its leading digits, where anything is left. Each
 * distinct identifier becomes one Python string: the runs are told apart in a hash table of
 * offsets into the text, so the millions of repeated names of a large tree cost no objects.
 * Any other text gives None, and the pure-Python reading (which also knows other scripts)
 * answers; so does a build without a C compiler.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t start; /* -1: empty slot */
    Py_ssize_t length;
    uint64_t hash;
} Slot;

/* Per byte: 0 not a word character, 1 a letter or underscore, 2 a digit (filled at import). */
static unsigned char WORD[256];

/* Insert text[start:start+length] unless present (1 when inserted). The table is never more
 * than half full, so the probe ends. */
static int
insert(Slot *slots, size_t mask, const unsigned char *text, Py_ssize_t start, Py_ssize_t length, uint64_t hash)
{
    size_t i = (size_t)hash & mask;
    while (slots[i].start >= 0) {
        if (slots[i].hash == hash && slots[i].length == length
            && memcmp(text + slots[i].start, text + start, (size_t)length) == 0)
            return 0;
        i = (i + 1) & mask;
    }
    slots[i].start = start;
    slots[i].length = length;
    slots[i].hash = hash;
    return 1;
}

/* The table at twice its capacity, or NULL (the old one is then still the caller's). */
static Slot *
grown(Slot *slots, size_t capacity, size_t new_capacity, const unsigned char *text)
{
    Slot *bigger = PyMem_Malloc(new_capacity * sizeof(Slot));
    if (bigger == NULL)
        return NULL;
    for (size_t i = 0; i < new_capacity; i++)
        bigger[i].start = -1;
    for (size_t i = 0; i < capacity; i++)
        if (slots[i].start >= 0)
            insert(bigger, new_capacity - 1, text, slots[i].start, slots[i].length, slots[i].hash);
    PyMem_Free(slots);
    return bigger;
}

static PyObject *
identifiers(PyObject *module, PyObject *text)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "identifiers(text) takes a str");
        return NULL;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)
        return NULL;
#endif
    if (!PyUnicode_IS_ASCII(text))
        Py_RETURN_NONE;
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    PyObject *found = NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    size_t capacity = 1024, used = 0;
    Slot *slots = PyMem_Malloc(capacity * sizeof(Slot));
    if (slots == NULL)
        return PyErr_NoMemory();
    for (size_t i = 0; i < capacity; i++)
        slots[i].start = -1;
    Py_ssize_t at = 0;
    while (at < n) {
        while (at < n && !WORD[s[at]])
            at++;
        while (at < n && WORD[s[at]] == 2)
            at++; /* an identifier starts at its first non-digit */
        if (at >= n || !WORD[s[at]])
            continue;
        Py_ssize_t start = at;
        uint64_t hash = 1469598103934665603ULL; /* FNV-1a */
        while (at < n && WORD[s[at]]) {
            hash = (hash ^ s[at]) * 1099511628211ULL;
            at++;
        }
        used += (size_t)insert(slots, capacity - 1, s, start, at - start, hash);
        if (used * 2 > capacity) {
            Slot *bigger = grown(slots, capacity, capacity * 2, s);
            if (bigger == NULL) {
                PyMem_Free(slots);
                return PyErr_NoMemory();
            }
            slots = bigger;
            capacity *= 2;
        }
    }
    /* A brand-new frozenset may be filled with PySet_Add before anyone sees it. */
    found = PyFrozenSet_New(NULL);
    if (found == NULL)
        goto fail;
    for (size_t i = 0; i < capacity; i++) {
        if (slots[i].start < 0)
            continue;
        PyObject *name = PyUnicode_New(slots[i].length, 127);
        if (name == NULL)
            goto fail;
        memcpy(PyUnicode_1BYTE_DATA(name), s + slots[i].start, (size_t)slots[i].length);
        int added = PySet_Add(found, name);
        Py_DECREF(name);
        if (added < 0)
            goto fail;
    }
    PyMem_Free(slots);
    return found;
fail:
    Py_XDECREF(found);
    PyMem_Free(slots);
    return NULL;
}

static PyMethodDef methods[] = {
    {"identifiers", identifiers, METH_O,
     "identifiers(text) -> frozenset[str] | None: the distinct identifiers of an ASCII str; None for other text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_identifiers",
    "The distinct identifiers of an ASCII text, for linter.prefilter.words.identifier_set.", -1, methods,
};

PyMODINIT_FUNC
PyInit__identifiers(void)
{
    for (int c = 0; c < 256; c++)
        WORD[c] = (c >= '0' && c <= '9') ? 2 : ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_');
    return PyModule_Create(&module);
}
