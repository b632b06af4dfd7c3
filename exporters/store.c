/* exporters/store.c - the local SQLite span store: the exporter that writes ended spans, the
 * read API of include/weft/store.h behind `weft trace`, and the tree renderer shared with the
 * console exporter (exporters/store.h).
 *
 * Schema (version 1, kept in PRAGMA user_version; PRAGMA application_id is "weft", so a store
 * is never confused with, or written into, another program's database):
 * - spans: one row per span, PRIMARY KEY (trace_id, span_id), so a span exported twice is
 *   replaced rather than duplicated. Ids are lowercase hex; parent_span_id is NULL for a root.
 *   attributes is a JSON object whose JSON types carry the attribute types (string, true/false,
 *   integer, real written with a decimal point, homogeneous arrays), so
 *   json_extract(attributes, '$."gen_ai.usage.input_tokens"') works from plain SQL. The few
 *   values plain JSON cannot type (NaN and infinities, empty arrays) are written as
 *   {"type": "<type>", "value": ...}; attribute values are never objects otherwise. events and
 *   links are JSON arrays of objects using the same attribute encoding.
 * - traces: one summary row per trace (start, end, span and error counts, root name, service),
 *   recomputed from spans for every trace a batch touches. `weft trace list` reads only this
 *   table through its start_ns index, so listing stays fast however many spans are stored.
 *
 * Writing: one IMMEDIATE transaction per batch with statements prepared once and reused; WAL
 * mode so that readers (weft trace, the web UI) never block the exporter and see each batch
 * whole or not at all; synchronous=NORMAL, which in WAL mode survives an application crash and
 * loses at most the last batches on power loss, an acceptable trade for a local trace store.
 * The database and its directory are created private (0600 and 0700): traces can carry
 * prompts and tool output.
 *
 * Invariants: the exporter is called by one thread at a time (export.h); shutdown may race
 * with an export that overran its deadline, so it only raises an atomic flag and the
 * connection is closed in destroy.
 */
#include "store.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "tracing/ids.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <weft/store.h>

#define SCHEMA_VERSION      1
#define WEFT_APPLICATION_ID 0x77656674 /* "weft" in PRAGMA application_id */
#define BUSY_TIMEOUT_MS     5000
#define MAX_LOADED_SPANS    (1u << 20) /* a loaded trace never holds more spans than this */
#define JSON_COLUMN_MAX     (64u << 20)
#define ARENA_BLOCK_BYTES   16384

/* ------------------------------------------------------------------------------------------ */
/* Arena                                                                                       */

struct weft__arena_block {
    struct weft__arena_block *next;
    size_t used;
    size_t cap;
    max_align_t data[];
};

void
weft__arena_init(struct weft__arena *arena)
{
    arena->head = NULL;
    arena->bytes = 0;
}

void
weft__arena_cleanup(struct weft__arena *arena)
{
    struct weft__arena_block *block = NULL;

    if (arena == NULL) {
        return;
    }
    block = arena->head;
    while (block != NULL) {
        struct weft__arena_block *next = block->next;

        weft__free(block);
        block = next;
    }
    arena->head = NULL;
    arena->bytes = 0;
}

void *
weft__arena_alloc(struct weft__arena *arena, size_t size)
{
    struct weft__arena_block *block = arena->head;
    unsigned char *p = NULL;

    if (size > SIZE_MAX / 2) {
        return NULL;
    }
    size = (size + 15u) & ~(size_t)15u;
    if (block == NULL || block->cap - block->used < size) {
        /* A large request gets a block of its own, linked behind the current one so that
         * the free room left there is still used by later small requests. */
        size_t cap = size > ARENA_BLOCK_BYTES / 4 ? size : ARENA_BLOCK_BYTES;
        struct weft__arena_block *fresh = weft__malloc(sizeof(*fresh) + cap);

        if (fresh == NULL) {
            return NULL;
        }
        fresh->used = 0;
        fresh->cap = cap;
        arena->bytes += sizeof(*fresh) + cap;
        if (block != NULL && cap != ARENA_BLOCK_BYTES) {
            fresh->next = block->next;
            block->next = fresh;
        } else {
            fresh->next = block;
            arena->head = fresh;
        }
        block = fresh;
    }
    p = (unsigned char *)block->data + block->used;
    block->used += size;
    memset(p, 0, size);
    return p;
}

char *
weft__arena_strndup(struct weft__arena *arena, const char *s, size_t len)
{
    char *copy = NULL;

    if (s == NULL || len == SIZE_MAX) {
        return NULL;
    }
    copy = weft__arena_alloc(arena, len + 1);
    if (copy != NULL) {
        memcpy(copy, s, len);
        copy[len] = '\0';
    }
    return copy;
}

char *
weft__arena_strdup(struct weft__arena *arena, const char *s)
{
    return s == NULL ? NULL : weft__arena_strndup(arena, s, strlen(s));
}

/* ------------------------------------------------------------------------------------------ */
/* Paths                                                                                       */

weft_err
weft_store_default_path(char *buf, size_t buf_len)
{
    const char *home = weft__env("WEFT_HOME");
    int n = 0;

    if (buf == NULL || buf_len == 0) {
        return WEFT_EINVAL;
    }
    if (home != NULL) {
        n = snprintf(buf, buf_len, "%s/weft.db", home);
    } else {
        n = snprintf(buf, buf_len, "./.weft/weft.db");
    }
    if (n < 0 || (size_t)n >= buf_len) {
        buf[0] = '\0';
        return WEFT_EINVAL;
    }
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* UTF-8                                                                                       */

/* Length of the valid UTF-8 sequence at @p s (at most @p len bytes), 0 when invalid
 * (overlong forms, surrogates and code points past U+10FFFF are invalid). */
static size_t
utf8_seq(const unsigned char *s, size_t len, uint32_t *cp)
{
    unsigned char c = s[0];
    size_t n = 0;
    uint32_t v = 0;
    uint32_t min = 0;

    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        v = c & 0x1fu;
        min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
        n = 3;
        v = c & 0x0fu;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        v = c & 0x07u;
        min = 0x10000;
    } else {
        return 0;
    }
    if (len < n) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            return 0;
        }
        v = (v << 6) | (s[i] & 0x3fu);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
        return 0;
    }
    *cp = v;
    return n;
}

/* Copy @p s into @p out with every invalid byte replaced by U+FFFD. */
static weft_err
utf8_sanitize(const char *s, size_t len, struct weft__buf *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    weft_err err = WEFT_OK;

    weft__buf_reset(out);
    while (i < len && err == WEFT_OK) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p + i, len - i, &cp);

        if (n == 0) {
            err = weft__buf_append(out, "\xef\xbf\xbd", 3);
            i++;
        } else {
            err = weft__buf_append(out, p + i, n);
            i += n;
        }
    }
    if (err == WEFT_OK && out->data == NULL) {
        err = weft__buf_reserve(out, 0);
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* JSON columns: writing                                                                       */

static const char *const type_names[] = {
    [WEFT_VALUE_STRING] = "string",
    [WEFT_VALUE_BOOL] = "bool",
    [WEFT_VALUE_INT] = "int",
    [WEFT_VALUE_DOUBLE] = "double",
    [WEFT_VALUE_STRING_ARRAY] = "string_array",
    [WEFT_VALUE_BOOL_ARRAY] = "bool_array",
    [WEFT_VALUE_INT_ARRAY] = "int_array",
    [WEFT_VALUE_DOUBLE_ARRAY] = "double_array",
};

/* A JSON string for @p len bytes of @p s; invalid UTF-8 is replaced rather than refused, so
 * one bad byte in a tool's output cannot lose the span. NULL only on ENOMEM. */
static json_t *
json_text(const char *s, size_t len)
{
    struct weft__buf clean;
    json_t *j = NULL;

    j = json_stringn(s != NULL ? s : "", s != NULL ? len : 0);
    if (j != NULL) {
        return j;
    }
    weft__buf_init(&clean, 0);
    if (utf8_sanitize(s, len, &clean) == WEFT_OK) {
        j = json_stringn(clean.data, clean.len);
    }
    weft__buf_cleanup(&clean);
    return j;
}

static bool
utf8_is_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p + i, len - i, &cp);

        if (n == 0) {
            return false;
        }
        i += n;
    }
    return true;
}

/* Set @p key to @p value in @p obj, replacing invalid UTF-8 in the key as in values (jansson
 * refuses such keys). Steals @p value, also on failure. @return 0 or -1 (ENOMEM). */
static int
json_set(json_t *obj, const char *key, json_t *value)
{
    struct weft__buf clean;
    size_t len = strlen(key);
    int rc = -1;

    if (value == NULL) {
        return -1;
    }
    if (utf8_is_valid(key, len)) {
        return json_object_set_new(obj, key, value);
    }
    weft__buf_init(&clean, 0);
    if (utf8_sanitize(key, len, &clean) == WEFT_OK) {
        rc = json_object_set_new(obj, clean.data, value);
    } else {
        json_decref(value);
    }
    weft__buf_cleanup(&clean);
    return rc;
}

/* Scalars and arrays plain JSON can type; NULL on ENOMEM. */
static json_t *
double_json(double d)
{
    if (isnan(d)) {
        return json_string("NaN");
    }
    if (isinf(d)) {
        return json_string(d > 0 ? "Infinity" : "-Infinity");
    }
    return json_real(d);
}

static json_t *
tagged(weft_value_type type, json_t *value)
{
    json_t *obj = NULL;

    if (value == NULL) {
        return NULL;
    }
    obj = json_object();
    if (obj == NULL) {
        json_decref(value);
        return NULL;
    }
    if (json_object_set_new(obj, "type", json_string(type_names[type])) != 0 ||
        json_object_set_new(obj, "value", value) != 0) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

static json_t *
value_json(const struct weft_value *v)
{
    json_t *arr = NULL;
    bool needs_tag = false;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return json_text(v->u.str, v->len);
    case WEFT_VALUE_BOOL:
        return json_boolean(v->u.b);
    case WEFT_VALUE_INT:
        return json_integer((json_int_t)v->u.i);
    case WEFT_VALUE_DOUBLE:
        if (isfinite(v->u.d)) {
            return json_real(v->u.d);
        }
        return tagged(v->type, double_json(v->u.d));
    case WEFT_VALUE_STRING_ARRAY:
    case WEFT_VALUE_BOOL_ARRAY:
    case WEFT_VALUE_INT_ARRAY:
    case WEFT_VALUE_DOUBLE_ARRAY:
        break;
    default:
        return json_null();
    }
    arr = json_array();
    if (arr == NULL) {
        return NULL;
    }
    /* An empty array has no element to carry its type. */
    needs_tag = v->len == 0;
    for (size_t i = 0; i < v->len; i++) {
        json_t *item = NULL;

        switch (v->type) {
        case WEFT_VALUE_STRING_ARRAY:
            item = json_text(v->u.strs[i], strlen(v->u.strs[i]));
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            item = json_boolean(v->u.bools[i]);
            break;
        case WEFT_VALUE_INT_ARRAY:
            item = json_integer((json_int_t)v->u.ints[i]);
            break;
        default:
            needs_tag = needs_tag || !isfinite(v->u.doubles[i]);
            item = double_json(v->u.doubles[i]);
            break;
        }
        if (item == NULL || json_array_append_new(arr, item) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return needs_tag ? tagged(v->type, arr) : arr;
}

static json_t *
attrs_json(const struct weft_attr *attrs, size_t count)
{
    json_t *obj = json_object();

    if (obj == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        if (attrs[i].key == NULL || json_set(obj, attrs[i].key, value_json(&attrs[i].value)) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

static json_t *
events_json(const struct weft_span_data *span)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->event_count; i++) {
        const struct weft_event_data *ev = &span->events[i];
        json_t *obj = json_object();

        if (obj == NULL || json_array_append_new(arr, obj) != 0 ||
            json_set(obj, "name", json_text(ev->name, ev->name != NULL ? strlen(ev->name) : 0)) !=
                0 ||
            json_set(obj, "time_ns", json_integer((json_int_t)ev->time_ns)) != 0 ||
            json_set(obj, "attributes", attrs_json(ev->attrs, ev->attr_count)) != 0 ||
            (ev->dropped_attrs != 0 &&
             json_set(obj, "dropped_attributes_count", json_integer(ev->dropped_attrs)) != 0)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static json_t *
links_json(const struct weft_span_data *span)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->link_count; i++) {
        const struct weft_link_data *link = &span->links[i];
        char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
        char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
        json_t *obj = json_object();

        weft_hex_encode(link->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
        weft_hex_encode(link->span_id, WEFT_SPAN_ID_SIZE, span_hex);
        if (obj == NULL || json_array_append_new(arr, obj) != 0 ||
            json_set(obj, "trace_id", json_string(trace_hex)) != 0 ||
            json_set(obj, "span_id", json_string(span_hex)) != 0 ||
            (link->trace_state != NULL &&
             json_set(obj, "trace_state",
                      json_text(link->trace_state, strlen(link->trace_state))) != 0) ||
            json_set(obj, "flags", json_integer(link->trace_flags)) != 0 ||
            json_set(obj, "is_remote", json_boolean(link->is_remote)) != 0 ||
            json_set(obj, "attributes", attrs_json(link->attrs, link->attr_count)) != 0 ||
            (link->dropped_attrs != 0 &&
             json_set(obj, "dropped_attributes_count", json_integer(link->dropped_attrs)) != 0)) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int
dump_to_buf(const char *data, size_t size, void *user_data)
{
    return weft__buf_append(user_data, data, size) == WEFT_OK ? 0 : -1;
}

/* Serialise @p j (consumed) into @p out. */
static weft_err
dump_json(json_t *j, struct weft__buf *out)
{
    int rc = 0;

    weft__buf_reset(out);
    if (j == NULL) {
        return WEFT_ENOMEM;
    }
    rc = json_dump_callback(j, dump_to_buf, out, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(j);
    if (rc != 0) {
        return WEFT_ENOMEM;
    }
    return weft__buf_reserve(out, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* JSON columns: reading                                                                       */

static bool
type_from_name(const char *name, weft_value_type *out)
{
    for (size_t i = 0; i < sizeof(type_names) / sizeof(type_names[0]); i++) {
        if (strcmp(type_names[i], name) == 0) {
            *out = (weft_value_type)i;
            return true;
        }
    }
    return false;
}

static bool
double_from_json(const json_t *j, double *out)
{
    const char *s = NULL;

    if (json_is_number(j)) {
        *out = json_number_value(j);
        return true;
    }
    s = json_string_value(j);
    if (s == NULL) {
        return false;
    }
    if (strcmp(s, "NaN") == 0) {
        *out = NAN;
    } else if (strcmp(s, "Infinity") == 0) {
        *out = INFINITY;
    } else if (strcmp(s, "-Infinity") == 0) {
        *out = -INFINITY;
    } else {
        return false;
    }
    return true;
}

/* Element type of a plain JSON array: the first element decides, and integers mixed into
 * reals read as doubles. */
static bool
array_type(const json_t *arr, weft_value_type *out)
{
    size_t i = 0;
    json_t *item = NULL;
    weft_value_type type = WEFT_VALUE_STRING_ARRAY;

    if (json_array_size(arr) == 0) {
        *out = WEFT_VALUE_STRING_ARRAY;
        return true;
    }
    item = json_array_get(arr, 0);
    if (json_is_string(item)) {
        type = WEFT_VALUE_STRING_ARRAY;
    } else if (json_is_boolean(item)) {
        type = WEFT_VALUE_BOOL_ARRAY;
    } else if (json_is_integer(item)) {
        type = WEFT_VALUE_INT_ARRAY;
    } else if (json_is_real(item)) {
        type = WEFT_VALUE_DOUBLE_ARRAY;
    } else {
        return false;
    }
    json_array_foreach(arr, i, item)
    {
        bool ok = false;

        switch (type) {
        case WEFT_VALUE_STRING_ARRAY:
            ok = json_is_string(item);
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            ok = json_is_boolean(item);
            break;
        case WEFT_VALUE_INT_ARRAY:
            ok = json_is_integer(item);
            if (!ok && json_is_real(item)) {
                type = WEFT_VALUE_DOUBLE_ARRAY;
                ok = true;
            }
            break;
        default:
            ok = json_is_number(item);
            break;
        }
        if (!ok) {
            return false;
        }
    }
    *out = type;
    return true;
}

/* Convert an array @p arr of elements of @p type into @p out. @return 0, 1 (malformed:
 * skip the attribute) or -1 (ENOMEM). */
static int
array_value(struct weft__arena *arena,
            const json_t *arr,
            weft_value_type type,
            struct weft_value *out)
{
    size_t n = json_array_size(arr);
    size_t elem = 0;
    void *items = NULL;

    switch (type) {
    case WEFT_VALUE_STRING_ARRAY:
        elem = sizeof(char *);
        break;
    case WEFT_VALUE_BOOL_ARRAY:
        elem = sizeof(bool);
        break;
    case WEFT_VALUE_INT_ARRAY:
        elem = sizeof(int64_t);
        break;
    case WEFT_VALUE_DOUBLE_ARRAY:
        elem = sizeof(double);
        break;
    default:
        return 1;
    }
    if (n > SIZE_MAX / elem) {
        return 1;
    }
    items = weft__arena_alloc(arena, n * elem);
    if (items == NULL) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(arr, i);

        switch (type) {
        case WEFT_VALUE_STRING_ARRAY: {
            const char *s = json_string_value(item);
            char *copy = NULL;

            if (s == NULL) {
                return 1;
            }
            copy = weft__arena_strndup(arena, s, strlen(s));
            if (copy == NULL) {
                return -1;
            }
            ((char **)items)[i] = copy;
            break;
        }
        case WEFT_VALUE_BOOL_ARRAY:
            if (!json_is_boolean(item)) {
                return 1;
            }
            ((bool *)items)[i] = json_is_true(item);
            break;
        case WEFT_VALUE_INT_ARRAY:
            if (!json_is_integer(item)) {
                return 1;
            }
            ((int64_t *)items)[i] = (int64_t)json_integer_value(item);
            break;
        default:
            if (!double_from_json(item, &((double *)items)[i])) {
                return 1;
            }
            break;
        }
    }
    out->type = type;
    out->len = n;
    out->u.ints = items; /* the union's array members share one representation */
    switch (type) {
    case WEFT_VALUE_STRING_ARRAY:
        out->u.strs = (const char *const *)items;
        break;
    case WEFT_VALUE_BOOL_ARRAY:
        out->u.bools = items;
        break;
    case WEFT_VALUE_DOUBLE_ARRAY:
        out->u.doubles = items;
        break;
    default:
        break;
    }
    return 0;
}

/* @return 0, 1 (not a value weft writes: skip it) or -1 (ENOMEM). */
static int
json_value(struct weft__arena *arena, const json_t *j, struct weft_value *out)
{
    weft_value_type type = WEFT_VALUE_STRING;

    memset(out, 0, sizeof(*out));
    switch (json_typeof(j)) {
    case JSON_STRING: {
        size_t len = json_string_length(j);
        char *copy = weft__arena_strndup(arena, json_string_value(j), len);

        if (copy == NULL) {
            return -1;
        }
        out->type = WEFT_VALUE_STRING;
        out->u.str = copy;
        out->len = len;
        return 0;
    }
    case JSON_TRUE:
    case JSON_FALSE:
        out->type = WEFT_VALUE_BOOL;
        out->u.b = json_is_true(j);
        return 0;
    case JSON_INTEGER:
        out->type = WEFT_VALUE_INT;
        out->u.i = (int64_t)json_integer_value(j);
        return 0;
    case JSON_REAL:
        out->type = WEFT_VALUE_DOUBLE;
        out->u.d = json_real_value(j);
        return 0;
    case JSON_ARRAY:
        if (!array_type(j, &type)) {
            return 1;
        }
        return array_value(arena, j, type, out);
    case JSON_OBJECT: {
        const json_t *value = json_object_get(j, "value");
        const char *name = json_string_value(json_object_get(j, "type"));

        if (name == NULL || value == NULL || !type_from_name(name, &type)) {
            return 1;
        }
        if (type == WEFT_VALUE_DOUBLE) {
            out->type = WEFT_VALUE_DOUBLE;
            return double_from_json(value, &out->u.d) ? 0 : 1;
        }
        if (type < WEFT_VALUE_STRING_ARRAY || !json_is_array(value)) {
            return json_value(arena, value, out);
        }
        return array_value(arena, value, type, out);
    }
    default:
        return 1;
    }
}

/* Attributes from a JSON object; values weft would not write are skipped and counted in
 * *dropped. @return WEFT_OK, WEFT_ENOMEM. */
static weft_err
json_attrs(struct weft__arena *arena,
           const json_t *obj,
           const struct weft_attr **out,
           size_t *count,
           uint32_t *dropped)
{
    struct weft_attr *attrs = NULL;
    const char *key = NULL;
    json_t *value = NULL;
    size_t n = 0;

    *out = NULL;
    *count = 0;
    if (!json_is_object(obj) || json_object_size(obj) == 0) {
        return WEFT_OK;
    }
    attrs = weft__arena_alloc(arena, json_object_size(obj) * sizeof(*attrs));
    if (attrs == NULL) {
        return WEFT_ENOMEM;
    }
    json_object_foreach((json_t *)(uintptr_t)obj, key, value)
    {
        int rc = json_value(arena, value, &attrs[n].value);

        if (rc < 0) {
            return WEFT_ENOMEM;
        }
        if (rc > 0 || key[0] == '\0') {
            (*dropped)++;
            continue;
        }
        attrs[n].key = weft__arena_strdup(arena, key);
        if (attrs[n].key == NULL) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    *out = attrs;
    *count = n;
    return WEFT_OK;
}

static uint32_t
json_u32(const json_t *j)
{
    json_int_t v = json_integer_value(j);

    return v < 0 ? 0 : v > (json_int_t)UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static weft_err
json_events(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span)
{
    struct weft_event_data *events = NULL;
    size_t n = 0;

    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        return WEFT_OK;
    }
    events = weft__arena_alloc(arena, json_array_size(arr) * sizeof(*events));
    if (events == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *obj = json_array_get(arr, i);
        struct weft_event_data *ev = &events[n];
        const char *name = json_string_value(json_object_get(obj, "name"));
        json_int_t t = json_integer_value(json_object_get(obj, "time_ns"));

        if (name == NULL) {
            span->dropped_events++;
            continue;
        }
        ev->name = weft__arena_strdup(arena, name);
        ev->time_ns = t < 0 ? 0 : (uint64_t)t;
        ev->dropped_attrs = json_u32(json_object_get(obj, "dropped_attributes_count"));
        if (ev->name == NULL || json_attrs(arena, json_object_get(obj, "attributes"), &ev->attrs,
                                           &ev->attr_count, &ev->dropped_attrs) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    span->events = events;
    span->event_count = n;
    return WEFT_OK;
}

static weft_err
json_links(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span)
{
    struct weft_link_data *links = NULL;
    size_t n = 0;

    if (!json_is_array(arr) || json_array_size(arr) == 0) {
        return WEFT_OK;
    }
    links = weft__arena_alloc(arena, json_array_size(arr) * sizeof(*links));
    if (links == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        const json_t *obj = json_array_get(arr, i);
        struct weft_link_data *link = &links[n];
        const char *trace_hex = json_string_value(json_object_get(obj, "trace_id"));
        const char *span_hex = json_string_value(json_object_get(obj, "span_id"));
        const char *state = json_string_value(json_object_get(obj, "trace_state"));

        if (trace_hex == NULL || span_hex == NULL ||
            weft__hex_decode_id(trace_hex, strlen(trace_hex), link->trace_id, WEFT_TRACE_ID_SIZE) !=
                WEFT_OK ||
            weft__hex_decode_id(span_hex, strlen(span_hex), link->span_id, WEFT_SPAN_ID_SIZE) !=
                WEFT_OK) {
            span->dropped_links++;
            continue;
        }
        link->trace_flags = (uint8_t)json_integer_value(json_object_get(obj, "flags"));
        link->is_remote = json_is_true(json_object_get(obj, "is_remote"));
        link->dropped_attrs = json_u32(json_object_get(obj, "dropped_attributes_count"));
        if (state != NULL) {
            link->trace_state = weft__arena_strdup(arena, state);
            if (link->trace_state == NULL) {
                return WEFT_ENOMEM;
            }
        }
        if (json_attrs(arena, json_object_get(obj, "attributes"), &link->attrs, &link->attr_count,
                       &link->dropped_attrs) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    span->links = links;
    span->link_count = n;
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Schema                                                                                      */

static const char schema_sql[] =
    "CREATE TABLE IF NOT EXISTS spans ("
    " trace_id TEXT NOT NULL,"
    " span_id TEXT NOT NULL,"
    " parent_span_id TEXT,"
    " parent_is_remote INTEGER NOT NULL DEFAULT 0,"
    " trace_state TEXT,"
    " flags INTEGER NOT NULL DEFAULT 0,"
    " name TEXT NOT NULL,"
    " kind INTEGER NOT NULL,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " status_code INTEGER NOT NULL,"
    " status_message TEXT,"
    " attributes TEXT NOT NULL DEFAULT '{}',"
    " events TEXT NOT NULL DEFAULT '[]',"
    " links TEXT NOT NULL DEFAULT '[]',"
    " dropped_attributes_count INTEGER NOT NULL DEFAULT 0,"
    " dropped_events_count INTEGER NOT NULL DEFAULT 0,"
    " dropped_links_count INTEGER NOT NULL DEFAULT 0,"
    " service_name TEXT,"
    " scope_name TEXT,"
    " scope_version TEXT,"
    " PRIMARY KEY (trace_id, span_id));"
    "CREATE INDEX IF NOT EXISTS spans_trace_start ON spans (trace_id, start_ns);"
    "CREATE INDEX IF NOT EXISTS spans_start ON spans (start_ns);"
    "CREATE TABLE IF NOT EXISTS traces ("
    " trace_id TEXT PRIMARY KEY,"
    " start_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL,"
    " span_count INTEGER NOT NULL,"
    " error_count INTEGER NOT NULL,"
    " root_name TEXT,"
    " service_name TEXT,"
    " has_root INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS traces_start ON traces (start_ns);";

static const char insert_sql[] =
    "INSERT OR REPLACE INTO spans (trace_id, span_id, parent_span_id, parent_is_remote,"
    " trace_state, flags, name, kind, start_ns, end_ns, status_code, status_message,"
    " attributes, events, links, dropped_attributes_count, dropped_events_count,"
    " dropped_links_count, service_name, scope_name, scope_version)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
    " ?19, ?20, ?21)";

/* The root is the span without a parent; failing that, one whose parent is remote (a local
 * root in a distributed trace); failing that (the root has not ended yet), the earliest. */
#define ROOT_ORDER \
    "ORDER BY (parent_span_id IS NULL) DESC, parent_is_remote DESC, start_ns, span_id"

static const char summary_sql[] =
    "INSERT OR REPLACE INTO traces (trace_id, start_ns, end_ns, span_count, error_count,"
    " root_name, service_name, has_root)"
    " SELECT ?1, MIN(start_ns), MAX(end_ns), COUNT(*), SUM(status_code = 2),"
    " (SELECT name FROM spans WHERE trace_id = ?1 " ROOT_ORDER " LIMIT 1),"
    " (SELECT service_name FROM spans WHERE trace_id = ?1 " ROOT_ORDER " LIMIT 1),"
    " EXISTS (SELECT 1 FROM spans WHERE trace_id = ?1"
    " AND (parent_span_id IS NULL OR parent_is_remote))"
    " FROM spans WHERE trace_id = ?1";

/* ------------------------------------------------------------------------------------------ */
/* The exporter                                                                                */

struct store_exporter {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *begin;
    sqlite3_stmt *commit;
    sqlite3_stmt *rollback;
    sqlite3_stmt *insert;
    sqlite3_stmt *summary;
    /* The incremental summary (summary_add): prepared on first use. */
    sqlite3_stmt *exists;
    sqlite3_stmt *summary_get;
    sqlite3_stmt *summary_set;
    struct weft__buf attrs_text;
    struct weft__buf events_text;
    struct weft__buf links_text;
    atomic_bool is_shut_down;
    uint64_t failures; /* consecutive failed batches: only the first is logged at ERROR */
};

/* Log a database failure with the path and SQLite's message. */
static void
log_db_error(weft_log_level level, const char *path, sqlite3 *db, const char *what)
{
    WEFT_LOG(level, "store %s: %s: %s", path, what,
             db != NULL ? sqlite3_errmsg(db) : "cannot allocate a connection");
}

static int
exec(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Read an integer: a PRAGMA's value or a one-row query's first column. */
static weft_err
query_int(sqlite3 *db, const char *sql, int *out)
{
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt, NULL);

    if (rc == SQLITE_OK) {
        rc = sqlite3_step(stmt);
    }
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(stmt);
        return WEFT_EIO;
    }
    *out = sqlite3_column_int(stmt, 0);
    sqlite3_finalize(stmt);
    return WEFT_OK;
}

/* Is the open database a weft store this build can read? Stores carry weft's
 * application_id (see sqlite.org/fileformat.html), so another program's database is told
 * apart from an old or empty one. @p why receives the reason when not. */
static weft_err
check_identity(sqlite3 *db, bool is_fresh_ok, int *version, const char **why)
{
    int app_id = 0;
    int tables = 0;

    *why = NULL;
    if (query_int(db, "PRAGMA user_version", version) != WEFT_OK ||
        query_int(db, "PRAGMA application_id", &app_id) != WEFT_OK ||
        query_int(db, "SELECT count(*) FROM sqlite_master", &tables) != WEFT_OK) {
        *why = "not a readable SQLite database";
        return WEFT_EIO;
    }
    if (app_id != WEFT_APPLICATION_ID && (app_id != 0 || tables > 0 || !is_fresh_ok)) {
        *why = "not a weft span store (another application's database?)";
        return WEFT_EIO;
    }
    if (*version > SCHEMA_VERSION) {
        *why = "written by a newer weft (unknown schema version)";
        return WEFT_EIO;
    }
    return WEFT_OK;
}

/* Create the schema on first use, inside one IMMEDIATE transaction so that two processes
 * opening a fresh store at once cannot both create it. */
static weft_err
migrate(struct store_exporter *st)
{
    const char *why = NULL;
    int version = 0;

    if (exec(st->db, "BEGIN IMMEDIATE") != SQLITE_OK) {
        log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot lock the database");
        return WEFT_EIO;
    }
    if (check_identity(st->db, true, &version, &why) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: %s", st->path, why);
        goto fail;
    }
    if (version < SCHEMA_VERSION) {
        char sql[96];

        snprintf(sql, sizeof(sql), "PRAGMA user_version = %d; PRAGMA application_id = %d",
                 SCHEMA_VERSION, WEFT_APPLICATION_ID);
        if (exec(st->db, schema_sql) != SQLITE_OK || exec(st->db, sql) != SQLITE_OK) {
            log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot create the schema");
            goto fail;
        }
    }
    if (exec(st->db, "COMMIT") != SQLITE_OK) {
        log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot commit the schema");
        goto fail;
    }
    return WEFT_OK;
fail:
    exec(st->db, "ROLLBACK");
    return WEFT_EIO;
}

/* Create the database file private before SQLite opens it: SQLite gives its -wal and -shm
 * files the database's permissions, so all three stay 0600. */
static weft_err
create_private(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

    struct stat sb;

    if (fd < 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: cannot create the database: %s", path, strerror(errno));
        return WEFT_EIO;
    }
    /* A database an older weft created 0644 loses group and other access too. */
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077) != 0 &&
        sb.st_uid == geteuid()) {
        (void)fchmod(fd, sb.st_mode & 0700);
    }
    close(fd);
    return WEFT_OK;
}

static weft_err
store_open_write(struct store_exporter *st)
{
    sqlite3_stmt *stmt = NULL;
    const char *mode = NULL;
    bool is_file = strcmp(st->path, ":memory:") != 0;
    weft_err err = WEFT_OK;

    if (is_file) {
        err = weft__mkdir_parents(st->path, 0700);
        if (err == WEFT_EIO) {
            WEFT_LOG(WEFT_LOG_ERROR, "store %s: cannot create its directory: %s", st->path,
                     strerror(errno));
        }
        if (err == WEFT_OK) {
            err = create_private(st->path);
        }
        if (err != WEFT_OK) {
            return err;
        }
    }
    if (sqlite3_open_v2(st->path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
        SQLITE_OK) {
        log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot open");
        return WEFT_EIO;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
    /* journal_mode answers with the mode in force; a file system without shared memory
     * (some network mounts) keeps the rollback journal, which still works, only slower. */
    if (sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &stmt, NULL) != SQLITE_OK ||
        sqlite3_step(stmt) != SQLITE_ROW) {
        sqlite3_finalize(stmt);
        log_db_error(WEFT_LOG_ERROR, st->path, st->db, "not a usable SQLite database");
        return WEFT_EIO;
    }
    mode = (const char *)sqlite3_column_text(stmt, 0);
    if (is_file && (mode == NULL || strcmp(mode, "wal") != 0)) {
        WEFT_LOG(WEFT_LOG_WARN, "store %s: WAL mode unavailable (journal mode %s)", st->path,
                 mode != NULL ? mode : "unknown");
    }
    sqlite3_finalize(stmt);
    if (exec(st->db, "PRAGMA synchronous = NORMAL") != SQLITE_OK) {
        log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot configure");
        return WEFT_EIO;
    }
    err = migrate(st);
    if (err != WEFT_OK) {
        return err;
    }
    if (sqlite3_prepare_v3(st->db, "BEGIN IMMEDIATE", -1, SQLITE_PREPARE_PERSISTENT, &st->begin,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(st->db, "COMMIT", -1, SQLITE_PREPARE_PERSISTENT, &st->commit, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v3(st->db, "ROLLBACK", -1, SQLITE_PREPARE_PERSISTENT, &st->rollback,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v3(st->db, insert_sql, -1, SQLITE_PREPARE_PERSISTENT, &st->insert, NULL) !=
            SQLITE_OK ||
        sqlite3_prepare_v3(st->db, summary_sql, -1, SQLITE_PREPARE_PERSISTENT, &st->summary,
                           NULL) != SQLITE_OK) {
        log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot prepare statements");
        return WEFT_EIO;
    }
    return WEFT_OK;
}

static int
step_once(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);

    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return rc;
}

static sqlite3_int64
ns_column(uint64_t ns)
{
    return ns > (uint64_t)INT64_MAX ? INT64_MAX : (sqlite3_int64)ns;
}

static const char *
service_name_of(const struct weft_span_data *span)
{
    if (span->resource == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < span->resource->attr_count; i++) {
        const struct weft_attr *a = &span->resource->attrs[i];

        if (a->key != NULL && strcmp(a->key, "service.name") == 0 &&
            a->value.type == WEFT_VALUE_STRING) {
            return a->value.u.str;
        }
    }
    return NULL;
}

static bool
is_zero(const uint8_t *bytes, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (bytes[i] != 0) {
            return false;
        }
    }
    return true;
}

static weft_err
insert_span(struct store_exporter *st, const struct weft_span_data *span)
{
    sqlite3_stmt *s = st->insert;
    char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
    char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    char parent_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    bool has_parent = span->has_parent && !is_zero(span->parent_span_id, WEFT_SPAN_ID_SIZE);
    weft_err err = WEFT_OK;

    err = dump_json(attrs_json(span->attrs, span->attr_count), &st->attrs_text);
    if (err == WEFT_OK) {
        err = dump_json(events_json(span), &st->events_text);
    }
    if (err == WEFT_OK) {
        err = dump_json(links_json(span), &st->links_text);
    }
    if (err != WEFT_OK) {
        return err;
    }
    weft_hex_encode(span->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
    weft_hex_encode(span->span_id, WEFT_SPAN_ID_SIZE, span_hex);
    weft_hex_encode(span->parent_span_id, WEFT_SPAN_ID_SIZE, parent_hex);
    /* Every text is bound SQLITE_TRANSIENT or outlives the step (the JSON buffers are only
     * rewritten for the next span, after step_once has reset the statement). */
    sqlite3_bind_text(s, 1, trace_hex, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 2, span_hex, -1, SQLITE_TRANSIENT);
    if (has_parent) {
        sqlite3_bind_text(s, 3, parent_hex, -1, SQLITE_TRANSIENT);
    }
    sqlite3_bind_int(s, 4, has_parent && span->parent_is_remote);
    if (span->trace_state != NULL) {
        sqlite3_bind_text(s, 5, span->trace_state, -1, SQLITE_STATIC);
    }
    sqlite3_bind_int(s, 6, span->trace_flags);
    sqlite3_bind_text(s, 7, span->name != NULL ? span->name : "", -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 8, (int)span->kind);
    sqlite3_bind_int64(s, 9, ns_column(span->start_time_ns));
    sqlite3_bind_int64(s, 10, ns_column(span->end_time_ns));
    sqlite3_bind_int(s, 11, (int)span->status_code);
    if (span->status_message != NULL && span->status_code == WEFT_STATUS_ERROR) {
        sqlite3_bind_text(s, 12, span->status_message, -1, SQLITE_STATIC);
    }
    sqlite3_bind_text(s, 13, st->attrs_text.data, (int)st->attrs_text.len, SQLITE_STATIC);
    sqlite3_bind_text(s, 14, st->events_text.data, (int)st->events_text.len, SQLITE_STATIC);
    sqlite3_bind_text(s, 15, st->links_text.data, (int)st->links_text.len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 16, span->dropped_attrs);
    sqlite3_bind_int64(s, 17, span->dropped_events);
    sqlite3_bind_int64(s, 18, span->dropped_links);
    if (service_name_of(span) != NULL) {
        sqlite3_bind_text(s, 19, service_name_of(span), -1, SQLITE_STATIC);
    }
    if (span->scope != NULL && span->scope->name != NULL) {
        sqlite3_bind_text(s, 20, span->scope->name, -1, SQLITE_STATIC);
    }
    if (span->scope != NULL && span->scope->version != NULL) {
        sqlite3_bind_text(s, 21, span->scope->version, -1, SQLITE_STATIC);
    }
    return step_once(s) == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

static weft_err
update_summary(struct store_exporter *st, const uint8_t *trace_id)
{
    char hex[2 * WEFT_TRACE_ID_SIZE + 1];

    weft_hex_encode(trace_id, WEFT_TRACE_ID_SIZE, hex);
    sqlite3_bind_text(st->summary, 1, hex, -1, SQLITE_TRANSIENT);
    return step_once(st->summary) == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

/* What one batch adds to one trace's summary. A run's spans reach the store in many small
 * batches (a flush at each checkpoint, docs/durability.md), so recomputing the summary from
 * every span of the trace each time would make a step's cost grow with the trace. */
struct trace_delta {
    const uint8_t *trace_id;
    const struct weft_span_data *earliest; /* by (start, span id) */
    uint64_t max_end;
    int64_t count;
    int64_t errors;
    bool needs_full; /* a span replaced, or a root candidate: recompute from the spans */
};

static bool
is_root_candidate(const struct weft_span_data *span)
{
    return !span->has_parent || is_zero(span->parent_span_id, WEFT_SPAN_ID_SIZE) ||
           span->parent_is_remote;
}

static bool
is_earlier(const struct weft_span_data *a, const struct weft_span_data *b)
{
    return a->start_time_ns < b->start_time_ns ||
           (a->start_time_ns == b->start_time_ns &&
            memcmp(a->span_id, b->span_id, WEFT_SPAN_ID_SIZE) < 0);
}

static int
prepare_once(struct store_exporter *st, sqlite3_stmt **stmt, const char *sql)
{
    if (*stmt != NULL) {
        return SQLITE_OK;
    }
    return sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT, stmt, NULL);
}

/* Is the span already stored (so that inserting it replaces a row)? -1 on error. */
static int
span_exists(struct store_exporter *st, const struct weft_span_data *span)
{
    char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
    char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    int rc =
        prepare_once(st, &st->exists, "SELECT 1 FROM spans WHERE trace_id = ?1 AND span_id = ?2");

    if (rc != SQLITE_OK) {
        return -1;
    }
    weft_hex_encode(span->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
    weft_hex_encode(span->span_id, WEFT_SPAN_ID_SIZE, span_hex);
    sqlite3_bind_text(st->exists, 1, trace_hex, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st->exists, 2, span_hex, -1, SQLITE_TRANSIENT);
    rc = step_once(st->exists);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

/* Add @p d to its trace's summary row, with the same result as summary_sql: the root is the
 * parentless span, else one with a remote parent, else the earliest span. Falls back to
 * summary_sql when the batch replaced a span, holds a root candidate, ties with the stored
 * earliest span, or the trace has no summary yet. */
static weft_err
summary_add(struct store_exporter *st, const struct trace_delta *d)
{
    char hex[2 * WEFT_TRACE_ID_SIZE + 1];
    sqlite3_stmt *get = NULL;
    sqlite3_stmt *set = NULL;
    uint64_t start = 0;
    bool has_root = false;
    bool is_new_root = false;
    int rc = 0;

    if (d->needs_full) {
        return update_summary(st, d->trace_id);
    }
    if (prepare_once(st, &st->summary_get,
                     "SELECT start_ns, has_root FROM traces WHERE trace_id = ?1") != SQLITE_OK ||
        prepare_once(st, &st->summary_set,
                     "UPDATE traces SET start_ns = MIN(start_ns, ?2), end_ns = MAX(end_ns, ?3),"
                     " span_count = span_count + ?4, error_count = error_count + ?5,"
                     " root_name = CASE WHEN ?6 THEN ?7 ELSE root_name END,"
                     " service_name = CASE WHEN ?6 THEN ?8 ELSE service_name END"
                     " WHERE trace_id = ?1") != SQLITE_OK) {
        return WEFT_EIO;
    }
    get = st->summary_get;
    set = st->summary_set;
    weft_hex_encode(d->trace_id, WEFT_TRACE_ID_SIZE, hex);
    sqlite3_bind_text(get, 1, hex, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(get);
    if (rc == SQLITE_ROW) {
        start = (uint64_t)sqlite3_column_int64(get, 0);
        has_root = sqlite3_column_int(get, 1) != 0;
    }
    sqlite3_reset(get);
    sqlite3_clear_bindings(get);
    if (rc == SQLITE_DONE || (!has_root && d->earliest->start_time_ns == start)) {
        return update_summary(st, d->trace_id);
    }
    if (rc != SQLITE_ROW) {
        return WEFT_EIO;
    }
    /* Without a root, the earliest span names the trace. */
    is_new_root = !has_root && d->earliest->start_time_ns < start;
    sqlite3_bind_text(set, 1, hex, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(set, 2, ns_column(d->earliest->start_time_ns));
    sqlite3_bind_int64(set, 3, ns_column(d->max_end));
    sqlite3_bind_int64(set, 4, d->count);
    sqlite3_bind_int64(set, 5, d->errors);
    sqlite3_bind_int(set, 6, is_new_root);
    if (is_new_root) {
        sqlite3_bind_text(set, 7, d->earliest->name != NULL ? d->earliest->name : "", -1,
                          SQLITE_STATIC);
        if (service_name_of(d->earliest) != NULL) {
            sqlite3_bind_text(set, 8, service_name_of(d->earliest), -1, SQLITE_STATIC);
        }
    }
    return step_once(set) == SQLITE_DONE ? WEFT_OK : WEFT_EIO;
}

static weft_err
write_batch(struct store_exporter *st, const struct weft_span_data *const *spans, size_t count)
{
    struct trace_delta *deltas = weft__calloc(count, sizeof(*deltas));
    size_t traces = 0;
    weft_err err = WEFT_OK;

    if (deltas == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < count && err == WEFT_OK; i++) {
        const struct weft_span_data *span = spans[i];
        struct trace_delta *d = NULL;
        int exists = span_exists(st, span);

        for (size_t t = 0; t < traces && d == NULL; t++) {
            if (memcmp(deltas[t].trace_id, span->trace_id, WEFT_TRACE_ID_SIZE) == 0) {
                d = &deltas[t];
            }
        }
        if (d == NULL) {
            d = &deltas[traces++];
            d->trace_id = span->trace_id;
            d->earliest = span;
        }
        d->needs_full = d->needs_full || exists != 0 || is_root_candidate(span);
        if (is_earlier(span, d->earliest)) {
            d->earliest = span;
        }
        if (span->end_time_ns > d->max_end) {
            d->max_end = span->end_time_ns;
        }
        d->count++;
        d->errors += span->status_code == WEFT_STATUS_ERROR;
        err = exists < 0 ? WEFT_EIO : insert_span(st, span);
    }
    /* Refresh the summary of every trace the batch touched, once each. */
    for (size_t t = 0; t < traces && err == WEFT_OK; t++) {
        err = summary_add(st, &deltas[t]);
    }
    weft__free(deltas);
    return err;
}

static weft_err
store_export(void *self,
             const struct weft_span_data *const *spans,
             size_t count,
             uint64_t deadline_ns,
             struct weft_export_result *result)
{
    struct store_exporter *st = self;
    weft_err err = WEFT_OK;

    (void)deadline_ns; /* bounded by the busy timeout, well inside any export deadline */
    (void)result;
    if (atomic_load(&st->is_shut_down)) {
        return WEFT_ESTATE;
    }
    if (count == 0) {
        return WEFT_OK;
    }
    if (spans == NULL) {
        return WEFT_EINVAL;
    }
    if (step_once(st->begin) != SQLITE_DONE) {
        err = WEFT_EIO;
    } else {
        err = write_batch(st, spans, count);
        if (err == WEFT_OK && step_once(st->commit) != SQLITE_DONE) {
            err = WEFT_EIO;
        }
    }
    if (err == WEFT_OK) {
        if (st->failures > 0) {
            WEFT_LOG(WEFT_LOG_INFO, "store %s: writing again after %" PRIu64 " failed batches",
                     st->path, st->failures);
        }
        st->failures = 0;
        return WEFT_OK;
    }
    /* Log before ROLLBACK replaces SQLite's message. */
    if (err == WEFT_ENOMEM) {
        WEFT_LOG(st->failures == 0 ? WEFT_LOG_ERROR : WEFT_LOG_DEBUG,
                 "store %s: out of memory encoding a batch", st->path);
    } else {
        log_db_error(st->failures == 0 ? WEFT_LOG_ERROR : WEFT_LOG_DEBUG, st->path, st->db,
                     "cannot write a batch");
    }
    st->failures++;
    if (!sqlite3_get_autocommit(st->db)) {
        step_once(st->rollback);
    }
    return err == WEFT_ENOMEM ? WEFT_ENOMEM : WEFT_EIO;
}

static weft_err
store_force_flush(void *self, uint64_t deadline_ns)
{
    (void)self;
    (void)deadline_ns;
    return WEFT_OK; /* every batch is committed before export returns */
}

static weft_err
store_shutdown(void *self, uint64_t deadline_ns)
{
    struct store_exporter *st = self;

    (void)deadline_ns;
    atomic_store(&st->is_shut_down, true);
    return WEFT_OK;
}

static void
store_destroy(void *self)
{
    struct store_exporter *st = self;

    if (st == NULL) {
        return;
    }
    sqlite3_finalize(st->begin);
    sqlite3_finalize(st->commit);
    sqlite3_finalize(st->rollback);
    sqlite3_finalize(st->insert);
    sqlite3_finalize(st->summary);
    sqlite3_finalize(st->exists);
    sqlite3_finalize(st->summary_get);
    sqlite3_finalize(st->summary_set);
    /* sqlite3_close_v2 checkpoints the WAL when this is the last connection. */
    sqlite3_close_v2(st->db);
    weft__buf_cleanup(&st->attrs_text);
    weft__buf_cleanup(&st->events_text);
    weft__buf_cleanup(&st->links_text);
    weft__free(st->path);
    weft__free(st);
}

static const struct weft_exporter_ops store_ops = {
    .name = "store",
    .export_batch = store_export,
    .force_flush = store_force_flush,
    .shutdown = store_shutdown,
    .destroy = store_destroy,
};

weft_err
weft_store_exporter_new(const char *db_path, struct weft_exporter **out)
{
    struct store_exporter *st = NULL;
    char default_path[4096];
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (db_path == NULL) {
        err = weft_store_default_path(default_path, sizeof(default_path));
        if (err != WEFT_OK) {
            return err;
        }
        db_path = default_path;
    }
    if (db_path[0] == '\0') {
        return WEFT_EINVAL;
    }
    st = weft__calloc(1, sizeof(*st));
    if (st == NULL) {
        return WEFT_ENOMEM;
    }
    atomic_init(&st->is_shut_down, false);
    weft__buf_init(&st->attrs_text, JSON_COLUMN_MAX);
    weft__buf_init(&st->events_text, JSON_COLUMN_MAX);
    weft__buf_init(&st->links_text, JSON_COLUMN_MAX);
    st->path = weft__strdup(db_path);
    if (st->path == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    err = store_open_write(st);
    if (err != WEFT_OK) {
        goto fail;
    }
    return weft_exporter_new(&store_ops, st, out);
fail:
    store_destroy(st);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Read API                                                                                    */

struct weft_store {
    sqlite3 *db;
    char *path;
    char errmsg[512];
};

struct weft_trace {
    struct weft__arena arena;
    struct weft_span_data **spans; /* tree order */
    size_t *depth;
    size_t count;
};

static void set_errmsg(struct weft_store *store, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
set_errmsg(struct weft_store *store, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(store->errmsg, sizeof(store->errmsg), fmt, ap);
    va_end(ap);
}

static weft_err
db_failure(struct weft_store *store, const char *what)
{
    set_errmsg(store, "%s: %s", what, sqlite3_errmsg(store->db));
    WEFT_LOG(WEFT_LOG_DEBUG, "store %s: %s", store->path, store->errmsg);
    return WEFT_EIO;
}

weft_err
weft_store_open(const char *db_path, struct weft_store **out)
{
    struct weft_store *store = NULL;
    char default_path[4096];
    struct stat st;
    const char *why = NULL;
    int version = 0;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (db_path == NULL) {
        err = weft_store_default_path(default_path, sizeof(default_path));
        if (err != WEFT_OK) {
            return err;
        }
        db_path = default_path;
    }
    if (stat(db_path, &st) != 0) {
        return errno == ENOENT || errno == ENOTDIR ? WEFT_ENOTFOUND : WEFT_EIO;
    }
    store = weft__calloc(1, sizeof(*store));
    if (store == NULL) {
        return WEFT_ENOMEM;
    }
    store->path = weft__strdup(db_path);
    if (store->path == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    if (sqlite3_open_v2(db_path, &store->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        log_db_error(WEFT_LOG_ERROR, db_path, store->db, "cannot open");
        err = WEFT_EIO;
        goto fail;
    }
    sqlite3_extended_result_codes(store->db, 1);
    sqlite3_busy_timeout(store->db, BUSY_TIMEOUT_MS);
    if (check_identity(store->db, false, &version, &why) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "store %s: %s", db_path, why);
        err = WEFT_EIO;
        goto fail;
    }
    *out = store;
    return WEFT_OK;
fail:
    weft_store_close(store);
    return err;
}

void
weft_store_close(struct weft_store *store)
{
    if (store == NULL) {
        return;
    }
    sqlite3_close_v2(store->db);
    weft__free(store->path);
    weft__free(store);
}

const char *
weft_store_path(const struct weft_store *store)
{
    return store != NULL ? store->path : "";
}

const char *
weft_store_errmsg(const struct weft_store *store)
{
    return store != NULL ? store->errmsg : "no store";
}

static char *
column_strdup(sqlite3_stmt *stmt, int col)
{
    const unsigned char *text = sqlite3_column_text(stmt, col);

    return text != NULL ? weft__strndup((const char *)text, (size_t)sqlite3_column_bytes(stmt, col))
                        : NULL;
}

static uint64_t
column_ns(sqlite3_stmt *stmt, int col)
{
    sqlite3_int64 v = sqlite3_column_int64(stmt, col);

    return v < 0 ? 0 : (uint64_t)v;
}

weft_err
weft_store_list_traces(struct weft_store *store,
                       size_t limit,
                       struct weft_trace_summary **out,
                       size_t *count)
{
    sqlite3_stmt *stmt = NULL;
    struct weft_trace_summary *list = NULL;
    size_t n = 0;
    size_t cap = 0;
    int rc = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    if (store == NULL || out == NULL || count == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    if (limit == 0) {
        limit = 20;
    }
    if (limit > 100000) {
        limit = 100000;
    }
    if (sqlite3_prepare_v2(store->db,
                           "SELECT trace_id, start_ns, end_ns, span_count, error_count, root_name,"
                           " service_name, has_root FROM traces"
                           " ORDER BY start_ns DESC, trace_id LIMIT ?1",
                           -1, &stmt, NULL) != SQLITE_OK) {
        return db_failure(store, "cannot list traces");
    }
    sqlite3_bind_int64(stmt, 1, (sqlite3_int64)limit);
    for (;;) {
        struct weft_trace_summary *sum = NULL;
        sqlite3_int64 spans = 0;
        sqlite3_int64 errors = 0;
        const unsigned char *id = NULL;

        rc = sqlite3_step(stmt);
        if (rc != SQLITE_ROW) {
            break;
        }
        if (n == cap) {
            size_t new_cap = cap == 0 ? 32 : cap * 2;
            struct weft_trace_summary *grown = weft__realloc(list, new_cap * sizeof(*grown));

            if (grown == NULL) {
                err = WEFT_ENOMEM;
                goto fail;
            }
            list = grown;
            cap = new_cap;
        }
        sum = &list[n++];
        memset(sum, 0, sizeof(*sum));
        id = sqlite3_column_text(stmt, 0);
        spans = sqlite3_column_int64(stmt, 3);
        errors = sqlite3_column_int64(stmt, 4);
        snprintf(sum->trace_id, sizeof(sum->trace_id), "%s", id != NULL ? (const char *)id : "");
        sum->start_ns = column_ns(stmt, 1);
        sum->end_ns = column_ns(stmt, 2);
        sum->span_count = spans < 0 ? 0 : (size_t)spans;
        sum->error_count = errors < 0 ? 0 : (size_t)errors;
        sum->has_root = sqlite3_column_int(stmt, 7) != 0;
        sum->root_name =
            sqlite3_column_type(stmt, 5) != SQLITE_NULL ? column_strdup(stmt, 5) : weft__strdup("");
        if (sqlite3_column_type(stmt, 6) != SQLITE_NULL) {
            sum->service_name = column_strdup(stmt, 6);
            if (sum->service_name == NULL) {
                err = WEFT_ENOMEM;
                goto fail;
            }
        }
        if (sum->root_name == NULL) {
            err = WEFT_ENOMEM;
            goto fail;
        }
    }
    if (rc != SQLITE_DONE) {
        err = db_failure(store, "cannot list traces");
        goto fail;
    }
    sqlite3_finalize(stmt);
    if (n == 0) {
        weft__free(list);
        list = NULL;
    }
    *out = list;
    *count = n;
    return WEFT_OK;
fail:
    sqlite3_finalize(stmt);
    weft_trace_summaries_free(list, n);
    return err;
}

void
weft_trace_summaries_free(struct weft_trace_summary *summaries, size_t count)
{
    if (summaries == NULL) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        weft__free((char *)(uintptr_t)summaries[i].root_name);
        weft__free((char *)(uintptr_t)summaries[i].service_name);
    }
    weft__free(summaries);
}

/* Lowercase @p ref into @p out if it is 1..32 hex characters. */
static bool
normalise_hex(const char *ref, char out[WEFT_TRACE_ID_HEX_LEN + 1])
{
    size_t len = strlen(ref);

    if (len == 0 || len > WEFT_TRACE_ID_HEX_LEN) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = ref[i];

        if (c >= 'A' && c <= 'F') {
            c = (char)(c - 'A' + 'a');
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return false;
        }
        out[i] = c;
    }
    out[len] = '\0';
    return true;
}

weft_err
weft_store_resolve(struct weft_store *store, const char *ref, char out[WEFT_TRACE_ID_HEX_LEN + 1])
{
    sqlite3_stmt *stmt = NULL;
    char prefix[WEFT_TRACE_ID_HEX_LEN + 1];
    char upper[WEFT_TRACE_ID_HEX_LEN + 2];
    char found[3][WEFT_TRACE_ID_HEX_LEN + 1];
    size_t matches = 0;
    int rc = 0;
    bool is_last = false;

    if (out != NULL) {
        out[0] = '\0';
    }
    if (store == NULL || ref == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    is_last = strcmp(ref, "last") == 0;
    if (!is_last && !normalise_hex(ref, prefix)) {
        set_errmsg(store, "'%.64s' is not a trace id: expected 'last' or up to 32 hex digits", ref);
        return WEFT_EINVAL;
    }
    if (is_last) {
        rc = sqlite3_prepare_v2(store->db,
                                "SELECT trace_id FROM traces ORDER BY start_ns DESC, trace_id"
                                " LIMIT 1",
                                -1, &stmt, NULL);
    } else {
        /* Every id that starts with the prefix sorts in [prefix, prefix + "g"): the next
         * character of such an id is a hex digit, and all of them sort below 'g'. This keeps
         * the lookup on the primary key index. */
        snprintf(upper, sizeof(upper), "%sg", prefix);
        rc = sqlite3_prepare_v2(store->db,
                                "SELECT trace_id FROM traces WHERE trace_id >= ?1 AND trace_id < ?2"
                                " ORDER BY trace_id LIMIT 3",
                                -1, &stmt, NULL);
        sqlite3_bind_text(stmt, 1, prefix, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 2, upper, -1, SQLITE_STATIC);
    }
    if (rc != SQLITE_OK) {
        return db_failure(store, "cannot look the trace up");
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW && matches < 3) {
        const unsigned char *id = sqlite3_column_text(stmt, 0);

        snprintf(found[matches++], sizeof(found[0]), "%s", id != NULL ? (const char *)id : "");
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        weft_err err = db_failure(store, "cannot look the trace up");

        sqlite3_finalize(stmt);
        return err;
    }
    sqlite3_finalize(stmt);
    if (matches == 0) {
        if (is_last) {
            set_errmsg(store, "the store has no traces yet");
        } else {
            set_errmsg(store, "no trace matches '%s'", prefix);
        }
        return WEFT_ENOTFOUND;
    }
    if (matches > 1) {
        set_errmsg(store, "'%s' is ambiguous: it matches %s, %s%s; give more digits", prefix,
                   found[0], found[1], matches > 2 ? " and more" : "");
        return WEFT_EINVAL;
    }
    memcpy(out, found[0], sizeof(found[0]));
    return WEFT_OK;
}

size_t
weft_trace_span_count(const struct weft_trace *trace)
{
    return trace != NULL ? trace->count : 0;
}

const struct weft_span_data *
weft_trace_span(const struct weft_trace *trace, size_t index)
{
    return trace != NULL && index < trace->count ? trace->spans[index] : NULL;
}

size_t
weft_trace_span_depth(const struct weft_trace *trace, size_t index)
{
    return trace != NULL && index < trace->count ? trace->depth[index] : 0;
}

void
weft_trace_free(struct weft_trace *trace)
{
    if (trace == NULL) {
        return;
    }
    weft__arena_cleanup(&trace->arena);
    weft__free(trace);
}

enum {
    COL_SPAN_ID,
    COL_PARENT,
    COL_PARENT_REMOTE,
    COL_TRACE_STATE,
    COL_FLAGS,
    COL_NAME,
    COL_KIND,
    COL_START,
    COL_END,
    COL_STATUS,
    COL_STATUS_MESSAGE,
    COL_ATTRS,
    COL_EVENTS,
    COL_LINKS,
    COL_DROPPED_ATTRS,
    COL_DROPPED_EVENTS,
    COL_DROPPED_LINKS,
    COL_SERVICE,
    COL_SCOPE_NAME,
    COL_SCOPE_VERSION
};

static const char load_sql[] =
    "SELECT span_id, parent_span_id, parent_is_remote, trace_state, flags, name, kind, start_ns,"
    " end_ns, status_code, status_message, attributes, events, links, dropped_attributes_count,"
    " dropped_events_count, dropped_links_count, service_name, scope_name, scope_version"
    " FROM spans WHERE trace_id = ?1 ORDER BY start_ns, span_id LIMIT ?2";

static const char *
arena_column(struct weft__arena *arena, sqlite3_stmt *stmt, int col, bool *is_oom)
{
    const unsigned char *text = sqlite3_column_text(stmt, col);
    char *copy = NULL;

    if (text == NULL) {
        return NULL;
    }
    copy = weft__arena_strndup(arena, (const char *)text, (size_t)sqlite3_column_bytes(stmt, col));
    if (copy == NULL) {
        *is_oom = true;
    }
    return copy;
}

/* Parse a JSON column; a corrupt column is logged and read as empty rather than failing the
 * whole trace: a damaged attribute blob should not hide the span tree. */
static json_t *
json_column(struct weft_store *store, sqlite3_stmt *stmt, int col, const char *what)
{
    const char *text = (const char *)sqlite3_column_text(stmt, col);
    json_error_t error;
    json_t *j = NULL;

    if (text == NULL) {
        return NULL;
    }
    j = json_loadb(text, (size_t)sqlite3_column_bytes(stmt, col), JSON_ALLOW_NUL, &error);
    if (j == NULL) {
        WEFT_LOG(WEFT_LOG_WARN, "store %s: span %s: unreadable %s column: %s", store->path,
                 sqlite3_column_text(stmt, COL_SPAN_ID), what, error.text);
    }
    return j;
}

static weft_err
row_to_span(struct weft_store *store,
            struct weft__arena *arena,
            sqlite3_stmt *stmt,
            const uint8_t *trace_id,
            struct weft_span_data **out)
{
    struct weft_span_data *span = weft__arena_alloc(arena, sizeof(*span));
    struct weft_resource *resource = weft__arena_alloc(arena, sizeof(*resource));
    struct weft_scope *scope = weft__arena_alloc(arena, sizeof(*scope));
    const char *span_hex = (const char *)sqlite3_column_text(stmt, COL_SPAN_ID);
    const char *parent_hex = (const char *)sqlite3_column_text(stmt, COL_PARENT);
    json_t *attrs = NULL;
    json_t *events = NULL;
    json_t *links = NULL;
    bool is_oom = false;
    weft_err err = WEFT_OK;

    *out = NULL;
    if (span == NULL || resource == NULL || scope == NULL) {
        return WEFT_ENOMEM;
    }
    if (span_hex == NULL || weft__hex_decode_id(span_hex, strlen(span_hex), span->span_id,
                                                WEFT_SPAN_ID_SIZE) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "store %s: skipping a span with a malformed id", store->path);
        return WEFT_OK;
    }
    memcpy(span->trace_id, trace_id, WEFT_TRACE_ID_SIZE);
    if (parent_hex != NULL &&
        weft__hex_decode_id(parent_hex, strlen(parent_hex), span->parent_span_id,
                            WEFT_SPAN_ID_SIZE) == WEFT_OK) {
        span->has_parent = true;
        span->parent_is_remote = sqlite3_column_int(stmt, COL_PARENT_REMOTE) != 0;
    }
    span->trace_flags = (uint8_t)sqlite3_column_int(stmt, COL_FLAGS);
    span->trace_state = arena_column(arena, stmt, COL_TRACE_STATE, &is_oom);
    span->name = arena_column(arena, stmt, COL_NAME, &is_oom);
    if (span->name == NULL && !is_oom) {
        span->name = "";
    }
    span->kind = (weft_span_kind)sqlite3_column_int(stmt, COL_KIND);
    span->start_time_ns = column_ns(stmt, COL_START);
    span->end_time_ns = column_ns(stmt, COL_END);
    span->status_code = (weft_status_code)sqlite3_column_int(stmt, COL_STATUS);
    span->status_message = arena_column(arena, stmt, COL_STATUS_MESSAGE, &is_oom);
    span->dropped_attrs = (uint32_t)sqlite3_column_int64(stmt, COL_DROPPED_ATTRS);
    span->dropped_events = (uint32_t)sqlite3_column_int64(stmt, COL_DROPPED_EVENTS);
    span->dropped_links = (uint32_t)sqlite3_column_int64(stmt, COL_DROPPED_LINKS);
    scope->name = arena_column(arena, stmt, COL_SCOPE_NAME, &is_oom);
    scope->version = arena_column(arena, stmt, COL_SCOPE_VERSION, &is_oom);
    if (scope->name == NULL && !is_oom) {
        scope->name = "";
    }
    span->scope = scope;
    span->resource = resource;
    if (sqlite3_column_type(stmt, COL_SERVICE) != SQLITE_NULL) {
        struct weft_attr *attr = weft__arena_alloc(arena, sizeof(*attr));
        const char *service = arena_column(arena, stmt, COL_SERVICE, &is_oom);

        if (attr != NULL && service != NULL) {
            attr->key = "service.name";
            attr->value.type = WEFT_VALUE_STRING;
            attr->value.u.str = service;
            attr->value.len = strlen(service);
            resource->attrs = attr;
            resource->attr_count = 1;
        } else {
            is_oom = true;
        }
    }
    if (is_oom) {
        return WEFT_ENOMEM;
    }
    attrs = json_column(store, stmt, COL_ATTRS, "attributes");
    events = json_column(store, stmt, COL_EVENTS, "events");
    links = json_column(store, stmt, COL_LINKS, "links");
    err = json_attrs(arena, attrs, &span->attrs, &span->attr_count, &span->dropped_attrs);
    if (err == WEFT_OK) {
        err = json_events(arena, events, span);
    }
    if (err == WEFT_OK) {
        err = json_links(arena, links, span);
    }
    json_decref(attrs);
    json_decref(events);
    json_decref(links);
    if (err == WEFT_OK) {
        *out = span;
    }
    return err;
}

weft_err
weft_store_load_trace(struct weft_store *store, const char *trace_id, struct weft_trace **out)
{
    sqlite3_stmt *stmt = NULL;
    struct weft_trace *trace = NULL;
    struct weft_span_data **rows = NULL;
    size_t *order = NULL;
    char hex[WEFT_TRACE_ID_HEX_LEN + 1];
    uint8_t id[WEFT_TRACE_ID_SIZE];
    size_t n = 0;
    size_t cap = 0;
    int rc = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (store == NULL || trace_id == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    store->errmsg[0] = '\0';
    if (strlen(trace_id) != WEFT_TRACE_ID_HEX_LEN || !normalise_hex(trace_id, hex) ||
        weft__hex_decode_id(hex, WEFT_TRACE_ID_HEX_LEN, id, sizeof(id)) != WEFT_OK) {
        set_errmsg(store, "'%.64s' is not a 32-digit hex trace id", trace_id);
        return WEFT_EINVAL;
    }
    trace = weft__calloc(1, sizeof(*trace));
    if (trace == NULL) {
        return WEFT_ENOMEM;
    }
    weft__arena_init(&trace->arena);
    if (sqlite3_prepare_v2(store->db, load_sql, -1, &stmt, NULL) != SQLITE_OK) {
        err = db_failure(store, "cannot load the trace");
        goto fail;
    }
    sqlite3_bind_text(stmt, 1, hex, -1, SQLITE_STATIC);
    sqlite3_bind_int64(stmt, 2, MAX_LOADED_SPANS);
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        struct weft_span_data *span = NULL;

        if (n == cap) {
            size_t new_cap = cap == 0 ? 64 : cap * 2;
            struct weft_span_data **grown = weft__realloc(rows, new_cap * sizeof(*rows));

            if (grown == NULL) {
                err = WEFT_ENOMEM;
                goto fail;
            }
            rows = grown;
            cap = new_cap;
        }
        err = row_to_span(store, &trace->arena, stmt, id, &span);
        if (err != WEFT_OK) {
            goto fail;
        }
        if (span != NULL) {
            rows[n++] = span;
        }
    }
    if (rc != SQLITE_DONE) {
        err = db_failure(store, "cannot load the trace");
        goto fail;
    }
    if (n == 0) {
        set_errmsg(store, "no spans stored for trace %s", hex);
        err = WEFT_ENOTFOUND;
        goto fail;
    }
    trace->spans = weft__arena_alloc(&trace->arena, n * sizeof(*trace->spans));
    trace->depth = weft__arena_alloc(&trace->arena, n * sizeof(*trace->depth));
    order = weft__malloc(n * sizeof(*order));
    if (trace->spans == NULL || trace->depth == NULL || order == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    err =
        weft__trace_tree((const struct weft_span_data *const *)rows, n, order, trace->depth, NULL);
    if (err != WEFT_OK) {
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        trace->spans[i] = rows[order[i]];
    }
    trace->count = n;
    sqlite3_finalize(stmt);
    weft__free(order);
    weft__free(rows);
    *out = trace;
    return WEFT_OK;
fail:
    sqlite3_finalize(stmt);
    weft__free(order);
    weft__free(rows);
    weft_trace_free(trace);
    return err;
}

weft_err
weft_trace_render(const struct weft_trace *trace, FILE *stream, unsigned flags)
{
    if (trace == NULL || stream == NULL) {
        return WEFT_EINVAL;
    }
    return weft__render_spans(stream, (const struct weft_span_data *const *)trace->spans,
                              trace->count, flags, NULL);
}

/* ------------------------------------------------------------------------------------------ */
/* Tree order                                                                                  */

struct by_start {
    uint64_t start;
    uint64_t end;
    const char *name;
    size_t index;
};

static int
cmp_by_start(const void *a, const void *b)
{
    const struct by_start *x = a;
    const struct by_start *y = b;
    int c = 0;

    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    /* Of two spans that start together, the longer one is more likely the parent. */
    if (x->end != y->end) {
        return x->end > y->end ? -1 : 1;
    }
    c = strcmp(x->name != NULL ? x->name : "", y->name != NULL ? y->name : "");
    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

struct by_id {
    uint8_t id[WEFT_SPAN_ID_SIZE];
    size_t index;
};

static int
cmp_by_id(const void *a, const void *b)
{
    const struct by_id *x = a;
    const struct by_id *y = b;
    int c = memcmp(x->id, y->id, WEFT_SPAN_ID_SIZE);

    if (c != 0) {
        return c;
    }
    return x->index < y->index ? -1 : x->index > y->index;
}

static int
cmp_id_key(const void *key, const void *elem)
{
    return memcmp(key, ((const struct by_id *)elem)->id, WEFT_SPAN_ID_SIZE);
}

struct tree {
    const struct weft_span_data *const *spans;
    size_t count;
    size_t *head; /* first child of each span, linked through next; roots under head[count] */
    size_t *next;
    size_t *node_depth;
    size_t *stack;
    bool *is_visited;
    size_t *order;
    size_t *depth;
    bool *is_orphan;
    size_t emitted;
};

/* Emit the subtree under @p root depth-first. Child lists are linked latest first, so
 * pushing a list front to back pops its earliest span first. */
static void
walk(struct tree *t, size_t root)
{
    size_t top = 0;

    t->node_depth[root] = 0;
    t->stack[top++] = root;
    while (top > 0) {
        size_t i = t->stack[--top];
        const struct weft_span_data *s = t->spans[i];

        if (t->is_visited[i]) {
            continue;
        }
        t->is_visited[i] = true;
        t->order[t->emitted] = i;
        t->depth[t->emitted] = t->node_depth[i];
        if (t->is_orphan != NULL) {
            t->is_orphan[t->emitted] = t->node_depth[i] == 0 && s->has_parent &&
                                       !s->parent_is_remote &&
                                       !is_zero(s->parent_span_id, WEFT_SPAN_ID_SIZE);
        }
        t->emitted++;
        /* Each span is on exactly one list, so the stack never holds more than count. */
        for (size_t c = t->head[i]; c != SIZE_MAX; c = t->next[c]) {
            if (!t->is_visited[c]) {
                t->node_depth[c] = t->node_depth[i] + 1;
                t->stack[top++] = c;
            }
        }
    }
}

weft_err
weft__trace_tree(const struct weft_span_data *const *spans,
                 size_t count,
                 size_t *order,
                 size_t *depth,
                 bool *is_orphan)
{
    struct tree t = {
        .spans = spans, .count = count, .order = order, .depth = depth, .is_orphan = is_orphan};
    struct by_start *starts = NULL;
    struct by_id *ids = NULL;
    bool *is_root = NULL;
    weft_err err = WEFT_OK;

    if (count == 0) {
        return WEFT_OK;
    }
    if (count > SIZE_MAX / sizeof(struct by_start) - 1) {
        return WEFT_ENOMEM;
    }
    starts = weft__malloc(count * sizeof(*starts));
    ids = weft__malloc(count * sizeof(*ids));
    t.head = weft__malloc((count + 1) * sizeof(*t.head));
    t.next = weft__malloc(count * sizeof(*t.next));
    t.node_depth = weft__malloc(count * sizeof(*t.node_depth));
    t.stack = weft__malloc(count * sizeof(*t.stack));
    t.is_visited = weft__calloc(count, sizeof(*t.is_visited));
    is_root = weft__calloc(count, sizeof(*is_root));
    if (starts == NULL || ids == NULL || t.head == NULL || t.next == NULL || t.node_depth == NULL ||
        t.stack == NULL || t.is_visited == NULL || is_root == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < count; i++) {
        starts[i].start = spans[i]->start_time_ns;
        starts[i].end = spans[i]->end_time_ns;
        starts[i].name = spans[i]->name;
        starts[i].index = i;
        memcpy(ids[i].id, spans[i]->span_id, WEFT_SPAN_ID_SIZE);
        ids[i].index = i;
        t.head[i] = SIZE_MAX;
    }
    t.head[count] = SIZE_MAX;
    qsort(starts, count, sizeof(*starts), cmp_by_start);
    qsort(ids, count, sizeof(*ids), cmp_by_id);
    /* Link every span under its parent (roots and orphans under head[count]), visiting them
     * in ascending start order and prepending, so each list runs latest first. */
    for (size_t k = 0; k < count; k++) {
        size_t i = starts[k].index;
        const struct weft_span_data *s = spans[i];
        const struct by_id *found = NULL;
        size_t p = count;

        if (s->has_parent) {
            found = bsearch(s->parent_span_id, ids, count, sizeof(*ids), cmp_id_key);
        }
        if (found != NULL && found->index != i) {
            p = found->index;
        }
        is_root[i] = p == count;
        t.next[i] = t.head[p];
        t.head[p] = i;
    }
    /* Walk the roots earliest first; then break any parent cycle (spans no root reaches)
     * by walking its earliest span as a root, so every span is emitted exactly once. */
    for (size_t k = 0; k < count; k++) {
        size_t i = starts[k].index;

        if (is_root[i]) {
            walk(&t, i);
        }
    }
    for (size_t k = 0; k < count && t.emitted < count; k++) {
        if (!t.is_visited[starts[k].index]) {
            walk(&t, starts[k].index);
        }
    }
out:
    weft__free(starts);
    weft__free(ids);
    weft__free(t.head);
    weft__free(t.next);
    weft__free(t.node_depth);
    weft__free(t.stack);
    weft__free(t.is_visited);
    weft__free(is_root);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Rendering                                                                                   */

#define NAME_MAX_COLS      60 /* longer span names are cut with an ellipsis */
#define ALIGN_MAX_COLS     72 /* durations line up in one column up to here */
#define VALUE_MAX_COLS     40
#define STATUS_MAX_COLS    120
#define ATTRS_MAX          4 /* key attributes shown per span or event */
#define ATTRS_MAX_COLS     100
#define EVENTS_MAX         3  /* events shown per span, besides the notable ones */
#define LINKS_MAX          3  /* links shown per span */
#define NOTABLE_EVENTS_MAX 10 /* notable events (weft.*, exception) shown per span */

struct style {
    FILE *out;
    bool is_ascii;
    const char *red;
    const char *green;
    const char *bold;
    const char *dim;
    const char *reset;
    const char *tee;    /* a child with siblings after it */
    const char *elbow;  /* the last child */
    const char *pipe;   /* an ancestor with siblings after it */
    const char *blank;  /* an ancestor without */
    const char *bullet; /* an event */
    const char *ellipsis;
};

static void
style_init(struct style *st, FILE *out, unsigned flags)
{
    bool is_color = (flags & WEFT_RENDER_COLOR) != 0;

    st->out = out;
    st->is_ascii = (flags & WEFT_RENDER_ASCII) != 0;
    st->red = is_color ? "\x1b[31m" : "";
    st->green = is_color ? "\x1b[32m" : "";
    st->bold = is_color ? "\x1b[1m" : "";
    st->dim = is_color ? "\x1b[2m" : "";
    st->reset = is_color ? "\x1b[0m" : "";
    st->tee = st->is_ascii ? "|- " : "\xe2\x94\x9c\xe2\x94\x80 ";
    st->elbow = st->is_ascii ? "`- " : "\xe2\x94\x94\xe2\x94\x80 ";
    st->pipe = st->is_ascii ? "|  " : "\xe2\x94\x82  ";
    st->blank = "   ";
    st->bullet = st->is_ascii ? "* " : "\xe2\x80\xa2 ";
    st->ellipsis = st->is_ascii ? "..." : "\xe2\x80\xa6";
}

/* Print at most @p max_cols characters of @p s, replacing control characters (C0, DEL, C1)
 * and invalid UTF-8 with '?' (tabs and newlines with a space) so that stored text cannot
 * move the cursor or recolour the terminal. @return the columns printed, counting one per
 * code point. */
static size_t
put_clean(const struct style *st, const char *s, size_t len, size_t max_cols)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    size_t cols = 0;

    if (s == NULL) {
        return 0;
    }
    while (i < len) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p + i, len - i, &cp);

        if (cols == max_cols) {
            fputs(st->ellipsis, st->out);
            return cols + 1;
        }
        if (n == 0) {
            fputc('?', st->out);
            i++;
        } else if (cp == '\t' || cp == '\n' || cp == '\r') {
            fputc(' ', st->out);
            i += n;
        } else if (cp < 0x20 || (cp >= 0x7f && cp < 0xa0)) {
            fputc('?', st->out);
            i += n;
        } else {
            fwrite(p + i, 1, n, st->out);
            i += n;
        }
        cols++;
    }
    return cols;
}

/* Columns put_clean() would print. */
static size_t
clean_width(const char *s, size_t max_cols)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t len = s != NULL ? strlen(s) : 0;
    size_t i = 0;
    size_t cols = 0;

    while (i < len) {
        uint32_t cp = 0;
        size_t n = utf8_seq(p + i, len - i, &cp);

        if (cols == max_cols) {
            return cols + 1;
        }
        i += n == 0 ? 1 : n;
        cols++;
    }
    return cols;
}

static void
put_spaces(FILE *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fputc(' ', out);
    }
}

static void
format_duration(uint64_t ns, bool is_ascii, char *buf, size_t len)
{
    if (ns < 1000u) {
        snprintf(buf, len, "%uns", (unsigned)ns);
    } else if (ns < 1000000u) {
        snprintf(buf, len, "%.1f%s", (double)ns / 1e3, is_ascii ? "us" : "\xc2\xb5s");
    } else if (ns < 100000000u) {
        snprintf(buf, len, "%.1fms", (double)ns / 1e6);
    } else if (ns < 1000000000u) {
        snprintf(buf, len, "%.0fms", (double)ns / 1e6);
    } else if (ns < 60000000000u) {
        snprintf(buf, len, "%.2fs", (double)ns / 1e9);
    } else if (ns < 3600000000000u) {
        uint64_t s = ns / 1000000000u;

        snprintf(buf, len, "%um%02us", (unsigned)(s / 60), (unsigned)(s % 60));
    } else {
        uint64_t m = ns / 60000000000u;

        snprintf(buf, len, "%" PRIu64 "h%02um", m / 60, (unsigned)(m % 60));
    }
}

static uint64_t
span_duration(const struct weft_span_data *s)
{
    return s->end_time_ns > s->start_time_ns ? s->end_time_ns - s->start_time_ns : 0;
}

static const char *
kind_label(weft_span_kind kind)
{
    switch (kind) {
    case WEFT_SPAN_KIND_SERVER:
        return "server";
    case WEFT_SPAN_KIND_CLIENT:
        return "client";
    case WEFT_SPAN_KIND_PRODUCER:
        return "producer";
    case WEFT_SPAN_KIND_CONSUMER:
        return "consumer";
    default:
        return NULL; /* INTERNAL and UNSPECIFIED are the default: not worth a word */
    }
}

/* Attributes that explain a span at a glance. Message content is opt-in and long, and the
 * operation name, run-wide ids and names repeat what the header and span name say, so those
 * stay out. */
static bool
is_key_attr(const char *key, bool is_event)
{
    static const char *const skipped[] = {
        "gen_ai.operation.name",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "gen_ai.tool.definitions",
        "exception.stacktrace",
        /* Run-wide (the same on every span of a run) or repeated by the span name. */
        "gen_ai.conversation.id",
        "weft.run.id",
        "gen_ai.agent.name",
        "gen_ai.request.model",
        "gen_ai.tool.name",
        "gen_ai.tool.call.id",
        "gen_ai.tool.type",
        "weft.iteration",
        "weft.plan.version",
    };

    for (size_t i = 0; i < sizeof(skipped) / sizeof(skipped[0]); i++) {
        if (strcmp(key, skipped[i]) == 0) {
            return false;
        }
    }
    return strcmp(key, "error.type") == 0 || strncmp(key, "gen_ai.", 7) == 0 ||
           strncmp(key, "weft.", 5) == 0 || (is_event && strncmp(key, "exception.", 10) == 0);
}

static void
put_value(const struct style *st, const struct weft_value *v)
{
    char num[64];
    size_t shown = v->len < 3 ? v->len : 3;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        put_clean(st, v->u.str, v->len, VALUE_MAX_COLS);
        return;
    case WEFT_VALUE_BOOL:
        fputs(v->u.b ? "true" : "false", st->out);
        return;
    case WEFT_VALUE_INT:
        fprintf(st->out, "%" PRId64, v->u.i);
        return;
    case WEFT_VALUE_DOUBLE:
        fprintf(st->out, "%g", v->u.d);
        return;
    default:
        break;
    }
    fputc('[', st->out);
    for (size_t i = 0; i < shown; i++) {
        if (i > 0) {
            fputc(',', st->out);
        }
        switch (v->type) {
        case WEFT_VALUE_STRING_ARRAY:
            put_clean(st, v->u.strs[i], strlen(v->u.strs[i]), VALUE_MAX_COLS / 2);
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            fputs(v->u.bools[i] ? "true" : "false", st->out);
            break;
        case WEFT_VALUE_INT_ARRAY:
            snprintf(num, sizeof(num), "%" PRId64, v->u.ints[i]);
            fputs(num, st->out);
            break;
        default:
            snprintf(num, sizeof(num), "%g", v->u.doubles[i]);
            fputs(num, st->out);
            break;
        }
    }
    if (shown < v->len) {
        fprintf(st->out, ",%s", st->ellipsis);
    }
    fputc(']', st->out);
}

/* Attributes that say how a run, a loop or a step ended, or why: always shown, whatever the
 * per-line budget, and with room for a sentence. */
static bool
is_outcome_attr(const char *key)
{
    static const char *const prefixes[] = {
        "weft.loop.",
        "weft.stuck_loop.",
        "weft.circuit_breaker.",
        "weft.break",
    };
    static const char *const keys[] = {
        "error.type",        "weft.run.status",         "weft.step.status", "weft.decision.reason",
        "weft.tool.outcome", "weft.reflection.verdict", "exception.type",   "exception.message",
    };

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0) {
            return true;
        }
    }
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (strcmp(key, keys[i]) == 0) {
            return true;
        }
    }
    return strstr(key, "reason") != NULL && strncmp(key, "weft.", 5) == 0;
}

static void
put_attr(const struct style *st, const struct weft_attr *a, size_t max_cols)
{
    fprintf(st->out, "  %s", st->dim);
    put_clean(st, a->key, strlen(a->key), VALUE_MAX_COLS);
    fputc('=', st->out);
    if (a->value.type == WEFT_VALUE_STRING) {
        put_clean(st, a->value.u.str, a->value.len, max_cols);
    } else {
        put_value(st, &a->value);
    }
    fputs(st->reset, st->out);
}

/* The outcome attributes first (all of them), then other key attributes within the budget
 * of ATTRS_MAX attributes and ATTRS_MAX_COLS columns. */
static void
put_attrs(const struct style *st, const struct weft_attr *attrs, size_t count, bool is_event)
{
    size_t shown = 0;
    size_t cols = 0;

    for (size_t i = 0; i < count; i++) {
        if (attrs[i].key != NULL && is_outcome_attr(attrs[i].key) &&
            is_key_attr(attrs[i].key, true)) {
            put_attr(st, &attrs[i], STATUS_MAX_COLS);
            cols += 3 + strlen(attrs[i].key) +
                    (attrs[i].value.type == WEFT_VALUE_STRING ? attrs[i].value.len : 8);
            shown++;
        }
    }
    for (size_t i = 0; i < count && shown < ATTRS_MAX && cols < ATTRS_MAX_COLS; i++) {
        if (attrs[i].key == NULL || is_outcome_attr(attrs[i].key) ||
            !is_key_attr(attrs[i].key, is_event)) {
            continue;
        }
        put_attr(st, &attrs[i], VALUE_MAX_COLS);
        cols += 3 + strlen(attrs[i].key) +
                (attrs[i].value.type == WEFT_VALUE_STRING ? attrs[i].value.len : 8);
        shown++;
    }
}

static void
put_header(const struct style *st,
           const struct weft_span_data *const *spans,
           size_t count,
           const size_t *order)
{
    char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
    char duration[32];
    char started[64];
    uint64_t start = UINT64_MAX;
    uint64_t end = 0;
    size_t errors = 0;
    const char *service = NULL;
    struct tm tm;
    time_t secs = 0;

    for (size_t i = 0; i < count; i++) {
        const struct weft_span_data *s = spans[order[i]];

        start = s->start_time_ns < start ? s->start_time_ns : start;
        end = s->end_time_ns > end ? s->end_time_ns : end;
        errors += s->status_code == WEFT_STATUS_ERROR;
        if (service == NULL) {
            service = service_name_of(s);
        }
    }
    weft_hex_encode(spans[order[0]]->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
    format_duration(end > start ? end - start : 0, st->is_ascii, duration, sizeof(duration));
    secs = (time_t)(start / 1000000000u);
    if (gmtime_r(&secs, &tm) != NULL) {
        size_t n = strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%S", &tm);

        snprintf(started + n, sizeof(started) - n, ".%03uZ",
                 (unsigned)(start % 1000000000u / 1000000u));
    } else {
        snprintf(started, sizeof(started), "?");
    }
    fprintf(st->out, "%strace %s%s", st->bold, trace_hex, st->reset);
    if (service != NULL) {
        fputs("  service=", st->out);
        put_clean(st, service, strlen(service), VALUE_MAX_COLS);
    }
    fprintf(st->out, "  start=%s  duration=%s  spans=%zu  ", started, duration, count);
    if (errors > 0) {
        fprintf(st->out, "%serrors=%zu%s\n", st->red, errors, st->reset);
    } else {
        fputs("errors=0\n", st->out);
    }
}

/* The tree glyphs before a line: one segment per ancestor level (a bar while that ancestor
 * has later siblings), then the span's own branch. */
static void
put_prefix(const struct style *st, const bool *has_more, size_t depth, bool is_last)
{
    for (size_t k = 1; k < depth; k++) {
        fputs(has_more[k] ? st->pipe : st->blank, st->out);
    }
    if (depth > 0) {
        fputs(is_last ? st->elbow : st->tee, st->out);
    }
}

/* Events that explain a failure or a loop: up to NOTABLE_EVENTS_MAX of them are shown besides
 * the EVENTS_MAX others, and they keep a span visible in a summarised trace. */
static bool
is_notable_event(const struct weft_event_data *ev)
{
    return ev->name != NULL &&
           (strncmp(ev->name, "weft.", 5) == 0 || strcmp(ev->name, "exception") == 0);
}

/* The glyphs that continue the tree on a detail line (event, link) of a span. */
static void
put_detail_prefix(const struct style *st, const bool *has_more, size_t depth, bool has_children)
{
    for (size_t k = 1; k <= depth; k++) {
        fputs(has_more[k] ? st->pipe : st->blank, st->out);
    }
    fputs(has_children ? st->pipe : st->blank, st->out);
}

static void
put_events(const struct style *st,
           const struct weft_span_data *s,
           const bool *has_more,
           size_t depth,
           bool has_children)
{
    size_t other = 0;
    size_t notable = 0;
    size_t hidden = 0;

    for (size_t e = 0; e < s->event_count; e++) {
        const struct weft_event_data *ev = &s->events[e];
        char offset[32];

        if (is_notable_event(ev) ? notable++ >= NOTABLE_EVENTS_MAX : other++ >= EVENTS_MAX) {
            hidden++;
            continue;
        }
        put_detail_prefix(st, has_more, depth, has_children);
        format_duration(ev->time_ns > s->start_time_ns ? ev->time_ns - s->start_time_ns : 0,
                        st->is_ascii, offset, sizeof(offset));
        fprintf(st->out, "%s%s", is_notable_event(ev) ? st->bold : st->dim, st->bullet);
        put_clean(st, ev->name, ev->name != NULL ? strlen(ev->name) : 0, VALUE_MAX_COLS);
        fprintf(st->out, "%s%s +%s%s", st->reset, st->dim, offset, st->reset);
        put_attrs(st, ev->attrs, ev->attr_count, true);
        fputc('\n', st->out);
    }
    if (hidden > 0 || s->dropped_events > 0) {
        put_detail_prefix(st, has_more, depth, has_children);
        fprintf(st->out, "%s%s%zu more events%s\n", st->dim, st->bullet, hidden + s->dropped_events,
                st->reset);
    }
}

/* Links: where a span points to another (a resumed run's previous trace, the failed step a
 * correction repairs, the occurrences of a stuck loop), at most LINKS_MAX per span. */
static void
put_links(const struct style *st,
          const struct weft_span_data *s,
          const bool *has_more,
          size_t depth,
          bool has_children)
{
    size_t shown = s->link_count < LINKS_MAX ? s->link_count : LINKS_MAX;

    for (size_t i = 0; i < shown; i++) {
        const struct weft_link_data *l = &s->links[i];
        char trace_hex[2 * WEFT_TRACE_ID_SIZE + 1];
        char span_hex[2 * WEFT_SPAN_ID_SIZE + 1];

        weft_hex_encode(l->trace_id, WEFT_TRACE_ID_SIZE, trace_hex);
        weft_hex_encode(l->span_id, WEFT_SPAN_ID_SIZE, span_hex);
        put_detail_prefix(st, has_more, depth, has_children);
        fprintf(st->out, "%s%slink ", st->dim, st->is_ascii ? "-> " : "\xe2\x86\xaa ");
        if (memcmp(l->trace_id, s->trace_id, WEFT_TRACE_ID_SIZE) != 0) {
            fprintf(st->out, "trace %s ", trace_hex);
        }
        fprintf(st->out, "span %s%s", span_hex, st->reset);
        put_attrs(st, l->attrs, l->attr_count, true);
        fputc('\n', st->out);
    }
    if (s->link_count > shown || s->dropped_links > 0) {
        put_detail_prefix(st, has_more, depth, has_children);
        fprintf(st->out, "%s%s%zu more links%s\n", st->dim, st->bullet,
                s->link_count - shown + s->dropped_links, st->reset);
    }
}

static size_t
name_width(const struct weft_span_data *s, size_t depth)
{
    const char *kind = kind_label(s->kind);

    return 3 * depth + clean_width(s->name, NAME_MAX_COLS) + (kind != NULL ? strlen(kind) + 3 : 0);
}

static void
put_span(const struct style *st,
         const struct weft_span_data *s,
         size_t width,
         size_t column,
         bool is_orphan,
         unsigned flags)
{
    const char *kind = kind_label(s->kind);
    char duration[32];

    put_clean(st, s->name, s->name != NULL ? strlen(s->name) : 0, NAME_MAX_COLS);
    if (kind != NULL) {
        fprintf(st->out, " %s(%s)%s", st->dim, kind, st->reset);
    }
    put_spaces(st->out, width < column ? column - width : 0);
    format_duration(span_duration(s), st->is_ascii, duration, sizeof(duration));
    put_spaces(st->out, 2 + 8 - clean_width(duration, 8));
    fputs(duration, st->out);
    if (s->status_code == WEFT_STATUS_ERROR) {
        fprintf(st->out, "  %s%sERROR", st->bold, st->red);
        if (s->status_message != NULL && s->status_message[0] != '\0') {
            fputs(": ", st->out);
            put_clean(st, s->status_message, strlen(s->status_message), STATUS_MAX_COLS);
        }
        fputs(st->reset, st->out);
    } else if (s->status_code == WEFT_STATUS_OK) {
        fprintf(st->out, "  %sok%s", st->green, st->reset);
    }
    if (is_orphan) {
        fprintf(st->out, "  %s(parent span missing)%s", st->dim, st->reset);
    }
    if ((flags & WEFT_RENDER_ATTRS) != 0) {
        put_attrs(st, s->attrs, s->attr_count, false);
    }
    fputc('\n', st->out);
}

/* is_last[i]: no later sibling follows line i. Scanning backwards, seen[d] says a span at
 * depth d was met since the tree last climbed above d; climbing clears the deeper levels,
 * and each level is cleared at most once per time it is set, so the pass is linear. */
static void
mark_last_siblings(const size_t *depth, size_t count, bool *seen, bool *is_last)
{
    size_t top = 0;

    for (size_t i = count; i-- > 0;) {
        size_t d = depth[i];

        for (size_t k = d + 1; k <= top; k++) {
            seen[k] = false;
        }
        is_last[i] = !seen[d];
        seen[d] = true;
        top = d;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Summarising large traces                                                                    */

#define KEEP_PER_NAME      10  /* siblings of one name shown before the rest are summarised */
#define KEEP_PER_PARENT    40  /* ordinary siblings shown under one parent */
#define NOTABLE_PER_PARENT 20  /* siblings with an error or a notable event shown in addition */
#define KEEP_TOTAL         300 /* ordinary spans shown in the whole trace */
#define NOTABLE_TOTAL      200 /* notable spans shown in the whole trace (nested fan-outs) */
#define TALLY_NAMES        8   /* summary lines per parent; further names share one line */

/* Hidden siblings of one name under one parent. name NULL: every other name. */
struct tally {
    const char *name;
    size_t spans;
    size_t ok;
    size_t error;
    size_t descendants;
};

/* The children of the current parent at one depth. */
struct level {
    size_t plain_kept;
    size_t notable_kept;
    struct tally tallies[TALLY_NAMES + 1];
    size_t tally_count;
    size_t names_first; /* index into the names list below */
};

/* One output line: a span (pos into the tree order) or a summary (tally). */
struct line {
    size_t pos;
    size_t depth;
    struct tally tally;
    bool is_summary;
};

struct summariser {
    const struct weft_span_data *const *spans;
    const size_t *order;
    const size_t *depth;
    const bool *is_notable;      /* per tree position: the span or one below it is notable */
    const bool *is_last;         /* per tree position: the last child of its parent */
    const size_t *notable_after; /* per tree position: notable siblings after it */
    struct level *levels;        /* per depth */
    struct line *lines;
    size_t line_count;
    size_t line_cap;
    bool is_oom;
    size_t plain_total;
    size_t notable_total;
    size_t hidden_spans;
    /* Kept names per level: which names were seen how often under the current parent. */
    const char **names;
    size_t *name_seen;
    size_t name_count;
};

/* A new zeroed line, or NULL (is_oom raised) when memory ran out. */
static struct line *
push_line(struct summariser *sm)
{
    struct line *ln = NULL;

    if (sm->line_count == sm->line_cap) {
        size_t cap = sm->line_cap == 0 ? 64 : 2 * sm->line_cap;
        struct line *grown = weft__realloc(sm->lines, cap * sizeof(*grown));

        if (grown == NULL) {
            sm->is_oom = true;
            return NULL;
        }
        sm->lines = grown;
        sm->line_cap = cap;
    }
    ln = &sm->lines[sm->line_count++];
    memset(ln, 0, sizeof(*ln));
    return ln;
}

static struct tally *
tally_for(struct level *lv, const char *name)
{
    for (size_t i = 0; i < lv->tally_count; i++) {
        if (lv->tallies[i].name != NULL && name != NULL && strcmp(lv->tallies[i].name, name) == 0) {
            return &lv->tallies[i];
        }
    }
    if (lv->tally_count < TALLY_NAMES) {
        struct tally *t = &lv->tallies[lv->tally_count++];

        memset(t, 0, sizeof(*t));
        t->name = name;
        return t;
    }
    return &lv->tallies[TALLY_NAMES]; /* "other names"; its name stays NULL */
}

/* How many siblings named @p name the current parent at level @p d has shown so far
 * (incremented). The list holds the names of every open level, deepest last. */
static size_t
seen_and_count(struct summariser *sm, size_t d, const char *name)
{
    for (size_t i = sm->levels[d].names_first; i < sm->name_count; i++) {
        if (strcmp(sm->names[i], name) == 0) {
            return sm->name_seen[i]++;
        }
    }
    sm->names[sm->name_count] = name;
    sm->name_seen[sm->name_count] = 1;
    sm->name_count++;
    return 0;
}

static void
open_level(struct summariser *sm, size_t d)
{
    struct level *lv = &sm->levels[d];

    memset(lv, 0, sizeof(*lv));
    lv->names_first = sm->name_count;
}

/* Close level @p d: its summary lines follow the last child of its parent. */
static void
close_level(struct summariser *sm, size_t d)
{
    struct level *lv = &sm->levels[d];

    for (size_t i = 0; i <= TALLY_NAMES; i++) {
        const struct tally *t = &lv->tallies[i];

        if ((i < lv->tally_count || i == TALLY_NAMES) && t->spans > 0) {
            struct line *ln = push_line(sm);

            if (ln == NULL) {
                return;
            }
            ln->is_summary = true;
            ln->depth = d;
            ln->tally = *t;
        }
    }
    sm->name_count = lv->names_first;
    memset(lv, 0, sizeof(*lv));
}

/* Decide which spans are printed. Every span with an error or a notable event, and the
 * ancestors of each, stay visible (up to NOTABLE_PER_PARENT per parent); of the others, at most
 * KEEP_PER_NAME per name and KEEP_PER_PARENT per parent, KEEP_TOTAL in all. The rest are
 * counted into one summary line per name, placed after their last sibling. */
static void
summarise(struct summariser *sm, size_t count, bool is_all)
{
    size_t open_depth = 0; /* levels [0, open_depth] are open; level 0 holds the roots */
    size_t hide_below = SIZE_MAX;
    struct tally *hiding = NULL;

    open_level(sm, 0);

    for (size_t pos = 0; pos < count; pos++) {
        const struct weft_span_data *s = sm->spans[sm->order[pos]];
        size_t d = sm->depth[pos];
        struct level *lv = NULL;
        bool is_kept = true;

        if (hide_below != SIZE_MAX && d > hide_below) {
            hiding->descendants++;
            sm->hidden_spans++;
            continue;
        }
        hide_below = SIZE_MAX;
        while (open_depth > d) {
            close_level(sm, open_depth--);
        }
        lv = &sm->levels[d];
        if (!is_all) {
            size_t seen = seen_and_count(sm, d, s->name != NULL ? s->name : "");

            if (sm->is_notable[pos]) {
                /* The first and the last ones: how the trouble started and how it ended. */
                is_kept = (lv->notable_kept < NOTABLE_PER_PARENT / 2 ||
                           sm->notable_after[pos] < NOTABLE_PER_PARENT / 2) &&
                          sm->notable_total < NOTABLE_TOTAL;
                lv->notable_kept += is_kept;
                sm->notable_total += is_kept;
            } else {
                /* The last child stays: it is how the parent ended (the final decision). */
                is_kept =
                    sm->is_last[pos] || (seen < KEEP_PER_NAME && lv->plain_kept < KEEP_PER_PARENT &&
                                         sm->plain_total < KEEP_TOTAL);
                lv->plain_kept += is_kept;
                sm->plain_total += is_kept;
            }
        }
        if (!is_kept) {
            hiding = tally_for(lv, s->name);
            hiding->spans++;
            hiding->ok += s->status_code != WEFT_STATUS_ERROR;
            hiding->error += s->status_code == WEFT_STATUS_ERROR;
            sm->hidden_spans++;
            hide_below = d;
            continue;
        }
        struct line *ln = push_line(sm);

        if (ln == NULL) {
            return;
        }
        ln->pos = pos;
        ln->depth = d;
        open_level(sm, d + 1);
        open_depth = d + 1;
    }
    while (open_depth > 0) {
        close_level(sm, open_depth--);
    }
    close_level(sm, 0);
}

static bool
is_notable_span(const struct weft_span_data *s)
{
    if (s->status_code == WEFT_STATUS_ERROR) {
        return true;
    }
    for (size_t e = 0; e < s->event_count; e++) {
        if (is_notable_event(&s->events[e])) {
            return true;
        }
    }
    return false;
}

/* is_notable[pos]: the span at tree position pos, or one in its subtree, is notable. A
 * backward pass: the children of a span follow it, so they are done when it is reached;
 * below[d] gathers the subtrees at depth d since the last span at depth d - 1. */
static void
mark_notable(const struct weft_span_data *const *spans,
             const size_t *order,
             const size_t *depth,
             size_t count,
             bool *below,
             bool *is_notable)
{
    for (size_t pos = count; pos-- > 0;) {
        size_t d = depth[pos];

        is_notable[pos] = is_notable_span(spans[order[pos]]) || below[d + 1];
        below[d + 1] = false;
        below[d] = below[d] || is_notable[pos];
    }
}

/* notable_after[pos]: how many later siblings of the span at pos are notable. A backward
 * pass: per depth, the notable spans met since the tree last climbed through their parent. */
static void
count_notable_after(const size_t *depth,
                    const bool *is_notable,
                    size_t count,
                    size_t *counts,
                    size_t *notable_after)
{
    for (size_t pos = count; pos-- > 0;) {
        size_t d = depth[pos];

        counts[d + 1] = 0; /* the children of this span, done */
        notable_after[pos] = counts[d];
        counts[d] += is_notable[pos];
    }
}

static void
put_summary(const struct style *st, const struct tally *t)
{
    fprintf(st->out, "%s%s %zu more ", st->dim, st->ellipsis, t->spans);
    if (t->name != NULL) {
        fputc('`', st->out);
        put_clean(st, t->name, strlen(t->name), NAME_MAX_COLS);
        fputs("` spans", st->out);
    } else {
        fputs("spans of other names", st->out);
    }
    fprintf(st->out, " (%zu ok, ", t->ok);
    if (t->error > 0) {
        fprintf(st->out, "%s%zu error%s%s", st->red, t->error, st->reset, st->dim);
    } else {
        fputs("0 error", st->out);
    }
    if (t->descendants > 0) {
        fprintf(st->out, "; %zu spans below them", t->descendants);
    }
    fprintf(st->out, ")%s\n", st->reset);
}

weft_err
weft__render_spans(FILE *stream,
                   const struct weft_span_data *const *spans,
                   size_t count,
                   unsigned flags,
                   const char *note)
{
    struct style st;
    struct summariser sm;
    size_t *order = NULL;
    size_t *depth = NULL;
    bool *is_orphan = NULL;
    bool *is_notable = NULL;
    bool *is_last_pos = NULL; /* per tree position: the last child of its parent */
    size_t *notable_after = NULL;
    size_t *notable_counts = NULL;
    bool *has_more = NULL; /* per depth: does the line at that depth have later siblings? */
    bool *is_last = NULL;  /* per line: is it the last of its siblings? */
    size_t *line_depth = NULL;
    size_t column = 0;
    weft_err err = WEFT_OK;

    if (stream == NULL || (spans == NULL && count > 0)) {
        return WEFT_EINVAL;
    }
    if (count == 0) {
        return WEFT_OK;
    }
    memset(&sm, 0, sizeof(sm));
    style_init(&st, stream, flags);
    order = weft__malloc(count * sizeof(*order));
    depth = weft__malloc(count * sizeof(*depth));
    is_orphan = weft__malloc(count * sizeof(*is_orphan));
    is_notable = weft__malloc(count * sizeof(*is_notable));
    is_last_pos = weft__malloc(count * sizeof(*is_last_pos));
    notable_after = weft__malloc(count * sizeof(*notable_after));
    notable_counts = weft__malloc((count + 2) * sizeof(*notable_counts));
    has_more = weft__calloc(count + 2, sizeof(*has_more));
    sm.levels = weft__malloc((count + 2) * sizeof(*sm.levels));
    sm.names = weft__malloc(count * sizeof(*sm.names));
    sm.name_seen = weft__malloc(count * sizeof(*sm.name_seen));
    if (order == NULL || depth == NULL || is_orphan == NULL || is_notable == NULL ||
        is_last_pos == NULL || notable_after == NULL || notable_counts == NULL ||
        has_more == NULL || sm.levels == NULL || sm.names == NULL || sm.name_seen == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    err = weft__trace_tree(spans, count, order, depth, is_orphan);
    if (err != WEFT_OK) {
        goto out;
    }
    mark_notable(spans, order, depth, count, has_more, is_notable);
    memset(has_more, 0, (count + 2) * sizeof(*has_more));
    mark_last_siblings(depth, count, has_more, is_last_pos);
    sm.is_last = is_last_pos;
    memset(notable_counts, 0, (count + 2) * sizeof(*notable_counts));
    count_notable_after(depth, is_notable, count, notable_counts, notable_after);
    sm.notable_after = notable_after;
    sm.spans = spans;
    sm.order = order;
    sm.depth = depth;
    sm.is_notable = is_notable;
    summarise(&sm, count, (flags & WEFT_RENDER_ALL) != 0);
    if (sm.is_oom) {
        err = WEFT_ENOMEM;
        goto out;
    }
    is_last = weft__malloc(sm.line_count * sizeof(*is_last));
    line_depth = weft__malloc(sm.line_count * sizeof(*line_depth));
    if (is_last == NULL || line_depth == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    put_header(&st, spans, count, order);
    if (note != NULL) {
        fprintf(stream, "%s(%s)%s\n", st.dim, note, st.reset);
    }
    if (sm.hidden_spans > 0) {
        fprintf(stream,
                "%s(%zu of %zu spans summarised; errors and notable events are kept; "
                "weft trace show --all prints every span)%s\n",
                st.dim, sm.hidden_spans, count, st.reset);
    }
    for (size_t i = 0; i < sm.line_count; i++) {
        line_depth[i] = sm.lines[i].depth;
        if (!sm.lines[i].is_summary) {
            size_t w = name_width(spans[order[sm.lines[i].pos]], sm.lines[i].depth);

            column = w > column ? w : column;
        }
    }
    column = column < ALIGN_MAX_COLS ? column : ALIGN_MAX_COLS;
    memset(has_more, 0, (count + 2) * sizeof(*has_more));
    mark_last_siblings(line_depth, sm.line_count, has_more, is_last);
    memset(has_more, 0, (count + 2) * sizeof(*has_more));
    for (size_t i = 0; i < sm.line_count; i++) {
        const struct line *ln = &sm.lines[i];
        const struct weft_span_data *s = NULL;
        bool has_children = i + 1 < sm.line_count && line_depth[i + 1] > ln->depth;

        has_more[ln->depth] = !is_last[i];
        put_prefix(&st, has_more, ln->depth, is_last[i]);
        if (ln->is_summary) {
            put_summary(&st, &ln->tally);
            continue;
        }
        s = spans[order[ln->pos]];
        put_span(&st, s, name_width(s, ln->depth), column, is_orphan[ln->pos], flags);
        if ((flags & WEFT_RENDER_EVENTS) != 0 && s->event_count > 0) {
            put_events(&st, s, has_more, ln->depth, has_children);
        }
        if ((flags & WEFT_RENDER_LINKS) != 0 && s->link_count > 0) {
            put_links(&st, s, has_more, ln->depth, has_children);
        }
    }
    if (ferror(stream)) {
        err = WEFT_EIO;
    }
out:
    weft__free(order);
    weft__free(depth);
    weft__free(is_orphan);
    weft__free(is_notable);
    weft__free(is_last_pos);
    weft__free(notable_after);
    weft__free(notable_counts);
    weft__free(has_more);
    weft__free(is_last);
    weft__free(line_depth);
    weft__free(sm.lines);
    weft__free(sm.levels);
    weft__free(sm.names);
    weft__free(sm.name_seen);
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Closing spans of interrupted runs (docs/durability.md)                                      */

static bool
is_hex_id(const char *s, size_t len)
{
    if (s == NULL || strlen(s) != len) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

static const char interrupted_sql[] =
    "INSERT INTO spans (trace_id, span_id, parent_span_id, name, kind, start_ns, end_ns,"
    " status_code, status_message, attributes, service_name, scope_name)"
    " SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'interrupted', ?9,"
    " (SELECT service_name FROM spans WHERE trace_id = ?1 AND service_name IS NOT NULL LIMIT 1),"
    " 'weft.runtime'"
    " WHERE NOT EXISTS (SELECT 1 FROM spans WHERE trace_id = ?1 AND span_id = ?2)";

weft_err
weft_store_add_interrupted_span(const char *db_path, const struct weft_interrupted_span *span)
{
    struct store_exporter *st = NULL;
    char default_path[4096];
    sqlite3_stmt *stmt = NULL;
    json_t *attrs = NULL;
    char *attrs_text = NULL;
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    weft_err err = WEFT_OK;

    if (span == NULL || !is_hex_id(span->trace_id, 2 * WEFT_TRACE_ID_SIZE) ||
        !is_hex_id(span->span_id, 2 * WEFT_SPAN_ID_SIZE) ||
        (span->parent_span_id != NULL && !is_hex_id(span->parent_span_id, 2 * WEFT_SPAN_ID_SIZE))) {
        return WEFT_EINVAL;
    }
    attrs = json_pack("{s:b}", "weft.interrupted", 1);
    if (attrs != NULL && span->run_id != NULL) {
        json_object_set_new(attrs, "weft.run.id", json_string(span->run_id));
    }
    attrs_text = attrs != NULL ? json_dumps(attrs, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(attrs);
    if (attrs_text == NULL) {
        return WEFT_ENOMEM;
    }
    if (db_path == NULL) {
        err = weft_store_default_path(default_path, sizeof(default_path));
        db_path = default_path;
    }
    st = err == WEFT_OK ? weft__calloc(1, sizeof(*st)) : NULL;
    if (st == NULL || (st->path = weft__strdup(db_path)) == NULL) {
        store_destroy(st);
        free(attrs_text);
        return err != WEFT_OK ? err : WEFT_ENOMEM;
    }
    weft__buf_init(&st->attrs_text, JSON_COLUMN_MAX);
    weft__buf_init(&st->events_text, JSON_COLUMN_MAX);
    weft__buf_init(&st->links_text, JSON_COLUMN_MAX);
    err = store_open_write(st);
    if (err != WEFT_OK) {
        store_destroy(st);
        free(attrs_text);
        return err;
    }
    if (sqlite3_prepare_v2(st->db, interrupted_sql, -1, &stmt, NULL) != SQLITE_OK ||
        step_once(st->begin) != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    if (err == WEFT_OK) {
        sqlite3_bind_text(stmt, 1, span->trace_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(stmt, 2, span->span_id, -1, SQLITE_STATIC);
        if (span->parent_span_id != NULL) {
            sqlite3_bind_text(stmt, 3, span->parent_span_id, -1, SQLITE_STATIC);
        }
        sqlite3_bind_text(stmt, 4, span->name != NULL ? span->name : "interrupted", -1,
                          SQLITE_STATIC);
        sqlite3_bind_int(stmt, 5, (int)WEFT_SPAN_KIND_INTERNAL);
        sqlite3_bind_int64(stmt, 6, ns_column(span->start_ns));
        sqlite3_bind_int64(
            stmt, 7, ns_column(span->end_ns > span->start_ns ? span->end_ns : span->start_ns));
        sqlite3_bind_int(stmt, 8, (int)WEFT_STATUS_ERROR);
        sqlite3_bind_text(stmt, 9, attrs_text, -1, SQLITE_STATIC);
        if (sqlite3_step(stmt) != SQLITE_DONE) {
            err = WEFT_EIO;
        }
    }
    if (err == WEFT_OK) {
        err = weft__hex_decode_id(span->trace_id, 2 * WEFT_TRACE_ID_SIZE, trace_id,
                                  sizeof(trace_id)) == WEFT_OK
                  ? update_summary(st, trace_id)
                  : WEFT_EINVAL;
    }
    if (err == WEFT_OK && step_once(st->commit) != SQLITE_DONE) {
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        log_db_error(WEFT_LOG_ERROR, st->path, st->db, "cannot close an interrupted span");
        if (!sqlite3_get_autocommit(st->db)) {
            step_once(st->rollback);
        }
    }
    sqlite3_finalize(stmt);
    free(attrs_text);
    store_destroy(st);
    return err;
}
