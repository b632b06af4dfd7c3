/* tests/support/mem_exporter.h - an in-memory exporter for tests: it copies what it receives
 * and can be made slow or failing, to drive processors through their paths. */
#ifndef WEFT_TESTS_SUPPORT_MEM_EXPORTER_H
#define WEFT_TESTS_SUPPORT_MEM_EXPORTER_H

#include <weft/weft.h>

#define MEM_MAX_EVENTS 8

struct mem_span {
    char name[128];
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    bool has_parent;
    bool parent_is_remote;
    uint8_t trace_flags;
    char trace_state[WEFT_TRACESTATE_MAX_LEN + 1];
    weft_span_kind kind;
    uint64_t start_ns;
    uint64_t end_ns;
    struct weft_attr *attrs; /* deep copy */
    size_t attr_count;
    uint32_t dropped_attrs;
    size_t event_count;
    uint32_t dropped_events;
    char event_names[MEM_MAX_EVENTS][64];
    struct weft_attr *event_attrs[MEM_MAX_EVENTS];
    size_t event_attr_count[MEM_MAX_EVENTS];
    uint32_t event_dropped_attrs[MEM_MAX_EVENTS];
    size_t link_count;
    uint32_t dropped_links;
    uint8_t link_trace_id[16];
    uint8_t link_span_id[8];
    size_t link_attr_count;
    weft_status_code status;
    char status_message[256];
    const struct weft_resource *resource;
    const struct weft_scope *scope;
};

struct mem_exporter; /* owned by the exporter handle; freed when it is destroyed */

/* Create; *state lets the test read what arrived (valid until the exporter is destroyed,
 * or keep it alive past that with mem_exporter_keep). */
weft_err mem_exporter_new(struct weft_exporter **out, struct mem_exporter **state);

/* Behaviour knobs (thread-safe). */
void mem_exporter_set_delay_ms(struct mem_exporter *m, unsigned delay_ms);
void mem_exporter_set_result(struct mem_exporter *m, weft_err err, uint64_t rejected);
/* Block every export until mem_exporter_release() (for "never waits" tests). */
void mem_exporter_block(struct mem_exporter *m);
void mem_exporter_release(struct mem_exporter *m);

size_t mem_exporter_count(struct mem_exporter *m);
size_t mem_exporter_batches(struct mem_exporter *m);
size_t mem_exporter_flushes(struct mem_exporter *m);
bool mem_exporter_is_shut_down(struct mem_exporter *m);
/* Copy of span i (valid until the exporter is destroyed). */
const struct mem_span *mem_exporter_span(struct mem_exporter *m, size_t i);
const struct mem_span *mem_exporter_find(struct mem_exporter *m, const char *name);
const struct weft_value *mem_span_attr(const struct mem_span *s, const char *key);

/* A provider with @p opts (NULL: defaults) exporting to a new in-memory exporter through a
 * simple processor, and its tracer "t". Returns the first error; the caller frees *provider
 * (weft_provider_shutdown + weft_provider_free), which frees the exporter. */
weft_err mem_provider_new(const struct weft_provider_options *opts,
                          struct weft_provider **provider,
                          struct weft_tracer **tracer,
                          struct mem_exporter **mem);

/* Keep the state alive after the exporter is destroyed; free with mem_exporter_state_free. */
void mem_exporter_keep(struct mem_exporter *m);
void mem_exporter_state_free(struct mem_exporter *m);

#endif
