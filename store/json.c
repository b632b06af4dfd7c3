/* store/json.c - the JSON columns of the span store (attributes, events, links):
 * spans to JSON for the writer, JSON back to spans for the reader, and the few span facts both
 * sides and the renderer agree on (service name, whether a parent is real).
 *
 * Encoding: attributes is a JSON object whose JSON types carry the attribute types (string,
 * true/false, integer, real written with a decimal point, homogeneous arrays). The few values
 * plain JSON cannot type (NaN and infinities, empty arrays) are written as
 * {"type": "<type>", "value": ...}; attribute values are never objects otherwise. events and
 * links are JSON arrays of objects using the same attribute encoding. Text is always valid
 * UTF-8: invalid bytes are replaced (U+FFFD) rather than refused, so one bad attribute never
 * loses a batch.
 */
#include "store.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/str.h"
#include "base/utf8.h"
#include "tracing/ids.h"

#include <jansson.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* JSON columns: writing                                                                       */

/* Why hand-written: the columns used to be built as a jansson tree and dumped, one tree per
 * span and column; on OTLP ingest that was about 40% of the time of decoding and storing a
 * span (bench/ingest_bench.c, issue 17). Writing straight into the column's buffer keeps the
 * very bytes jansson wrote (JSON_COMPACT | JSON_REAL_PRECISION(17), keys in insertion order, a
 * repeated key keeping its first place and its last value, strings escaped as jansson escapes
 * them), because readers and users' SQL (json_extract) rely on them;
 * tests/store/test_json.c compares the two on many spans. */

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

/* Attribute sets up to this size find repeated keys with tables on the stack. */
#define SMALL_SET 32

/* A writer into one column: the first error sticks and later writes do nothing. */
struct jw {
    struct weft__buf *out;
    size_t max; /* the buffer's hard cap (weft__buf_init() turned 0 into SIZE_MAX / 2) */
    weft_err err;
    struct weft__store_payloads *pl; /* where long attribute texts go; NULL: inline */
};

/* Most writes are a few bytes into a buffer that already has room: they are copied in place,
 * without weft__buf_append()'s checks and NUL (column_end() terminates the text). */
static inline void
put(struct jw *w, const char *s, size_t len)
{
    struct weft__buf *b = w->out;

    if (len == 0) {
        return; /* s may be NULL */
    }
    if (len < b->cap - b->len && len <= w->max - b->len) {
        memcpy(b->data + b->len, s, len);
        b->len += len;
    } else if (w->err == WEFT_OK) {
        w->err = weft__buf_append(b, s, len);
    }
}

static void
put_lit(struct jw *w, const char *s)
{
    put(w, s, strlen(s));
}

/* The escape of ASCII byte @p c as jansson writes it: the short forms, else \u00XX. */
static void
put_escape(struct jw *w, uint8_t c)
{
    static const char hex[] = "0123456789ABCDEF";
    char seq[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};

    switch (c) {
    case '"':
        put(w, "\\\"", 2);
        return;
    case '\\':
        put(w, "\\\\", 2);
        return;
    case '\b':
        put(w, "\\b", 2);
        return;
    case '\f':
        put(w, "\\f", 2);
        return;
    case '\n':
        put(w, "\\n", 2);
        return;
    case '\r':
        put(w, "\\r", 2);
        return;
    case '\t':
        put(w, "\\t", 2);
        return;
    default:
        put(w, seq, sizeof(seq));
        return;
    }
}

/* Do the 8 bytes at @p s need neither an escape nor a UTF-8 check (printable ASCII other than
 * '"' and '\\')? Bit tricks on one word: a byte below 0x20, a byte equal to '"' or '\\', or a
 * byte with its high bit set each leave a high bit in the result. */
static inline bool
is_plain_word(const uint8_t *s)
{
    const uint64_t ones = 0x0101010101010101ull;
    const uint64_t highs = 0x8080808080808080ull;
    uint64_t x = 0;
    uint64_t quote = 0;
    uint64_t slash = 0;

    memcpy(&x, s, sizeof(x));
    quote = x ^ (ones * '"');
    slash = x ^ (ones * '\\');
    return ((((x - ones * 0x20) & ~x) | ((quote - ones) & ~quote) | ((slash - ones) & ~slash) | x) &
            highs) == 0;
}

/* A JSON string for @p len bytes of @p text (NULL reads as empty). Each maximal invalid
 * subpart becomes U+FFFD, as weft__utf8_sanitize() did before jansson saw the text, so one
 * bad byte in a tool's output cannot lose the span. Runs that need no escape are copied
 * whole. */
static void
put_text(struct jw *w, const char *text, size_t len)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t run = 0;
    size_t i = 0;

    put(w, "\"", 1);
    while (s != NULL && i < len) {
        size_t n = 1;
        bool is_valid = true;

        if (len - i >= 8 && is_plain_word(s + i)) {
            i += 8;
            continue;
        }
        if (s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\') {
            i++;
            continue;
        }
        if (s[i] >= 0x80) {
            n = weft__utf8_seq(s + i, len - i, &is_valid);
            if (is_valid) {
                i += n;
                continue;
            }
        }
        put(w, text + run, i - run);
        if (is_valid) {
            put_escape(w, s[i]);
        } else {
            put(w, WEFT__UTF8_REPLACEMENT, sizeof(WEFT__UTF8_REPLACEMENT) - 1);
        }
        i += n;
        run = i;
    }
    put(w, text != NULL ? text + run : NULL, i - run);
    put(w, "\"", 1);
}

static void
put_int(struct jw *w, int64_t v)
{
    char digits[24];
    size_t n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

    do {
        digits[sizeof(digits) - 1 - n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        digits[sizeof(digits) - 1 - n++] = '-';
    }
    put(w, digits + sizeof(digits) - n, n);
}

/* A finite double as jansson's dump writes it (weft__fmt_json_real()). */
static void
put_real(struct jw *w, double d)
{
    char text[WEFT__JSON_REAL_MAX];
    size_t len = weft__fmt_json_real(d, localeconv()->decimal_point[0], text);

    put(w, text, len);
}

/* A double inside a value: non-finite ones as the strings "NaN", "Infinity", "-Infinity". */
static void
put_double(struct jw *w, double d)
{
    if (isnan(d)) {
        put_lit(w, "\"NaN\"");
    } else if (isinf(d)) {
        put_lit(w, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    } else {
        put_real(w, d);
    }
}

static void
put_bool(struct jw *w, bool b)
{
    put_lit(w, b ? "true" : "false");
}

/* An array value's elements as a JSON array (its tag, when it needs one, is the caller's). */
static void
put_items(struct jw *w, const struct weft_value *v)
{
    put(w, "[", 1);
    for (size_t i = 0; i < v->len; i++) {
        if (i > 0) {
            put(w, ",", 1);
        }
        switch (v->type) {
        case WEFT_VALUE_STRING_ARRAY:
            put_text(w, v->u.strs[i], v->u.strs[i] != NULL ? strlen(v->u.strs[i]) : 0);
            break;
        case WEFT_VALUE_BOOL_ARRAY:
            put_bool(w, v->u.bools[i]);
            break;
        case WEFT_VALUE_INT_ARRAY:
            put_int(w, v->u.ints[i]);
            break;
        default:
            put_double(w, v->u.doubles[i]);
            break;
        }
    }
    put(w, "]", 1);
}

/* Values plain JSON cannot type (non-finite doubles, empty arrays, double arrays holding a
 * non-finite element) are written {"type":"<type>","value":...}. */
static bool
needs_tag(const struct weft_value *v)
{
    if (v->type == WEFT_VALUE_DOUBLE) {
        return !isfinite(v->u.d);
    }
    if (v->len == 0) {
        return true;
    }
    for (size_t i = 0; v->type == WEFT_VALUE_DOUBLE_ARRAY && i < v->len; i++) {
        if (!isfinite(v->u.doubles[i])) {
            return true;
        }
    }
    return false;
}

/* A long attribute text as a payload reference, when @p w collects payloads and the text can
 * be one: valid UTF-8 without NUL, so that reading it back gives the very text an inline
 * column would (which replaces invalid bytes, and in PostgreSQL NUL characters). */
static bool
put_payload(struct jw *w, const char *text, size_t len)
{
    char ref[WEFT__PAYLOAD_HEX_LEN + 1];
    weft_err err = WEFT_OK;

    if (w->pl == NULL || !w->pl->is_enabled || len < WEFT__PAYLOAD_MIN || len > WEFT__PAYLOAD_MAX ||
        memchr(text, '\0', len) != NULL || !weft__utf8_valid(text, len)) {
        return false;
    }
    err = weft__store_payloads_add(w->pl, text, len, ref);
    if (err != WEFT_OK) {
        if (w->err == WEFT_OK) {
            w->err = err;
        }
        return true;
    }
    put_lit(w, "{\"type\":\"payload\",\"value\":\"");
    put(w, ref, WEFT__PAYLOAD_HEX_LEN);
    put(w, "\"}", 2);
    return true;
}

static void
put_value(struct jw *w, const struct weft_value *v)
{
    bool is_tagged = false;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        if (v->u.str == NULL || !put_payload(w, v->u.str, v->len)) {
            put_text(w, v->u.str, v->u.str != NULL ? v->len : 0);
        }
        return;
    case WEFT_VALUE_BOOL:
        put_bool(w, v->u.b);
        return;
    case WEFT_VALUE_INT:
        put_int(w, v->u.i);
        return;
    case WEFT_VALUE_DOUBLE:
    case WEFT_VALUE_STRING_ARRAY:
    case WEFT_VALUE_BOOL_ARRAY:
    case WEFT_VALUE_INT_ARRAY:
    case WEFT_VALUE_DOUBLE_ARRAY:
        break;
    default:
        put_lit(w, "null");
        return;
    }
    is_tagged = needs_tag(v);
    if (is_tagged) {
        put_lit(w, "{\"type\":\"");
        put_lit(w, type_names[v->type]);
        put_lit(w, "\",\"value\":");
    }
    if (v->type == WEFT_VALUE_DOUBLE) {
        put_double(w, v->u.d);
    } else {
        put_items(w, v);
    }
    if (is_tagged) {
        put(w, "}", 1);
    }
}

/* --- repeated keys ------------------------------------------------------------------------ */

/* The next character of s[0..len) at *i as the column holds it: a well-formed sequence, or
 * U+FFFD for a maximal invalid subpart. Sets *c and returns its length. */
static size_t
next_char(const char *s, size_t len, size_t *i, const char **c)
{
    bool is_valid = true;
    size_t n = weft__utf8_seq((const uint8_t *)s + *i, len - *i, &is_valid);

    *c = is_valid ? s + *i : WEFT__UTF8_REPLACEMENT;
    *i += n;
    return is_valid ? n : sizeof(WEFT__UTF8_REPLACEMENT) - 1;
}

/* FNV-1a of a key as written (invalid UTF-8 replaced). */
static uint32_t
key_hash(const char *key)
{
    size_t len = strlen(key);
    uint32_t h = 2166136261u;
    size_t i = 0;

    while (i < len) {
        const char *c = key + i;
        size_t n = 1;

        if ((uint8_t)key[i] < 0x80) {
            i++;
        } else {
            n = next_char(key, len, &i, &c);
        }
        for (size_t k = 0; k < n; k++) {
            h = (h ^ (uint8_t)c[k]) * 16777619u;
        }
    }
    return h;
}

/* Are two keys one key once written? Keys that differ only in their invalid bytes are. */
static bool
key_equal(const char *a, const char *b)
{
    size_t alen = strlen(a);
    size_t blen = strlen(b);
    size_t i = 0;
    size_t j = 0;

    if (alen == blen && memcmp(a, b, alen) == 0) {
        return true;
    }
    while (i < alen && j < blen) {
        const char *ca = NULL;
        const char *cb = NULL;
        size_t na = next_char(a, alen, &i, &ca);
        size_t nb = next_char(b, blen, &j, &cb);

        if (na != nb || memcmp(ca, cb, na) != 0) {
            return false;
        }
    }
    return i == alen && j == blen;
}

#define SKIPPED UINT32_MAX

/* For each attribute, the index of the one whose value goes in its place (the last with the
 * same key: a jansson object kept a key's first position and its last value), or SKIPPED
 * when its key came earlier. @p slots has room for @p mask + 1 indexes, a power of two at
 * least twice @p count; @p hashes for @p count. */
static void
resolve_keys(const struct weft_attr *attrs,
             size_t count,
             uint32_t *winner,
             uint32_t *hashes,
             uint32_t *slots,
             size_t mask)
{
    memset(slots, 0xff, (mask + 1) * sizeof(*slots));
    for (size_t i = 0; i < count; i++) {
        size_t at = 0;

        hashes[i] = key_hash(attrs[i].key);
        winner[i] = (uint32_t)i;
        for (at = hashes[i] & mask; slots[at] != SKIPPED; at = (at + 1) & mask) {
            uint32_t first = slots[at];

            if (hashes[first] == hashes[i] && key_equal(attrs[first].key, attrs[i].key)) {
                winner[first] = (uint32_t)i;
                winner[i] = SKIPPED;
                break;
            }
        }
        if (slots[at] == SKIPPED) {
            slots[at] = (uint32_t)i;
        }
    }
}

static void
put_attrs_resolved(struct jw *w, const struct weft_attr *attrs, size_t count, const uint32_t *win)
{
    bool is_first = true;

    put(w, "{", 1);
    for (size_t i = 0; i < count; i++) {
        if (win[i] == SKIPPED) {
            continue;
        }
        if (!is_first) {
            put(w, ",", 1);
        }
        is_first = false;
        put_text(w, attrs[i].key, strlen(attrs[i].key));
        put(w, ":", 1);
        put_value(w, &attrs[win[i]].value);
    }
    put(w, "}", 1);
}

/* An attribute object. A NULL key fails the column, as it did with jansson. */
static void
put_attrs(struct jw *w, const struct weft_attr *attrs, size_t count)
{
    uint32_t small[SMALL_SET * 4];
    uint32_t *mem = small;
    size_t slots = 2 * SMALL_SET;

    for (size_t i = 0; i < count; i++) {
        if (attrs[i].key == NULL && w->err == WEFT_OK) {
            w->err = WEFT_ENOMEM;
        }
    }
    if (w->err != WEFT_OK) {
        return;
    }
    if (count > SMALL_SET) {
        if (count > UINT32_MAX / 4) {
            w->err = WEFT_ENOMEM;
            return;
        }
        for (slots = 2 * SMALL_SET; slots < 2 * count;) {
            slots *= 2;
        }
        mem = weft__malloc((2 * count + slots) * sizeof(*mem));
        if (mem == NULL) {
            w->err = WEFT_ENOMEM;
            return;
        }
    }
    resolve_keys(attrs, count, mem, mem + count, mem + 2 * count, slots - 1);
    put_attrs_resolved(w, attrs, count, mem);
    if (mem != small) {
        weft__free(mem);
    }
}

/* Start writing a column into @p out, replacing its contents. */
static struct jw
column(struct weft__buf *out)
{
    struct jw w = {out, out->max, WEFT_OK, NULL};

    weft__buf_reset(out);
    return w;
}

/* Finish a column: any failure (out of memory or past the column cap) is WEFT_ENOMEM, as
 * jansson's dump reported it; the data is never NULL on success. */
static weft_err
column_end(struct jw *w)
{
    if (w->err == WEFT_OK) {
        w->err = weft__buf_reserve(w->out, 0);
    }
    if (w->out->data != NULL) {
        w->out->data[w->out->len] = '\0';
    }
    return w->err == WEFT_OK ? WEFT_OK : WEFT_ENOMEM;
}

weft_err
weft__store_attrs_text(const struct weft_attr *attrs,
                       size_t count,
                       struct weft__store_payloads *pl,
                       struct weft__buf *out)
{
    struct jw w = column(out);

    w.pl = pl;
    put_attrs(&w, attrs, count);
    return column_end(&w);
}

static void
put_dropped(struct jw *w, uint32_t dropped)
{
    if (dropped != 0) {
        put_lit(w, ",\"dropped_attributes_count\":");
        put_int(w, dropped);
    }
}

static void
put_events(struct jw *w, const struct weft_span_data *span)
{
    put(w, "[", 1);
    for (size_t i = 0; i < span->event_count; i++) {
        const struct weft_event_data *ev = &span->events[i];

        put_lit(w, i == 0 ? "{\"name\":" : ",{\"name\":");
        put_text(w, ev->name, ev->name != NULL ? strlen(ev->name) : 0);
        put_lit(w, ",\"time_ns\":");
        put_int(w, (int64_t)ev->time_ns);
        put_lit(w, ",\"attributes\":");
        put_attrs(w, ev->attrs, ev->attr_count);
        put_dropped(w, ev->dropped_attrs);
        put(w, "}", 1);
    }
    put(w, "]", 1);
}

weft_err
weft__store_events_text(const struct weft_span_data *span, struct weft__buf *out)
{
    struct jw w = column(out);

    put_events(&w, span);
    return column_end(&w);
}

static void
put_link(struct jw *w, const struct weft_link_data *link)
{
    char hex[2 * WEFT_TRACE_ID_SIZE + 1];

    weft_hex_encode(link->trace_id, WEFT_TRACE_ID_SIZE, hex);
    put_lit(w, "{\"trace_id\":\"");
    put(w, hex, 2 * WEFT_TRACE_ID_SIZE);
    weft_hex_encode(link->span_id, WEFT_SPAN_ID_SIZE, hex);
    put_lit(w, "\",\"span_id\":\"");
    put(w, hex, 2 * WEFT_SPAN_ID_SIZE);
    put(w, "\"", 1);
    if (link->trace_state != NULL) {
        put_lit(w, ",\"trace_state\":");
        put_text(w, link->trace_state, strlen(link->trace_state));
    }
    put_lit(w, ",\"flags\":");
    put_int(w, link->trace_flags);
    put_lit(w, ",\"is_remote\":");
    put_bool(w, link->is_remote);
    put_lit(w, ",\"attributes\":");
    put_attrs(w, link->attrs, link->attr_count);
    put_dropped(w, link->dropped_attrs);
    put(w, "}", 1);
}

static void
put_links(struct jw *w, const struct weft_span_data *span)
{
    put(w, "[", 1);
    for (size_t i = 0; i < span->link_count; i++) {
        if (i > 0) {
            put(w, ",", 1);
        }
        put_link(w, &span->links[i]);
    }
    put(w, "]", 1);
}

weft_err
weft__store_links_text(const struct weft_span_data *span, struct weft__buf *out)
{
    struct jw w = column(out);

    put_links(&w, span);
    return column_end(&w);
}

/* One column of a batch's texts: written after the ones before it and closed with a NUL;
 * past STORE_JSON_COLUMN_MAX it fails as the single column would. */
static void
texts_column(struct jw *w, size_t start)
{
    if (w->err == WEFT_OK && w->out->len - start > STORE_JSON_COLUMN_MAX) {
        w->err = WEFT_ENOMEM;
    }
    put(w, "", 1);
}

weft_err
weft__store_texts_build(struct weft__store_texts *texts,
                        const struct weft_span_data *const *spans,
                        size_t count,
                        size_t max)
{
    struct jw w = {&texts->text, 0, WEFT_OK, &texts->payloads};

    weft__buf_init(&texts->text, max);
    weft__store_payloads_init(&texts->payloads);
    w.max = texts->text.max;
    texts->count = 0;
    texts->starts = weft__calloc(3 * count + 1, sizeof(*texts->starts));
    if (texts->starts == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < count && w.err == WEFT_OK; i++) {
        size_t *at = &texts->starts[3 * i];

        at[0] = w.out->len;
        put_attrs(&w, spans[i]->attrs, spans[i]->attr_count);
        texts_column(&w, at[0]);
        w.pl = NULL; /* events and links stay inline: they are rarely long */
        at[1] = w.out->len;
        put_events(&w, spans[i]);
        texts_column(&w, at[1]);
        at[2] = w.out->len;
        put_links(&w, spans[i]);
        texts_column(&w, at[2]);
        w.pl = &texts->payloads;
    }
    texts->starts[3 * count] = w.out->len;
    texts->count = count;
    weft__store_payloads_sort(&texts->payloads);
    return w.err == WEFT_OK ? WEFT_OK : WEFT_ENOMEM;
}

const char *
weft__store_texts_column(const struct weft__store_texts *texts, size_t i, size_t *len)
{
    *len = texts->starts[i + 1] - texts->starts[i] - 1;
    return texts->text.data + texts->starts[i];
}

void
weft__store_texts_cleanup(struct weft__store_texts *texts)
{
    weft__buf_cleanup(&texts->text);
    weft__store_payloads_cleanup(&texts->payloads);
    weft__free(texts->starts);
    texts->starts = NULL;
    texts->count = 0;
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
weft_err
weft__store_read_attrs(struct weft__arena *arena,
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

weft_err
weft__store_read_events(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span)
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
        if (ev->name == NULL ||
            weft__store_read_attrs(arena, json_object_get(obj, "attributes"), &ev->attrs,
                                   &ev->attr_count, &ev->dropped_attrs) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    span->events = events;
    span->event_count = n;
    return WEFT_OK;
}

weft_err
weft__store_read_links(struct weft__arena *arena, const json_t *arr, struct weft_span_data *span)
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
        if (weft__store_read_attrs(arena, json_object_get(obj, "attributes"), &link->attrs,
                                   &link->attr_count, &link->dropped_attrs) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
        n++;
    }
    span->links = links;
    span->link_count = n;
    return WEFT_OK;
}

const char *
weft__store_service_name(const struct weft_span_data *span)
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

bool
weft__store_has_parent(const struct weft_span_data *span)
{
    if (!span->has_parent) {
        return false;
    }
    for (size_t i = 0; i < WEFT_SPAN_ID_SIZE; i++) {
        if (span->parent_span_id[i] != 0) {
            return true;
        }
    }
    return false;
}
