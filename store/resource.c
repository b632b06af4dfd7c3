/* store/resource.c - the resource a trace arrived with (OTLP ResourceSpans.resource: service.name,
 * service.version, telemetry.sdk.*, host.*, k8s.*, ...), as the span store keeps it.
 *
 * Where: the `resource` column of the spans that start a trace's part in one process, the root
 * candidates (no parent, or a remote one); other spans keep only service_name. A trace whose
 * parts come from several services so keeps each one's resource, at the cost of one small
 * column per part rather than one per span (a resource is the same for every span of a
 * process).
 *
 * Bounded: at most WEFT__STORE_RESOURCE_MAX_ATTRS attributes, string values cut to
 * WEFT__STORE_RESOURCE_VALUE_MAX bytes (on a UTF-8 boundary, as OTel's attribute value length
 * limit cuts), arrays longer than that dropped, at most WEFT__STORE_RESOURCE_TEXT_MAX bytes in
 * all. What is left out is counted, never silently lost: "dropped_attributes_count" (the
 * sender's own count plus the attributes left out here) and "truncated" (values cut).
 * Redacted as the rest of weft redacts: a value whose key names a secret (…token, …password,
 * …api_key, …authorization) is replaced whole, credential shapes inside other values
 * (Bearer …, sk-…, AWS key ids) are replaced (weft_redact_builtin()).
 *
 * Column text: {"attributes": {...}, "dropped_attributes_count": N, "truncated": M}, the
 * attributes in the attributes column's encoding (json.c).
 */
#include "store.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"

#include <jansson.h>
#include <string.h>
#include <weft/trace.h>

/* The redaction rules look at a value's first bytes only up to this many (a longer value is cut
 * to WEFT__STORE_RESOURCE_VALUE_MAX after redaction anyway). */
#define REDACT_SCAN_MAX (4 * WEFT__STORE_RESOURCE_VALUE_MAX)

/* The bytes a value takes in the column, roughly (quotes, escapes and separators aside). */
static size_t
value_size(const struct weft_value *v)
{
    size_t n = 8;

    switch (v->type) {
    case WEFT_VALUE_STRING:
        return v->len;
    case WEFT_VALUE_STRING_ARRAY:
        for (size_t i = 0; i < v->len; i++) {
            n += (v->u.strs[i] != NULL ? strlen(v->u.strs[i]) : 0) + 3;
        }
        return n;
    case WEFT_VALUE_BOOL_ARRAY:
    case WEFT_VALUE_INT_ARRAY:
    case WEFT_VALUE_DOUBLE_ARRAY:
        return n + 24 * v->len;
    default:
        return n;
    }
}

/* @p value redacted and cut, in @p out (NUL-terminated); *is_cut when it was cut.
 * @return WEFT_OK or WEFT_ENOMEM. */
static weft_err
clean_text(const char *key, const char *value, size_t len, struct weft__buf *out, bool *is_cut)
{
    size_t scan = weft__utf8_cut(value, len, REDACT_SCAN_MAX);
    size_t scratch_len = scan + scan / 2 + 64;
    char *scratch = weft__malloc(scratch_len);
    const char *r = NULL;
    size_t keep = 0;
    weft_err err = WEFT_OK;

    if (scratch == NULL) {
        return WEFT_ENOMEM;
    }
    r = weft_redact_builtin(key, value, scan, scratch, scratch_len);
    if (r == NULL) {
        r = value; /* nothing matched: the text as it came */
    } else {
        len = strlen(r);
    }
    keep = weft__utf8_cut(r, r == value ? scan : len, WEFT__STORE_RESOURCE_VALUE_MAX);
    *is_cut = keep < len;
    weft__buf_reset(out);
    err = weft__buf_append(out, r, keep);
    if (err == WEFT_OK) {
        err = weft__buf_reserve(out, 1);
    }
    if (err == WEFT_OK) {
        out->data[out->len] = '\0';
    }
    weft__free(scratch);
    return err == WEFT_OK ? WEFT_OK : WEFT_ENOMEM;
}

/* The kept attributes of @p res: copies into @p kept (strings in @p texts, which own them),
 * with the counts of what was left out and cut. */
struct kept {
    struct weft_attr attrs[WEFT__STORE_RESOURCE_MAX_ATTRS];
    struct weft__buf texts[WEFT__STORE_RESOURCE_MAX_ATTRS];
    char **arrays[WEFT__STORE_RESOURCE_MAX_ATTRS];
    size_t count;
    uint64_t dropped;
    uint64_t truncated;
};

static void
kept_cleanup(struct kept *k)
{
    for (size_t i = 0; i < k->count; i++) {
        weft__buf_cleanup(&k->texts[i]);
        if (k->arrays[i] != NULL) {
            for (size_t j = 0; j < k->attrs[i].value.len; j++) {
                weft__free(k->arrays[i][j]);
            }
            weft__free(k->arrays[i]);
        }
    }
}

/* A string array's items, each redacted (by the attribute's key too) into new strings. */
static weft_err
clean_array(struct kept *k, const char *key, const struct weft_value *v, size_t slot)
{
    char **items = weft__calloc(v->len > 0 ? v->len : 1, sizeof(*items));
    struct weft__buf one;
    weft_err err = WEFT_OK;

    if (items == NULL) {
        return WEFT_ENOMEM;
    }
    k->arrays[slot] = items;
    weft__buf_init(&one, 0);
    for (size_t i = 0; err == WEFT_OK && i < v->len; i++) {
        const char *s = v->u.strs[i] != NULL ? v->u.strs[i] : "";
        bool is_cut = false;

        err = clean_text(key, s, strlen(s), &one, &is_cut);
        items[i] = err == WEFT_OK ? weft__strdup(one.data) : NULL;
        err = items[i] == NULL ? WEFT_ENOMEM : err;
        k->truncated += is_cut;
    }
    weft__buf_cleanup(&one);
    k->attrs[slot].value.u.strs = (const char *const *)items;
    return err;
}

/* Keep attribute @p a when it fits (@p used: the bytes kept so far). */
static weft_err
keep_one(struct kept *k, const struct weft_attr *a, size_t *used)
{
    size_t slot = k->count;
    size_t size = 0;
    weft_err err = WEFT_OK;

    if (a->key == NULL || a->key[0] == '\0' || slot == WEFT__STORE_RESOURCE_MAX_ATTRS ||
        (a->value.type != WEFT_VALUE_STRING &&
         value_size(&a->value) > WEFT__STORE_RESOURCE_VALUE_MAX)) {
        k->dropped++;
        return WEFT_OK;
    }
    size = strlen(a->key) +
           (a->value.type == WEFT_VALUE_STRING
                ? (a->value.len < WEFT__STORE_RESOURCE_VALUE_MAX ? a->value.len
                                                                 : WEFT__STORE_RESOURCE_VALUE_MAX)
                : value_size(&a->value));
    if (*used + size > WEFT__STORE_RESOURCE_TEXT_MAX) {
        k->dropped++;
        return WEFT_OK;
    }
    k->attrs[slot] = *a;
    k->arrays[slot] = NULL;
    weft__buf_init(&k->texts[slot], 0);
    k->count++;
    if (a->value.type == WEFT_VALUE_STRING) {
        bool is_cut = false;

        err = clean_text(a->key, a->value.u.str != NULL ? a->value.u.str : "", a->value.len,
                         &k->texts[slot], &is_cut);
        k->attrs[slot].value.u.str = k->texts[slot].data;
        k->attrs[slot].value.len = k->texts[slot].len;
        k->truncated += is_cut;
    } else if (a->value.type == WEFT_VALUE_STRING_ARRAY) {
        err = clean_array(k, a->key, &a->value, slot);
    }
    *used += size;
    return err;
}

weft_err
weft__store_resource_text(const struct weft_resource *res, struct weft__buf *out)
{
    struct kept *k = NULL;
    struct weft__buf attrs;
    size_t used = 0;
    weft_err err = WEFT_OK;

    weft__buf_reset(out);
    if (res == NULL || res->attr_count == 0) {
        return WEFT_ENOTFOUND;
    }
    k = weft__calloc(1, sizeof(*k));
    if (k == NULL) {
        return WEFT_ENOMEM;
    }
    k->dropped = res->dropped_attrs;
    for (size_t i = 0; err == WEFT_OK && i < res->attr_count; i++) {
        err = keep_one(k, &res->attrs[i], &used);
    }
    weft__buf_init(&attrs, 0);
    if (err == WEFT_OK) {
        err = weft__store_attrs_text(k->attrs, k->count, NULL, &attrs);
    }
    if (err == WEFT_OK) {
        err = weft__buf_printf(out,
                               "{\"attributes\":%s,\"dropped_attributes_count\":%llu,"
                               "\"truncated\":%llu}",
                               attrs.data, (unsigned long long)k->dropped,
                               (unsigned long long)k->truncated);
    }
    weft__buf_cleanup(&attrs);
    kept_cleanup(k);
    weft__free(k);
    return err == WEFT_OK ? WEFT_OK : WEFT_ENOMEM;
}

weft_err
weft__store_read_resource(struct weft__arena *arena,
                          const char *text,
                          size_t len,
                          struct weft_resource *res)
{
    json_t *doc = json_loadb(text, len, 0, NULL);
    const struct weft_attr *attrs = NULL;
    size_t count = 0;
    uint32_t dropped = 0;
    json_int_t told = 0;
    weft_err err = WEFT_OK;

    if (!json_is_object(doc)) {
        json_decref(doc);
        return WEFT_EIO; /* a damaged column: the caller keeps service.name alone */
    }
    err =
        weft__store_read_attrs(arena, json_object_get(doc, "attributes"), &attrs, &count, &dropped);
    told = json_integer_value(json_object_get(doc, "dropped_attributes_count"));
    json_decref(doc);
    if (err != WEFT_OK) {
        return err;
    }
    res->attrs = attrs;
    res->attr_count = count;
    told += dropped;
    res->dropped_attrs = told < 0 ? 0 : told > (json_int_t)UINT32_MAX ? UINT32_MAX : (uint32_t)told;
    return WEFT_OK;
}
