/* runtime/dataset/file_items.c - a dataset's new items from a file (sources.h):
 * - JSONL: one JSON object a line with "input" (any JSON value but null), and optionally
 *   "expected" (any value), "assertions" (an array) and "metadata" (an object); other keys go
 *   into metadata. Blank lines are skipped.
 * - CSV (RFC 4180: quoted fields, "" inside quotes, newlines inside quotes): a header row with an
 *   "input" column; an "expected" column; every other column into metadata as a string. A cell
 *   that is a JSON object or array is kept as one, anything else is a JSON string.
 * The first bad line stops the read: "PATH:LINE: field: expected ...". */
#include "runtime/dataset/sources.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define LINE_MAX_BYTES (WEFT_DATASET_INPUT_MAX + 3u * WEFT_DATASET_FIELD_MAX + 4096u)

/* @p v as compact JSON text (new, weft__free), or NULL with *is_oom. */
static char *
dump(const json_t *v, bool *is_oom)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER);
    char *copy = text != NULL ? weft__strdup(text) : NULL;

    free(text);
    *is_oom = *is_oom || copy == NULL;
    return copy;
}

/* Check a field's size: @return WEFT_OK or WEFT_ELIMIT with the message. */
static weft_err
check_size(const char *text,
           size_t max,
           const char *path,
           size_t line,
           const char *field,
           char *err,
           size_t err_len)
{
    if (text != NULL && strlen(text) > max) {
        snprintf(err, err_len, "%s:%zu: %s: expected at most %zu bytes, got %zu", path, line, field,
                 max, strlen(text));
        return WEFT_ELIMIT;
    }
    return WEFT_OK;
}

/* The item's texts from the JSON object @p obj (its "input" etc.; other keys into metadata). */
static weft_err
item_of_object(json_t *obj,
               struct weft_dataset_item *it,
               const char *path,
               size_t line,
               char *err,
               size_t err_len)
{
    json_t *input = json_object_get(obj, "input");
    json_t *assertions = json_object_get(obj, "assertions");
    json_t *metadata = json_object_get(obj, "metadata");
    json_t *meta = NULL;
    const char *key = NULL;
    json_t *value = NULL;
    bool is_oom = false;
    weft_err rc = WEFT_OK;

    if (input == NULL || json_is_null(input)) {
        snprintf(err, err_len, "%s:%zu: input: expected a value (every item needs one)", path,
                 line);
        return WEFT_EPARSE;
    }
    if (assertions != NULL && !json_is_array(assertions) && !json_is_null(assertions)) {
        snprintf(err, err_len, "%s:%zu: assertions: expected an array", path, line);
        return WEFT_EPARSE;
    }
    if (metadata != NULL && !json_is_object(metadata) && !json_is_null(metadata)) {
        snprintf(err, err_len, "%s:%zu: metadata: expected an object", path, line);
        return WEFT_EPARSE;
    }
    meta = json_is_object(metadata) ? json_deep_copy(metadata) : json_object();
    json_object_foreach(obj, key, value)
    {
        if (strcmp(key, "input") != 0 && strcmp(key, "expected") != 0 &&
            strcmp(key, "assertions") != 0 && strcmp(key, "metadata") != 0 && meta != NULL) {
            json_object_set(meta, key, value);
        }
    }
    it->input = dump(input, &is_oom);
    it->expected =
        json_object_get(obj, "expected") != NULL && !json_is_null(json_object_get(obj, "expected"))
            ? dump(json_object_get(obj, "expected"), &is_oom)
            : NULL;
    it->assertions = json_is_array(assertions) ? dump(assertions, &is_oom) : NULL;
    it->metadata = meta != NULL ? dump(meta, &is_oom) : NULL;
    is_oom = is_oom || meta == NULL;
    json_decref(meta);
    if (is_oom) {
        return WEFT_ENOMEM;
    }
    rc = check_size(it->input, WEFT_DATASET_INPUT_MAX, path, line, "input", err, err_len);
    if (rc == WEFT_OK) {
        rc = check_size(it->expected, WEFT_DATASET_FIELD_MAX, path, line, "expected", err, err_len);
    }
    if (rc == WEFT_OK) {
        rc = check_size(it->assertions, WEFT_DATASET_FIELD_MAX, path, line, "assertions", err,
                        err_len);
    }
    if (rc == WEFT_OK) {
        rc = check_size(it->metadata, WEFT_DATASET_FIELD_MAX, path, line, "metadata", err, err_len);
    }
    return rc;
}

static bool
is_blank(const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s != ' ' && *s != '\t' && *s != '\r' && *s != '\n') {
            return false;
        }
    }
    return true;
}

/* One JSONL line (its newline kept or not) into a new item of @p items. */
static weft_err
jsonl_line(const char *text,
           struct weft__ds_items *items,
           const char *path,
           size_t line,
           char *err,
           size_t err_len)
{
    json_error_t jerr;
    json_t *obj = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    struct weft_dataset_item *it = NULL;
    bool is_full = false;
    weft_err rc = WEFT_OK;

    if (obj == NULL || !json_is_object(obj)) {
        snprintf(err, err_len, "%s:%zu: expected a JSON object: %s", path, line,
                 obj == NULL ? jerr.text : "the line is another JSON value");
        json_decref(obj);
        return WEFT_EPARSE;
    }
    it = weft__ds_items_push(items, &is_full);
    if (it == NULL) {
        json_decref(obj);
        if (is_full) {
            snprintf(err, err_len, "%s:%zu: more than %u items at once", path, line,
                     WEFT_DATASET_ITEMS_MAX);
        }
        return is_full ? WEFT_ELIMIT : WEFT_ENOMEM;
    }
    rc = item_of_object(obj, it, path, line, err, err_len);
    json_decref(obj);
    return rc;
}

static weft_err
read_jsonl(FILE *f, const char *path, struct weft__ds_items *items, char *err, size_t err_len)
{
    char *text = NULL;
    size_t cap = 0;
    ssize_t len = 0;
    size_t line = 0;
    weft_err rc = WEFT_OK;

    while (rc == WEFT_OK && (len = getline(&text, &cap, f)) >= 0) {
        line++;
        if ((size_t)len > LINE_MAX_BYTES) {
            snprintf(err, err_len, "%s:%zu: expected a line of at most %u bytes", path, line,
                     (unsigned)LINE_MAX_BYTES);
            rc = WEFT_ELIMIT;
        } else if (!is_blank(text)) {
            rc = jsonl_line(text, items, path, line, err, err_len);
        }
    }
    if (rc == WEFT_OK && ferror(f)) {
        snprintf(err, err_len, "%s:%zu: cannot read it: %s", path, line + 1, strerror(errno));
        rc = WEFT_EIO;
    }
    free(text);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */
/* CSV                                                                                         */

/* One CSV record: its cells (each new), read from *pos onward in @p text. */
struct csv_record {
    char **cells;
    size_t n;
    size_t cap;
    size_t line;     /* where it starts */
    size_t end_line; /* the line after it */
};

static void
record_clear(struct csv_record *r)
{
    for (size_t i = 0; i < r->n; i++) {
        weft__free(r->cells[i]);
    }
    r->n = 0;
}

static bool
record_push(struct csv_record *r, struct weft__buf *cell)
{
    char *copy = weft__strndup(cell->data != NULL ? cell->data : "", cell->len);

    if (copy == NULL) {
        return false;
    }
    if (r->n == r->cap) {
        size_t cap = r->cap == 0 ? 8 : r->cap * 2;
        char **grown = weft__realloc(r->cells, cap * sizeof(*grown));

        if (grown == NULL) {
            weft__free(copy);
            return false;
        }
        r->cells = grown;
        r->cap = cap;
    }
    r->cells[r->n++] = copy;
    weft__buf_reset(cell);
    return true;
}

/* Read the record at *pos of @p text: @return 1 a record, 0 the end, -1 an error in @p why. */
static int
csv_next(const char *text, size_t *pos, struct csv_record *r, size_t *line, const char **why)
{
    struct weft__buf cell;
    size_t i = *pos;
    bool is_quoted = false;
    bool is_oom = false;

    if (text[i] == '\0') {
        return 0;
    }
    weft__buf_init(&cell, 0);
    record_clear(r);
    r->line = *line;
    for (;; i++) {
        char c = text[i];

        if (is_quoted) {
            if (c == '\0') {
                *why = "a closing quote (the quoted cell runs to the end of the file)";
                weft__buf_cleanup(&cell);
                return -1;
            }
            if (c == '"' && text[i + 1] == '"') {
                is_oom |= weft__buf_append_byte(&cell, '"') != WEFT_OK;
                i++;
            } else if (c == '"') {
                is_quoted = false;
            } else {
                *line += c == '\n';
                is_oom |= weft__buf_append_byte(&cell, (uint8_t)c) != WEFT_OK;
            }
        } else if (c == '"' && cell.len == 0) {
            is_quoted = true;
        } else if (c == ',' || c == '\n' || c == '\0' || (c == '\r' && text[i + 1] == '\n')) {
            if (is_oom || !record_push(r, &cell)) {
                *why = "memory";
                weft__buf_cleanup(&cell);
                return -1;
            }
            if (c == ',') {
                continue;
            }
            i += c == '\r';
            *line += text[i] == '\n';
            *pos = text[i] == '\0' ? i : i + 1;
            break;
        } else {
            is_oom |= weft__buf_append_byte(&cell, (uint8_t)c) != WEFT_OK;
        }
    }
    r->end_line = *line;
    weft__buf_cleanup(&cell);
    return 1;
}

/* A CSV cell as JSON: an object or array kept, else the text as a string; NULL out of memory
 * (the cell is valid UTF-8: the caller checked). */
static json_t *
cell_value(const char *cell, bool is_json_ok)
{
    json_t *v = is_json_ok && (cell[0] == '{' || cell[0] == '[')
                    ? json_loads(cell, JSON_REJECT_DUPLICATES, NULL)
                    : NULL;

    return v != NULL ? v : json_string(cell);
}

/* One data record into a new item: the input and expected columns, the rest metadata. */
static weft_err
csv_item(const struct csv_record *head,
         const struct csv_record *r,
         struct weft__ds_items *items,
         const char *path,
         char *err,
         size_t err_len)
{
    json_t *obj = NULL;
    json_t *meta = NULL;
    struct weft_dataset_item *it = NULL;
    bool is_full = false;
    weft_err rc = WEFT_OK;

    if (r->n != head->n) {
        snprintf(err, err_len, "%s:%zu: expected %zu cells as the header has, got %zu", path,
                 r->line, head->n, r->n);
        return WEFT_EPARSE;
    }
    obj = json_object();
    meta = json_object();
    if (obj == NULL || meta == NULL || json_object_set(obj, "metadata", meta) != 0) {
        rc = WEFT_ENOMEM;
    }
    for (size_t c = 0; rc == WEFT_OK && c < r->n; c++) {
        const char *name = head->cells[c];
        const char *cell = r->cells[c];
        bool is_field = strcmp(name, "input") == 0 || strcmp(name, "expected") == 0;
        json_t *v = NULL;

        if (is_field && cell[0] == '\0') {
            continue; /* an empty input is reported below */
        }
        if (!weft__utf8_valid(cell, strlen(cell))) {
            snprintf(err, err_len, "%s:%zu: %s: expected UTF-8 text", path, r->line, name);
            rc = WEFT_EPARSE;
            break;
        }
        v = cell_value(cell, is_field);
        if (v == NULL || json_object_set_new(is_field ? obj : meta, name, v) != 0) {
            rc = WEFT_ENOMEM;
        }
    }
    json_decref(meta);
    if (rc == WEFT_OK) {
        it = weft__ds_items_push(items, &is_full);
        rc = it == NULL ? (is_full ? WEFT_ELIMIT : WEFT_ENOMEM)
                        : item_of_object(obj, it, path, r->line, err, err_len);
    }
    if (is_full) {
        snprintf(err, err_len, "%s:%zu: more than %u items at once", path, r->line,
                 WEFT_DATASET_ITEMS_MAX);
    }
    json_decref(obj);
    return rc;
}

static weft_err
csv_records(
    const char *text, const char *path, struct weft__ds_items *items, char *err, size_t err_len)
{
    struct csv_record head = {0};
    struct csv_record r = {0};
    size_t pos = 0;
    size_t line = 1;
    const char *why = NULL;
    bool has_input = false;
    weft_err rc = WEFT_OK;
    int got = csv_next(text, &pos, &head, &line, &why);

    for (size_t c = 0; got == 1 && rc == WEFT_OK && c < head.n; c++) {
        has_input |= strcmp(head.cells[c], "input") == 0;
        if (!weft__utf8_valid(head.cells[c], strlen(head.cells[c]))) {
            snprintf(err, err_len, "%s:1: header: column %zu: expected UTF-8 text", path, c + 1);
            rc = WEFT_EPARSE;
        }
        for (size_t d = 0; rc == WEFT_OK && d < c; d++) {
            if (strcmp(head.cells[c], head.cells[d]) == 0) {
                snprintf(err, err_len, "%s:1: header: column '%s' appears twice", path,
                         head.cells[c]);
                rc = WEFT_EPARSE;
            }
        }
    }
    if (rc == WEFT_OK && (got != 1 || !has_input)) {
        snprintf(err, err_len, "%s:1: header: expected a row of column names with \"input\"", path);
        rc = WEFT_EPARSE;
    }
    while (rc == WEFT_OK && (got = csv_next(text, &pos, &r, &line, &why)) == 1) {
        if (r.n == 1 && r.cells[0][0] == '\0') {
            continue; /* a blank line */
        }
        rc = csv_item(&head, &r, items, path, err, err_len);
    }
    if (rc == WEFT_OK && got < 0) {
        snprintf(err, err_len, "%s:%zu: expected %s", path, r.line, why);
        rc = strcmp(why, "memory") == 0 ? WEFT_ENOMEM : WEFT_EPARSE;
    }
    record_clear(&head);
    record_clear(&r);
    weft__free(head.cells);
    weft__free(r.cells);
    return rc;
}

/* The whole file into a new NUL-terminated string (at most the items' bound). */
static weft_err
slurp(FILE *f, const char *path, char **out, char *err, size_t err_len)
{
    struct weft__buf b;
    char chunk[65536];
    size_t n = 0;

    weft__buf_init(&b, 0);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b.len + n > (size_t)64 * 1024 * 1024) {
            snprintf(err, err_len, "%s: expected a file of at most 64 MiB", path);
            weft__buf_cleanup(&b);
            return WEFT_ELIMIT;
        }
        if (weft__buf_append(&b, chunk, n) != WEFT_OK) {
            weft__buf_cleanup(&b);
            return WEFT_ENOMEM;
        }
    }
    if (ferror(f)) {
        snprintf(err, err_len, "%s: cannot read it: %s", path, strerror(errno));
        weft__buf_cleanup(&b);
        return WEFT_EIO;
    }
    if (weft__buf_append(&b, "", 1) != WEFT_OK) {
        weft__buf_cleanup(&b);
        return WEFT_ENOMEM;
    }
    *out = b.data;
    return WEFT_OK;
}

static bool
ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s);
    size_t b = strlen(suffix);

    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

weft_err
weft__ds_items_from_file(const char *path, struct weft__ds_items *items, char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    weft_err rc = WEFT_OK;

    if (f == NULL) {
        snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
        return WEFT_ENOTFOUND;
    }
    if (ends_with(path, ".csv")) {
        rc = slurp(f, path, &text, err, err_len);
        if (rc == WEFT_OK) {
            rc = csv_records(text, path, items, err, err_len);
        }
        weft__free(text);
    } else {
        rc = read_jsonl(f, path, items, err, err_len);
    }
    fclose(f);
    return rc;
}
