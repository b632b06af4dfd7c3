/* tests/support/mem_exporter.c - in-memory exporter for tests. */
#include "mem_exporter.h"

#include "base/mem.h"
#include "tracing/sdk.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MEM_CAP 100000

struct mem_exporter {
    pthread_mutex_t lock;
    pthread_cond_t released;
    struct mem_span *spans;
    size_t count;
    size_t batches;
    size_t flushes;
    unsigned delay_ms;
    weft_err result;
    uint64_t rejected;
    bool blocked;
    bool shut_down;
    bool keep;
    bool destroyed;
};

static void
copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src == NULL ? "" : src);
}

static weft_err
mem_export(void *self,
           const struct weft_span_data *const *spans,
           size_t count,
           uint64_t deadline_ns,
           struct weft_export_result *result)
{
    struct mem_exporter *m = self;

    (void)deadline_ns;
    pthread_mutex_lock(&m->lock);
    while (m->blocked) {
        pthread_cond_wait(&m->released, &m->lock);
    }
    if (m->delay_ms > 0) {
        struct timespec ts = {m->delay_ms / 1000, (long)(m->delay_ms % 1000) * 1000000L};
        pthread_mutex_unlock(&m->lock);
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&m->lock);
    }
    m->batches++;
    if (m->result != WEFT_OK) {
        pthread_mutex_unlock(&m->lock);
        return m->result;
    }
    for (size_t i = 0; i < count && m->count < MEM_CAP; i++) {
        const struct weft_span_data *d = spans[i];
        struct mem_span *s = &m->spans[m->count++];

        memset(s, 0, sizeof(*s));
        copy_str(s->name, sizeof(s->name), d->name);
        memcpy(s->trace_id, d->trace_id, 16);
        memcpy(s->span_id, d->span_id, 8);
        memcpy(s->parent_span_id, d->parent_span_id, 8);
        s->has_parent = d->has_parent;
        s->parent_is_remote = d->parent_is_remote;
        s->trace_flags = d->trace_flags;
        copy_str(s->trace_state, sizeof(s->trace_state), d->trace_state);
        s->kind = d->kind;
        s->start_ns = d->start_time_ns;
        s->end_ns = d->end_time_ns;
        weft__attrs_copy(d->attrs, d->attr_count, &s->attrs);
        s->attr_count = s->attrs != NULL ? d->attr_count : 0;
        s->dropped_attrs = d->dropped_attrs;
        s->event_count = d->event_count;
        s->dropped_events = d->dropped_events;
        for (size_t e = 0; e < d->event_count && e < MEM_MAX_EVENTS; e++) {
            copy_str(s->event_names[e], sizeof(s->event_names[e]), d->events[e].name);
            weft__attrs_copy(d->events[e].attrs, d->events[e].attr_count, &s->event_attrs[e]);
            s->event_attr_count[e] = d->events[e].attr_count;
            s->event_dropped_attrs[e] = d->events[e].dropped_attrs;
        }
        s->link_count = d->link_count;
        s->dropped_links = d->dropped_links;
        if (d->link_count > 0) {
            memcpy(s->link_trace_id, d->links[0].trace_id, 16);
            memcpy(s->link_span_id, d->links[0].span_id, 8);
            s->link_attr_count = d->links[0].attr_count;
        }
        s->status = d->status_code;
        copy_str(s->status_message, sizeof(s->status_message), d->status_message);
        s->resource = d->resource;
        s->scope = d->scope;
    }
    result->rejected = m->rejected;
    pthread_mutex_unlock(&m->lock);
    return WEFT_OK;
}

static weft_err
mem_flush(void *self, uint64_t deadline_ns)
{
    struct mem_exporter *m = self;

    (void)deadline_ns;
    pthread_mutex_lock(&m->lock);
    m->flushes++;
    pthread_mutex_unlock(&m->lock);
    return WEFT_OK;
}

static weft_err
mem_shutdown(void *self, uint64_t deadline_ns)
{
    struct mem_exporter *m = self;

    (void)deadline_ns;
    pthread_mutex_lock(&m->lock);
    m->shut_down = true;
    m->blocked = false;
    pthread_cond_broadcast(&m->released);
    pthread_mutex_unlock(&m->lock);
    return WEFT_OK;
}

void
mem_exporter_state_free(struct mem_exporter *m)
{
    if (m == NULL) {
        return;
    }
    for (size_t i = 0; i < m->count; i++) {
        weft__free(m->spans[i].attrs);
        for (size_t e = 0; e < MEM_MAX_EVENTS; e++) {
            weft__free(m->spans[i].event_attrs[e]);
        }
    }
    free(m->spans);
    pthread_cond_destroy(&m->released);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static void
mem_destroy(void *self)
{
    struct mem_exporter *m = self;

    pthread_mutex_lock(&m->lock);
    m->destroyed = true;
    bool keep = m->keep;
    pthread_mutex_unlock(&m->lock);
    if (!keep) {
        mem_exporter_state_free(m);
    }
}

static const struct weft_exporter_ops mem_ops = {
    .name = "memory",
    .export_batch = mem_export,
    .force_flush = mem_flush,
    .shutdown = mem_shutdown,
    .destroy = mem_destroy,
};

weft_err
mem_exporter_new(struct weft_exporter **out, struct mem_exporter **state)
{
    struct mem_exporter *m = calloc(1, sizeof(*m));

    if (m == NULL) {
        return WEFT_ENOMEM;
    }
    m->spans = calloc(MEM_CAP, sizeof(*m->spans));
    if (m->spans == NULL) {
        free(m);
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->released, NULL);
    *state = m;
    return weft_exporter_new(&mem_ops, m, out);
}

#define LOCKED(m, expr)                   \
    do {                                  \
        pthread_mutex_lock(&(m)->lock);   \
        expr;                             \
        pthread_mutex_unlock(&(m)->lock); \
    } while (0)

void
mem_exporter_set_delay_ms(struct mem_exporter *m, unsigned delay_ms)
{
    LOCKED(m, m->delay_ms = delay_ms);
}

void
mem_exporter_set_result(struct mem_exporter *m, weft_err err, uint64_t rejected)
{
    LOCKED(m, (m->result = err, m->rejected = rejected));
}

void
mem_exporter_block(struct mem_exporter *m)
{
    LOCKED(m, m->blocked = true);
}

void
mem_exporter_release(struct mem_exporter *m)
{
    LOCKED(m, (m->blocked = false, pthread_cond_broadcast(&m->released)));
}

void
mem_exporter_keep(struct mem_exporter *m)
{
    LOCKED(m, m->keep = true);
}

size_t
mem_exporter_count(struct mem_exporter *m)
{
    size_t n = 0;

    LOCKED(m, n = m->count);
    return n;
}

size_t
mem_exporter_batches(struct mem_exporter *m)
{
    size_t n = 0;

    LOCKED(m, n = m->batches);
    return n;
}

size_t
mem_exporter_flushes(struct mem_exporter *m)
{
    size_t n = 0;

    LOCKED(m, n = m->flushes);
    return n;
}

bool
mem_exporter_is_shut_down(struct mem_exporter *m)
{
    bool b = false;

    LOCKED(m, b = m->shut_down);
    return b;
}

const struct mem_span *
mem_exporter_span(struct mem_exporter *m, size_t i)
{
    const struct mem_span *s = NULL;

    LOCKED(m, s = i < m->count ? &m->spans[i] : NULL);
    return s;
}

const struct mem_span *
mem_exporter_find(struct mem_exporter *m, const char *name)
{
    const struct mem_span *s = NULL;

    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < m->count; i++) {
        if (strcmp(m->spans[i].name, name) == 0) {
            s = &m->spans[i];
            break;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return s;
}

const struct weft_value *
mem_span_attr(const struct mem_span *s, const char *key)
{
    for (size_t i = 0; i < s->attr_count; i++) {
        if (strcmp(s->attrs[i].key, key) == 0) {
            return &s->attrs[i].value;
        }
    }
    return NULL;
}

weft_err
mem_provider_new(const struct weft_provider_options *opts,
                 struct weft_provider **provider,
                 struct weft_tracer **tracer,
                 struct mem_exporter **mem)
{
    struct weft_exporter *ex = NULL;
    struct weft_processor *proc = NULL;
    weft_err err = weft_provider_new(opts, provider);

    if (err == WEFT_OK) {
        err = mem_exporter_new(&ex, mem);
    }
    if (err == WEFT_OK) {
        err = weft_simple_processor_new(ex, &proc);
    }
    if (err == WEFT_OK) {
        err = weft_provider_add_processor_take(*provider, proc);
    }
    if (err == WEFT_OK) {
        err = weft_provider_get_tracer(*provider, "t", NULL, tracer);
    }
    return err;
}
