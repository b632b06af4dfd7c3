/* tracing/span.c - span recording: start, attributes, events, links, status, end, and the
 * thread-local current-span stack.
 *
 * One allocation per span holds the span, eight attribute slots and a 384-byte arena for
 * copied strings (the layout and the inline helpers are in span.h, shared with the interned-key
 * setters of span_keys.c); attribute arrays, events and links grow into further allocations
 * only when a span needs them, and span objects are recycled through a pool (span_alloc), so
 * start + five attributes + end allocates nothing in the steady state. The other hot-path
 * costs are kept down by the attribute fast paths (key tags, one arena block per string
 * attribute, a Bloom filter in front of the key lookup), wyrand ids and the default sampler
 * inline at start, pooled spans kept clean so that start writes only what every span changes,
 * initial-exec thread-locals, the TSC span clock, and span end handing the owner's reference
 * straight to a single processor, each explained where it is defined. With them the
 * span_bench attrs5 case costs about 1,165 instructions per span on the recording thread and
 * attrs5_k (interned keys) about 490 (callgrind; docs/PERFORMANCE.md, issue 29 part 4). A
 * span's total arena is capped
 * (WEFT__SPAN_ARENA_MAX) so that a loop overwriting one attribute cannot grow memory without
 * bound: past the cap, new values are dropped and counted like any other limit.
 *
 * Invariants: data.attr_count <= limits.attr_count; every value the span points to lives in
 * its arena, every key there or in the table of interned keys; after end, nothing in the span
 * changes (exporters read it from another thread).
 */
#define WEFT__BUILDING_SPAN /* defines the functions trace.h inlines through macros */
#include "span.h"
#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"
#include "ids.h"
#include "sdk.h"

#include <fcntl.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CONTEXT_DEPTH 64

/* The shared non-recording span: returned when the SDK is off, shut down or out of memory. */
static struct weft_span noop_span = {.head.has_ended = true, .is_static = true};

/* ---- thread-local context ------------------------------------------------------------- */

/* The depth is read on every span start, the stack only when it is not empty: the depth alone
 * is initial-exec (WEFT__TLS_HOT, ids.h), the 512-byte stack keeps the default model. */
static _Thread_local struct weft_span *context_stack[CONTEXT_DEPTH];
static _Thread_local size_t context_depth WEFT__TLS_HOT; /* may exceed CONTEXT_DEPTH */

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

static inline struct weft_span *
context_current(void)
{
    size_t depth = context_depth < CONTEXT_DEPTH ? context_depth : CONTEXT_DEPTH;

    return depth == 0 ? NULL : context_stack[depth - 1];
}

struct weft_span *
weft_context_current(void)
{
    return context_current();
}

#include "span_clock.h" /* the span clock: TSC-based timestamps (span_clock.c) */

/* ---- arena ---------------------------------------------------------------------------- */

/* The slow half of arena_alloc() (span.h): open a new chunk. Kept out of line so that the
 * common bump allocation inlines into its callers. */
void *
weft__span_arena_grow(struct weft_span *span, size_t size)
{
    struct chunk *c = NULL;
    size_t chunk_size = size > CHUNK_MIN ? size : CHUNK_MIN;

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
    char *p = len < WEFT__SPAN_ARENA_MAX ? arena_alloc(span, len + 1) : NULL;

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
        (provider->builtin_redaction && weft__may_need_redaction(key, strlen(key), s, len))) {
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
 * with malloc that round trip costs a contended arena lock and cold cache lines on every
 * span, so freed spans are kept for reuse, in two tiers:
 *
 * - a process-wide bounded stack of bundles: the export thread releases a batch of spans at
 *   once (weft__span_unref_batch) and pushes them as bundles of up to POOL_BUNDLE spans
 *   linked through pool_next, one operation per bundle rather than per span. Last in, first
 *   out: the bundle handed out is the one freed last, whose lines are most likely still in a
 *   cache (a first-in first-out ring of the same size handed out spans that had left it; with
 *   four times the capacity a span cost 30 % more). The stack is a short critical section
 *   under a mutex that recording threads only ever try (pthread_mutex_trylock): when it is
 *   busy they allocate instead, so the hot path never waits;
 * - a per-thread cache (a plain list, no atomics) that a recording thread fills by popping
 *   one bundle when it runs dry, and with the spans it frees itself (sampled-out spans, the
 *   simple processor). Two recording threads therefore touch the shared ring once per
 *   POOL_BUNDLE spans instead of contending for its head on every span.
 *
 * Bounds: the stack holds at most POOL_CAP bundles (8192 spans, about 8 MiB, kept only after
 * that many were in flight at once) and each thread cache THREAD_CACHE_MAX spans (64 KiB); a
 * thread's cache is freed when the thread exits. The stack is sized for the spans a batch
 * queue holds while its export thread waits for a CPU: with 64 bundles, span_bench on a
 * loaded 2-core machine went back to malloc for 1 span in 15-300 with one recording thread;
 * with 256, 1 in 150-500. (With the first-in first-out ring this replaced, 256 bundles made a
 * span 30 % dearer, by handing out cold spans; as a stack they cost nothing measurable.) */
#define POOL_BUNDLE      32
#define POOL_CAP         256
#define THREAD_CACHE_MAX (2 * POOL_BUNDLE)
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct weft_span *pool_top; /* bundles linked through bundle_next; under pool_lock */
static size_t pool_bundles;        /* under pool_lock */
static pthread_key_t cache_key;
static bool cache_key_ready;
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;
struct thread_cache {
    struct weft_span *head;
    size_t len;
    bool is_registered;
};
static _Thread_local struct thread_cache cache WEFT__TLS_HOT;

/* Thread exit: free the spans this thread's cache still holds. */
static void
cache_destroy(void *unused)
{
    (void)unused;
    while (cache.head != NULL) {
        struct weft_span *next = cache.head->pool_next;

        weft__free(cache.head);
        cache.head = next;
    }
    cache.len = 0;
}

static void
pool_init(void)
{
    cache_key_ready = pthread_key_create(&cache_key, cache_destroy) == 0;
}

/* Give a bundle of @p n spans (linked through pool_next) to the stack, or free it when the
 * stack is full, or busy and @p may_wait is false (recording threads never wait for it; the
 * export thread may). */
static void
pool_put_bundle(struct weft_span *head, size_t n, bool may_wait)
{
    bool locked =
        may_wait ? pthread_mutex_lock(&pool_lock) == 0 : pthread_mutex_trylock(&pool_lock) == 0;

    head->pool_count = n;
    if (locked) {
        bool kept = pool_bundles < POOL_CAP;

        if (kept) {
            head->bundle_next = pool_top;
            pool_top = head;
            pool_bundles++;
        }
        pthread_mutex_unlock(&pool_lock);
        if (kept) {
            return;
        }
    }
    while (head != NULL) {
        struct weft_span *next = head->pool_next;

        weft__free(head);
        head = next;
    }
}

/* Make sure this thread's cache is freed at thread exit; false if that cannot be arranged
 * (then the thread caches nothing). */
static bool
cache_register(void)
{
    if (!cache.is_registered) {
        pthread_once(&pool_once, pool_init);
        /* The value only has to be non-NULL for the destructor to run. */
        if (!cache_key_ready || pthread_setspecific(cache_key, &cache.head) != 0) {
            return false;
        }
        cache.is_registered = true;
    }
    return true;
}

/* Keep @p span in this thread's cache; false when the cache is full or unavailable. */
static bool
cache_put(struct weft_span *span)
{
    if (cache.len >= THREAD_CACHE_MAX || !cache_register()) {
        return false;
    }
    span->pool_next = cache.head;
    cache.head = span;
    cache.len++;
    return true;
}

/* A recycled span from a bundle of the stack, the rest of which becomes this thread's cache
 * (empty when this is called); NULL if none. */
static struct weft_span *
pool_get_bundle(void)
{
    struct weft_span *span = NULL;

    if (pthread_mutex_trylock(&pool_lock) != 0) {
        return NULL; /* busy: allocate rather than wait */
    }
    span = pool_top;
    if (span != NULL) {
        pool_top = span->bundle_next;
        pool_bundles--;
    }
    pthread_mutex_unlock(&pool_lock);
    if (span == NULL) {
        return NULL;
    }
    /* Keep the rest of the bundle; if this thread cannot cache, the rest goes back to the
     * stack as a bundle. */
    if (span->pool_next != NULL) {
        if (cache_register()) {
            cache.head = span->pool_next;
            cache.len = span->pool_count - 1;
        } else {
            pool_put_bundle(span->pool_next, span->pool_count - 1, false);
        }
    }
    return span;
}

/* A span when this thread's cache is empty: a bundle from the stack, else malloc. A span from
 * the pool is clean: what only the rare paths change (a grown attribute array, events, links,
 * arena chunks, status, drop counts, the trace state) was reset when it was released
 * (span_release()), mostly on the export thread, so span start writes only what every span
 * changes. A span from malloc gets the rest here. */
static NO_INLINE struct weft_span *
span_new(void)
{
    struct weft_span *span = pool_get_bundle();

    if (span != NULL) {
        return span;
    }
    span = weft__malloc(sizeof(*span));
    if (span == NULL) {
        return NULL;
    }
    memset(&span->data, 0, sizeof(span->data));
    span->data.status_code = WEFT_STATUS_UNSET;
    span->is_static = false;
    span->attrs = span->inline_attrs;
    span->key_tags = span->inline_tags;
    span->attr_cap = INLINE_ATTRS;
    span->events = NULL;
    span->event_cap = 0;
    span->links = NULL;
    span->link_cap = 0;
    span->arena_used = 0;
    span->chunks = NULL;
    return span;
}

/* A span for span_start(): from this thread's cache (inline: the common case is three loads
 * and two stores), else from span_new(). */
static HOT_INLINE struct weft_span *
span_alloc(struct weft_provider *provider)
{
    struct thread_cache *c = &cache;
    struct weft_span *span = c->head;

    if (span != NULL) {
        c->head = span->pool_next;
        c->len--;
    } else {
        span = span_new();
        if (span == NULL) {
            return NULL;
        }
    }
    /* Field by field rather than a memset of the header: gcc turns a memset of this size into
     * rep stos, which cost 46 instructions a span. The ids, parent, flags, name, kind, times,
     * resource and scope are written at start; the pool links and the inline arrays before
     * they are read. */
    span->data.attr_count = 0;
    span->head.is_recording = false;
    span->head.has_ended = false;
    atomic_init(&span->refs, 1);
    span->provider = provider;
    span->tag_filter = 0;
    span->attr_fast_max = provider->attr_fast_max;
    span->string_fast_max = provider->string_fast_max;
    return span; /* span_start() sets up the arena (start_name()) */
}

/* Free what a span owns besides itself, and make it clean for the pool (see span_new()). The
 * tests are the ones freeing needs anyway, so a span that used none of it costs the releasing
 * thread a few stores and no call. */
static void
span_release(struct weft_span *span)
{
    struct chunk *c = span->chunks;

    if (c != NULL) {
        while (c != NULL) {
            struct chunk *next = c->next;
            weft__free(c);
            c = next;
        }
        span->chunks = NULL;
        span->arena_used = 0;
    }
    if (span->attrs != span->inline_attrs) {
        weft__free(span->attrs);
        span->attrs = span->inline_attrs;
        span->key_tags = span->inline_tags;
        span->attr_cap = INLINE_ATTRS;
    }
    if (span->events != NULL) {
        weft__free(span->events);
        span->events = NULL;
        span->event_cap = 0;
        span->data.events = NULL;
        span->data.event_count = 0;
    }
    if (span->links != NULL) {
        weft__free(span->links);
        span->links = NULL;
        span->link_cap = 0;
        span->data.links = NULL;
        span->data.link_count = 0;
    }
    span->data.trace_state = NULL;
    span->data.dropped_attrs = 0;
    span->data.dropped_events = 0;
    span->data.dropped_links = 0;
    span->data.status_code = WEFT_STATUS_UNSET;
    span->data.status_message = NULL;
}

static void
span_free(struct weft_span *span)
{
    span_release(span);
    if (!cache_put(span)) {
        span->pool_next = NULL;
        pool_put_bundle(span, 1, false);
    }
}

/* A thread's first span: seed its id generator (again, after a fork) and give it its own
 * counter stripe and queue shard (sdk.h). Apart, so that span start calls nothing here.
 * @return the generator's state. */
static NO_INLINE uint64_t
thread_first_span(void)
{
    weft__stripe_assign();
    return weft__id_rng_seed();
}

/* Ids are never all zero (W3C: an all-zero id is invalid). Three wyrand outputs are zero
 * together with odds of 2^-64 a span, so the test is one branch and the redraw is apart (it
 * draws from the thread's generator, whose state the caller has stored). */
static NO_INLINE void
redraw_zero_ids(uint8_t *trace_id, uint8_t *span_id)
{
    uint64_t state = weft__tls_id_state;
    uint64_t v[2] = {0, 0};

    if (trace_id != NULL) {
        memcpy(v, trace_id, sizeof(v));
        while ((v[0] | v[1]) == 0) {
            v[0] = weft__id_step(&state);
            v[1] = weft__id_step(&state);
        }
        memcpy(trace_id, v, sizeof(v));
    }
    memcpy(v, span_id, sizeof(v[0]));
    while (v[0] == 0) {
        v[0] = weft__id_step(&state);
    }
    memcpy(span_id, v, sizeof(v[0]));
    weft__tls_id_state = state;
}

/* New ids from this thread's wyrand generator (ids.h), inline: straight-line steps on a state
 * read once into a register and written back once (each access to a thread-local variable
 * costs an address computation in position-independent code). */
static HOT_INLINE void
new_ids_fast(uint8_t *trace_id, uint8_t *span_id)
{
    uint64_t state = weft__tls_id_state;
    uint64_t hi = 1; /* a span with a parent has its trace id already: any non-zero value */
    uint64_t lo = 0;
    uint64_t span = 0;

    if (state == 0) {
        state = thread_first_span();
    }
    if (trace_id != NULL) {
        hi = weft__id_step(&state);
        lo = weft__id_step(&state);
        memcpy(trace_id, &hi, sizeof(hi)); /* host order, as weft__new_trace_id() */
        memcpy(trace_id + sizeof(hi), &lo, sizeof(lo));
    }
    span = weft__id_step(&state);
    memcpy(span_id, &span, sizeof(span));
    weft__tls_id_state = state;
    if ((hi | lo) == 0 || span == 0) {
        redraw_zero_ids(trace_id, span_id);
    }
}

/* Ids for a new span: from the thread's generator, or with a fixed seed (tests) from the
 * provider's xoshiro256**, under the lock, so that they are reproducible. */
static NO_INLINE void
new_ids_seeded(struct weft_provider *provider, uint8_t *trace_id, uint8_t *span_id)
{
    struct weft__rng seeded;

    pthread_mutex_lock(&provider->lock);
    memcpy(seeded.s, provider->seeded_rng_state, sizeof(seeded.s));
    if (trace_id != NULL) {
        weft__new_trace_id(&seeded, trace_id);
    }
    weft__new_span_id(&seeded, span_id);
    memcpy(provider->seeded_rng_state, seeded.s, sizeof(seeded.s));
    pthread_mutex_unlock(&provider->lock);
}

static HOT_INLINE void
new_span_id(struct weft_provider *provider, uint8_t *trace_id, uint8_t *span_id)
{
    if (provider->id_seed == 0) {
        new_ids_fast(trace_id, span_id);
    } else {
        new_ids_seeded(provider, trace_id, span_id);
    }
}

/* A copy of the span's name (inline: names are short, and memcpy's call costs as much as the
 * copy); "" when the arena cannot take it. The name is the first thing a span puts in its
 * arena, so the arena is set up here: a name that fits the inline arena goes at its start
 * without arena_alloc()'s tests. */
static HOT_INLINE const char *
start_name(struct weft_span *span, const char *name)
{
    size_t len = strlen(name);
    size_t size = (len + 8) & ~(size_t)7; /* len + 1, rounded as arena_alloc() */
    char *p = span->inline_arena;

    if (len < INLINE_ARENA) {
        span->arena = p + size;
        span->arena_left = INLINE_ARENA - size;
    } else {
        span->arena = p;
        span->arena_left = INLINE_ARENA;
        p = len < WEFT__SPAN_ARENA_MAX ? arena_alloc(span, len + 1) : NULL;
        if (p == NULL) {
            return "";
        }
    }
    copy_bytes(p, name, len);
    p[len] = '\0';
    return p;
}

/* The new span's parent: explicit span, explicit context, then the current span. Without
 * options (the common call), the current span; opts is tested rather than pointed at defaults
 * so that the common call reads no option. Fills *parent_ctx and returns true when there is a
 * parent. */
static HOT_INLINE bool
start_parent(const struct weft_span_start_options *opts, struct weft_span_context *parent_ctx)
{
    const struct weft_span *parent = NULL;

    if (opts == NULL) {
        parent = context_current();
    } else if (opts->parent != NULL) {
        parent = opts->parent;
    } else if (opts->parent_context == NULL && !opts->is_root) {
        parent = context_current();
    }
    if (parent != NULL && !parent->is_static) {
        weft_span_context_of(parent, parent_ctx);
        return true;
    }
    if (parent == NULL && opts != NULL && opts->parent_context != NULL &&
        weft_span_context_is_valid(opts->parent_context)) {
        *parent_ctx = *opts->parent_context;
        return true;
    }
    return false;
}

/* A span the sampler dropped: ids only, nothing recorded. */
static NO_INLINE struct weft_span *
start_unsampled(struct weft_provider *provider, struct weft_span *span)
{
    weft__counter_add(&provider->sampled_out, 1);
    span->data.name = "";
    span->data.kind = WEFT_SPAN_KIND_UNSPECIFIED; /* span_alloc() left these to start */
    span->data.start_time_ns = 0;
    span->data.end_time_ns = 0;
    span->data.attrs = NULL;
    span->data.resource = NULL;
    span->data.scope = NULL;
    return span;
}

/* The body of weft_span_start() for a live provider. Kept out of line so that the public entry
 * point's early return (SDK disabled or shut down) runs before any register saves: a disabled
 * SDK pays a few instructions per call, not this function's frame. The same split keeps
 * weft_span_end() and weft_span_set_str() cheap on a non-recording span. */
static HOT_INLINE struct weft_span *
span_start_body(struct weft_tracer *tracer,
                const char *name,
                const struct weft_span_start_options *opts)
{
    struct weft_provider *provider = tracer->provider;
    struct weft_span *span = NULL;
    struct weft_span_context parent_ctx;
    bool has_parent = false;
    bool sampled = false;

    if (name == NULL) {
        name = "";
    }
    has_parent = start_parent(opts, &parent_ctx);

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
        /* parent_ctx is only filled when has_parent: reading is_remote otherwise would load an
         * indeterminate bool (UBSan reports it). */
        sampled =
            weft__sampler_should_sample(provider, span->data.trace_id, true, parent_ctx.is_remote,
                                        parent_ctx.trace_flags & WEFT_TRACE_FLAG_SAMPLED);
    } else {
        memset(span->data.parent_span_id, 0, WEFT_SPAN_ID_SIZE);
        span->data.has_parent = false;
        span->data.parent_is_remote = false;
        span->data.trace_flags = WEFT_TRACE_FLAG_RANDOM;
        new_span_id(provider, span->data.trace_id, span->data.span_id);
        /* The default sampler on a root span, without the call. */
        sampled = provider->samples_every_root ||
                  weft__sampler_should_sample(provider, span->data.trace_id, false, false, false);
    }
    if (sampled) {
        span->head.is_recording = true;
        span->data.trace_flags |= WEFT_TRACE_FLAG_SAMPLED;
        span->data.name = start_name(span, name); /* sets up the arena */
    } else {
        span->data.trace_flags &= (uint8_t)~WEFT_TRACE_FLAG_SAMPLED;
        span->arena = span->inline_arena;
        span->arena_left = INLINE_ARENA;
    }
    if (has_parent && parent_ctx.trace_state != NULL) {
        span->data.trace_state =
            arena_strndup(span, parent_ctx.trace_state, strlen(parent_ctx.trace_state));
    }
    if (!sampled) {
        return start_unsampled(provider, span); /* carries ids for propagation, records nothing */
    }

    /* data.end_time_ns is left to span end, which sets it before any exporter can read it. */
    if (opts == NULL || opts->start_time_ns == 0) {
        span->data.start_time_ns = span_clock_now(&span->start_tsc);
    } else {
        span->data.start_time_ns = opts->start_time_ns;
        span->start_tsc = 0;
    }
    span->data.kind = opts == NULL || opts->kind == WEFT_SPAN_KIND_UNSPECIFIED
                          ? WEFT_SPAN_KIND_INTERNAL
                          : opts->kind;
    span->data.resource = &provider->resource;
    span->data.scope = &tracer->scope;
    span->data.attrs = span->inline_attrs; /* == span->attrs: a new span has not grown them */
    if (opts != NULL) {
        for (size_t i = 0; i < opts->attr_count; i++) {
            weft_span_set_attr(span, &opts->attrs[i]);
        }
        for (size_t i = 0; i < opts->link_count; i++) {
            weft_span_add_link(span, &opts->links[i].context, opts->links[i].attrs,
                               opts->links[i].attr_count);
        }
    }
    weft__counter_add(&provider->started, 1);
    return span;
}

static NO_INLINE struct weft_span *
span_start(struct weft_tracer *tracer, const char *name, const struct weft_span_start_options *opts)
{
    return span_start_body(tracer, name, opts);
}

/* span_start() for the common call without options, compiled apart so that the compiler drops
 * every test of opts and the registers it held (callgrind: about 10 instructions a span). */
static NO_INLINE struct weft_span *
span_start_plain(struct weft_tracer *tracer, const char *name)
{
    return span_start_body(tracer, name, NULL);
}

struct weft_span *
weft_span_start(struct weft_tracer *tracer,
                const char *name,
                const struct weft_span_start_options *opts)
{
    if (tracer == NULL || tracer->provider->is_disabled ||
        atomic_load_explicit(&tracer->provider->is_shut_down, memory_order_relaxed)) {
        return &noop_span;
    }
    if (opts == NULL) {
        return span_start_plain(tracer, name);
    }
    return span_start(tracer, name, opts);
}

/* ---- attributes ----------------------------------------------------------------------- */

/* The scan behind a set bit of the key filter (span.h): out of line, since a span rarely sets
 * a key twice. */
size_t
weft__span_find_attr_slow(const struct weft_span *span, const char *key, size_t klen, uint64_t tag)
{
    size_t count = span->data.attr_count;

    for (size_t i = 0; i < count; i++) {
        if (span->key_tags[i] == tag && memcmp(span->attrs[i].key, key, klen) == 0) {
            return i;
        }
    }
    return count;
}

/* Index of @p key among the span's attributes, or attr_count when absent. */
static HOT_INLINE size_t
find_attr(const struct weft_span *span, const char *key, size_t klen, uint64_t tag)
{
    if ((span->tag_filter & tag_bit(tag)) == 0) {
        return span->data.attr_count;
    }
    return weft__span_find_attr_slow(span, key, klen, tag);
}

weft_err
weft__span_grow_attrs(struct weft_span *span)
{
    size_t cap = span->attr_cap * 2;
    struct weft_attr *attrs = NULL;
    uint64_t *tags = NULL;

    if (cap > span->provider->limits.attr_count) {
        cap = span->provider->limits.attr_count;
    }
    if (cap > SIZE_MAX / (sizeof(*attrs) + sizeof(*tags))) {
        return WEFT_ENOMEM;
    }
    /* One block: the attributes, then their tags (both 8-byte aligned). */
    attrs = weft__malloc(cap * (sizeof(*attrs) + sizeof(*tags)));
    if (attrs == NULL) {
        return WEFT_ENOMEM;
    }
    tags = (uint64_t *)(void *)(attrs + cap);
    memcpy(attrs, span->attrs, span->data.attr_count * sizeof(*attrs));
    memcpy(tags, span->key_tags, span->data.attr_count * sizeof(*tags));
    if (span->attrs != span->inline_attrs) {
        weft__free(span->attrs);
    }
    span->attrs = attrs;
    span->key_tags = tags;
    span->attr_cap = cap;
    span->attr_fast_max = cap; /* cap <= limits.attr_count */
    span->string_fast_max = span->provider->strings_plain ? cap : 0;
    span->data.attrs = attrs;
    return WEFT_OK;
}

/* Where a setter will write: slot @c i (== attr_count for a new key). */
struct attr_slot {
    size_t i;
    size_t klen;
    uint64_t tag;
    bool is_new;
};

/* Look @p key (@p klen bytes, klen > 0) up and apply the count limit.
 * @return WEFT_OK or WEFT_ELIMIT (counted). */
static HOT_INLINE weft_err
attr_slot_find(struct weft_span *span, const char *key, size_t klen, struct attr_slot *slot)
{
    slot->klen = klen;
    slot->tag = key_tag(key, slot->klen);
    slot->i = find_attr(span, key, slot->klen, slot->tag);
    slot->is_new = slot->i == span->data.attr_count;
    if (slot->is_new && span->data.attr_count >= span->provider->limits.attr_count) {
        span->data.dropped_attrs++;
        return WEFT_ELIMIT;
    }
    return WEFT_OK;
}

/* Make room in the attribute array for a new key. Called after every other allocation of the
 * setter, so that a failure here or there leaves the attributes as they were. */
static HOT_INLINE weft_err
attr_slot_reserve(struct weft_span *span, const struct attr_slot *slot)
{
    if (slot->is_new && span->data.attr_count == span->attr_cap) {
        return weft__span_grow_attrs(span);
    }
    return WEFT_OK;
}

static HOT_INLINE void
attr_slot_commit(struct weft_span *span,
                 const struct attr_slot *slot,
                 const char *key_copy,
                 const struct weft_value *value)
{
    if (slot->is_new) {
        span->attrs[slot->i].key = key_copy;
        span->key_tags[slot->i] = slot->tag;
        span->tag_filter |= tag_bit(slot->tag);
        span->data.attr_count++;
    }
    span->attrs[slot->i].value = *value;
}

/* Store @p value (already truncated and redacted) under @p key: one arena block holds the
 * value and, for a new key, the key after it. */
static HOT_INLINE weft_err
commit_string(struct weft_span *span,
              const struct attr_slot *slot,
              const char *key,
              const char *value,
              size_t len)
{
    size_t key_size = slot->is_new ? slot->klen + 1 : 0;
    struct weft_value v;
    char *p = NULL;

    if (len < WEFT__SPAN_ARENA_MAX && slot->klen < WEFT__SPAN_ARENA_MAX) {
        p = arena_alloc(span, len + 1 + key_size);
    }
    if (p == NULL || attr_slot_reserve(span, slot) != WEFT_OK) {
        span->data.dropped_attrs++;
        return WEFT_ENOMEM;
    }
    copy_bytes(p, value, len);
    p[len] = '\0';
    if (slot->is_new) {
        copy_bytes(p + len + 1, key, slot->klen);
        p[len + 1 + slot->klen] = '\0'; /* keys from the _n setters need not end in NUL */
    }
    v.type = WEFT_VALUE_STRING;
    v.len = len;
    v.u.str = p;
    attr_slot_commit(span, slot, p + len + 1, &v);
    return WEFT_OK;
}

/* A NUL-terminated copy of a key given with its length, for the redaction code and the user's
 * callback (the slow path only): on the stack when short, else on the heap. */
struct key_buf {
    char *key;
    char *heap;
    char small[128];
};

static weft_err
key_buf_init(struct key_buf *kb, const char *key, size_t klen)
{
    kb->heap = NULL;
    kb->key = kb->small;
    if (klen >= sizeof(kb->small)) {
        kb->heap = weft__malloc(klen + 1);
        if (kb->heap == NULL) {
            return WEFT_ENOMEM;
        }
        kb->key = kb->heap;
    }
    memcpy(kb->key, key, klen);
    kb->key[klen] = '\0';
    return WEFT_OK;
}

static void
key_buf_cleanup(struct key_buf *kb)
{
    weft__free(kb->heap);
}

/* The general string path: the same steps as store_string() (truncate, redact, truncate
 * the replacement, copy). */
static weft_err
set_string_slow(struct weft_span *span,
                const struct attr_slot *slot,
                const char *key,
                const char *value,
                size_t len)
{
    const struct weft_provider *provider = span->provider;
    struct weft__buf redacted;
    struct key_buf kb;
    const char *r = NULL;
    weft_err err = WEFT_OK;

    if (provider->limits.attr_value_length != WEFT_LIMIT_NONE) {
        len = weft__utf8_prefix(value, len, provider->limits.attr_value_length);
    }
    if (provider->redact == NULL &&
        (!provider->builtin_redaction || !weft__may_need_redaction(key, slot->klen, value, len))) {
        return commit_string(span, slot, key, value, len);
    }
    /* Redaction and callbacks read the key as a C string: give them a terminated copy. */
    if (key_buf_init(&kb, key, slot->klen) != WEFT_OK) {
        span->data.dropped_attrs++;
        return WEFT_ENOMEM;
    }
    weft__buf_init(&redacted, 0);
    r = weft__redact(provider, kb.key, value, len, &redacted);
    if (r != NULL) {
        value = r;
        len = strlen(r);
        if (provider->limits.attr_value_length != WEFT_LIMIT_NONE) {
            len = weft__utf8_prefix(r, len, provider->limits.attr_value_length);
        }
    }
    err = commit_string(span, slot, key, value, len);
    weft__buf_cleanup(&redacted);
    key_buf_cleanup(&kb);
    return err;
}

/* The string setter behind weft_span_set_str(), _set_strn() and string weft_attrs, without
 * the weft_value round trip. The common case (no length limit, no callback, nothing that
 * could be a secret) is inlined; everything else takes set_string_slow(). Every value
 * still goes through the redaction pre-check and, when it may hold a secret or a callback
 * is installed, through weft__redact(). */
NO_INLINE weft_err
weft__span_set_string(
    struct weft_span *span, const char *key, size_t klen, const char *value, size_t len)
{
    const struct weft_provider *provider = span->provider;
    struct attr_slot slot;

    if (klen == KEY_CSTR) {
        klen = strlen(key);
    }
    if (attr_slot_find(span, key, klen, &slot) != WEFT_OK) {
        return WEFT_ELIMIT;
    }
    if (provider->limits.attr_value_length != WEFT_LIMIT_NONE || provider->redact != NULL ||
        (provider->builtin_redaction && weft__may_need_redaction(key, klen, value, len))) {
        return set_string_slow(span, &slot, key, value, len);
    }
    return commit_string(span, &slot, key, value, len);
}

/* Bool, int and double: nothing to copy but the key. Never inlined into the public entry
 * points, whose early return for a non-recording span must not pay this path's register
 * saves (a disabled SDK calls them too). */
static NO_INLINE weft_err
set_scalar(struct weft_span *span, const char *key, size_t klen, const struct weft_value *value)
{
    struct attr_slot slot;
    char *key_copy = NULL;
    weft_err err = WEFT_OK;

    if (klen == KEY_CSTR) {
        klen = strlen(key);
    }
    err = attr_slot_find(span, key, klen, &slot);
    if (err != WEFT_OK) {
        return err;
    }
    if (slot.is_new) {
        if (slot.klen < WEFT__SPAN_ARENA_MAX) {
            key_copy = arena_alloc(span, slot.klen + 1);
        }
        if (key_copy != NULL) {
            copy_bytes(key_copy, key, slot.klen);
            key_copy[slot.klen] = '\0'; /* keys from the _n setters need not end in NUL */
        }
        if (key_copy == NULL || attr_slot_reserve(span, &slot) != WEFT_OK) {
            span->data.dropped_attrs++;
            return WEFT_ENOMEM;
        }
    }
    attr_slot_commit(span, &slot, key_copy, value);
    return WEFT_OK;
}

weft_err
weft_span_set_attr(struct weft_span *span, const struct weft_attr *attr)
{
    struct attr_slot slot;
    struct weft_value value;
    const char *key = NULL;
    weft_err err = WEFT_OK;

    if (span == NULL || attr == NULL || attr->key == NULL || attr->key[0] == '\0') {
        return WEFT_EINVAL;
    }
    if (!span->head.is_recording) {
        return WEFT_OK;
    }
    switch (attr->value.type) {
    case WEFT_VALUE_STRING:
        if (attr->value.u.str == NULL) {
            return weft__span_set_string(span, attr->key, KEY_CSTR, "", 0); /* as store_string() */
        }
        return weft__span_set_string(span, attr->key, KEY_CSTR, attr->value.u.str, attr->value.len);
    case WEFT_VALUE_BOOL:
    case WEFT_VALUE_INT:
    case WEFT_VALUE_DOUBLE:
        return set_scalar(span, attr->key, KEY_CSTR, &attr->value);
    default:
        break;
    }
    err = attr_slot_find(span, attr->key, strlen(attr->key), &slot);
    if (err != WEFT_OK) {
        return err;
    }
    /* Allocate everything before touching the attribute array: a failure changes nothing. */
    err = store_value(span, attr->key, &attr->value, &value);
    if (err == WEFT_OK && slot.is_new) {
        key = arena_strndup(span, attr->key, slot.klen);
        if (key == NULL) {
            err = WEFT_ENOMEM;
        } else {
            err = attr_slot_reserve(span, &slot);
        }
    }
    if (err != WEFT_OK) {
        if (err == WEFT_ENOMEM) {
            span->data.dropped_attrs++;
        }
        return err;
    }
    attr_slot_commit(span, &slot, key, &value);
    return WEFT_OK;
}

weft_err
weft_span_set_strn(struct weft_span *span, const char *key, const char *value, size_t len)
{
    if (span == NULL || key == NULL || value == NULL || key[0] == '\0') {
        return WEFT_EINVAL;
    }
    if (!span->head.is_recording) {
        return WEFT_OK;
    }
    return weft__span_set_string(span, key, KEY_CSTR, value, len);
}

/* A key given with its length must be non-empty and hold no NUL byte: exporters write keys
 * as C strings, and a NUL inside would silently cut the key short. */
static inline bool
key_n_is_valid(const char *key, size_t key_len)
{
    return key != NULL && key_len > 0 && key_len != KEY_CSTR && memchr(key, 0, key_len) == NULL;
}

weft_err
weft_span_set_string_n(
    struct weft_span *span, const char *key, size_t key_len, const char *value, size_t value_len)
{
    if (span == NULL || key == NULL || (value == NULL && value_len > 0)) {
        return WEFT_EINVAL;
    }
    if (!span->head.is_recording) {
        return WEFT_OK;
    }
    if (!key_n_is_valid(key, key_len)) {
        return WEFT_EINVAL;
    }
    return weft__span_set_string(span, key, key_len, value == NULL ? "" : value, value_len);
}

/* weft_span_set_str() on a recording span (see span_start() for why it is apart). */
static NO_INLINE weft_err
set_str(struct weft_span *span, const char *key, const char *value)
{
    if (key[0] == '\0') {
        return WEFT_EINVAL;
    }
    return weft__span_set_string(span, key, KEY_CSTR, value, strlen(value));
}

weft_err
weft_span_set_str(struct weft_span *span, const char *key, const char *value)
{
    if (span == NULL || key == NULL || value == NULL) {
        return WEFT_EINVAL;
    }
    if (!span->head.is_recording) {
        return WEFT_OK; /* before strlen: the disabled SDK must cost next to nothing */
    }
    return set_str(span, key, value);
}

/* The scalar setters. A non-recording span accepts anything but a NULL span or key, as
 * weft_span_set_attr() would (it checks the key before recording, these after). The checks
 * stay in these small entry points, so that a disabled SDK pays only them and not the
 * register saves of the inlined recording path. */
weft_err
weft_span_set_bool(struct weft_span *span, const char *key, bool value)
{
    struct weft_value v;

    if (span != NULL && !span->head.is_recording && key != NULL) {
        return WEFT_OK;
    }
    if (span == NULL || key == NULL || key[0] == '\0') {
        return WEFT_EINVAL;
    }
    v.type = WEFT_VALUE_BOOL;
    v.len = 0;
    v.u.b = value;
    return set_scalar(span, key, KEY_CSTR, &v);
}

weft_err
weft_span_set_bool_n(struct weft_span *span, const char *key, size_t key_len, bool value)
{
    struct weft_value v;

    if (span != NULL && !span->head.is_recording && key != NULL) {
        return WEFT_OK;
    }
    if (span == NULL || !key_n_is_valid(key, key_len)) {
        return WEFT_EINVAL;
    }
    v.type = WEFT_VALUE_BOOL;
    v.len = 0;
    v.u.b = value;
    return set_scalar(span, key, key_len, &v);
}

weft_err
weft_span_set_int(struct weft_span *span, const char *key, int64_t value)
{
    struct weft_value v;

    if (span != NULL && !span->head.is_recording && key != NULL) {
        return WEFT_OK;
    }
    if (span == NULL || key == NULL || key[0] == '\0') {
        return WEFT_EINVAL;
    }
    v.type = WEFT_VALUE_INT;
    v.len = 0;
    v.u.i = value;
    return set_scalar(span, key, KEY_CSTR, &v);
}

weft_err
weft_span_set_int_n(struct weft_span *span, const char *key, size_t key_len, int64_t value)
{
    struct weft_value v;

    if (span != NULL && !span->head.is_recording && key != NULL) {
        return WEFT_OK;
    }
    if (span == NULL || !key_n_is_valid(key, key_len)) {
        return WEFT_EINVAL;
    }
    v.type = WEFT_VALUE_INT;
    v.len = 0;
    v.u.i = value;
    return set_scalar(span, key, key_len, &v);
}

weft_err
weft_span_set_double(struct weft_span *span, const char *key, double value)
{
    struct weft_value v;

    if (span != NULL && !span->head.is_recording && key != NULL) {
        return WEFT_OK;
    }
    if (span == NULL || key == NULL || key[0] == '\0') {
        return WEFT_EINVAL;
    }
    v.type = WEFT_VALUE_DOUBLE;
    v.len = 0;
    v.u.d = value;
    return set_scalar(span, key, KEY_CSTR, &v);
}

weft_err
weft_span_set_double_n(struct weft_span *span, const char *key, size_t key_len, double value)
{
    struct weft_value v;

    if (span != NULL && !span->head.is_recording && key != NULL) {
        return WEFT_OK;
    }
    if (span == NULL || !key_n_is_valid(key, key_len)) {
        return WEFT_EINVAL;
    }
    v.type = WEFT_VALUE_DOUBLE;
    v.len = 0;
    v.u.d = value;
    return set_scalar(span, key, key_len, &v);
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
    if (!span->head.is_recording) {
        return WEFT_OK;
    }
    if (span->data.event_count >= span->provider->limits.event_count) {
        span->data.dropped_events++;
        return WEFT_ELIMIT;
    }
    memset(&ev, 0, sizeof(ev));
    ev.time_ns = time_ns != 0 ? time_ns : span_clock_since(span);
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
    if (!span->head.is_recording) {
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
    if (!span->head.is_recording || code == WEFT_STATUS_UNSET ||
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
    if (!span->head.is_recording) {
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

/* Hand an ended span to @p count processors other than one (see span_end()). Apart, so that
 * span end with one processor keeps no register for the loop. */
static NO_INLINE void
end_to_processors(struct weft_provider *provider, struct weft_span *span, size_t count)
{
    if (count == 0) {
        weft_span_unref(span);
        return;
    }
    atomic_fetch_add_explicit(&span->refs, (unsigned)(count - 1), memory_order_relaxed);
    for (size_t i = 0; i < count; i++) {
        struct weft_processor *proc = provider->processors[i];

        proc->vt->on_end(proc, span);
    }
}

/* weft_span_end() of a span not ended yet. Inline: the inline weft_span_end() of trace.h has
 * already returned early for a span that records nothing, so the register saves of this body
 * cost only direct calls of the function on such spans. */
static HOT_INLINE void
span_end(struct weft_span *span, uint64_t end_time_ns)
{
    struct weft_provider *provider = NULL;
    struct weft_processor *proc = NULL;
    size_t count = 0;
    uint64_t end = 0;

    span->head.has_ended = true;
    if (!span->head.is_recording) {
        weft_span_unref(span);
        return;
    }
    span->head.is_recording = false;
    /* The clock first, and the provider only after it, so that only the span lives across the
     * call (fewer registers to save). */
    end = end_time_ns != 0 ? end_time_ns : span_clock_since(span);
    span->data.end_time_ns = end < span->data.start_time_ns ? span->data.start_time_ns : end;
    provider = span->provider;
    weft__counter_add(&provider->ended, 1);
    /* The acquire pairs with the release in weft_provider_add_processor_take so a processor is
     * fully built before use. Each processor is handed one reference that it keeps or drops
     * (on_end steals it): the owner's own reference goes to the first, so with one processor
     * span end does no reference-count atomics at all. One processor (the usual set-up) is a
     * tail call without the loop. */
    count = atomic_load_explicit(&provider->processor_count, memory_order_acquire);
    if (count == 1) {
        proc = provider->processors[0];
        proc->vt->on_end(proc, span);
        return;
    }
    end_to_processors(provider, span, count);
}

void
weft_span_end(struct weft_span *span, uint64_t end_time_ns)
{
    /* The shared no-op span (is_static) is marked ended: one test covers both. */
    if (span == NULL || span->head.has_ended) {
        return;
    }
    span_end(span, end_time_ns);
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

/* The export thread's release of a batch: spans whose last reference goes are bundled for
 * the pool (see span_alloc) instead of being pushed one by one. */
void
weft__span_unref_batch(struct weft_span *const *spans, size_t count)
{
    struct weft_span *bundle = NULL;
    size_t n = 0;

    for (size_t i = 0; i < count; i++) {
        struct weft_span *span = spans[i];

        if (span == NULL || span->is_static ||
            atomic_fetch_sub_explicit(&span->refs, 1, memory_order_acq_rel) != 1) {
            continue;
        }
        span_release(span);
        span->pool_next = bundle;
        bundle = span;
        if (++n == POOL_BUNDLE) {
            pool_put_bundle(bundle, n, true);
            bundle = NULL;
            n = 0;
        }
    }
    if (bundle != NULL) {
        pool_put_bundle(bundle, n, true);
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
    return span != NULL && span->head.is_recording;
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
