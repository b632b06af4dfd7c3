/* exporters/langfuse.c - spans to Langfuse over its OTLP endpoint, and scores through its public
 * scores API (REFERENCE.md, "Langfuse"; docs/langfuse.md has the mapping for users).
 *
 * The runtime already puts DESIGN.md's three vocabularies on its spans; this exporter adds what
 * only Langfuse reads, on its own copy of each span view, so that OTLP collectors see the spans
 * unchanged:
 * - trace-wide attributes on every span (environment, release, session, user, tags): Langfuse
 *   v4 stores spans as immutable and reads trace fields from whichever span it meets;
 * - langfuse.observation.level (ERROR for failed steps and runs that did not complete, WARNING
 *   for stuck loops and breaker trips), model name, usage_details JSON, and filterable
 *   langfuse.observation.metadata.* keys for the decision, loop, verdict and step attributes;
 * - usage and cost only on generations: the totals the runtime puts on run and agent spans
 *   (gen_ai.usage.*, cost_details) become metadata, so Langfuse does not count them twice;
 * - string values longer than max_value_bytes cut with a marker;
 * - runs of more than max_spans_per_trace spans split into several traces (same session, a span
 *   link back to the original trace, "(part N)" in the trace name).
 * Requests stay under max_request_bytes (a batch that encodes larger is halved). Each span is
 * sent once: the batch processor hands over ended spans only, and Langfuse v4 does not
 * deduplicate. Sampling (LANGFUSE_SAMPLE_RATE) is decided per trace id, so traces stay whole.
 *
 * Scores are derived from the spans of a batch and sent after the spans were accepted, on the
 * same export thread (never the agent's), one POST each over a kept-alive connection, with
 * deterministic ids so that a retried score replaces itself instead of doubling.
 *
 * A 401 or 403 stops the exporter: one clear log line, then every later span is counted as
 * dropped without touching the network (not a stream of 401s).
 */
#include "otlp_encode.h"
#include "otlp_transport.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/utf8.h"
#include "tracing/exporter.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_HOST           "https://cloud.langfuse.com"
#define DEFAULT_MAX_VALUE      32768u
#define DEFAULT_MAX_REQUEST    (3u << 20) /* REFERENCE.md: keep a request well under 5 MB */
#define DEFAULT_MAX_SPANS      10000u
#define SPLIT_SLOTS            1024u /* traces whose span counts are tracked for splitting */
#define TRUNCATION_MARKER      "...[truncated by weft]"
#define MAX_ENVIRONMENT_LENGTH 40

struct split_slot {
    uint8_t trace_id[WEFT_TRACE_ID_SIZE];
    uint64_t spans;    /* spans of this trace exported so far */
    uint64_t last_use; /* for replacing the least recently used slot */
};

struct langfuse {
    struct weft__otlp_transport *spans;
    struct weft__otlp_transport *scores;
    struct weft__buf body;
    char *host;
    char *environment; /* NULL: not sent */
    char *release;     /* NULL: not sent */
    double sample_rate;
    bool is_scoring;
    size_t max_value;
    size_t max_request;
    uint64_t max_spans;
    struct split_slot *slots; /* SPLIT_SLOTS; used by the export thread only */
    uint64_t use_clock;
    atomic_bool is_stopped;
    atomic_uint_fast64_t n_sent;
    atomic_uint_fast64_t n_sampled_out;
    atomic_uint_fast64_t n_dropped;
    atomic_uint_fast64_t n_truncated;
    atomic_uint_fast64_t n_split;
    atomic_uint_fast64_t n_scores_sent;
    atomic_uint_fast64_t n_scores_failed;
};

/* ------------------------------------------------------------------------------------------ */
/* A batch's rewritten span views: every allocation is kept here and freed after the export.  */

struct lf_batch {
    void **allocs;
    size_t alloc_count;
    size_t alloc_cap;
    bool is_oom;
    json_t *scores; /* array of score bodies */
};

static void *
batch_alloc(struct lf_batch *b, size_t size)
{
    void *p = NULL;

    if (b->alloc_count == b->alloc_cap) {
        size_t cap = b->alloc_cap == 0 ? 64 : b->alloc_cap * 2;
        void **grown = weft__realloc(b->allocs, cap * sizeof(*grown));
        if (grown == NULL) {
            b->is_oom = true;
            return NULL;
        }
        b->allocs = grown;
        b->alloc_cap = cap;
    }
    p = weft__calloc(1, size);
    if (p == NULL) {
        b->is_oom = true;
        return NULL;
    }
    b->allocs[b->alloc_count++] = p;
    return p;
}

static char *batch_printf(struct lf_batch *b, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static char *
batch_printf(struct lf_batch *b, size_t size, const char *fmt, ...)
{
    char *s = batch_alloc(b, size);
    va_list ap;

    if (s != NULL) {
        va_start(ap, fmt);
        vsnprintf(s, size, fmt, ap);
        va_end(ap);
    }
    return s;
}

static void
batch_cleanup(struct lf_batch *b)
{
    for (size_t i = 0; i < b->alloc_count; i++) {
        weft__free(b->allocs[i]);
    }
    weft__free(b->allocs);
    json_decref(b->scores);
    memset(b, 0, sizeof(*b));
}

/* ------------------------------------------------------------------------------------------ */
/* Helpers                                                                                     */

static void
hex(const uint8_t *id, size_t len, char *out)
{
    static const char digits[] = "0123456789abcdef";

    for (size_t i = 0; i < len; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[2 * len] = '\0';
}

static uint64_t
mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t
id_word(const uint8_t *id, size_t len)
{
    uint64_t h = 0;

    for (size_t i = 0; i < len; i++) {
        h = mix64(h ^ id[i]);
    }
    return h;
}

static const struct weft_value *
attr_of(const struct weft_span_data *s, const char *key)
{
    return weft_span_data_attr(s, key);
}

static const char *
str_attr(const struct weft_span_data *s, const char *key)
{
    const struct weft_value *v = attr_of(s, key);

    return v != NULL && v->type == WEFT_VALUE_STRING ? v->u.str : NULL;
}

static bool
num_attr(const struct weft_span_data *s, const char *key, double *out)
{
    const struct weft_value *v = attr_of(s, key);

    if (v == NULL) {
        return false;
    }
    if (v->type == WEFT_VALUE_INT) {
        *out = (double)v->u.i;
        return true;
    }
    if (v->type == WEFT_VALUE_DOUBLE) {
        *out = v->u.d;
        return true;
    }
    return false;
}

static const struct weft_event_data *
find_event(const struct weft_span_data *s, const char *name)
{
    for (size_t i = 0; i < s->event_count; i++) {
        if (strcmp(s->events[i].name, name) == 0) {
            return &s->events[i];
        }
    }
    return NULL;
}

static const char *
event_str(const struct weft_event_data *ev, const char *key)
{
    for (size_t i = 0; i < ev->attr_count; i++) {
        if (strcmp(ev->attrs[i].key, key) == 0 && ev->attrs[i].value.type == WEFT_VALUE_STRING) {
            return ev->attrs[i].value.u.str;
        }
    }
    return NULL;
}

/* The weft.* attributes that become filterable Langfuse metadata. */
static bool
is_metadata_key(const char *key)
{
    static const char *const prefixes[] = {
        "weft.decision.", "weft.loop.", "weft.reflection.", "weft.replan.", "weft.correction.",
        "weft.step.",     "weft.tool.", "weft.run.",        "weft.plan.",   "weft.reward"};

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0) {
            return true;
        }
    }
    return false;
}

/* ------------------------------------------------------------------------------------------ */
/* Sampling and trace splitting                                                                */

static bool
is_sampled(const struct langfuse *x, const uint8_t *trace_id)
{
    if (x->sample_rate >= 1.0) {
        return true;
    }
    if (x->sample_rate <= 0.0) {
        return false;
    }
    /* Decided by the trace id alone, so every span of a trace gets the same answer. */
    return (double)(id_word(trace_id, WEFT_TRACE_ID_SIZE) >> 11) * 0x1.0p-53 < x->sample_rate;
}

/* Which part of its trace span @p s belongs to (0 for the first max_spans spans). Root spans
 * always stay in part 0, the trace the run's session and links point at. */
static uint64_t
trace_part(struct langfuse *x, const struct weft_span_data *s)
{
    struct split_slot *slot = NULL;
    struct split_slot *victim = &x->slots[0];
    uint64_t part = 0;

    x->use_clock++;
    for (size_t i = 0; i < SPLIT_SLOTS; i++) {
        struct split_slot *c = &x->slots[i];
        if (c->spans != 0 && memcmp(c->trace_id, s->trace_id, WEFT_TRACE_ID_SIZE) == 0) {
            slot = c;
            break;
        }
        if (c->last_use < victim->last_use) {
            victim = c;
        }
    }
    if (slot == NULL) {
        slot = victim;
        memcpy(slot->trace_id, s->trace_id, WEFT_TRACE_ID_SIZE);
        slot->spans = 0;
    }
    slot->last_use = x->use_clock;
    if (!s->has_parent) {
        return 0; /* it takes no place in a part, so it cannot start one */
    }
    part = slot->spans / x->max_spans;
    if (part > 0 && slot->spans % x->max_spans == 0) {
        atomic_fetch_add(&x->n_split, 1); /* the first span of a new part: one more trace */
    }
    slot->spans++;
    return part;
}

static void
part_trace_id(const uint8_t *trace_id, uint64_t part, uint8_t *out)
{
    uint64_t w = mix64(id_word(trace_id, WEFT_TRACE_ID_SIZE) ^ part);

    memcpy(out, trace_id, WEFT_TRACE_ID_SIZE);
    for (int i = 0; i < 8; i++) {
        out[i] ^= (uint8_t)(w >> (8 * i));
    }
    if (out[0] == 0 && out[1] == 0) {
        out[0] = 1; /* never the all-zero id */
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Scores                                                                                      */

static void
add_score(struct langfuse *x,
          struct lf_batch *b,
          const struct weft_span_data *v,
          bool on_observation,
          const char *name,
          json_t *value,
          const char *data_type,
          const char *comment,
          unsigned seq)
{
    char trace[2 * WEFT_TRACE_ID_SIZE + 1];
    char span[2 * WEFT_SPAN_ID_SIZE + 1];
    char id[48];
    /* Deterministic: a retried score replaces itself; @p seq tells apart several scores of
     * one name on one span (stuck-loop events). */
    uint64_t h =
        mix64(id_word(v->trace_id, WEFT_TRACE_ID_SIZE) ^ id_word(v->span_id, WEFT_SPAN_ID_SIZE) ^
              id_word((const uint8_t *)name, strlen(name)) ^ mix64(seq));
    json_t *score = NULL;

    if (!x->is_scoring || value == NULL) {
        json_decref(value);
        return;
    }
    hex(v->trace_id, WEFT_TRACE_ID_SIZE, trace);
    hex(v->span_id, WEFT_SPAN_ID_SIZE, span);
    snprintf(id, sizeof(id), "weft-%016llx%016llx", (unsigned long long)h,
             (unsigned long long)mix64(h));
    score = json_pack("{s:s, s:s, s:s, s:o, s:s}", "id", id, "traceId", trace, "name", name,
                      "value", value, "dataType", data_type);
    if (score == NULL) {
        b->is_oom = true;
        return;
    }
    if (on_observation) {
        json_object_set_new(score, "observationId", json_string(span));
    }
    if (x->environment != NULL) {
        json_object_set_new(score, "environment", json_string(x->environment));
    }
    if (comment != NULL) {
        json_object_set_new(score, "comment", json_string(comment));
    }
    if (b->scores == NULL) {
        b->scores = json_array();
    }
    if (json_array_append_new(b->scores, score) != 0) {
        b->is_oom = true;
    }
}

/* The evaluator scores recorded on a span (gen_ai.evaluation.result events, include/weft/eval.h):
 * each a NUMERIC score named after its evaluator, its explanation as the comment; on the
 * observation, or on the trace when recorded on a root span. */
static void
derive_eval_scores(struct langfuse *x, struct lf_batch *b, const struct weft_span_data *v)
{
    for (size_t i = 0; i < v->event_count; i++) {
        const struct weft_event_data *ev = &v->events[i];
        const char *name = NULL;
        double value = 0;
        bool has_value = false;

        if (strcmp(ev->name, "gen_ai.evaluation.result") != 0) {
            continue;
        }
        name = event_str(ev, "gen_ai.evaluation.name");
        for (size_t j = 0; j < ev->attr_count; j++) {
            const struct weft_attr *a = &ev->attrs[j];
            if (strcmp(a->key, "gen_ai.evaluation.score.value") == 0 &&
                (a->value.type == WEFT_VALUE_DOUBLE || a->value.type == WEFT_VALUE_INT)) {
                value = a->value.type == WEFT_VALUE_DOUBLE ? a->value.u.d : (double)a->value.u.i;
                has_value = true;
            }
        }
        if (name != NULL && has_value) {
            add_score(x, b, v, v->has_parent, name, json_real(value), "NUMERIC",
                      event_str(ev, "gen_ai.evaluation.explanation"), (unsigned)i);
        }
    }
}

/* The scores a span implies: a reflection verdict, the run's outcome, reward and loops (on
 * the root span), a stuck-loop detection, evaluator scores. */
static void
derive_scores(struct langfuse *x, struct lf_batch *b, const struct weft_span_data *v)
{
    const char *verdict = str_attr(v, "weft.reflection.verdict");
    const char *type = str_attr(v, "langfuse.observation.type");
    const char *status = str_attr(v, "weft.run.status");
    double n = 0;

    /* The agent span repeats its last verdict; the score belongs to the evaluator. */
    if (verdict != NULL && type != NULL && strcmp(type, "evaluator") == 0) {
        add_score(x, b, v, true, "reflection_verdict", json_string(verdict), "CATEGORICAL",
                  str_attr(v, "weft.reflection.feedback"), 0);
    }
    if (!v->has_parent && status != NULL) {
        double total = 0;

        add_score(x, b, v, false, "run_success", json_integer(strcmp(status, "completed") == 0),
                  "BOOLEAN", status, 0);
        if (num_attr(v, "weft.run.reward", &n)) {
            add_score(x, b, v, false, "run_reward", json_real(n), "NUMERIC", NULL, 0);
        }
        for (size_t i = 0; i < v->attr_count; i++) {
            const char *key = v->attrs[i].key;
            if (strncmp(key, "weft.run.loops.", 15) == 0 && num_attr(v, key, &n)) {
                char name[96];
                total += n;
                if (n > 0) {
                    snprintf(name, sizeof(name), "loops_%s", key + 15);
                    add_score(x, b, v, false, name, json_real(n), "NUMERIC", NULL, 0);
                }
            }
        }
        add_score(x, b, v, false, "loops_total", json_real(total), "NUMERIC", NULL, 0);
    }
    derive_eval_scores(x, b, v);
    /* The run's root span repeats each detection for the trace view; its score belongs to the
     * observation where the loop was found, once. */
    for (size_t i = 0; status == NULL && i < v->event_count; i++) {
        const struct weft_event_data *ev = &v->events[i];
        if (strcmp(ev->name, "weft.stuck_loop") == 0) {
            const char *kind = event_str(ev, "weft.stuck_loop.kind");
            add_score(x, b, v, true, "stuck_loop", json_string(kind != NULL ? kind : "unknown"),
                      "CATEGORICAL", event_str(ev, "weft.stuck_loop.evidence"), (unsigned)i);
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* The Langfuse view of one span                                                               */

static bool
has_key(const struct weft_attr *attrs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(attrs[i].key, key) == 0) {
            return true;
        }
    }
    return false;
}

static void
put_str(struct weft_attr *attrs, size_t *n, const char *key, const char *value)
{
    if (value != NULL && !has_key(attrs, *n, key)) {
        attrs[(*n)++] = weft_attr_str(key, value);
    }
}

/* Part @p part (> 0) of a run's trace goes to a trace id of its own: @p v gets that id and
 * one more link, back to where the run's root lives in the original trace. */
static bool
relink_part(struct lf_batch *b,
            const struct weft_span_data *s,
            uint64_t part,
            struct weft_span_data *v)
{
    struct weft_link_data *links = batch_alloc(b, (s->link_count + 1) * sizeof(*links));

    if (links == NULL) {
        return false;
    }
    part_trace_id(s->trace_id, part, v->trace_id);
    if (s->link_count > 0) { /* s->links may be NULL then, and memcpy(NULL) is undefined */
        memcpy(links, s->links, s->link_count * sizeof(*links));
    }
    memset(&links[s->link_count], 0, sizeof(*links));
    memcpy(links[s->link_count].trace_id, s->trace_id, WEFT_TRACE_ID_SIZE);
    memcpy(links[s->link_count].span_id, s->has_parent ? s->parent_span_id : s->span_id,
           WEFT_SPAN_ID_SIZE);
    links[s->link_count].trace_flags = s->trace_flags;
    v->links = links;
    v->link_count = s->link_count + 1;
    return true;
}

/* One of the span's own attributes as Langfuse should get it: usage totals of non-generations
 * as metadata, the trace name of a part marked, long strings cut and counted. */
static bool
rewrite_attr(
    struct langfuse *x, struct lf_batch *b, bool is_generation, uint64_t part, struct weft_attr *a)
{
    if (!is_generation && (strncmp(a->key, "gen_ai.usage.", 13) == 0 ||
                           strcmp(a->key, "langfuse.observation.cost_details") == 0)) {
        /* Run and agent totals: Langfuse would count them again beside the generations
         * they sum up, so they go as metadata (usage.input_tokens, cost_details). */
        char *key = batch_printf(b, strlen(a->key) + 40, "langfuse.observation.metadata.%s",
                                 a->key[0] == 'g' ? a->key + 7 : "cost_details");
        if (key == NULL) {
            return false;
        }
        a->key = key;
    } else if (part > 0 && strcmp(a->key, "langfuse.trace.name") == 0) {
        char *name = batch_printf(b, strlen(a->value.u.str) + 32, "%s (part %llu)", a->value.u.str,
                                  (unsigned long long)part + 1);
        if (name == NULL) {
            return false;
        }
        a->value.u.str = name;
        a->value.len = strlen(name);
    } else if (a->value.type == WEFT_VALUE_STRING && a->value.len > x->max_value) {
        /* Cut on a UTF-8 boundary, then say so. */
        size_t keep = weft__utf8_cut(a->value.u.str, a->value.len, x->max_value);
        char *cut = batch_alloc(b, keep + sizeof(TRUNCATION_MARKER));

        if (cut == NULL) {
            return false;
        }
        memcpy(cut, a->value.u.str, keep);
        memcpy(cut + keep, TRUNCATION_MARKER, sizeof(TRUNCATION_MARKER));
        a->value.u.str = cut;
        a->value.len = keep + sizeof(TRUNCATION_MARKER) - 1;
        atomic_fetch_add(&x->n_truncated, 1);
    }
    return true;
}

/* Filterable metadata: weft.decision.layer -> langfuse.observation.metadata.decision.layer. */
static bool
add_metadata(struct lf_batch *b,
             const struct weft_span_data *s,
             struct weft_attr *attrs,
             size_t *n,
             size_t cap)
{
    for (size_t i = 0; i < s->attr_count && *n < cap - 16; i++) {
        if (is_metadata_key(s->attrs[i].key)) {
            char *key = batch_printf(b, strlen(s->attrs[i].key) + 32,
                                     "langfuse.observation.metadata.%s", s->attrs[i].key + 5);
            if (key == NULL) {
                return false;
            }
            attrs[*n] = attrs[i];
            attrs[(*n)++].key = key;
        }
    }
    return true;
}

/* The trace-level attributes Langfuse reads: environment, release, session, user, trace name
 * and tags. */
static void
add_trace_attrs(const struct langfuse *x,
                const struct weft_span_data *s,
                struct weft_attr *attrs,
                size_t *n)
{
    const char *session = str_attr(s, "session.id");

    put_str(attrs, n, "langfuse.environment", x->environment);
    put_str(attrs, n, "langfuse.release", x->release);
    put_str(attrs, n, "langfuse.session.id",
            session != NULL ? session : str_attr(s, "gen_ai.conversation.id"));
    put_str(attrs, n, "langfuse.user.id", str_attr(s, "user.id"));
    if (str_attr(s, "langfuse.trace.name") == NULL && !s->has_parent) {
        put_str(attrs, n, "langfuse.trace.name", s->name);
    }
    if (!has_key(attrs, *n, "langfuse.trace.tags")) {
        const struct weft_value *tags = attr_of(s, "weft.run.tags");
        if (tags != NULL && tags->type == WEFT_VALUE_STRING_ARRAY) {
            attrs[*n] = (struct weft_attr){"langfuse.trace.tags", *tags};
            (*n)++;
        }
    }
}

/* A failed step, and a run that did not complete (its root repeats the loops it met), are
 * errors; a span with a stuck-loop or breaker event is a warning, though its status is ERROR. */
static void
add_level(const struct weft_span_data *s, struct weft_attr *attrs, size_t *n)
{
    const char *step_status = str_attr(s, "weft.step.status");
    bool is_warning =
        find_event(s, "weft.stuck_loop") != NULL || find_event(s, "weft.circuit_breaker") != NULL;

    if ((step_status != NULL && strcmp(step_status, "failed") == 0) ||
        (str_attr(s, "weft.run.status") != NULL && s->status_code == WEFT_STATUS_ERROR)) {
        put_str(attrs, n, "langfuse.observation.level", "ERROR");
    } else if (is_warning) {
        put_str(attrs, n, "langfuse.observation.level", "WARNING");
    } else if (s->status_code == WEFT_STATUS_ERROR) {
        put_str(attrs, n, "langfuse.observation.level", "ERROR");
    }
}

/* A generation's model and usage details, unless the span set them itself. */
static bool
add_generation(struct lf_batch *b,
               const struct weft_span_data *s,
               struct weft_attr *attrs,
               size_t *n)
{
    const char *model = str_attr(s, "gen_ai.response.model");
    double in = -1;
    double out = -1;
    bool has_usage = false;

    put_str(attrs, n, "langfuse.observation.model.name",
            model != NULL ? model : str_attr(s, "gen_ai.request.model"));
    has_usage = num_attr(s, "gen_ai.usage.input_tokens", &in);
    has_usage = num_attr(s, "gen_ai.usage.output_tokens", &out) || has_usage;
    if (has_usage && !has_key(attrs, *n, "langfuse.observation.usage_details")) {
        char *usage = batch_printf(b, 96, "{\"input\":%lld,\"output\":%lld,\"total\":%lld}",
                                   (long long)(in < 0 ? 0 : in), (long long)(out < 0 ? 0 : out),
                                   (long long)((in < 0 ? 0 : in) + (out < 0 ? 0 : out)));
        if (usage == NULL) {
            return false;
        }
        attrs[(*n)++] = weft_attr_str("langfuse.observation.usage_details", usage);
    }
    return true;
}

/* Fill @p v, Langfuse's copy of @p s. @return false when out of memory. */
static bool
rewrite(struct langfuse *x,
        struct lf_batch *b,
        const struct weft_span_data *s,
        struct weft_span_data *v)
{
    size_t cap = 2 * s->attr_count + 16;
    struct weft_attr *attrs = batch_alloc(b, cap * sizeof(*attrs));
    uint64_t part = trace_part(x, s);
    const char *type = str_attr(s, "langfuse.observation.type");
    bool is_generation = type != NULL && strcmp(type, "generation") == 0;
    size_t n = 0;

    if (attrs == NULL) {
        return false;
    }
    *v = *s;
    if (part > 0 && !relink_part(b, s, part, v)) {
        return false;
    }
    for (size_t i = 0; i < s->attr_count; i++) {
        attrs[n] = s->attrs[i];
        if (!rewrite_attr(x, b, is_generation, part, &attrs[n])) {
            return false;
        }
        n++;
    }
    if (!add_metadata(b, s, attrs, &n, cap)) {
        return false;
    }
    add_trace_attrs(x, s, attrs, &n);
    add_level(s, attrs, &n);
    if (is_generation && !add_generation(b, s, attrs, &n)) {
        return false;
    }
    v->attrs = attrs;
    v->attr_count = n;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Sending                                                                                     */

static void
stop_on_auth(struct langfuse *x, weft_err err, struct weft__otlp_transport *t)
{
    struct weft_otlp_stats st;

    if (err != WEFT_EHTTP) {
        return;
    }
    weft__otlp_transport_stats(t, &st);
    if ((st.last_http_status == 401 || st.last_http_status == 403) &&
        !atomic_exchange(&x->is_stopped, true)) {
        WEFT_LOG(WEFT_LOG_ERROR,
                 "Langfuse at %s refused the credentials (HTTP %ld): check LANGFUSE_PUBLIC_KEY "
                 "and LANGFUSE_SECRET_KEY (a key pair of this project and region). The Langfuse "
                 "exporter is stopped; its spans are counted as dropped, other exporters go on",
                 x->host, st.last_http_status);
    }
}

static weft_err
send_part(struct langfuse *x,
          const struct weft_span_data *const *views,
          size_t count,
          uint64_t deadline,
          uint64_t *spooled_out)
{
    uint64_t spooled = 0;
    weft_err err = WEFT_OK;

    if (atomic_load(&x->is_stopped)) {
        atomic_fetch_add(&x->n_dropped, count);
        return WEFT_ESTATE;
    }
    weft__buf_reset(&x->body);
    err = weft__otlp_transport_is_json(x->spans) ? weft__otlp_encode_json(views, count, &x->body)
                                                 : weft__otlp_encode_proto(views, count, &x->body);
    if (err == WEFT_ELIMIT) {
        if (count == 1) {
            WEFT_LOG(WEFT_LOG_ERROR,
                     "Langfuse: span '%s' is over %zu bytes even with its values cut; dropped",
                     views[0]->name, x->max_request);
            atomic_fetch_add(&x->n_dropped, 1);
            return WEFT_ELIMIT;
        }
        /* Split by bytes: each half on its own, and keep going after a failed half. */
        {
            weft_err first = send_part(x, views, count / 2, deadline, spooled_out);
            weft_err second =
                send_part(x, views + count / 2, count - count / 2, deadline, spooled_out);
            return first != WEFT_OK ? first : second;
        }
    }
    if (err == WEFT_OK) {
        err = weft__otlp_transport_export(x->spans, x->body.data, x->body.len, (uint32_t)count,
                                          deadline, NULL, &spooled);
    }
    if (err == WEFT_OK && spooled > 0) {
        *spooled_out += spooled; /* sent later from the spool (weft_exporter_spool_stats) */
    } else if (err == WEFT_OK) {
        atomic_fetch_add(&x->n_sent, count);
    } else {
        atomic_fetch_add(&x->n_dropped, count);
        stop_on_auth(x, err, x->spans);
    }
    return err;
}

static void
send_scores(struct langfuse *x, json_t *scores, uint64_t deadline)
{
    size_t i = 0;
    json_t *score = NULL;

    json_array_foreach(scores, i, score)
    {
        char *text = NULL;
        weft_err err = WEFT_ESTATE;

        if (!atomic_load(&x->is_stopped)) {
            text = json_dumps(score, JSON_COMPACT);
            err = text == NULL
                      ? WEFT_ENOMEM
                      : weft__otlp_transport_send(x->scores, text, strlen(text), deadline, NULL);
            free(text);
        }
        if (err == WEFT_OK) {
            atomic_fetch_add(&x->n_scores_sent, 1);
        } else {
            atomic_fetch_add(&x->n_scores_failed, 1);
            stop_on_auth(x, err, x->scores);
        }
    }
}

static weft_err
lf_export(void *self,
          const struct weft_span_data *const *spans,
          size_t count,
          uint64_t deadline_ns,
          struct weft_export_result *result)
{
    struct langfuse *x = self;
    struct lf_batch b;
    struct weft_span_data *views = NULL;
    const struct weft_span_data **ptrs = NULL;
    size_t kept = 0;
    weft_err err = WEFT_OK;

    if (atomic_load(&x->is_stopped)) {
        atomic_fetch_add(&x->n_dropped, count);
        return WEFT_ESTATE;
    }
    memset(&b, 0, sizeof(b));
    views = batch_alloc(&b, (count + 1) * sizeof(*views));
    ptrs = batch_alloc(&b, (count + 1) * sizeof(*ptrs));
    for (size_t i = 0; views != NULL && ptrs != NULL && i < count; i++) {
        if (!is_sampled(x, spans[i]->trace_id)) {
            atomic_fetch_add(&x->n_sampled_out, 1);
            continue;
        }
        if (!rewrite(x, &b, spans[i], &views[kept])) {
            break;
        }
        derive_scores(x, &b, &views[kept]);
        ptrs[kept] = &views[kept];
        kept++;
    }
    if (b.is_oom || views == NULL || ptrs == NULL) {
        atomic_fetch_add(&x->n_dropped, count);
        batch_cleanup(&b);
        return WEFT_ENOMEM;
    }
    if (kept > 0) {
        err = send_part(x, ptrs, kept, deadline_ns, &result->spooled);
    }
    /* Scores name spans: send them once their spans are in (else they would point nowhere).
     * Scores are not spooled: when the spans went to the spool, the scores count as failed. */
    if (err == WEFT_OK && result->spooled == 0 && b.scores != NULL) {
        send_scores(x, b.scores, deadline_ns);
    } else if (b.scores != NULL) {
        atomic_fetch_add(&x->n_scores_failed, json_array_size(b.scores));
    }
    batch_cleanup(&b);
    return err;
}

static weft_err
lf_shutdown(void *self, uint64_t deadline_ns)
{
    struct langfuse *x = self;

    (void)deadline_ns;
    weft__otlp_transport_shutdown(x->spans);
    weft__otlp_transport_shutdown(x->scores);
    return WEFT_OK;
}

static void
lf_destroy(void *self)
{
    struct langfuse *x = self;

    if (x == NULL) {
        return;
    }
    weft__otlp_transport_free(x->spans);
    weft__otlp_transport_free(x->scores);
    weft__buf_cleanup(&x->body);
    weft__free(x->slots);
    weft__free(x->host);
    weft__free(x->environment);
    weft__free(x->release);
    weft__free(x);
}

/* The span transport's last failure (a 401 that stopped the exporter stays the reason). */
static size_t
lf_last_error(void *self, char *buf, size_t len)
{
    struct langfuse *x = self;

    return weft__otlp_transport_last_error(x->spans, buf, len);
}

/* The span spool (otlp_transport.h): sent on flush and when the processor is idle. */
static weft_err
lf_force_flush(void *self, uint64_t deadline_ns)
{
    struct langfuse *x = self;

    if (!atomic_load(&x->is_stopped)) {
        weft__otlp_transport_flush_spool(x->spans, deadline_ns);
    }
    return WEFT_OK;
}

static bool
lf_idle(void *self, uint64_t deadline_ns)
{
    struct langfuse *x = self;

    return !atomic_load(&x->is_stopped) && weft__otlp_transport_idle(x->spans, deadline_ns);
}

static void
lf_spool_stats(void *self, struct weft_spool_stats *out)
{
    struct langfuse *x = self;

    weft__otlp_transport_spool_stats(x->spans, out);
}

static const struct weft_exporter_ops langfuse_ops = {
    .name = "langfuse",
    .export_batch = lf_export,
    .force_flush = lf_force_flush,
    .shutdown = lf_shutdown,
    .destroy = lf_destroy,
    .last_error = lf_last_error,
    .idle = lf_idle,
    .spool_stats = lf_spool_stats,
};

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                               */

/* An empty string counts as not given, as an empty variable does (weft__env): an empty key
 * is a missing key, refused here rather than answered by a 401 later. */
static const char *
pick(const char *given, const char *env1, const char *env2)
{
    const char *v = given != NULL && given[0] != '\0' ? given : NULL;

    if (v == NULL) {
        v = weft__env(env1);
    }
    if (v == NULL && env2 != NULL) {
        v = weft__env(env2);
    }
    return v;
}

bool
weft_langfuse_configured(void)
{
    return weft__env("LANGFUSE_PUBLIC_KEY") != NULL || weft__env("LANGFUSE_SECRET_KEY") != NULL ||
           weft__env("LANGFUSE_HOST") != NULL || weft__env("LANGFUSE_BASE_URL") != NULL;
}

/* Langfuse's rule for environments: at most 40 of [a-z0-9-_], not starting with "langfuse". */
static bool
is_valid_environment(const char *env)
{
    size_t len = strlen(env);

    if (len == 0 || len > MAX_ENVIRONMENT_LENGTH || strncmp(env, "langfuse", 8) == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = env[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
            return false;
        }
    }
    return true;
}

static weft_err
check_config(const struct weft_langfuse_options *o,
             const char *host,
             const char *pk,
             const char *sk,
             const char *environment,
             double *rate)
{
    const char *rate_text = weft__env("LANGFUSE_SAMPLE_RATE");

    if (pk == NULL || sk == NULL) {
        WEFT_LOG(WEFT_LOG_ERROR,
                 "Langfuse: %s: set both LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY (the key "
                 "pair of a Langfuse project), or neither to run without Langfuse",
                 pk == NULL && sk == NULL
                     ? "LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY are not set"
                 : pk == NULL ? "LANGFUSE_PUBLIC_KEY is not set"
                              : "LANGFUSE_SECRET_KEY is not set");
        return WEFT_EINVAL;
    }
    if (strncmp(pk, "sk-", 3) == 0 && strncmp(sk, "pk-", 3) == 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "Langfuse: the keys look swapped: LANGFUSE_PUBLIC_KEY holds an "
                                 "sk-... key and LANGFUSE_SECRET_KEY a pk-... key");
        return WEFT_EINVAL;
    }
    if (strncasecmp(host, "http://", 7) != 0 && strncasecmp(host, "https://", 8) != 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "Langfuse: LANGFUSE_HOST=%s: expected an http:// or https:// URL",
                 host);
        return WEFT_EINVAL;
    }
    if (environment != NULL && !is_valid_environment(environment)) {
        WEFT_LOG(WEFT_LOG_ERROR,
                 "Langfuse: LANGFUSE_ENVIRONMENT=%s: expected at most 40 characters of a-z, 0-9, "
                 "'-' and '_', not starting with 'langfuse'",
                 environment);
        return WEFT_EINVAL;
    }
    *rate = 1.0;
    if (o->sample_rate_set) {
        *rate = o->sample_rate;
    } else if (rate_text != NULL) {
        char *end = NULL;
        *rate = strtod(rate_text, &end);
        if (end == rate_text || *end != '\0') {
            *rate = -1;
        }
    }
    if (!(*rate >= 0.0 && *rate <= 1.0)) {
        WEFT_LOG(WEFT_LOG_ERROR, "Langfuse: LANGFUSE_SAMPLE_RATE: expected a number in [0, 1]");
        return WEFT_EINVAL;
    }
    return WEFT_OK;
}

static weft_err
make_transport(const struct weft_langfuse_options *o,
               const char *host,
               const char *pk,
               const char *sk,
               bool is_scores,
               struct weft__otlp_transport **out)
{
    static const char *const span_headers[] = {"x-langfuse-ingestion-version: 4"};
    struct weft__otlp_transport_config cfg;
    struct weft_otlp_options oo;
    char url[2048];
    size_t host_len = strlen(host);

    while (host_len > 0 && host[host_len - 1] == '/') {
        host_len--;
    }
    snprintf(url, sizeof(url), "%.*s/api/public/%s", (int)host_len, host,
             is_scores ? "scores" : "otel/v1/traces");
    memset(&cfg, 0, sizeof(cfg));
    cfg.path = "";
    cfg.signal_endpoint = url;
    cfg.log_name = is_scores ? "Langfuse scores" : "Langfuse";
    cfg.basic_user = pk;
    cfg.basic_password = sk;
    if (!is_scores) {
        cfg.extra_headers = span_headers;
        cfg.extra_header_count = 1;
    }
    memset(&oo, 0, sizeof(oo));
    oo.protocol_set = true;
    oo.protocol = is_scores || o->protocol_json ? WEFT_OTLP_HTTP_JSON : WEFT_OTLP_HTTP_PROTOBUF;
    oo.compression = is_scores ? 1 : 2; /* scores are a few hundred bytes */
    oo.timeout_ms = o->timeout_ms;
    oo.max_retry_ms = o->max_retry_ms;
    oo.initial_backoff_ms = o->initial_backoff_ms;
    oo.spool = o->spool;
    oo.spool_dir = o->spool_dir;
    oo.spool_max_bytes = o->spool_max_bytes;
    if (!is_scores) {
        cfg.spool_kind = "langfuse";
    }
    oo.user_agent = "weft/" WEFT_VERSION_STRING " (Langfuse)";
    return weft__otlp_transport_new(&cfg, &oo, out);
}

weft_err
weft_langfuse_exporter_new(const struct weft_langfuse_options *opts, struct weft_exporter **out)
{
    static const struct weft_langfuse_options defaults;
    const struct weft_langfuse_options *o = opts != NULL ? opts : &defaults;
    const char *host = pick(o->host, "LANGFUSE_HOST", "LANGFUSE_BASE_URL");
    const char *pk = pick(o->public_key, "LANGFUSE_PUBLIC_KEY", NULL);
    const char *sk = pick(o->secret_key, "LANGFUSE_SECRET_KEY", NULL);
    const char *environment =
        pick(o->environment, "LANGFUSE_ENVIRONMENT", "LANGFUSE_TRACING_ENVIRONMENT");
    const char *release = pick(o->release, "LANGFUSE_RELEASE", NULL);
    const char *protocol = weft__env("WEFT_LANGFUSE_PROTOCOL");
    struct weft_langfuse_options eff = *o;
    struct langfuse *x = NULL;
    double rate = 1.0;
    weft_err err = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (host == NULL) {
        host = DEFAULT_HOST;
    }
    err = check_config(o, host, pk, sk, environment, &rate);
    if (err != WEFT_OK) {
        return err;
    }
    if (protocol != NULL && strcmp(protocol, "http/json") == 0) {
        eff.protocol_json = true;
    }
    x = weft__calloc(1, sizeof(*x));
    if (x == NULL) {
        return WEFT_ENOMEM;
    }
    x->sample_rate = rate;
    x->is_scoring = !o->disable_scores && weft__env_bool("WEFT_LANGFUSE_SCORES", true);
    /* The limits: the option, else the environment (bad values warn and keep the default). */
    x->max_value = o->max_value_bytes != 0
                       ? o->max_value_bytes
                       : (size_t)weft__env_u64("WEFT_LANGFUSE_MAX_VALUE_BYTES", DEFAULT_MAX_VALUE,
                                               256, 1u << 30);
    x->max_request = o->max_request_bytes != 0
                         ? o->max_request_bytes
                         : (size_t)weft__env_u64("WEFT_LANGFUSE_MAX_REQUEST_BYTES",
                                                 DEFAULT_MAX_REQUEST, 4096, 64u << 20);
    x->max_spans = o->max_spans_per_trace != 0 ? o->max_spans_per_trace
                                               : weft__env_u64("WEFT_LANGFUSE_MAX_SPANS_PER_TRACE",
                                                               DEFAULT_MAX_SPANS, 1, UINT32_MAX);
    weft__buf_init(&x->body, x->max_request);
    x->slots = weft__calloc(SPLIT_SLOTS, sizeof(*x->slots));
    x->host = weft__strdup(host);
    x->environment = environment != NULL ? weft__strdup(environment) : NULL;
    x->release = release != NULL ? weft__strdup(release) : NULL;
    if (x->slots == NULL || x->host == NULL || (environment != NULL && x->environment == NULL) ||
        (release != NULL && x->release == NULL)) {
        err = WEFT_ENOMEM;
    }
    if (err == WEFT_OK) {
        err = make_transport(&eff, host, pk, sk, false, &x->spans);
    }
    if (err == WEFT_OK) {
        err = make_transport(&eff, host, pk, sk, true, &x->scores);
    }
    if (err != WEFT_OK) {
        lf_destroy(x);
        return err;
    }
    return weft_exporter_new(&langfuse_ops, x, out);
}

void
weft_langfuse_exporter_stats(const struct weft_exporter *exporter, struct weft_langfuse_stats *out)
{
    const struct langfuse *x = weft__exporter_self(exporter, &langfuse_ops);
    struct weft_otlp_stats st;

    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (x == NULL) {
        return;
    }
    weft__otlp_transport_stats(x->spans, &st);
    out->spans_sent = atomic_load(&x->n_sent);
    out->spans_sampled_out = atomic_load(&x->n_sampled_out);
    out->spans_dropped = atomic_load(&x->n_dropped);
    out->values_truncated = atomic_load(&x->n_truncated);
    out->traces_split = atomic_load(&x->n_split);
    out->requests = st.requests;
    out->scores_sent = atomic_load(&x->n_scores_sent);
    out->scores_failed = atomic_load(&x->n_scores_failed);
    out->is_stopped = atomic_load(&x->is_stopped);
}
