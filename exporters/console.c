/* exporters/console.c - the console exporter: prints each trace as an indented tree once its
 * root span ends, for a developer watching a run in a terminal.
 *
 * Spans arrive one by one as they end, children before their parents, so the exporter holds
 * copies grouped by trace (in arrival order) until a root arrives: a span without a parent, or
 * whose parent is remote (the local root of a distributed trace). The tree is drawn by the
 * renderer shared with `weft trace show` (report/render.h), so both look the same.
 *
 * Bounds: at most 10000 spans and 64 MiB of copies are held. Past either, the oldest trace is
 * printed at once, marked incomplete, rather than dropped: a debugging aid should not lose the
 * spans that explain a stuck run. Spans that end after their trace was printed (late async
 * children) and orphans whose root never comes are printed on force_flush and shutdown, marked.
 *
 * Thread-safety: a mutex guards everything, because shutdown may be called from another thread
 * while an export overruns its deadline.
 */
#include "base/arena.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "report/render.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/store.h>

#define MAX_HELD_SPANS 10000
#define MAX_HELD_BYTES (64u << 20)
#define RECENT_TRACES  64 /* printed trace ids remembered to recognise late spans */

struct held_trace {
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    struct weft__arena arena;
    struct weft_span_data **spans;
    size_t count;
    size_t cap;
    bool has_root; /* a root arrived in the current batch: print at the end of it */
};

struct console {
    pthread_mutex_t lock;
    FILE *stream;
    unsigned flags;
    struct held_trace **traces; /* oldest first */
    size_t trace_count;
    size_t trace_cap;
    size_t held_spans;
    uint8_t recent[RECENT_TRACES][WEFT_TRACE_ID_SIZE];
    size_t recent_next;
    bool is_shut_down;
    bool has_failed; /* the stream failed: logged once until it works again */
};

/* ------------------------------------------------------------------------------------------ */
/* Copies                                                                                      */

static weft_err
copy_value(struct weft__arena *a, const struct weft_value *in, struct weft_value *out)
{
    size_t elem = 0;
    void *items = NULL;

    *out = *in;
    switch (in->type) {
    case WEFT_VALUE_STRING:
        out->u.str = weft__arena_strndup(a, in->u.str != NULL ? in->u.str : "",
                                         in->u.str != NULL ? in->len : 0);
        return out->u.str != NULL ? WEFT_OK : WEFT_ENOMEM;
    case WEFT_VALUE_STRING_ARRAY: {
        char **strs = weft__arena_alloc(a, in->len * sizeof(*strs));

        if (strs == NULL) {
            return WEFT_ENOMEM;
        }
        for (size_t i = 0; i < in->len; i++) {
            strs[i] = weft__arena_strdup(a, in->u.strs[i] != NULL ? in->u.strs[i] : "");
            if (strs[i] == NULL) {
                return WEFT_ENOMEM;
            }
        }
        out->u.strs = (const char *const *)strs;
        return WEFT_OK;
    }
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
        return WEFT_OK;
    }
    items = weft__arena_alloc(a, in->len * elem);
    if (items == NULL) {
        return WEFT_ENOMEM;
    }
    if (in->len > 0) {
        memcpy(items, in->u.ints, in->len * elem);
    }
    out->u.ints = items;
    return WEFT_OK;
}

static weft_err
copy_attrs(struct weft__arena *a,
           const struct weft_attr *in,
           size_t count,
           const struct weft_attr **out)
{
    struct weft_attr *attrs = NULL;

    *out = NULL;
    if (count == 0) {
        return WEFT_OK;
    }
    attrs = weft__arena_alloc(a, count * sizeof(*attrs));
    if (attrs == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        attrs[i].key = weft__arena_strdup(a, in[i].key != NULL ? in[i].key : "");
        if (attrs[i].key == NULL || copy_value(a, &in[i].value, &attrs[i].value) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
    }
    *out = attrs;
    return WEFT_OK;
}

/* Copy of the strings the renderer reads from a possibly-NULL source. */
static weft_err
copy_str(struct weft__arena *a, const char *in, const char **out)
{
    *out = NULL;
    if (in == NULL) {
        return WEFT_OK;
    }
    *out = weft__arena_strdup(a, in);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* Deep-copy what the renderer needs of @p in: everything but the resource, of which only
 * service.name is kept (the rest is shared by every span and never printed). */
static weft_err
copy_span(struct weft__arena *a, const struct weft_span_data *in, struct weft_span_data **out)
{
    struct weft_span_data *s = weft__arena_alloc(a, sizeof(*s));
    struct weft_resource *resource = weft__arena_alloc(a, sizeof(*resource));
    struct weft_scope *scope = weft__arena_alloc(a, sizeof(*scope));
    struct weft_event_data *events = NULL;
    struct weft_link_data *links = NULL;
    const struct weft_value *service = NULL;

    *out = NULL;
    if (s == NULL || resource == NULL || scope == NULL) {
        return WEFT_ENOMEM;
    }
    *s = *in;
    s->resource = resource;
    s->scope = scope;
    s->events = NULL;
    s->links = NULL;
    if (copy_str(a, in->trace_state, &s->trace_state) != WEFT_OK ||
        copy_str(a, in->name != NULL ? in->name : "", &s->name) != WEFT_OK ||
        copy_str(a, in->status_message, &s->status_message) != WEFT_OK ||
        copy_attrs(a, in->attrs, in->attr_count, &s->attrs) != WEFT_OK) {
        return WEFT_ENOMEM;
    }
    if (in->event_count > 0) {
        events = weft__arena_alloc(a, in->event_count * sizeof(*events));
        if (events == NULL) {
            return WEFT_ENOMEM;
        }
        for (size_t i = 0; i < in->event_count; i++) {
            events[i] = in->events[i];
            if (copy_str(a, in->events[i].name != NULL ? in->events[i].name : "",
                         &events[i].name) != WEFT_OK ||
                copy_attrs(a, in->events[i].attrs, in->events[i].attr_count, &events[i].attrs) !=
                    WEFT_OK) {
                return WEFT_ENOMEM;
            }
        }
        s->events = events;
    }
    if (in->link_count > 0) {
        links = weft__arena_alloc(a, in->link_count * sizeof(*links));
        if (links == NULL) {
            return WEFT_ENOMEM;
        }
        for (size_t i = 0; i < in->link_count; i++) {
            links[i] = in->links[i];
            if (copy_str(a, in->links[i].trace_state, &links[i].trace_state) != WEFT_OK ||
                copy_attrs(a, in->links[i].attrs, in->links[i].attr_count, &links[i].attrs) !=
                    WEFT_OK) {
                return WEFT_ENOMEM;
            }
        }
        s->links = links;
    }
    if (in->scope != NULL) {
        if (copy_str(a, in->scope->name, &scope->name) != WEFT_OK ||
            copy_str(a, in->scope->version, &scope->version) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
    }
    for (size_t i = 0; in->resource != NULL && i < in->resource->attr_count; i++) {
        const struct weft_attr *attr = &in->resource->attrs[i];

        if (attr->key != NULL && strcmp(attr->key, "service.name") == 0) {
            service = &attr->value;
        }
    }
    if (service != NULL) {
        struct weft_attr *attr = weft__arena_alloc(a, sizeof(*attr));

        if (attr == NULL || copy_value(a, service, &attr->value) != WEFT_OK) {
            return WEFT_ENOMEM;
        }
        attr->key = "service.name";
        resource->attrs = attr;
        resource->attr_count = 1;
    }
    *out = s;
    return WEFT_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Held traces                                                                                 */

static bool
is_local_root(const struct weft_span_data *s)
{
    return !s->has_parent || s->parent_is_remote;
}

static void
held_free(struct held_trace *t)
{
    if (t == NULL) {
        return;
    }
    weft__arena_cleanup(&t->arena);
    weft__free(t->spans);
    weft__free(t);
}

static size_t
held_bytes(const struct console *c)
{
    size_t bytes = 0;

    for (size_t i = 0; i < c->trace_count; i++) {
        bytes += c->traces[i]->arena.bytes;
    }
    return bytes;
}

static struct held_trace *
find_trace(struct console *c, const uint8_t *trace_id)
{
    /* Newest first: the trace being recorded right now is the likely match. */
    for (size_t i = c->trace_count; i-- > 0;) {
        if (memcmp(c->traces[i]->trace_id, trace_id, WEFT_TRACE_ID_SIZE) == 0) {
            return c->traces[i];
        }
    }
    return NULL;
}

static weft_err
hold_span(struct console *c, const struct weft_span_data *span)
{
    struct held_trace *t = find_trace(c, span->trace_id);
    struct held_trace *fresh = NULL;
    struct weft_span_data *copy = NULL;
    weft_err err = WEFT_OK;

    if (t == NULL) {
        if (c->trace_count == c->trace_cap) {
            size_t cap = c->trace_cap == 0 ? 16 : c->trace_cap * 2;
            struct held_trace **grown = weft__realloc(c->traces, cap * sizeof(*grown));

            if (grown == NULL) {
                return WEFT_ENOMEM;
            }
            c->traces = grown;
            c->trace_cap = cap;
        }
        fresh = weft__calloc(1, sizeof(*fresh));
        if (fresh == NULL) {
            return WEFT_ENOMEM;
        }
        memcpy(fresh->trace_id, span->trace_id, WEFT_TRACE_ID_SIZE);
        weft__arena_init(&fresh->arena);
        t = fresh;
    }
    if (t->count == t->cap) {
        size_t cap = t->cap == 0 ? 16 : t->cap * 2;
        struct weft_span_data **grown = weft__realloc(t->spans, cap * sizeof(*grown));

        if (grown == NULL) {
            err = WEFT_ENOMEM;
            goto fail;
        }
        t->spans = grown;
        t->cap = cap;
    }
    /* A failed copy leaves half-filled arena memory behind; it is freed with the trace. */
    err = copy_span(&t->arena, span, &copy);
    if (err != WEFT_OK) {
        goto fail;
    }
    t->spans[t->count++] = copy;
    t->has_root = t->has_root || is_local_root(span);
    c->held_spans++;
    if (fresh != NULL) {
        c->traces[c->trace_count++] = fresh;
    }
    return WEFT_OK;
fail:
    held_free(fresh);
    return err;
}

static bool
was_printed(const struct console *c, const uint8_t *trace_id)
{
    for (size_t i = 0; i < RECENT_TRACES; i++) {
        if (memcmp(c->recent[i], trace_id, WEFT_TRACE_ID_SIZE) == 0) {
            return true;
        }
    }
    return false;
}

/* Print trace @p index and forget it. @p reason explains a trace printed without its root. */
static weft_err
print_trace(struct console *c, size_t index, const char *reason)
{
    struct held_trace *t = c->traces[index];
    const char *note = NULL;
    char text[160];
    weft_err err = WEFT_OK;

    if (!t->has_root) {
        if (was_printed(c, t->trace_id)) {
            snprintf(text, sizeof(text), "%zu span%s that ended after the trace was printed",
                     t->count, t->count == 1 ? "" : "s");
        } else {
            snprintf(text, sizeof(text), "incomplete: %s", reason);
        }
        note = text;
    }
    err = weft__render_spans(c->stream, (const struct weft_span_data *const *)t->spans, t->count,
                             c->flags, note);
    if (err == WEFT_OK) {
        fputc('\n', c->stream);
        if (fflush(c->stream) != 0 || ferror(c->stream)) {
            err = WEFT_EIO;
        }
    }
    if (t->has_root) {
        memcpy(c->recent[c->recent_next], t->trace_id, WEFT_TRACE_ID_SIZE);
        c->recent_next = (c->recent_next + 1) % RECENT_TRACES;
    }
    c->held_spans -= t->count;
    held_free(t);
    memmove(&c->traces[index], &c->traces[index + 1],
            (c->trace_count - index - 1) * sizeof(*c->traces));
    c->trace_count--;
    return err;
}

static weft_err
print_all(struct console *c, const char *reason)
{
    weft_err first = WEFT_OK;

    while (c->trace_count > 0) {
        weft_err err = print_trace(c, 0, reason);

        if (err != WEFT_OK && first == WEFT_OK) {
            first = err;
        }
    }
    return first;
}

static weft_err
report(struct console *c, weft_err err)
{
    if (err == WEFT_EIO && !c->has_failed) {
        WEFT_LOG(WEFT_LOG_ERROR, "console exporter: cannot write to its stream");
        c->has_failed = true;
    } else if (err == WEFT_OK) {
        c->has_failed = false;
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Exporter operations                                                                         */

static weft_err
console_export(void *self,
               const struct weft_span_data *const *spans,
               size_t count,
               uint64_t deadline_ns,
               struct weft_export_result *result)
{
    struct console *c = self;
    weft_err err = WEFT_OK;
    weft_err print_err = WEFT_OK;

    (void)deadline_ns;
    (void)result;
    if (spans == NULL && count > 0) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&c->lock);
    if (c->is_shut_down) {
        pthread_mutex_unlock(&c->lock);
        return WEFT_ESTATE;
    }
    /* Hold the whole batch first: a root may come before its children within one batch. */
    for (size_t i = 0; i < count; i++) {
        weft_err one = hold_span(c, spans[i]);

        if (one != WEFT_OK && err == WEFT_OK) {
            err = one; /* that span is lost; keep the others */
        }
    }
    for (size_t i = 0; i < c->trace_count;) {
        if (c->traces[i]->has_root) {
            weft_err one = print_trace(c, i, NULL);

            print_err = print_err == WEFT_OK ? one : print_err;
        } else {
            i++;
        }
    }
    while (c->trace_count > 0 &&
           (c->held_spans > MAX_HELD_SPANS || held_bytes(c) > MAX_HELD_BYTES)) {
        weft_err one = print_trace(c, 0, "too many spans held; its root span has not ended");

        print_err = print_err == WEFT_OK ? one : print_err;
    }
    print_err = report(c, print_err);
    pthread_mutex_unlock(&c->lock);
    return err != WEFT_OK ? err : print_err;
}

static weft_err
console_force_flush(void *self, uint64_t deadline_ns)
{
    struct console *c = self;
    weft_err err = WEFT_OK;

    (void)deadline_ns;
    pthread_mutex_lock(&c->lock);
    err = report(c, print_all(c, "its root span has not ended"));
    pthread_mutex_unlock(&c->lock);
    return err;
}

static weft_err
console_shutdown(void *self, uint64_t deadline_ns)
{
    struct console *c = self;
    weft_err err = WEFT_OK;

    (void)deadline_ns;
    pthread_mutex_lock(&c->lock);
    if (!c->is_shut_down) {
        err = report(c, print_all(c, "its root span never ended"));
        c->is_shut_down = true;
    }
    pthread_mutex_unlock(&c->lock);
    return err;
}

static void
console_destroy(void *self)
{
    struct console *c = self;

    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->trace_count; i++) {
        held_free(c->traces[i]);
    }
    weft__free(c->traces);
    pthread_mutex_destroy(&c->lock);
    weft__free(c);
}

static const struct weft_exporter_ops console_ops = {
    .name = "console",
    .export_batch = console_export,
    .force_flush = console_force_flush,
    .shutdown = console_shutdown,
    .destroy = console_destroy,
};

/* Colour only for a terminal, and never when NO_COLOR (no-color.org) or TERM=dumb says so. */
static bool
wants_color(FILE *stream)
{
    const char *term = weft__env("TERM");
    int fd = fileno(stream);

    return fd >= 0 && isatty(fd) && weft__env("NO_COLOR") == NULL &&
           (term == NULL || strcmp(term, "dumb") != 0);
}

weft_err
weft_console_exporter_new(void *stream, struct weft_exporter **out)
{
    struct console *c = NULL;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    c = weft__calloc(1, sizeof(*c));
    if (c == NULL) {
        return WEFT_ENOMEM;
    }
    if (pthread_mutex_init(&c->lock, NULL) != 0) {
        weft__free(c);
        return WEFT_ENOMEM;
    }
    c->stream = stream != NULL ? stream : stdout;
    c->flags = WEFT_RENDER_ATTRS | WEFT_RENDER_EVENTS | WEFT_RENDER_LINKS;
    if (wants_color(c->stream)) {
        c->flags |= WEFT_RENDER_COLOR;
    }
    return weft_exporter_new(&console_ops, c, out);
}
