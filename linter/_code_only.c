/* linter.code_only.code_only in C: source text with comments dropped and string literals
 * emptied, lines kept.
 *
 * reduced(text, literal) answers code_only(text) exactly. It finds each comment or literal as
 * code_only does (the next '#', '"' or '\'', a literal's body as code_only's _BODY pattern
 * matches it, its prefix read behind the quote); a plain literal becomes "" (after as many
 * newlines as it spans, and a blank), and an f-string is handed to literal(prefix, body), the
 * Python function that keeps its replacement fields. Without a C compiler code_only does the
 * same in Python.
 *
 * top_level_cuts(code) answers linter.segments._top_level_cuts on code-only text: where each
 * top-level statement starts, read in one pass that counts brackets and lines as it goes.
 *
 * brackets_balanced(code) and bracket_opener(code, at) answer linter.prefilter.kv208._Brackets'
 * questions without a list of every bracket.
 *
 * definition_lines(text) answers linter.prefilter.lines.definition_lines, on any text.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int
is_prefix_letter(Py_UCS4 c)
{
    return c == 'r' || c == 'R' || c == 'b' || c == 'B' || c == 'u' || c == 'U' || c == 'f' || c == 'F';
}

static int
is_word_char(Py_UCS4 c)
{
    return c == '_' || Py_UNICODE_ISALNUM(c);
}

#define READ(i) PyUnicode_READ(kind, data, (i))

/* 0 for a str ready to read (its width and data at hand); -1 with `message` as a TypeError
 * for anything else. */
static int
readable(PyObject *text, const char *message)
{
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, message);
        return -1;
    }
#if PY_VERSION_HEX < 0x030C0000
    return PyUnicode_READY(text);
#else
    return 0;
#endif
}

/* The end of the literal whose quote is at `at`, as _BODY matches it; -1 when it does not. */
static Py_ssize_t
body_end(int kind, const void *data, Py_ssize_t n, Py_ssize_t at)
{
    Py_UCS4 q = READ(at);
    if (at + 2 < n && READ(at + 1) == q && READ(at + 2) == q) {
        /* Triple quotes: runs to the closing three, or to the end of the text. A backslash
         * with nothing after it ends no alternative of the pattern here: the one-quote
         * alternative below is tried instead. */
        Py_ssize_t i = at + 3;
        for (;;) {
            if (i >= n)
                return n;
            Py_UCS4 c = READ(i);
            if (c == '\\') {
                if (i + 1 >= n)
                    break;
                i += 2;
            } else if (c == q && i + 2 < n && READ(i + 1) == q && READ(i + 2) == q) {
                return i + 3;
            } else {
                i++;
            }
        }
    }
    /* One quote: runs to the closing quote, or up to the end of its line or of the text; a
     * backslash takes the next character (a CRLF as one) with it. A backslash ending the text
     * leaves the pattern one way back: the last escaped CRLF read as an escaped CR, the
     * literal ending before its LF. */
    Py_ssize_t i = at + 1, last_crlf = -1;
    for (;;) {
        if (i >= n)
            return n;
        Py_UCS4 c = READ(i);
        if (c == q)
            return i + 1;
        if (c == '\n')
            return i;
        if (c == '\\') {
            if (i + 1 >= n)
                return last_crlf;
            if (i + 2 < n && READ(i + 1) == '\r' && READ(i + 2) == '\n') {
                last_crlf = i + 2;
                i += 3;
            } else {
                i += 2;
            }
        } else {
            i++;
        }
    }
}

/* Where a comment or literal may start: '#', '"' or '\''. */
static unsigned char STARTS[128];

/* The offset of the next '#', '"' or '\'' from `at` (n: none), one loop per width: most of the
 * text is skipped here, and PyUnicode_READ's switch on the width per character cost a fourth
 * of code_only's time on sglang's files. */
static Py_ssize_t
next_start(int kind, const void *data, Py_ssize_t n, Py_ssize_t at)
{
    if (kind == PyUnicode_1BYTE_KIND) {
        const Py_UCS1 *s = data;
        while (at < n && (s[at] > 127 || !STARTS[s[at]]))
            at++;
    } else if (kind == PyUnicode_2BYTE_KIND) {
        const Py_UCS2 *s = data;
        while (at < n && (s[at] > 127 || !STARTS[s[at]]))
            at++;
    } else {
        const Py_UCS4 *s = data;
        while (at < n && (s[at] > 127 || !STARTS[s[at]]))
            at++;
    }
    return at;
}

static int
append_slice(PyObject *pieces, PyObject *text, Py_ssize_t start, Py_ssize_t end)
{
    if (start >= end)
        return 0;
    PyObject *piece = PyUnicode_Substring(text, start, end);
    if (piece == NULL)
        return -1;
    int failed = PyList_Append(pieces, piece);
    Py_DECREF(piece);
    return failed;
}

static PyObject *
reduced(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyUnicode_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "reduced(text, literal) takes a str and a function");
        return NULL;
    }
    PyObject *text = args[0], *literal = args[1];
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(text) < 0)
        return NULL;
#endif
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *pieces = PyList_New(0);
    if (pieces == NULL)
        return NULL;
    Py_ssize_t copied = 0, at = 0;
    while ((at = next_start(kind, data, n, at)) < n) {
        Py_UCS4 c = READ(at);
        Py_ssize_t end;
        if (c == '#') {
            end = at;
            while (end < n && READ(end) != '\n')
                end++;
            if (append_slice(pieces, text, copied, at) < 0)
                goto fail;
        } else {
            /* The prefix: one or two letters right before the quote that start a word, and
             * not inside what was replaced before. */
            Py_ssize_t first = at, low = copied > at - 2 ? copied : at - 2;
            while (first > low && is_prefix_letter(READ(first - 1)))
                first--;
            while (first < at && first > 0 && is_word_char(READ(first - 1)))
                first++;
            end = body_end(kind, data, n, at);
            if (end < 0) {
                at++; /* a quote and a backslash ending the text: no literal, the quote stays */
                continue;
            }
            if (append_slice(pieces, text, copied, first) < 0)
                goto fail;
            int formatted = 0;
            Py_ssize_t lines = 0;
            for (Py_ssize_t i = first; i < at; i++)
                formatted |= READ(i) == 'f' || READ(i) == 'F';
            PyObject *replacement;
            if (formatted) {
                PyObject *prefix = PyUnicode_Substring(text, first, at);
                PyObject *body = prefix ? PyUnicode_Substring(text, at, end) : NULL;
                replacement = body ? PyObject_CallFunctionObjArgs(literal, prefix, body, NULL) : NULL;
                Py_XDECREF(prefix);
                Py_XDECREF(body);
            } else {
                for (Py_ssize_t i = at; i < end; i++)
                    lines += READ(i) == '\n';
                if (lines == 0) {
                    replacement = PyUnicode_FromString("\"\"");
                } else {
                    replacement = PyUnicode_New(lines + 3, 127);
                    if (replacement != NULL) {
                        Py_UCS1 *out = PyUnicode_1BYTE_DATA(replacement);
                        memset(out, '\n', (size_t)lines);
                        memcpy(out + lines, " \"\"", 3);
                    }
                }
            }
            if (replacement == NULL)
                goto fail;
            int failed = PyList_Append(pieces, replacement);
            Py_DECREF(replacement);
            if (failed < 0)
                goto fail;
        }
        copied = end;
        at = end;
    }
    if (append_slice(pieces, text, copied, n) < 0)
        goto fail;
    PyObject *empty = PyUnicode_New(0, 0);
    if (empty == NULL)
        goto fail;
    PyObject *joined = PyUnicode_Join(empty, pieces);
    Py_DECREF(empty);
    Py_DECREF(pieces);
    return joined;
fail:
    Py_DECREF(pieces);
    return NULL;
}

/* Per character up to '}': +1 an opening bracket, -1 a closing one, 2 a newline, else 0. */
static signed char BRACKET[128];

/* Does the text at `at` start with the ASCII `word`, followed by no word character (re's \b)? */
static int
starts_word(int kind, const void *data, Py_ssize_t n, Py_ssize_t at, const char *word)
{
    Py_ssize_t i = 0;
    for (; word[i]; i++)
        if (at + i >= n || READ(at + i) != (Py_UCS4)(unsigned char)word[i])
            return 0;
    return at + i >= n || !is_word_char(READ(at + i));
}

/* Does the text at `at` start with the ASCII `word` (whatever follows)? */
static int
starts_word_prefix(int kind, const void *data, Py_ssize_t n, Py_ssize_t at, const char *word)
{
    for (Py_ssize_t i = 0; word[i]; i++)
        if (at + i >= n || READ(at + i) != (Py_UCS4)(unsigned char)word[i])
            return 0;
    return 1;
}

/* A line that starts a top-level statement may start one: segments._DEFINITION. */
static int
is_definition(int kind, const void *data, Py_ssize_t n, Py_ssize_t at)
{
    if (starts_word(kind, data, n, at, "def") || starts_word(kind, data, n, at, "class"))
        return 1;
    const char *async = "async";
    for (Py_ssize_t i = 0; i < 5; i++)
        if (at + i >= n || READ(at + i) != (Py_UCS4)async[i])
            return 0;
    Py_ssize_t i = at + 5;
    if (i >= n || !Py_UNICODE_ISSPACE(READ(i)))
        return 0;
    while (i < n && Py_UNICODE_ISSPACE(READ(i)))
        i++;
    return starts_word(kind, data, n, i, "def");
}

/* linter.prefilter.lines.definition_lines: the offsets of the lines after the first that start
 * (after spaces and tabs) with '@', or with "def", "class" or "async" and blanks and "def", a
 * word by itself; each line found from the newline before it. */
static PyObject *
definition_lines(PyObject *module, PyObject *text)
{
    if (readable(text, "definition_lines(text) takes a str") < 0)
        return NULL;
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t n = PyUnicode_GET_LENGTH(text);
    PyObject *found = PyList_New(0);
    if (found == NULL)
        return NULL;
    Py_ssize_t newline = 0;
    while ((newline = PyUnicode_FindChar(text, '\n', newline, n, 1)) >= 0) {
        Py_ssize_t line = newline + 1, i = line;
        newline = line;
        while (i < n && (READ(i) == ' ' || READ(i) == '\t'))
            i++;
        if (i >= n)
            break;
        int starts = READ(i) == '@' || starts_word(kind, data, n, i, "def") || starts_word(kind, data, n, i, "class");
        if (!starts && starts_word_prefix(kind, data, n, i, "async")) {
            Py_ssize_t j = i + 5;
            if (j < n && (READ(j) == ' ' || READ(j) == '\t')) {
                while (j < n && (READ(j) == ' ' || READ(j) == '\t'))
                    j++;
                starts = starts_word(kind, data, n, j, "def");
            }
        }
        if (starts) {
            PyObject *offset = PyLong_FromSsize_t(line);
            if (offset == NULL || PyList_Append(found, offset) < 0) {
                Py_XDECREF(offset);
                Py_DECREF(found);
                return NULL;
            }
            Py_DECREF(offset);
        }
    }
    if (newline == -2) {
        Py_DECREF(found);
        return NULL;
    }
    return found;
}

static PyObject *
top_level_cuts(PyObject *module, PyObject *code)
{
    if (readable(code, "top_level_cuts(code) takes a str") < 0)
        return NULL;
    int kind = PyUnicode_KIND(code);
    const void *data = PyUnicode_DATA(code);
    Py_ssize_t n = PyUnicode_GET_LENGTH(code);
    PyObject *cuts = PyList_New(0);
    if (cuts == NULL)
        return NULL;
    Py_ssize_t depth = 0, line = 0, at = 0;
    int decorating = 0;
    while (at < n) {
        /* `at` starts a line: segments._COLUMN_0, then the checks of top_level_segments. */
        Py_ssize_t first = at;
        while (first < n && READ(first) == '\f')
            first++;
        if (first < n) {
            Py_UCS4 c = READ(first);
            if (!Py_UNICODE_ISSPACE(c) && c != ')' && c != ']' && c != '}' && depth <= 0) {
                /* segments._continued: the (at most three) characters before, less line ends. */
                Py_ssize_t low = at - 3 > 0 ? at - 3 : 0, i = at;
                while (i > low && (READ(i - 1) == '\r' || READ(i - 1) == '\n'))
                    i--;
                int continued = i > low && READ(i - 1) == '\\';
                int clause = starts_word(kind, data, n, first, "else") || starts_word(kind, data, n, first, "elif")
                             || starts_word(kind, data, n, first, "except") || starts_word(kind, data, n, first, "finally");
                if (!continued && !clause) {
                    int decorator = c == '@';
                    int definition = decorator || is_definition(kind, data, n, first);
                    if (!(decorating && definition)) {
                        PyObject *cut = Py_BuildValue("(nnO)", at, line, definition ? Py_True : Py_False);
                        if (cut == NULL || PyList_Append(cuts, cut) < 0) {
                            Py_XDECREF(cut);
                            Py_DECREF(cuts);
                            return NULL;
                        }
                        Py_DECREF(cut);
                    }
                    decorating = decorator;
                }
            }
        }
        /* On to the next line, counting its brackets (byte by byte in one-byte text). */
        if (kind == PyUnicode_1BYTE_KIND) {
            const Py_UCS1 *bytes = (const Py_UCS1 *)data;
            while (at < n) {
                Py_UCS1 c = bytes[at++];
                if (c > '}' || !BRACKET[c])
                    continue;
                if (c == '\n') {
                    line++;
                    break;
                }
                depth += BRACKET[c];
            }
            continue;
        }
        while (at < n) {
            Py_UCS4 c = READ(at++);
            if (c == '\n') {
                line++;
                break;
            }
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if (c == ')' || c == ']' || c == '}')
                depth--;
        }
    }
    return cuts;
}

/* linter.prefilter.kv208._Brackets in C, for code-only text, where every bracket is code.
 * brackets_balanced(code): is no bracket closed before it was opened, and every one closed?
 * bracket_opener(code, at): the offset of the innermost bracket open at `at` (a bracket at `at`
 * included), read back from `at`; None outside every bracket. */
static PyObject *
brackets_balanced(PyObject *module, PyObject *code)
{
    if (readable(code, "brackets_balanced(code) takes a str") < 0)
        return NULL;
    int kind = PyUnicode_KIND(code);
    const void *data = PyUnicode_DATA(code);
    Py_ssize_t n = PyUnicode_GET_LENGTH(code), depth = 0;
    for (Py_ssize_t at = 0; at < n; at++) {
        Py_UCS4 c = READ(at);
        if (c > '}' || BRACKET[c] == 0 || BRACKET[c] == 2)
            continue;
        depth += BRACKET[c];
        if (depth < 0)
            Py_RETURN_FALSE;
    }
    return PyBool_FromLong(depth == 0);
}

static PyObject *
bracket_opener(PyObject *module, PyObject *args)
{
    PyObject *code;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "Un:bracket_opener", &code, &at))
        return NULL;
    int kind = PyUnicode_KIND(code);
    const void *data = PyUnicode_DATA(code);
    Py_ssize_t n = PyUnicode_GET_LENGTH(code), depth = 0;
    for (Py_ssize_t i = at < n ? at : n - 1; i >= 0; i--) {
        Py_UCS4 c = READ(i);
        if (c > '}' || BRACKET[c] == 0 || BRACKET[c] == 2)
            continue;
        if (BRACKET[c] < 0)
            depth++;
        else if (depth)
            depth--;
        else
            return PyLong_FromSsize_t(i);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"reduced", (PyCFunction)(void (*)(void))reduced, METH_FASTCALL,
     "reduced(text, literal) -> str: code_only(text); literal(prefix, body) gives an f-string's replacement."},
    {"top_level_cuts", top_level_cuts, METH_O,
     "top_level_cuts(code) -> list[(offset, line, definition)]: where each top-level statement of code-only text starts."},
    {"definition_lines", definition_lines, METH_O,
     "definition_lines(text) -> list[int]: the offsets of the lines after the first that start a def, class or decorator."},
    {"brackets_balanced", brackets_balanced, METH_O,
     "brackets_balanced(code) -> bool: no bracket of code-only text closed before it opened, every one closed."},
    {"bracket_opener", bracket_opener, METH_VARARGS,
     "bracket_opener(code, at) -> int | None: the offset of the innermost bracket open at offset at."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_code_only", "linter.code_only.code_only in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__code_only(void)
{
    BRACKET['('] = BRACKET['['] = BRACKET['{'] = 1;
    BRACKET[')'] = BRACKET[']'] = BRACKET['}'] = -1;
    BRACKET['\n'] = 2;
    STARTS['#'] = STARTS['"'] = STARTS['\''] = 1;
    return PyModule_Create(&module);
}
