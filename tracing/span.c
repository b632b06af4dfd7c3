/* tracing/span.c - span recording: start, attributes, events, links, status, end, and the
 * thread-local current-span stack.
 *
 * One allocation per span holds the span, eight attribute slots and a 384-byte arena for
 * copied strings; attribute arrays, events and links grow into further allocations only
 * when a span needs them. That keeps start + five attributes + end to one malloc and one
 * free, which is what lets the hot path stay under 100 ns. A span's total arena is capped
 * (WEFT__SPAN_ARENA_MAX) so that a loop overwriting one attribute cannot grow memory without
 * bound: past the cap, new values are dropped and counted like any other limit.
 *
 * Invariants: data.attr_count <= limits.attr_count; every string the span points to lives
 * in its arena; after end, nothing in the span changes (exporters read it from another
 * thread).
 */
#include "ids.h"
#include "ring.h"
#include "sdk.h"

#include <string.h>

#define INLINE_ATTRS         8
#define INLINE_ARENA         384
#define CHUNK_MIN            1024
#define WEFT__SPAN_ARENA_MAX (4u * 1024 * 1024)
#define CONTEXT_DEPTH        64

struct chunk {
    struct chunk *next;
    size_t size;
    _Alignas(8) char data[];
};

struct weft_span {
    struct weft_span_data data; /* first: exporters receive &span->data */
    atomic_uint refs;
    bool is_recording;
    bool is_static;
    bool has_ended;
    struct weft_provider *provider;
    struct weft_attr *attrs; /* == inline_attrs until it grows */
    size_t attr_cap;
    struct weft_event_data *events;
    size_t event_cap;
    struct weft_link_data *links;
    size_t link_cap;
    char *arena;
    size_t arena_left;
    size_t arena_used; /* bytes in chunks, for the cap */
    struct chunk *chunks;
    struct weft_attr inline_attrs[INLINE_ATTRS];
    _Alignas(8) char inline_arena[INLINE_ARENA];
};

/* The shared non-recording span: returned when the SDK is off, shut down or out of memory. */
static struct weft_span noop_span = {.is_static = true, .has_ended = true};

/* ---- thread-local context ------------------------------------------------------------- */

static _Thread_local struct weft_span *context_stack[CONTEXT_DEPTH];
static _Thread_local size_t context_depth; /* may exceed CONTEXT_DEPTH: overflow entries */

size_t
weft_context_attach(struct weft_span *span)
{
    size_t token = context_depth;

    if (span == NULL) {
        return token;
    }
    if (context_depth < CONTEXT_DEPTH) {
        context_stack[context_depth] = weft_span_ref(span);
    } else if (span->provider != NULL) {
        atomic_fetch_add_explicit(&span->provider->context_overflows, 1, memory_order_relaxed);
    }
    context_depth++;
    return token;
}

void
weft_context_detach(size_t token)
{
    while (context_depth > token) {
        context_depth--;
        if (context_depth < CONTEXT_DEPTH) {
            weft_span_unref(context_stack[context_depth]);
            context_stack[context_depth] = NULL;
        }
    }
}

struct weft_span *
weft_context_current(void)
{
    size_t depth = context_depth < CONTEXT_DEPTH ? context_depth : CONTEXT_DEPTH;

    return depth == 0 ? NULL : context_stack[depth - 1];
}

/* ---- arena ---------------------------------------------------------------------------- */

static void *
arena_alloc(struct weft_span *span, size_t size)
{
    struct chunk *c = NULL;
    size_t chunk_size = 0;
    void *p = NULL;

    size = (size + 7) & ~(size_t)7;
    if (size <= span->arena_left) {
        p = span->arena;
        span->arena += size;
        span->arena_left -= size;
        return p;
    }
    chunk_size = size > CHUNK_MIN ? size : CHUNK_MIN;
    if (span->arena_used + chunk_size > WEFT__SPAN_ARENA_MAX) {
        return NULL;
    }
    c = weft__malloc(sizeof(*c) + chunk_size);
    if (c == NULL) {
        return NULL;
    }
    c->next = span->chunks;
    c->size = chunk_size;
    span->chunks = c;
    span->arena_used += chunk_size;
    span->arena = c->data + size;
    span->arena_left = chunk_size - size;
    return c->data;
}

static char *
arena_strndup(struct weft_span *span, const char *s, size_t len)
{
    char *p = arena_alloc(span, len + 1);

    if (p != NULL) {
        memcpy(p, s, len);
        p[len] = '\0';
    }
    return p;
}

/* Copy a string value: truncate to the value-length limit, redact, then store. */
static const char *
store_string(struct weft_span *span, const char *key, const char *s, size_t len, size_t *out_len)
{
    const struct weft_provider *provider = span->provider;
    struct weft__buf redacted;
    const char *r = NULL;
    char *copy = NULL;

    if (s == NULL) {
        s = "";
        len = 0;
    }
    if (provider->limits.attr_value_length != WEFT_LIMIT_NONE) {
        len = weft__utf8_prefix(s, len, provider->limits.attr_value_length);
    }
    if (provider->redact != NULL ||
        (provider->builtin_redaction && weft__may_need_redaction(key, s, len))) {
        weft__buf_init(&redacted, 0);
        r = weft__redact(provider, key, s, len, &redacted);
        if (r != NULL) {
            len = strlen(r);
            if (provider->limits.attr_value_length != WEFT_LIMIT_NONE) {
                len = weft__utf8_prefix(r, len, provider->limits.attr_value_length);
            }
            copy = arena_strndup(span, r, len);
            weft__buf_cleanup(&redacted);
            *out_len = len;
            return copy;
        }
        weft__buf_cleanup(&redacted);
    }
    copy = arena_strndup(span, s, len);
    *out_len = len;
    return copy;
}

static size_t
scalar_size(weft_value_type type)
{
    switch (type) {
    case WEFT_VALUE_BOOL_ARRAY:
        return sizeof(bool);
    case WEFT_VALUE_INT_ARRAY:
        return sizeof(int64_t);
    case WEFT_VALUE_DOUBLE_ARRAY:
        return sizeof(double);
    default:
        return sizeof(char *);
    }
}

/* Copy @p in into span storage as @p out. @return WEFT_OK, WEFT_EINVAL or WEFT_ENOMEM. */
static weft_err
store_value(struct weft_span *span,
            const char *key,
            const struct weft_value *in,
            struct weft_value *out)
{
    size_t n = 0;

    *out = *in;
    switch (in->type) {
    case WEFT_VALUE_STRING:
        out->u.str = store_string(span, key, in->u.str, in->len, &out->len);
        return out->u.str == NULL ? WEFT_ENOMEM : WEFT_OK;
    case WEFT_VALUE_BOOL:
    case WEFT_VALUE_INT:
    case WEFT_VALUE_DOUBLE:
        return WEFT_OK;
    case WEFT_VALUE_STRING_ARRAY: {
        const char **strs = NULL;

        if (in->len > 0 && in->u.strs == NULL) {
            return WEFT_EINVAL;
        }
        strs = arena_alloc(span, in->len * sizeof(char *));
        if (strs == NULL && in->len > 0) {
            return WEFT_ENOMEM;
        }
        for (size_t i = 0; i < in->len; i++) {
            const char *s = in->u.strs[i] == NULL ? "" : in->u.strs[i];

            strs[i] = store_string(span, key, s, strlen(s), &n);
            if (strs[i] == NULL) {
                return WEFT_ENOMEM;
            }
        }
        out->u.strs = strs;
        return WEFT_OK;
    }
    case WEFT_VALUE_BOOL_ARRAY:
    case WEFT_VALUE_INT_ARRAY:
    case WEFT_VALUE_DOUBLE_ARRAY: {
        void *copy = NULL;

        if (in->len > 0 && in->u.ints == NULL) {
            return WEFT_EINVAL;
        }
        n = in->len * scalar_size(in->type);
        copy = arena_alloc(span, n);
        if (copy == NULL && n > 0) {
            return WEFT_ENOMEM;
        }
        if (n > 0) {
            memcpy(copy, in->u.ints, n);
        }
        out->u.ints = copy;
        return WEFT_OK;
    }
    }
    return WEFT_EINVAL;
}

/* Store an attribute list (for events and links): dedupe keys, keep at most @p limit,
 * count the rest in *dropped. */
static weft_err
store_attr_list(struct weft_span *span,
                const struct weft_attr *in,
                size_t count,
                size_t limit,
                const struct weft_attr **out,
                size_t *out_count,
                uint32_t *dropped)
{
    struct weft_attr *attrs = NULL;
    size_t n = 0;
    weft_err err = WEFT_OK;

    *out = NULL;
    *out_count = 0;
    *dropped = 0;
    if (count == 0) {
        return WEFT_OK;
    }
    if (in == NULL) {
        return WEFT_EINVAL;
    }
    attrs = arena_alloc(span, (count < limit ? count : limit) * sizeof(*attrs) + 1);
    if (attrs == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        size_t j = 0;

        if (in[i].key == NULL || in[i].key[0] == '\0') {
            (*dropped)++;
            continue;
        }
        for (j = 0; j < n; j++) {
            if (strcmp(attrs[j].key, in[i].key) == 0) {
                break;
            }
        }
        if (j == n && n == limit) {
            (*dropped)++;
            continue;
        }
        err = store_value(span, in[i].key, &in[i].value, &attrs[j].value);
        if (err != WEFT_OK) {
            (*dropped)++;
            continue;
        }
        if (j == n) {
            attrs[j].key = arena_strndup(span, in[i].key, strlen(in[i].key));
            if (attrs[j].key == NULL) {
                (*dropped)++;
                continue;
            }
            n++;
        }
    }
    *out = attrs;
    *out_count = n;
    return WEFT_OK;
}

/* ---- start ---------------------------------------------------------------------------- */

/* Recycled span objects. Spans are allocated on agent threads and freed on export threads;
 * with malloc that round trip costs a contended arena lock and cold cache lines on every span,
 * so freed spans go back through this bounded lock-free ring instead (at most POOL_CAP spans,
 * about 1 MiB, are kept). */
#define POOL_CAP 1024
static struct weft__ring pool;
static bool pool_ready;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static void
pool_init(void)
{
    pool_ready = weft__ring_init(&pool, POOL_CAP) == WEFT_OK;
}

static struct weft_span *
span_alloc(struct weft_provider *provider)
{
    struct weft_span *span = NULL;

    pthread_once(&pool_once, pool_init);
    if (pool_ready) {
        span = weft__ring_pop(&pool);
    }
    if (span == NULL) {
        span = weft__malloc(sizeof(*span));
    }

    if (span == NULL) {
        return NULL;
    }
    /* Only the header needs zeroing; the inline arrays are written before they are read. */
    memset(span, 0, offsetof(struct weft_span, inline_attrs));
    atomic_init(&span->refs, 1);
    span->provider = provider;
    span->attrs = span->inline_attrs;
    span->attr_cap = INLINE_ATTRS;
    span->arena = span->inline_arena;
    span->arena_left = INLINE_ARENA;
    return span;
}

static void
span_free(struct weft_span *span)
{
    struct chunk *c = span->chunks;

    while (c != NULL) {
        struct chunk *next = c->next;
        weft__free(c);
        c = next;
    }
    if (span->attrs != span->inline_attrs) {
        weft__free(span->attrs);
    }
    weft__free(span->events);
    weft__free(span->links);
    if (!pool_ready || !weft__ring_push(&pool, span, NULL)) {
        weft__free(span);
    }
}

static void
new_span_id(struct weft_provider *provider, uint8_t *trace_id, uint8_t *span_id)
{
    struct weft__rng seeded;

    if (provider->id_seed == 0) {
        struct weft__rng *rng = weft__thread_rng();

        if (trace_id != NULL) {
            weft__new_trace_id(rng, trace_id);
        }
        weft__new_span_id(rng, span_id);
        return;
    }
    /* A fixed seed (tests) makes ids reproducible: one generator, under the lock. */
    pthread_mutex_lock(&provider->lock);
    memcpy(seeded.s, provider->seeded_rng_state, sizeof(seeded.s));
    if (trace_id != NULL) {
        weft__new_trace_id(&seeded, trace_id);
    }
    weft__new_span_id(&seeded, span_id);
    memcpy(provider->seeded_rng_state, seeded.s, sizeof(seeded.s));
    pthread_mutex_unlock(&provider->lock);
}

struct weft_span *
weft_span_start(struct weft_tracer *tracer,
                const char *name,
                const struct weft_span_start_options *opts)
{
    static const struct weft_span_start_options defaults;
    struct weft_provider *provider = NULL;
    struct weft_span *span = NULL;
    const struct weft_span *parent = NULL;
    struct weft_span_context parent_ctx;
    bool has_parent = false;
    bool sampled = false;

    if (tracer == NULL || tracer->provider->is_disabled ||
        atomic_load_explicit(&tracer->provider->is_shut_down, memory_order_relaxed)) {
        return &noop_span;
    }
    provider = tracer->provider;
    if (opts == NULL) {
        opts = &defaults;
    }
    if (name == NULL) {
        name = "";
    }
    /* The parent: explicit span, explicit context, then the current span. */
    if (opts->parent != NULL) {
        parent = opts->parent;
    } else if (opts->parent_context == NULL && !opts->is_root) {
        parent = weft_context_current();
    }
    if (parent != NULL && !parent->is_static) {
        weft_span_context_of(parent, &parent_ctx);
        has_parent = true;
    } else if (parent == NULL && opts->parent_context != NULL &&
               weft_span_context_is_valid(opts->parent_context)) {
        parent_ctx = *opts->parent_context;
        has_parent = true;
    }

    span = span_alloc(provider);
    if (span == NULL) {
        weft__counter_add(&provider->lost, 1);
        return &noop_span;
    }
    if (has_parent) {
        memcpy(span->data.trace_id, parent_ctx.trace_id, WEFT_TRACE_ID_SIZE);
        memcpy(span->data.parent_span_id, parent_ctx.span_id, WEFT_SPAN_ID_SIZE);
        span->data.has_parent = true;
        span->data.parent_is_remote = parent_ctx.is_remote;
        span->data.trace_flags = parent_ctx.trace_flags;
        new_span_id(provider, NULL, span->data.span_id);
    } else {
        new_span_id(provider, span->data.trace_id, span->data.span_id);
        span->data.trace_flags = WEFT_TRACE_FLAG_RANDOM;
    }
    sampled = weft__sampler_should_sample(
        provider, span->data.trace_id, has_parent, parent_ctx.is_remote,
        has_parent && (parent_ctx.trace_flags & WEFT_TRACE_FLAG_SAMPLED));
    if (sampled) {
        span->data.trace_flags |= WEFT_TRACE_FLAG_SAMPLED;
    } else {
        span->data.trace_flags &= (uint8_t)~WEFT_TRACE_FLAG_SAMPLED;
    }
    if (has_parent && parent_ctx.trace_state != NULL) {
        span->data.trace_state =
            arena_strndup(span, parent_ctx.trace_state, strlen(parent_ctx.trace_state));
    }
    if (!sampled) {
        weft__counter_add(&provider->sampled_out, 1);
        span->data.name = "";
        return span; /* carries ids for propagation, records nothing */
    }

    span->is_recording = true;
    span->data.kind =
        opts->kind == WEFT_SPAN_KIND_UNSPECIFIED ? WEFT_SPAN_KIND_INTERNAL : opts->kind;
    span->data.start_time_ns = opts->start_time_ns != 0 ? opts->start_time_ns : weft__now_ns();
    span->data.resource = &provider->resource;
    span->data.scope = &tracer->scope;
    span->data.attrs = span->attrs;
    span->data.name = arena_strndup(span, name, strlen(name));
    if (span->data.name == NULL) {
        span->data.name = "";
    }
    for (size_t i = 0; i < opts->attr_count; i++) {
        weft_span_set_attr(span, &opts->attrs[i]);
    }
    for (size_t i = 0; i < opts->link_count; i++) {
        weft_span_add_link(span, &opts->links[i].context, opts->links[i].attrs,
                           opts->links[i].attr_count);
    }
    weft__counter_add(&provider->started, 1);
    return span;
}

/* ---- attributes ----------------------------------------------------------------------- */

static weft_err
grow_attrs(struct weft_span *span)
{
    size_t cap = span->attr_cap * 2;
    struct weft_attr *attrs = NULL;

    if (cap > span->provider->limits.attr_count) {
        cap = span->provider->limits.attr_count;
    }
    attrs = weft__malloc(cap * sizeof(*attrs));
    if (attrs == NULL) {
        return WEFT_ENOMEM;
    }
    memcpy(attrs, span->attrs, span->data.attr_count * sizeof(*attrs));
    if (span->attrs != span->inline_attrs) {
        weft__free(span->attrs);
    }
    span->attrs = attrs;
    span->attr_cap = cap;
    span->data.attrs = attrs;
    return WEFT_OK;
}

weft_err
weft_span_set_attr(struct weft_span *span, const struct weft_attr *attr)
{
    size_t i = 0;
    size_t count = 0;
    struct weft_value value;
    const char *key = NULL;
    weft_err err = WEFT_OK;

    if (span == NULL || attr == NULL || attr->key == NULL || attr->key[0] == '\0') {
        return WEFT_EINVAL;
    }
    if (!span->is_recording) {
        return WEFT_OK;
    }
    count = span->data.attr_count;
    for (i = 0; i < count; i++) {
        const char *k = span->attrs[i].key;

        if (k[0] == attr->key[0] && strcmp(k, attr->key) == 0) {
            break;
        }
    }
    if (i == count && count >= span->provider->limits.attr_count) {
        span->data.dropped_attrs++;
        return WEFT_ELIMIT;
    }
    /* Allocate everything before touching the attribute array: a failure changes nothing. */
    err = store_value(span, attr->key, &attr->value, &value);
    if (err == WEFT_OK && i == count) {
        key = arena_strndup(span, attr->key, strlen(attr->key));
        if (key == NULL) {
            err = WEFT_ENOMEM;
        } else if (count == span->attr_cap) {
            err = grow_attrs(span);
        }
    }
    if (err != WEFT_OK) {
        if (err == WEFT_ENOMEM) {
            span->data.dropped_attrs++;
        }
        return err;
    }
    if (i == count) {
        span->attrs[i].key = key;
        span->data.attr_count++;
    }
    span->attrs[i].value = value;
    return WEFT_OK;
}

weft_err
weft_span_set_strn(struct weft_span *span, const char *key, const char *value, size_t len)
{
    struct weft_attr a = {.key = key};

    if (value == NULL) {
        return WEFT_EINVAL;
    }
    a.value.type = WEFT_VALUE_STRING;
    a.value.len = len;
    a.value.u.str = value;
    return weft_span_set_attr(span, &a);
}

weft_err
weft_span_set_str(struct weft_span *span, const char *key, const char *value)
{
    if (span == NULL || key == NULL || value == NULL) {
        return WEFT_EINVAL;
    }
    if (!span->is_recording) {
        return WEFT_OK; /* before strlen: the disabled SDK must cost next to nothing */
    }
    return weft_span_set_strn(span, key, value, strlen(value));
}

weft_err
weft_span_set_bool(struct weft_span *span, const char *key, bool value)
{
    struct weft_attr a;

    if (span != NULL && !span->is_recording && key != NULL) {
        return WEFT_OK;
    }
    a = weft_attr_bool(key, value);
    return weft_span_set_attr(span, &a);
}

weft_err
weft_span_set_int(struct weft_span *span, const char *key, int64_t value)
{
    struct weft_attr a;

    if (span != NULL && !span->is_recording && key != NULL) {
        return WEFT_OK;
    }
    a = weft_attr_int(key, value);
    return weft_span_set_attr(span, &a);
}

weft_err
weft_span_set_double(struct weft_span *span, const char *key, double value)
{
    struct weft_attr a;

    if (span != NULL && !span->is_recording && key != NULL) {
        return WEFT_OK;
    }
    a = weft_attr_double(key, value);
    return weft_span_set_attr(span, &a);
}

static weft_err
set_array(
    struct weft_span *span, const char *key, weft_value_type type, const void *values, size_t count)
{
    struct weft_attr a = {.key = key};

    if (values == NULL && count > 0) {
        return WEFT_EINVAL;
    }
    a.value.type = type;
    a.value.len = count;
    a.value.u.ints = values;
    return weft_span_set_attr(span, &a);
}

weft_err
weft_span_set_str_array(struct weft_span *span,
                        const char *key,
                        const char *const *values,
                        size_t count)
{
    return set_array(span, key, WEFT_VALUE_STRING_ARRAY, values, count);
}

weft_err
weft_span_set_bool_array(struct weft_span *span, const char *key, const bool *values, size_t count)
{
    return set_array(span, key, WEFT_VALUE_BOOL_ARRAY, values, count);
}

weft_err
weft_span_set_int_array(struct weft_span *span,
                        const char *key,
                        const int64_t *values,
                        size_t count)
{
    return set_array(span, key, WEFT_VALUE_INT_ARRAY, values, count);
}

weft_err
weft_span_set_double_array(struct weft_span *span,
                           const char *key,
                           const double *values,
                           size_t count)
{
    return set_array(span, key, WEFT_VALUE_DOUBLE_ARRAY, values, count);
}

/* ---- events, links, status, name ------------------------------------------------------ */

/* Make room for one more element in a span-owned array bounded by @p limit. */
static weft_err
reserve_one(void **items, size_t *cap, size_t count, size_t size, size_t limit)
{
    size_t new_cap = 0;
    void *grown = NULL;

    if (count < *cap) {
        return WEFT_OK;
    }
    new_cap = *cap == 0 ? 4 : *cap * 2;
    if (new_cap > limit) {
        new_cap = limit;
    }
    grown = weft__realloc(*items, new_cap * size);
    if (grown == NULL) {
        return WEFT_ENOMEM;
    }
    *items = grown;
    *cap = new_cap;
    return WEFT_OK;
}

weft_err
weft_span_add_event(struct weft_span *span,
                    const char *name,
                    const struct weft_attr *attrs,
                    size_t attr_count,
                    uint64_t time_ns)
{
    struct weft_event_data ev;
    void *events = NULL;
    weft_err err = WEFT_OK;

    if (span == NULL || name == NULL || (attrs == NULL && attr_count > 0)) {
        return WEFT_EINVAL;
    }
    if (!span->is_recording) {
        return WEFT_OK;
    }
    if (span->data.event_count >= span->provider->limits.event_count) {
        span->data.dropped_events++;
        return WEFT_ELIMIT;
    }
    memset(&ev, 0, sizeof(ev));
    ev.time_ns = time_ns != 0 ? time_ns : weft__now_ns();
    ev.name = arena_strndup(span, name, strlen(name));
    if (ev.name == NULL) {
        err = WEFT_ENOMEM;
        goto dropped;
    }
    err = store_attr_list(span, attrs, attr_count, span->provider->limits.attrs_per_event,
                          &ev.attrs, &ev.attr_count, &ev.dropped_attrs);
    if (err != WEFT_OK) {
        goto dropped;
    }
    events = span->events;
    err = reserve_one(&events, &span->event_cap, span->data.event_count, sizeof(ev),
                      span->provider->limits.event_count);
    span->events = events;
    if (err != WEFT_OK) {
        goto dropped;
    }
    span->events[span->data.event_count++] = ev;
    span->data.events = span->events;
    return WEFT_OK;
dropped:
    span->data.dropped_events++;
    return err;
}

weft_err
weft_span_add_link(struct weft_span *span,
                   const struct weft_span_context *context,
                   const struct weft_attr *attrs,
                   size_t attr_count)
{
    struct weft_link_data link;
    void *links = NULL;
    weft_err err = WEFT_OK;

    if (span == NULL || !weft_span_context_is_valid(context) || (attrs == NULL && attr_count > 0)) {
        return WEFT_EINVAL;
    }
    if (!span->is_recording) {
        return WEFT_OK;
    }
    if (span->data.link_count >= span->provider->limits.link_count) {
        span->data.dropped_links++;
        return WEFT_ELIMIT;
    }
    memset(&link, 0, sizeof(link));
    memcpy(link.trace_id, context->trace_id, WEFT_TRACE_ID_SIZE);
    memcpy(link.span_id, context->span_id, WEFT_SPAN_ID_SIZE);
    link.trace_flags = context->trace_flags;
    link.is_remote = context->is_remote;
    if (context->trace_state != NULL) {
        link.trace_state = arena_strndup(span, context->trace_state, strlen(context->trace_state));
        if (link.trace_state == NULL) {
            err = WEFT_ENOMEM;
            goto dropped;
        }
    }
    err = store_attr_list(span, attrs, attr_count, span->provider->limits.attrs_per_link,
                          &link.attrs, &link.attr_count, &link.dropped_attrs);
    if (err != WEFT_OK) {
        goto dropped;
    }
    links = span->links;
    err = reserve_one(&links, &span->link_cap, span->data.link_count, sizeof(link),
                      span->provider->limits.link_count);
    span->links = links;
    if (err != WEFT_OK) {
        goto dropped;
    }
    span->links[span->data.link_count++] = link;
    span->data.links = span->links;
    return WEFT_OK;
dropped:
    span->data.dropped_links++;
    return err;
}

weft_err
weft_span_set_status(struct weft_span *span, weft_status_code code, const char *message)
{
    if (span == NULL || code > WEFT_STATUS_ERROR) {
        return WEFT_EINVAL;
    }
    if (!span->is_recording || code == WEFT_STATUS_UNSET ||
        span->data.status_code == WEFT_STATUS_OK) {
        return WEFT_OK;
    }
    span->data.status_code = code;
    span->data.status_message = NULL;
    if (code == WEFT_STATUS_ERROR && message != NULL && message[0] != '\0') {
        size_t len = 0;

        span->data.status_message =
            store_string(span, "status.message", message, strlen(message), &len);
        if (span->data.status_message == NULL) {
            return WEFT_ENOMEM;
        }
    }
    return WEFT_OK;
}

weft_err
weft_span_record_exception(struct weft_span *span,
                           const char *type,
                           const char *message,
                           const char *stacktrace)
{
    struct weft_attr attrs[3];
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (span == NULL) {
        return WEFT_EINVAL;
    }
    if (type != NULL) {
        attrs[n++] = weft_attr_str("exception.type", type);
    }
    if (message != NULL) {
        attrs[n++] = weft_attr_str("exception.message", message);
    }
    if (stacktrace != NULL) {
        attrs[n++] = weft_attr_str("exception.stacktrace", stacktrace);
    }
    err = weft_span_add_event(span, "exception", attrs, n, 0);
    weft_span_set_status(span, WEFT_STATUS_ERROR, message != NULL ? message : type);
    return err;
}

weft_err
weft_span_update_name(struct weft_span *span, const char *name)
{
    const char *copy = NULL;

    if (span == NULL || name == NULL) {
        return WEFT_EINVAL;
    }
    if (!span->is_recording) {
        return WEFT_OK;
    }
    copy = arena_strndup(span, name, strlen(name));
    if (copy == NULL) {
        return WEFT_ENOMEM;
    }
    span->data.name = copy;
    return WEFT_OK;
}

/* ---- end, references, context --------------------------------------------------------- */

void
weft_span_end(struct weft_span *span, uint64_t end_time_ns)
{
    struct weft_provider *provider = NULL;
    size_t count = 0;

    if (span == NULL || span->is_static || span->has_ended) {
        return;
    }
    span->has_ended = true;
    if (span->is_recording) {
        provider = span->provider;
        span->is_recording = false;
        span->data.end_time_ns = end_time_ns != 0 ? end_time_ns : weft__now_ns();
        if (span->data.end_time_ns < span->data.start_time_ns) {
            span->data.end_time_ns = span->data.start_time_ns;
        }
        weft__counter_add(&provider->ended, 1);
        /* Processors take their own references; the acquire pairs with the release in
         * weft_provider_add_processor_take so a processor is fully built before use. */
        count = atomic_load_explicit(&provider->processor_count, memory_order_acquire);
        for (size_t i = 0; i < count; i++) {
            struct weft_processor *proc = provider->processors[i];
            proc->vt->on_end(proc, span);
        }
    }
    weft_span_unref(span);
}

struct weft_span *
weft_span_ref(struct weft_span *span)
{
    if (span != NULL && !span->is_static) {
        atomic_fetch_add_explicit(&span->refs, 1, memory_order_relaxed);
    }
    return span;
}

void
weft_span_unref(struct weft_span *span)
{
    if (span == NULL || span->is_static) {
        return;
    }
    if (atomic_fetch_sub_explicit(&span->refs, 1, memory_order_acq_rel) == 1) {
        span_free(span);
    }
}

void
weft__span_unref_batch(struct weft_span *const *spans, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        weft_span_unref(spans[i]);
    }
}

const struct weft_span_data *
weft__span_data(const struct weft_span *span)
{
    return &span->data;
}

bool
weft_span_is_recording(const struct weft_span *span)
{
    return span != NULL && span->is_recording;
}

void
weft_span_context_of(const struct weft_span *span, struct weft_span_context *out)
{
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (span == NULL || span->is_static) {
        return;
    }
    memcpy(out->trace_id, span->data.trace_id, WEFT_TRACE_ID_SIZE);
    memcpy(out->span_id, span->data.span_id, WEFT_SPAN_ID_SIZE);
    out->trace_flags = span->data.trace_flags;
    out->trace_state = span->data.trace_state;
    out->is_remote = false;
}
