/* The distinct identifiers of a text, in C, for the linter's pre-filter.
 *
 * identifiers(text) answers linter.prefilter.words.identifier_set's question: the frozenset of
 * what [^\W\d]\w* finds in a str, that is every maximal run of word characters (letters,
 * digits and underscores of any script, as re's \w reads them) less its leading decimal
 * digits, where anything is left. Each distinct identifier becomes one Python string: the runs
 * are told apart in a hash table of offsets into the text, so the millions of repeated names
 * of a large tree cost no objects, and a name an earlier text had is that text's string again
 * (see name_of). A build without a C compiler reads the same sets in Python.
 *
 * with_part(names, parts) answers linter.prefilter.file._k_candidates's question: the set of
 * the names that have one of parts as a "_"-separated part (name.split("_")), compared
 * character by character, so no part of a name becomes a string.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_ssize_t start; /* in characters; -1: empty slot */
    Py_ssize_t length;
    uint64_t hash;
} Slot;

typedef struct {
    Slot *slots;
    size_t capacity; /* a power of two, never more than half full: every probe ends */
    size_t used;
    const char *data; /* the text's characters, `width` bytes each */
    int width;
} Table;

/* Per ASCII character: 0 not a word character, 1 a letter or underscore, 2 a digit. */
static unsigned char WORD[128];

static void
place(Slot *slots, size_t mask, const Table *table, Py_ssize_t start, Py_ssize_t length, uint64_t hash, int *inserted)
{
    size_t i = (size_t)hash & mask;
    size_t bytes = (size_t)length * (size_t)table->width;
    while (slots[i].start >= 0) {
        if (slots[i].hash == hash && slots[i].length == length
            && memcmp(table->data + slots[i].start * table->width, table->data + start * table->width, bytes) == 0) {
            *inserted = 0;
            return;
        }
        i = (i + 1) & mask;
    }
    slots[i].start = start;
    slots[i].length = length;
    slots[i].hash = hash;
    *inserted = 1;
}

/* Add text[start:start+length] unless present; -1 when out of memory. */
static int
add(Table *table, Py_ssize_t start, Py_ssize_t length, uint64_t hash)
{
    int inserted;
    place(table->slots, table->capacity - 1, table, start, length, hash, &inserted);
    table->used += (size_t)inserted;
    if (table->used * 2 <= table->capacity)
        return 0;
    size_t capacity = table->capacity * 2;
    Slot *slots = PyMem_Malloc(capacity * sizeof(Slot));
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < capacity; i++)
        slots[i].start = -1;
    for (size_t i = 0; i < table->capacity; i++)
        if (table->slots[i].start >= 0)
            place(slots, capacity - 1, table, table->slots[i].start, table->slots[i].length, table->slots[i].hash, &inserted);
    PyMem_Free(table->slots);
    table->slots = slots;
    table->capacity = capacity;
    return 0;
}

#define FNV_START 1469598103934665603ULL
#define FNV_STEP(hash, c) (((hash) ^ (uint64_t)(c)) * 1099511628211ULL)

/* ASCII text: one byte a character, classified by table. */
static int
scan_ascii(Table *table, const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t at = 0;
    while (at < n) {
        while (at < n && !WORD[s[at]])
            at++;
        while (at < n && WORD[s[at]] == 2)
            at++; /* an identifier starts at its first non-digit */
        if (at >= n || !WORD[s[at]])
            continue;
        Py_ssize_t start = at;
        uint64_t hash = FNV_START;
        while (at < n && WORD[s[at]]) {
            hash = FNV_STEP(hash, s[at]);
            at++;
        }
        if (add(table, start, at - start, hash) < 0)
            return -1;
    }
    return 0;
}

/* The identifier strings made so far, across calls: a tree repeats the same names in file after
 * file, and a string met before costs neither an allocation nor a hash (a str keeps its own);
 * on sglang's 4,719 files this took a sixth off the whole call. Open addressing, never more
 * than half full; emptied when it reaches NAMES_LIMIT entries, so its memory stays bounded. */
typedef struct {
    uint64_t hash;
    PyObject *name; /* NULL: empty */
} Name;

static Name *names = NULL;
static size_t names_capacity = 0, names_used = 0;
#define NAMES_LIMIT (1u << 17)

static void
forget_names(void)
{
    for (size_t i = 0; i < names_capacity; i++)
        Py_XDECREF(names[i].name);
    PyMem_Free(names);
    names = NULL;
    names_capacity = names_used = 0;
}

/* Is name the text's characters [start, start + length)? */
static int
same_name(PyObject *name, const Table *table, Py_ssize_t start, Py_ssize_t length)
{
    if (PyUnicode_GET_LENGTH(name) != length)
        return 0;
    int kind = PyUnicode_KIND(name);
    const void *data = PyUnicode_DATA(name);
    if (kind == table->width)
        return memcmp(data, table->data + start * table->width, (size_t)length * (size_t)kind) == 0;
    for (Py_ssize_t i = 0; i < length; i++)
        if (PyUnicode_READ(kind, data, i) != PyUnicode_READ(table->width, table->data, start + i))
            return 0;
    return 1;
}

/* A new reference to the string of the text's characters [start, start + length). */
static PyObject *
name_of(PyObject *text, const Table *table, Py_ssize_t start, Py_ssize_t length, uint64_t hash)
{
    if (names_used * 2 >= names_capacity) {
        if (names_used >= NAMES_LIMIT)
            forget_names();
        size_t capacity = names_capacity ? names_capacity * 2 : 4096;
        Name *grown = PyMem_Calloc(capacity, sizeof(Name));
        if (grown == NULL)
            return PyUnicode_Substring(text, start, start + length);
        for (size_t i = 0; i < names_capacity; i++) {
            if (names[i].name == NULL)
                continue;
            size_t j = (size_t)names[i].hash & (capacity - 1);
            while (grown[j].name != NULL)
                j = (j + 1) & (capacity - 1);
            grown[j] = names[i];
        }
        PyMem_Free(names);
        names = grown;
        names_capacity = capacity;
    }
    size_t mask = names_capacity - 1, i = (size_t)hash & mask;
    while (names[i].name != NULL) {
        if (names[i].hash == hash && same_name(names[i].name, table, start, length)) {
            Py_INCREF(names[i].name);
            return names[i].name;
        }
        i = (i + 1) & mask;
    }
    PyObject *name = PyUnicode_Substring(text, start, start + length);
    if (name == NULL)
        return NULL;
    Py_INCREF(name);
    names[i].hash = hash;
    names[i].name = name;
    names_used++;
    return name;
}

/* \w and \d of re for str patterns, for any character. */
static int
is_word(Py_UCS4 c)
{
    return c < 128 ? WORD[c] != 0 : Py_UNICODE_ISALNUM(c);
}

static int
is_decimal(Py_UCS4 c)
{
    return c < 128 ? WORD[c] == 2 : Py_UNICODE_ISDECIMAL(c);
}

/* Any other text, character by character, one loop per width: PyUnicode_READ's switch on the
 * width, taken per character, made identifier sets 8% slower over sglang's files (a third of
 * its text is in files with a non-ASCII character). */
#define SCAN_WIDTH(name, Char)                                                     \
    static int name(Table *table, const Char *s, Py_ssize_t n)                     \
    {                                                                              \
        Py_ssize_t at = 0;                                                         \
        while (at < n) {                                                           \
            while (at < n && !is_word(s[at]))                                      \
                at++;                                                              \
            while (at < n && is_decimal(s[at]))                                    \
                at++;                                                              \
            if (at >= n || !is_word(s[at]))                                        \
                continue;                                                          \
            Py_ssize_t start = at;                                                 \
            uint64_t hash = FNV_START;                                             \
            while (at < n && is_word(s[at])) {                                     \
                hash = FNV_STEP(hash, s[at]);                                      \
                at++;                                                              \
            }                                                                      \
            if (add(table, start, at - start, hash) < 0)                           \
                return -1;                                                         \
        }                                                                          \
        return 0;                                                                  \
    }

SCAN_WIDTH(scan_ucs1, Py_UCS1)
SCAN_WIDTH(scan_ucs2, Py_UCS2)
SCAN_WIDTH(scan_ucs4, Py_UCS4)

static int
scan_any(Table *table, int kind, const void *data, Py_ssize_t n)
{
    switch (kind) {
    case PyUnicode_1BYTE_KIND:
        return scan_ucs1(table, data, n);
    case PyUnicode_2BYTE_KIND:
        return scan_ucs2(table, data, n);
    default:
        return scan_ucs4(table, data, n);
    }
}

/* The distinct identifiers of text (a str, else TypeError naming caller) in table; -1 on an error
 * set. The caller frees table->slots. */
static int
scan_text(PyObject *text, Table *table, const char *caller)
{
    if (!PyUnicode_Check(text)) {
        PyErr_Format(PyExc_TypeError, "%s(text) takes a str", caller);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)
        return -1;
#endif
    int kind = PyUnicode_KIND(text);
    *table = (Table){NULL, 1024, 0, (const char *)PyUnicode_DATA(text), kind};
    table->slots = PyMem_Malloc(table->capacity * sizeof(Slot));
    if (table->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < table->capacity; i++)
        table->slots[i].start = -1;
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    int failed = PyUnicode_IS_ASCII(text) ? scan_ascii(table, PyUnicode_1BYTE_DATA(text), n)
                                          : scan_any(table, kind, PyUnicode_DATA(text), n);
    if (failed) {
        PyMem_Free(table->slots);
        table->slots = NULL;
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The distinct identifiers of text, one a line, in one string built from the text's own
 * characters: no string per identifier (making them, and the set, was half the time of
 * identifiers() over sglang's files, and most files are asked only which words their names
 * hold and whether a K name has its V twin). */
static PyObject *
joined(PyObject *module, PyObject *text)
{
    Table table;
    if (scan_text(text, &table, "joined") < 0)
        return NULL;
    int width = table.width;
    size_t length = 0;
    for (size_t i = 0; i < table.capacity; i++)
        if (table.slots[i].start >= 0)
            length += (size_t)table.slots[i].length + 1;
    length -= length > 0; /* no newline after the last */
    char *buffer = PyMem_Malloc((length + 1) * (size_t)width);
    if (buffer == NULL) {
        PyMem_Free(table.slots);
        return PyErr_NoMemory();
    }
    size_t at = 0;
    for (size_t i = 0; i < table.capacity; i++) {
        Slot *slot = &table.slots[i];
        if (slot->start < 0)
            continue;
        if (at) {
            if (width == PyUnicode_1BYTE_KIND)
                ((Py_UCS1 *)buffer)[at] = '\n';
            else if (width == PyUnicode_2BYTE_KIND)
                ((Py_UCS2 *)buffer)[at] = '\n';
            else
                ((Py_UCS4 *)buffer)[at] = '\n';
            at++;
        }
        memcpy(buffer + at * width, table.data + slot->start * width, (size_t)slot->length * width);
        at += (size_t)slot->length;
    }
    PyMem_Free(table.slots);
    /* Narrowed to the characters the names hold (a str's width must be its widest character's). */
    PyObject *found = PyUnicode_FromKindAndData(width, buffer, (Py_ssize_t)length);
    PyMem_Free(buffer);
    return found;
}

static PyObject *
identifiers(PyObject *module, PyObject *text)
{
    Table table;
    if (scan_text(text, &table, "identifiers") < 0)
        return NULL;
    /* A brand-new frozenset may be filled with PySet_Add before anyone sees it. */
    PyObject *found = PyFrozenSet_New(NULL);
    if (found == NULL)
        goto fail;
    for (size_t i = 0; i < table.capacity; i++) {
        Slot *slot = &table.slots[i];
        if (slot->start < 0)
            continue;
        PyObject *name = name_of(text, &table, slot->start, slot->length, slot->hash);
        if (name == NULL)
            goto fail;
        int added = PySet_Add(found, name);
        Py_DECREF(name);
        if (added < 0)
            goto fail;
    }
    PyMem_Free(table.slots);
    return found;
fail:
    Py_XDECREF(found);
    PyMem_Free(table.slots);
    return NULL;
}

/* The whole-word occurrences of word in text, as (start, end) offsets: found by substring search
 * from the end of the one before, kept where no word character (re's \w) stands right before
 * or after it. */
static PyObject *
spans(PyObject *module, PyObject *args)
{
    PyObject *text, *word;
    if (!PyArg_ParseTuple(args, "UU:spans", &text, &word))
        return NULL;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0 || PyUnicode_READY(word) < 0)
        return NULL;
#endif
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), length = PyUnicode_GET_LENGTH(word);
    PyObject *found = PyList_New(0);
    if (found == NULL || length == 0)
        return found;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t at = 0;
    while (at + length <= n) {
        Py_ssize_t hit = PyUnicode_Find(text, word, at, n, 1);
        if (hit == -2)
            goto fail;
        if (hit < 0)
            break;
        Py_ssize_t end = hit + length;
        if ((hit == 0 || !is_word(PyUnicode_READ(kind, data, hit - 1)))
            && (end == n || !is_word(PyUnicode_READ(kind, data, end)))) {
            PyObject *span = Py_BuildValue("(nn)", hit, end);
            if (span == NULL)
                goto fail;
            int appended = PyList_Append(found, span);
            Py_DECREF(span);
            if (appended < 0)
                goto fail;
        }
        at = end;
    }
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}

/* The lines of text (one name a line) whose line in haystack (text itself, or text
 * lower-cased, of the same length) contains part: found by substring search in haystack, each
 * line taken once, from the end of the line before on. */
static PyObject *
lines_with(PyObject *module, PyObject *args)
{
    PyObject *haystack, *text, *part;
    if (!PyArg_ParseTuple(args, "UUU:lines_with", &haystack, &text, &part))
        return NULL;
    Py_ssize_t n = PyUnicode_GET_LENGTH(haystack);
    if (PyUnicode_GET_LENGTH(text) != n) {
        PyErr_SetString(PyExc_ValueError, "lines_with(haystack, text, part): haystack and text differ in length");
        return NULL;
    }
    PyObject *found = PyList_New(0);
    if (found == NULL || PyUnicode_GET_LENGTH(part) == 0)
        return found;
    Py_ssize_t at = 0;
    while (at < n) {
        Py_ssize_t hit = PyUnicode_Find(haystack, part, at, n, 1);
        if (hit == -2)
            goto fail;
        if (hit < 0)
            break;
        Py_ssize_t start = hit > 0 ? PyUnicode_FindChar(haystack, '\n', 0, hit, -1) + 1 : 0;
        Py_ssize_t end = PyUnicode_FindChar(haystack, '\n', hit, n, 1);
        if (start == -1 || end == -2)
            goto fail;
        end = end < 0 ? n : end;
        PyObject *line = PyUnicode_Substring(text, start, end);
        if (line == NULL)
            goto fail;
        int appended = PyList_Append(found, line);
        Py_DECREF(line);
        if (appended < 0)
            goto fail;
        at = end;
    }
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}

/* Is name[start:end] equal to one of parts (a tuple of str)? */
static int
is_part(int kind, const void *data, Py_ssize_t start, Py_ssize_t end, PyObject *parts)
{
    Py_ssize_t count = PyTuple_GET_SIZE(parts);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *part = PyTuple_GET_ITEM(parts, i);
        if (PyUnicode_GET_LENGTH(part) != end - start)
            continue;
        int part_kind = PyUnicode_KIND(part);
        const void *part_data = PyUnicode_DATA(part);
        Py_ssize_t j = 0;
        while (j < end - start && PyUnicode_READ(kind, data, start + j) == PyUnicode_READ(part_kind, part_data, j))
            j++;
        if (j == end - start)
            return 1;
    }
    return 0;
}

/* The parts' lengths and ASCII first characters: most parts are told apart by these alone. */
typedef struct {
    PyObject *parts; /* a tuple of str */
    Py_ssize_t shortest, longest;
    unsigned char starts[128]; /* 0 stands for an empty part; any other first character is compared */
} Parts;

/* Has data[start:end] (one name) one of parts->parts as a "_"-separated part? */
static int
has_part(int kind, const void *data, Py_ssize_t start, Py_ssize_t end, const Parts *parts)
{
    Py_ssize_t from = start;
    for (Py_ssize_t at = start; at <= end; at++) {
        if (at < end && PyUnicode_READ(kind, data, at) != '_')
            continue;
        Py_ssize_t length = at - from;
        Py_UCS4 first = length ? PyUnicode_READ(kind, data, from) : 0;
        if (length >= parts->shortest && length <= parts->longest && (first >= 128 || parts->starts[first])
            && is_part(kind, data, from, at, parts->parts))
            return 1;
        from = at + 1;
    }
    return 0;
}

/* Those of the names in names_str (one a line) with a part, added to found; -1 on an error. */
static int
lines_with_part(PyObject *names_str, const Parts *parts, PyObject *found)
{
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(names_str) < 0)
        return -1;
#endif
    int kind = PyUnicode_KIND(names_str);
    const void *data = PyUnicode_DATA(names_str);
    Py_ssize_t n = PyUnicode_GET_LENGTH(names_str), start = 0;
    for (Py_ssize_t at = 0; at <= n; at++) {
        if (at < n && PyUnicode_READ(kind, data, at) != '\n')
            continue;
        if (has_part(kind, data, start, at, parts)) {
            PyObject *name = PyUnicode_Substring(names_str, start, at);
            int added = name == NULL ? -1 : PySet_Add(found, name);
            Py_XDECREF(name);
            if (added < 0)
                return -1;
        }
        start = at + 1;
    }
    return 0;
}

static PyObject *
with_part(PyObject *module, PyObject *args)
{
    PyObject *names;
    Parts parts = {NULL, PY_SSIZE_T_MAX, -1, {0}};
    if (!PyArg_ParseTuple(args, "OO!:with_part", &names, &PyTuple_Type, &parts.parts))
        return NULL;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(parts.parts); i++) {
        PyObject *part = PyTuple_GET_ITEM(parts.parts, i);
        if (!PyUnicode_Check(part)) {
            PyErr_SetString(PyExc_TypeError, "with_part(names, parts): parts is a tuple of str");
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(part) < 0)
            return NULL;
#endif
        Py_ssize_t length = PyUnicode_GET_LENGTH(part);
        parts.shortest = length < parts.shortest ? length : parts.shortest;
        parts.longest = length > parts.longest ? length : parts.longest;
        Py_UCS4 first = length ? PyUnicode_READ_CHAR(part, 0) : 0;
        if (first < 128)
            parts.starts[first] = 1;
    }
    PyObject *found = PySet_New(NULL);
    if (found == NULL)
        return NULL;
    if (PyUnicode_Check(names)) {
        if (lines_with_part(names, &parts, found) < 0)
            goto fail;
        return found;
    }
    PyObject *iterator = PyObject_GetIter(names);
    if (iterator == NULL)
        goto fail;
    PyObject *name;
    while ((name = PyIter_Next(iterator)) != NULL) {
        int failed = !PyUnicode_Check(name);
        if (failed)
            PyErr_SetString(PyExc_TypeError, "with_part(names, parts): names holds str only");
#if PY_VERSION_HEX < 0x030C0000
        failed = failed || PyUnicode_READY(name) < 0;
#endif
        failed = failed || (has_part(PyUnicode_KIND(name), PyUnicode_DATA(name), 0, PyUnicode_GET_LENGTH(name), &parts)
                            && PySet_Add(found, name) < 0);
        Py_DECREF(name);
        if (failed) {
            Py_DECREF(iterator);
            goto fail;
        }
    }
    Py_DECREF(iterator);
    if (PyErr_Occurred())
        goto fail;
    return found;
fail:
    Py_DECREF(found);
    return NULL;
}

/* Which of words (a tuple of str) occur in text as substrings. ASCII words in ASCII text are
 * looked for in one pass: the words are filed by their first two characters (one-character
 * words by their one), and each offset of the text is compared only with the words filed
 * under the two characters there. A pass costs what four or five searches for one word do; the
 * trigger scan made about thirty a file on sglang. The tables of the last two tuples asked
 * about are kept (a run asks with the same two, of words and of lower-cased words, for every
 * file). Any other text or word: one search per word. */
typedef struct {
    PyObject *words; /* the tuple the table was built for (a reference held), or NULL */
    Py_ssize_t count;
    uint64_t twos[1024];    /* a bit per two characters: a two-character word is them */
    uint64_t threes[1024];  /* a bit per hash of three characters: a longer word starts so */
    int16_t by_pair[65536]; /* first word filed under two characters, -1: none */
    int16_t by_char[128];   /* the one-character word, -1: none */
    int16_t *next;          /* the next word filed under the same two characters */
} Filed;

/* Three ASCII characters hashed to 16 bits. */
#define THREE(c) ((((unsigned)(c)[0] << 10) ^ ((unsigned)(c)[1] << 5) ^ (unsigned)(c)[2]) & 0xffffu)

static Filed tables[2];
static int last_table = 0;

/* The table of words (all ASCII str, fewer than 32,768), kept or built; NULL when out of memory. */
static Filed *
table_of(PyObject *words)
{
    for (int t = 0; t < 2; t++)
        if (tables[t].words == words) {
            last_table = t;
            return &tables[t];
        }
    last_table = !last_table;
    Filed *filed = &tables[last_table];
    Py_ssize_t count = PyTuple_GET_SIZE(words);
    int16_t *next = PyMem_Malloc((size_t)(count ? count : 1) * sizeof(int16_t));
    if (next == NULL)
        return NULL;
    Py_CLEAR(filed->words);
    PyMem_Free(filed->next);
    memset(filed->twos, 0, sizeof filed->twos);
    memset(filed->threes, 0, sizeof filed->threes);
    memset(filed->by_pair, 0xff, sizeof filed->by_pair);
    memset(filed->by_char, 0xff, sizeof filed->by_char);
    for (Py_ssize_t i = count - 1; i >= 0; i--) {
        PyObject *word = PyTuple_GET_ITEM(words, i);
        const unsigned char *w = PyUnicode_1BYTE_DATA(word);
        next[i] = -1;
        if (PyUnicode_GET_LENGTH(word) == 1) {
            filed->by_char[w[0]] = (int16_t)i;
        } else {
            unsigned pair = (unsigned)w[0] << 8 | w[1];
            next[i] = filed->by_pair[pair];
            filed->by_pair[pair] = (int16_t)i;
            if (PyUnicode_GET_LENGTH(word) == 2) {
                filed->twos[pair >> 6] |= 1ULL << (pair & 63);
            } else {
                unsigned three = THREE(w);
                filed->threes[three >> 6] |= 1ULL << (three & 63);
            }
        }
    }
    Py_INCREF(words);
    filed->words = words;
    filed->count = count;
    filed->next = next;
    return filed;
}

static PyObject *
present(PyObject *module, PyObject *args)
{
    PyObject *text, *words;
    if (!PyArg_ParseTuple(args, "UO!:present", &text, &PyTuple_Type, &words))
        return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(words);
    int ascii = PyUnicode_IS_ASCII(text) && count < 32768;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *word = PyTuple_GET_ITEM(words, i);
        if (!PyUnicode_Check(word)) {
            PyErr_SetString(PyExc_TypeError, "present(text, words): words is a tuple of str");
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(word) < 0)
            return NULL;
#endif
        ascii = ascii && PyUnicode_IS_ASCII(word) && PyUnicode_GET_LENGTH(word) > 0;
    }
    PyObject *found = PySet_New(NULL);
    if (found == NULL)
        return NULL;
    if (!ascii) {
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *word = PyTuple_GET_ITEM(words, i);
            int in = PyUnicode_Contains(text, word);
            if (in < 0 || (in && PySet_Add(found, word) < 0)) {
                Py_DECREF(found);
                return NULL;
            }
        }
        return found;
    }
    Filed *filed = table_of(words);
    if (filed == NULL) {
        Py_DECREF(found);
        return PyErr_NoMemory();
    }
    const unsigned char *s = PyUnicode_1BYTE_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text), left = count;
    char *seen = PyMem_Calloc((size_t)(count ? count : 1), 1);
    if (seen == NULL) {
        Py_DECREF(found);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t at = 0; at < n && left; at++) {
        int16_t i = filed->by_char[s[at]];
        if (i >= 0 && !seen[i]) {
            seen[i] = 1;
            left--;
            if (PySet_Add(found, PyTuple_GET_ITEM(words, i)) < 0)
                goto fail;
        }
        if (at + 1 >= n)
            break;
        /* Most offsets end here, on two 8 kB bitmaps that stay in the fastest cache (on the
         * trees' identifiers, 1 offset in 10 starts a word's first two characters, 1 in 60
         * its first three). */
        unsigned pair = (unsigned)s[at] << 8 | s[at + 1];
        if (!(filed->twos[pair >> 6] >> (pair & 63) & 1)) {
            if (at + 2 >= n)
                continue;
            unsigned three = THREE(s + at);
            if (!(filed->threes[three >> 6] >> (three & 63) & 1))
                continue;
        }
        for (i = filed->by_pair[pair]; i >= 0; i = filed->next[i]) {
            PyObject *word = PyTuple_GET_ITEM(words, i);
            Py_ssize_t length = PyUnicode_GET_LENGTH(word);
            if (!seen[i] && length <= n - at && memcmp(s + at, PyUnicode_1BYTE_DATA(word), (size_t)length) == 0) {
                seen[i] = 1;
                left--;
                if (PySet_Add(found, word) < 0)
                    goto fail;
            }
        }
    }
    PyMem_Free(seen);
    return found;
fail:
    PyMem_Free(seen);
    Py_DECREF(found);
    return NULL;
}

static PyMethodDef methods[] = {
    {"identifiers", identifiers, METH_O,
     "identifiers(text) -> frozenset[str]: the distinct identifiers of text, as re's [^\\W\\d]\\w* finds them."},
    {"joined", joined, METH_O,
     "joined(text) -> str: the distinct identifiers of text, one a line, in no particular order."},
    {"with_part", with_part, METH_VARARGS,
     "with_part(names, parts) -> set[str]: the names (an iterable of str, or a str of one a line) with one of parts as a '_'-separated part."},
    {"spans", spans, METH_VARARGS,
     "spans(text, word) -> list[tuple[int, int]]: (start, end) of each whole-word occurrence of word in text."},
    {"lines_with", lines_with, METH_VARARGS,
     "lines_with(haystack, text, part) -> list[str]: the lines of text whose line in haystack contains part."},
    {"present", present, METH_VARARGS,
     "present(text, words) -> set[str]: those of words (a tuple of str) that occur in text."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_identifiers",
    "The distinct identifiers of a text, for linter.prefilter.words.identifier_set.", -1, methods,
};

PyMODINIT_FUNC
PyInit__identifiers(void)
{
    for (int c = 0; c < 128; c++)
        WORD[c] = (c >= '0' && c <= '9') ? 2 : ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_');
    return PyModule_Create(&module);
}
