/* exporters/tail.c - the run buffer of tail sampling (include/weft/sampling.h): an exporter
 * that wraps another and holds each trace's spans until the trace's local root span brings
 * the decision (weft.sampling.decision), then sends them on or drops them.
 *
 * Held spans are kept encoded as OTLP protobuf ExportTraceServiceRequests, one appended per
 * export call: a view is valid only for its call, protobuf is the most compact form weft
 * writes (about 430 bytes a span with ten attributes), and concatenated requests are one
 * valid request (repeated fields merge), so a trace's bytes decode in one pass when it is
 * released. Past max_memory_bytes the largest held trace is appended to an unlinked spill file
 * (nothing is left behind by a crash); past max_spill_bytes the oldest undecided trace is sent
 * on whole as kept ("overflow"): a bound never drops a run that may be the failed one.
 * Decisions are remembered (bounded, first in first out) so that spans ending after their
 * root follow it.
 *
 * Threads: export_batch, force_flush and shutdown run on the processor's export thread (one at
 * a time); only the counters of struct weft_tail are shared, as atomics.
 * Invariants: a trace id is in at most one of held and decided; mem_bytes is the sum of the
 * held traces' in-memory bytes and spill_live the sum of their spilled bytes.
 */
#include "base/buf.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "otlp_decode.h"
#include "otlp_encode.h"
#include "tracing/exporter.h"

#include "base/time.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/sampling.h>

#define DEFAULT_MEMORY    (64u * 1024 * 1024)
#define DEFAULT_SPILL     (1024ull * 1024 * 1024)
#define DEFAULT_DECISIONS 65536u
#define FORWARD_CHUNK     512 /* spans per call to the wrapped exporter (OTEL_BSP default) */
#define DEFAULT_WAIT_MS   5000u
#define DEFAULT_TRACES    50000u
#define MAX_RULE_COUNTS   40
#define NO_ROOT_FACTOR    6              /* no root: decide after this many waits of silence */
#define NO_ROOT_MIN_NS    30000000000ull /* ... and at least 30 s */
#define LOOKUP_EVERY_NS   1000000000ull  /* held traces asked about others' decisions */
#define LOOKUP_BATCH      512

struct weft_tail {
    atomic_size_t refs;
    struct weft_tail_options opts;
    char *spill_dir;
    atomic_uint_fast64_t traces_held, spans_held, bytes_held, bytes_spilled, spans_spilled;
    atomic_uint_fast64_t spans_kept, spans_sampled_out, spans_failed, traces_forced;
    atomic_uint_fast64_t traces_kept, traces_dropped, traces_early;
    pthread_mutex_t rules_lock; /* guards rules and rule_count */
    struct weft_tail_rule_count rules[MAX_RULE_COUNTS];
    size_t rule_count;
    struct gauge_ctx *gauges; /* weft_tail_observe()'s callback contexts, or NULL */
};

struct segment {
    uint64_t off;
    size_t len;
};

struct held {
    uint8_t id[WEFT_TRACE_ID_SIZE];
    struct weft__buf mem; /* encoded requests not spilled, after the spilled ones */
    struct segment *segs; /* spilled requests, in order */
    size_t seg_count, seg_cap;
    size_t spilled;
    size_t spans;
    size_t mem_spans; /* of which in mem */
    uint64_t seq;     /* arrival order: overflow sends the oldest first */
    size_t pending;
    /* What the spans showed so far, for a policy buffer (observe()). */
    struct weft_sampling_facts facts;
    bool has_root, has_run_status, has_root_cost, has_error;
    uint64_t root_seen_ns, last_seen_ns; /* CLOCK_MONOTONIC */
    uint64_t min_start_ns, max_end_ns;
    double cost_sum;
};

/* Open addressing with linear probing keyed by trace id; deletion shifts back, so there are
 * no tombstones. The last eight bytes of a W3C trace id are random: they are the hash. */
struct idmap {
    struct slot {
        uint8_t id[WEFT_TRACE_ID_SIZE];
        uintptr_t val; /* 0: empty */
    } * slots;
    size_t cap; /* a power of two */
    size_t count;
};

struct wrapper {
    struct weft_exporter_ops ops; /* a copy named after the wrapped exporter */
    struct weft_tail *tail;
    struct weft_exporter *inner;
    struct idmap held;                    /* trace id -> struct held * */
    struct idmap decided;                 /* trace id -> 1 keep, 2 drop */
    uint8_t (*order)[WEFT_TRACE_ID_SIZE]; /* decided ids, oldest first (a ring) */
    size_t order_head;
    size_t mem_bytes;
    uint64_t spill_end, spill_live;
    int spill_fd;
    uint64_t seq;
    uint64_t next_due_ns;    /* no held trace is due before this (policy buffers) */
    uint64_t next_lookup_ns; /* the next lookup_others() */
    char last_error[256];
    /* scratch, reused across calls */
    const struct weft_span_data **fw;
    struct held **hold_of;
    const struct weft_span_data **group;
    size_t scratch_cap;
};

/* ------------------------------------------------------------------------------------------ */
/* idmap                                                                                       */

static size_t
id_hash(const uint8_t *id)
{
    uint64_t v = 0;

    for (int i = 8; i < 16; i++) {
        v = (v << 8) | id[i];
    }
    return (size_t)(v ^ (v >> 29));
}

static struct slot *
idmap_find(const struct idmap *m, const uint8_t *id)
{
    if (m->cap == 0) {
        return NULL;
    }
    for (size_t i = id_hash(id) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->slots[i].val == 0) {
            return NULL;
        }
        if (memcmp(m->slots[i].id, id, WEFT_TRACE_ID_SIZE) == 0) {
            return &m->slots[i];
        }
    }
}

static uintptr_t
idmap_get(const struct idmap *m, const uint8_t *id)
{
    const struct slot *s = idmap_find(m, id);

    return s != NULL ? s->val : 0;
}

static weft_err
idmap_grow(struct idmap *m)
{
    size_t cap = m->cap == 0 ? 64 : m->cap * 2;
    struct slot *slots = weft__calloc(cap, sizeof(*slots));

    if (slots == NULL) {
        return WEFT_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].val != 0) {
            size_t j = id_hash(m->slots[i].id) & (cap - 1);

            while (slots[j].val != 0) {
                j = (j + 1) & (cap - 1);
            }
            slots[j] = m->slots[i];
        }
    }
    weft__free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return WEFT_OK;
}

static weft_err
idmap_put(struct idmap *m, const uint8_t *id, uintptr_t val)
{
    struct slot *s = idmap_find(m, id);
    size_t i = 0;

    if (s != NULL) {
        s->val = val;
        return WEFT_OK;
    }
    if ((m->count + 1) * 4 > m->cap * 3 && idmap_grow(m) != WEFT_OK) {
        return WEFT_ENOMEM;
    }
    for (i = id_hash(id) & (m->cap - 1); m->slots[i].val != 0; i = (i + 1) & (m->cap - 1)) {
    }
    memcpy(m->slots[i].id, id, WEFT_TRACE_ID_SIZE);
    m->slots[i].val = val;
    m->count++;
    return WEFT_OK;
}

static uintptr_t
idmap_take(struct idmap *m, const uint8_t *id)
{
    struct slot *s = idmap_find(m, id);
    uintptr_t val = 0;
    size_t hole = 0;

    if (s == NULL) {
        return 0;
    }
    val = s->val;
    hole = (size_t)(s - m->slots);
    s->val = 0;
    m->count--;
    /* Shift back the entries of the run after the hole that probed past it. */
    for (size_t j = (hole + 1) & (m->cap - 1); m->slots[j].val != 0; j = (j + 1) & (m->cap - 1)) {
        size_t home = id_hash(m->slots[j].id) & (m->cap - 1);
        bool is_between = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);

        if (!is_between) {
            m->slots[hole] = m->slots[j];
            m->slots[j].val = 0;
            hole = j;
        }
    }
    return val;
}

/* ------------------------------------------------------------------------------------------ */
/* held traces                                                                                 */

static void
held_free(struct held *h)
{
    if (h == NULL) {
        return;
    }
    weft__buf_cleanup(&h->mem);
    weft__free(h->segs);
    weft__free(h);
}

/* Forget @p h's counts in the gauges and the wrapper's totals. */
static void
unaccount(struct wrapper *w, const struct held *h)
{
    struct weft_tail *t = w->tail;

    w->mem_bytes -= h->mem.len;
    w->spill_live -= h->spilled;
    atomic_fetch_sub(&t->traces_held, 1);
    atomic_fetch_sub(&t->spans_held, h->spans);
    atomic_fetch_sub(&t->bytes_held, h->mem.len);
    atomic_fetch_sub(&t->bytes_spilled, h->spilled);
    if (w->spill_live == 0 && w->spill_end > 0) {
        /* Nothing spilled is alive: the file starts over. */
        if (ftruncate(w->spill_fd, 0) == 0) {
            w->spill_end = 0;
        }
    }
}

static bool
open_spill(struct wrapper *w)
{
    char path[PATH_MAX];

    if (w->spill_fd >= 0) {
        return true;
    }
    snprintf(path, sizeof(path), "%s/weft-tail-XXXXXX", w->tail->spill_dir);
    w->spill_fd = mkstemp(path);
    if (w->spill_fd < 0) {
        WEFT_LOG(WEFT_LOG_WARN, "tail sampling: cannot create a spill file in %s: %s",
                 w->tail->spill_dir, strerror(errno));
        return false;
    }
    (void)unlink(path); /* anonymous: freed with the descriptor, even after a crash */
    return true;
}

/* Move @p h's in-memory bytes to the spill file. */
static bool
spill(struct wrapper *w, struct held *h)
{
    struct weft_tail *t = w->tail;
    size_t done = 0;

    if (h->mem.len == 0 || !open_spill(w)) {
        return false;
    }
    if (h->seg_count == h->seg_cap) {
        size_t cap = h->seg_cap == 0 ? 4 : h->seg_cap * 2;
        struct segment *segs = weft__realloc(h->segs, cap * sizeof(*segs));

        if (segs == NULL) {
            return false;
        }
        h->segs = segs;
        h->seg_cap = cap;
    }
    while (done < h->mem.len) {
        ssize_t n = pwrite(w->spill_fd, h->mem.data + done, h->mem.len - done,
                           (off_t)(w->spill_end + done));

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            WEFT_LOG(WEFT_LOG_WARN, "tail sampling: spill write failed: %s",
                     n < 0 ? strerror(errno) : "no space");
            return false;
        }
        done += (size_t)n;
    }
    h->segs[h->seg_count++] = (struct segment){w->spill_end, h->mem.len};
    w->spill_end += h->mem.len;
    w->spill_live += h->mem.len;
    h->spilled += h->mem.len;
    w->mem_bytes -= h->mem.len;
    atomic_fetch_add(&t->bytes_spilled, h->mem.len);
    atomic_fetch_sub(&t->bytes_held, h->mem.len);
    atomic_fetch_add(&t->spans_spilled, h->mem_spans);
    h->mem_spans = 0;
    weft__buf_reset(&h->mem);
    return true;
}

/* The trace's encoded requests, spilled ones first, in one buffer. */
static bool
gather(struct wrapper *w, const struct held *h, struct weft__buf *out)
{
    if (weft__buf_reserve(out, h->spilled + h->mem.len) != WEFT_OK) {
        return false;
    }
    for (size_t i = 0; i < h->seg_count; i++) {
        size_t done = 0;

        while (done < h->segs[i].len) {
            ssize_t n = pread(w->spill_fd, out->data + out->len + done, h->segs[i].len - done,
                              (off_t)(h->segs[i].off + done));

            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                return false;
            }
            done += (size_t)n;
        }
        out->len += h->segs[i].len;
    }
    return weft__buf_append(out, h->mem.data, h->mem.len) == WEFT_OK;
}

static void
remember_error(struct wrapper *w, weft_err err)
{
    struct weft_exporter *inner = w->inner;

    if (inner->ops->last_error == NULL ||
        inner->ops->last_error(inner->self, w->last_error, sizeof(w->last_error)) == 0) {
        snprintf(w->last_error, sizeof(w->last_error), "%s", weft_strerror(err));
    }
}

/* Hand @p n views to the wrapped exporter in chunks; count what it took and what it did not. */
static void
forward(struct wrapper *w, const struct weft_span_data *const *views, size_t n, uint64_t deadline)
{
    struct weft_tail *t = w->tail;

    for (size_t i = 0; i < n; i += FORWARD_CHUNK) {
        size_t k = n - i < FORWARD_CHUNK ? n - i : FORWARD_CHUNK;
        struct weft_export_result res = {0};
        weft_err err = w->inner->ops->export_batch(w->inner->self, views + i, k, deadline, &res);

        if (err == WEFT_OK) {
            uint64_t rejected = res.rejected > k ? k : res.rejected;

            /* Spooled spans count as kept: the exporter sends them once its endpoint answers
             * (its spool counters say what becomes of them). */
            atomic_fetch_add(&t->spans_kept, k - rejected);
            atomic_fetch_add(&t->spans_failed, rejected);
        } else {
            atomic_fetch_add(&t->spans_failed, k);
            remember_error(w, err);
            WEFT_LOG(WEFT_LOG_WARN, "exporter %s: %zu kept spans failed: %s", w->ops.name, k,
                     w->last_error);
        }
    }
}

/* Send a held trace on (it was kept); frees it. */
static void
release(struct wrapper *w, struct held *h, uint64_t deadline)
{
    struct weft__buf bytes;
    struct weft__otlp_batch batch;
    size_t spans = h->spans;
    char why[128] = "";
    weft_err err = WEFT_OK;

    weft__buf_init(&bytes, 0);
    weft__otlp_batch_init(&batch, SIZE_MAX / 4);
    if (!gather(w, h, &bytes)) {
        err = WEFT_EIO;
        snprintf(why, sizeof(why), "a held trace could not be read back");
    }
    unaccount(w, h); /* after gather: the spill file may start over once nothing lives in it */
    if (err == WEFT_OK) {
        err = weft__otlp_decode_proto((const uint8_t *)bytes.data, bytes.len, &batch, why,
                                      sizeof(why));
    }
    if (err == WEFT_OK) {
        forward(w, batch.spans, batch.count, deadline);
    } else {
        atomic_fetch_add(&w->tail->spans_failed, spans);
        snprintf(w->last_error, sizeof(w->last_error), "tail sampling: %s",
                 why[0] != '\0' ? why : weft_strerror(err));
        WEFT_LOG(WEFT_LOG_ERROR, "exporter %s: %zu held spans lost: %s", w->ops.name, spans,
                 w->last_error);
    }
    weft__otlp_batch_cleanup(&batch);
    weft__buf_cleanup(&bytes);
    held_free(h);
}

/* Count a decision under its rule. */
static void
count_decision(struct weft_tail *t, bool keep, const char *rule)
{
    size_t i = 0;

    atomic_fetch_add(keep ? &t->traces_kept : &t->traces_dropped, 1);
    pthread_mutex_lock(&t->rules_lock);
    for (i = 0; i < t->rule_count; i++) {
        if (strcmp(t->rules[i].rule, rule) == 0) {
            break;
        }
    }
    if (i == t->rule_count && i < MAX_RULE_COUNTS) {
        snprintf(t->rules[i].rule, sizeof(t->rules[i].rule), "%s", rule);
        t->rule_count++;
    }
    if (i < t->rule_count) {
        if (keep) {
            t->rules[i].kept++;
        } else {
            t->rules[i].dropped++;
        }
    }
    pthread_mutex_unlock(&t->rules_lock);
}

/* Remember a decision; the oldest is forgotten past max_decisions. */
static void
remember(struct wrapper *w, const uint8_t *id, bool keep)
{
    size_t max = w->tail->opts.max_decisions;

    if (idmap_get(&w->decided, id) != 0) {
        return;
    }
    if (w->decided.count >= max) {
        (void)idmap_take(&w->decided, w->order[w->order_head]);
    }
    if (idmap_put(&w->decided, id, keep ? 1 : 2) == WEFT_OK) {
        memcpy(w->order[w->order_head], id, WEFT_TRACE_ID_SIZE);
        w->order_head = (w->order_head + 1) % max;
    }
}

static void decide_by_policy(struct wrapper *w, struct held *h, uint64_t deadline);

/* The oldest held trace, sent on as kept: the spill bound was reached. */
static void
force_oldest(struct wrapper *w, uint64_t deadline, const char *why)
{
    struct held *oldest = NULL;

    for (size_t i = 0; i < w->held.cap; i++) {
        struct held *h = (struct held *)w->held.slots[i].val;

        if (h != NULL && (oldest == NULL || h->seq < oldest->seq)) {
            oldest = h;
        }
    }
    if (oldest == NULL) {
        return;
    }
    if (w->tail->opts.policy != NULL) {
        /* A deciding buffer decides it now, from what it has, rather than keep it blindly. */
        atomic_fetch_add(&w->tail->traces_early, 1);
        (void)idmap_take(&w->held, oldest->id);
        decide_by_policy(w, oldest, deadline);
        return;
    }
    WEFT_LOG(WEFT_LOG_WARN, "exporter %s: tail sampling: a trace of %zu spans sent undecided (%s)",
             w->ops.name, oldest->spans, why);
    atomic_fetch_add(&w->tail->traces_forced, 1);
    (void)idmap_take(&w->held, oldest->id);
    remember(w, oldest->id, true);
    release(w, oldest, deadline);
}

/* Keep memory and spill within their bounds. */
static void
enforce_bounds(struct wrapper *w, uint64_t deadline)
{
    const struct weft_tail_options *o = &w->tail->opts;

    while (w->mem_bytes > o->max_memory_bytes) {
        struct held *largest = NULL;

        for (size_t i = 0; i < w->held.cap; i++) {
            struct held *h = (struct held *)w->held.slots[i].val;

            if (h != NULL && (largest == NULL || h->mem.len > largest->mem.len)) {
                largest = h;
            }
        }
        if (largest == NULL || !spill(w, largest)) {
            force_oldest(w, deadline, "memory bound reached and the spill file is unusable");
            continue;
        }
    }
    while (w->spill_live > o->max_spill_bytes && w->held.count > 0) {
        force_oldest(w, deadline, "spill bound reached");
    }
}

/* ------------------------------------------------------------------------------------------ */
/* deciding at ingest                                                                          */

static double
attr_double(const struct weft_span_data *s, const char *key, bool *has)
{
    const struct weft_value *v = weft_span_data_attr(s, key);

    *has = v != NULL && (v->type == WEFT_VALUE_DOUBLE || v->type == WEFT_VALUE_INT);
    if (!*has) {
        return 0;
    }
    return v->type == WEFT_VALUE_DOUBLE ? v->u.d : (double)v->u.i;
}

static bool
attr_is(const struct weft_span_data *s, const char *key, const char *value)
{
    const struct weft_value *v = weft_span_data_attr(s, key);

    return v != NULL && v->type == WEFT_VALUE_STRING && v->u.str != NULL &&
           strcmp(v->u.str, value) == 0;
}

/* What one span tells the policy about its trace: an ERROR status, a stuck-loop event, a
 * correction, a REJECTED verdict, cost; the root (no parent) brings the run's own figures
 * when a weft run sent it (weft.run.status, .reward, .ps.corrections, weft.cost.usd). */
static void
observe(struct held *h, const struct weft_span_data *s, uint64_t now)
{
    bool has = false;
    double v = 0;

    h->last_seen_ns = now;
    if (h->min_start_ns == 0 || s->start_time_ns < h->min_start_ns) {
        h->min_start_ns = s->start_time_ns;
    }
    if (s->end_time_ns > h->max_end_ns) {
        h->max_end_ns = s->end_time_ns;
    }
    h->has_error |= s->status_code == WEFT_STATUS_ERROR;
    for (size_t i = 0; i < s->event_count; i++) {
        h->facts.is_stuck |= strcmp(s->events[i].name, "weft.stuck_loop") == 0;
    }
    h->facts.is_corrected |= strncmp(s->name, "correct ", 8) == 0;
    h->facts.is_rejected |= attr_is(s, "weft.reflection.verdict", "REJECTED");
    v = attr_double(s, "weft.cost.usd", &has);
    if (s->has_parent) {
        h->cost_sum += has ? v : 0;
        return;
    }
    h->has_root = true;
    h->root_seen_ns = now;
    h->facts.duration_s = (double)(s->end_time_ns - s->start_time_ns) / 1e9;
    if (has) {
        h->has_root_cost = true;
        h->facts.cost_usd = v;
    }
    if (weft_span_data_attr(s, "weft.run.status") != NULL) {
        h->has_run_status = true;
        h->facts.is_completed = attr_is(s, "weft.run.status", "completed");
        h->facts.is_stuck |= attr_is(s, "weft.run.status", "stuck");
    }
    v = attr_double(s, "weft.run.reward", &has);
    if (has) {
        h->facts.has_reward = true;
        h->facts.reward = v;
    }
    h->facts.is_corrected |= attr_double(s, "weft.run.ps.corrections", &has) > 0;
}

/* Settle trace @p id (@p h: what is held of it, taken out of held, or NULL) as @p keep under
 * @p rule: claimed in the shared record first when there is one (@p is_claim), whose standing
 * decision wins, then remembered, counted, and the held spans sent on or dropped. */
static void
apply_decision(struct wrapper *w,
               const uint8_t *id,
               struct held *h,
               bool keep,
               const char *rule,
               bool is_claim,
               uint64_t deadline)
{
    struct weft_tail *t = w->tail;
    const struct weft_tail_coordinator *c = t->opts.coordinator;
    char standing[48];

    snprintf(standing, sizeof(standing), "%s", rule);
    if (is_claim && c != NULL && c->claim != NULL) {
        char hex[2 * WEFT_TRACE_ID_SIZE + 1];
        bool standing_keep = keep;

        weft_hex_encode(id, WEFT_TRACE_ID_SIZE, hex);
        if (c->claim(c->user_data, hex, keep, rule, &standing_keep, standing, sizeof(standing))) {
            keep = standing_keep;
        }
    }
    remember(w, id, keep);
    count_decision(t, keep, standing);
    if (h == NULL) {
        return;
    }
    if (keep) {
        release(w, h, deadline);
        return;
    }
    atomic_fetch_add(&t->spans_sampled_out, h->spans);
    unaccount(w, h);
    held_free(h);
}

/* When @p h is due for a decision (CLOCK_MONOTONIC ns). */
static uint64_t
due_ns(const struct wrapper *w, const struct held *h)
{
    uint64_t wait = (uint64_t)w->tail->opts.decision_wait_ms * 1000000u;
    uint64_t silence =
        wait * NO_ROOT_FACTOR > NO_ROOT_MIN_NS ? wait * NO_ROOT_FACTOR : NO_ROOT_MIN_NS;

    return h->has_root ? h->root_seen_ns + wait : h->last_seen_ns + silence;
}

/* Decide @p h (taken out of held) by the policy from what its spans showed, and send it on
 * or drop it. */
static void
decide_by_policy(struct wrapper *w, struct held *h, uint64_t deadline)
{
    struct weft_tail *t = w->tail;
    const char *rule = NULL;
    bool keep = false;

    memcpy(h->facts.trace_id, h->id, WEFT_TRACE_ID_SIZE);
    if (!h->has_run_status) {
        h->facts.is_completed = !h->has_error; /* not a weft run: an ERROR span failed it */
    }
    if (!h->has_root) {
        h->facts.duration_s = (double)(h->max_end_ns - h->min_start_ns) / 1e9;
    }
    if (!h->has_root_cost) {
        h->facts.cost_usd = h->cost_sum;
    }
    keep = weft_sampling_decide(t->opts.policy, &h->facts, &rule);
    apply_decision(w, h->id, h, keep, rule, true, deadline);
}

struct found_ctx {
    struct wrapper *w;
    const uint8_t (*ids)[WEFT_TRACE_ID_SIZE];
    uint64_t deadline;
};

/* Another process decided a trace held here: follow it (no claim: it stands). */
static void
on_found(void *ctx, size_t index, bool keep, const char *rule)
{
    struct found_ctx *f = ctx;
    struct held *h = (struct held *)idmap_take(&f->w->held, f->ids[index]);

    if (h != NULL) {
        apply_decision(f->w, f->ids[index], h, keep, rule, false, f->deadline);
    }
}

/* Once a second: ask the shared record about held traces (at most LOOKUP_BATCH, oldest first
 * in slot order), so that spans of a trace whose root reached another process follow its
 * decision there. */
static void
lookup_others(struct wrapper *w, uint64_t now, uint64_t deadline)
{
    const struct weft_tail_coordinator *c = w->tail->opts.coordinator;
    uint8_t(*ids)[WEFT_TRACE_ID_SIZE] = NULL;
    char(*hex)[2 * WEFT_TRACE_ID_SIZE + 1] = NULL;
    const char **list = NULL;
    size_t n = 0;

    if (c == NULL || c->lookup == NULL || w->held.count == 0 || now < w->next_lookup_ns) {
        return;
    }
    w->next_lookup_ns = now + LOOKUP_EVERY_NS;
    ids = weft__calloc(LOOKUP_BATCH, sizeof(*ids));
    hex = weft__calloc(LOOKUP_BATCH, sizeof(*hex));
    list = weft__calloc(LOOKUP_BATCH, sizeof(*list));
    for (size_t i = 0;
         ids != NULL && hex != NULL && list != NULL && i < w->held.cap && n < LOOKUP_BATCH; i++) {
        if (w->held.slots[i].val != 0) {
            memcpy(ids[n], w->held.slots[i].id, WEFT_TRACE_ID_SIZE);
            weft_hex_encode(ids[n], WEFT_TRACE_ID_SIZE, hex[n]);
            list[n] = hex[n];
            n++;
        }
    }
    if (n > 0) {
        struct found_ctx f = {w, (const uint8_t(*)[WEFT_TRACE_ID_SIZE])ids, deadline};

        c->lookup(c->user_data, list, n, on_found, &f);
    }
    weft__free(ids);
    weft__free(hex);
    weft__free(list);
}

/* Decide every held trace whose wait is over (@p is_all: every one: the process stops). */
static void
decide_due(struct wrapper *w, uint64_t deadline, bool is_all)
{
    uint64_t now = weft__monotonic_ns();
    uint64_t next = UINT64_MAX;

    if (w->tail->opts.policy == NULL) {
        return;
    }
    lookup_others(w, now, deadline);
    if (!is_all && now < w->next_due_ns) {
        return;
    }
    for (size_t i = 0; i < w->held.cap;) {
        struct held *h = (struct held *)w->held.slots[i].val;
        uint64_t due = h != NULL ? due_ns(w, h) : 0;

        if (h == NULL || (!is_all && due > now)) {
            next = h != NULL && due < next ? due : next;
            i++;
            continue;
        }
        /* Taking it out may shift a later entry into slot i: look at slot i again. An entry
         * shifted from before i (wrapping around) is seen on the next call. */
        (void)idmap_take(&w->held, h->id);
        decide_by_policy(w, h, deadline);
    }
    w->next_due_ns = next;
}

/* Past max_traces, the oldest undecided trace is decided now from the spans it has. */
static void
decide_oldest_early(struct wrapper *w, uint64_t deadline)
{
    struct held *oldest = NULL;

    for (size_t i = 0; i < w->held.cap; i++) {
        struct held *h = (struct held *)w->held.slots[i].val;

        if (h != NULL && (oldest == NULL || h->seq < oldest->seq)) {
            oldest = h;
        }
    }
    if (oldest != NULL) {
        atomic_fetch_add(&w->tail->traces_early, 1);
        (void)idmap_take(&w->held, oldest->id);
        decide_by_policy(w, oldest, deadline);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* exporter ops                                                                                */

static bool
is_local_root(const struct weft_span_data *s)
{
    return !s->has_parent || s->parent_is_remote;
}

/* "keep" -> 1, "drop" -> 2, else 0 (no decision on this span). */
static uintptr_t
decision_of(const struct weft_span_data *s)
{
    const struct weft_value *v = NULL;

    if (!is_local_root(s)) {
        return 0;
    }
    v = weft_span_data_attr(s, WEFT_SAMPLING_DECISION_ATTR);
    if (v == NULL || v->type != WEFT_VALUE_STRING || v->u.str == NULL) {
        return 0;
    }
    return strcmp(v->u.str, "keep") == 0 ? 1 : strcmp(v->u.str, "drop") == 0 ? 2 : 0;
}

/* The rule a carried decision names (weft.sampling.rule), for the counts by rule. */
static const char *
rule_of(const struct weft_span_data *s)
{
    const struct weft_value *v = weft_span_data_attr(s, WEFT_SAMPLING_RULE_ATTR);

    return v != NULL && v->type == WEFT_VALUE_STRING && v->u.str != NULL ? v->u.str : "decided";
}

static bool
scratch(struct wrapper *w, size_t n)
{
    if (n <= w->scratch_cap) {
        return true;
    }
    weft__free(w->fw);
    weft__free(w->hold_of);
    weft__free(w->group);
    w->fw = weft__calloc(n, sizeof(*w->fw));
    w->hold_of = weft__calloc(n, sizeof(*w->hold_of));
    w->group = weft__calloc(n, sizeof(*w->group));
    w->scratch_cap = w->fw != NULL && w->hold_of != NULL && w->group != NULL ? n : 0;
    return w->scratch_cap == n;
}

/* The held trace of @p id, created when new. */
static struct held *
held_get(struct wrapper *w, const uint8_t *id)
{
    struct held *h = (struct held *)idmap_get(&w->held, id);

    if (h != NULL) {
        return h;
    }
    h = weft__calloc(1, sizeof(*h));
    if (h == NULL) {
        return NULL;
    }
    memcpy(h->id, id, WEFT_TRACE_ID_SIZE);
    weft__buf_init(&h->mem, 0);
    h->seq = w->seq++;
    if (idmap_put(&w->held, id, (uintptr_t)h) != WEFT_OK) {
        held_free(h);
        return NULL;
    }
    atomic_fetch_add(&w->tail->traces_held, 1);
    return h;
}

/* Append the spans of this call that wait (hold_of[i] != NULL) to their traces, one encoded
 * request per trace. @return the spans that could not be held. */
static size_t
hold(struct wrapper *w, const struct weft_span_data *const *spans, size_t count)
{
    struct weft_tail *t = w->tail;
    size_t lost = 0;

    for (size_t i = 0; i < count; i++) {
        struct held *h = w->hold_of[i];
        size_t n = 0;
        size_t before = 0;

        if (h == NULL || h->pending == 0) {
            continue;
        }
        for (size_t j = i; j < count; j++) {
            if (w->hold_of[j] == h) {
                w->group[n++] = spans[j];
                w->hold_of[j] = NULL;
            }
        }
        h->pending = 0;
        before = h->mem.len;
        if (weft__otlp_encode_proto(w->group, n, &h->mem) != WEFT_OK) {
            weft__buf_truncate(&h->mem, before);
            lost += n;
            continue;
        }
        h->spans += n;
        h->mem_spans += n;
        w->mem_bytes += h->mem.len - before;
        atomic_fetch_add(&t->spans_held, n);
        atomic_fetch_add(&t->bytes_held, h->mem.len - before);
    }
    return lost;
}

static weft_err
tail_export(void *self,
            const struct weft_span_data *const *spans,
            size_t count,
            uint64_t deadline,
            struct weft_export_result *result)
{
    struct wrapper *w = self;
    struct weft_tail *t = w->tail;
    size_t nfw = 0;
    size_t lost = 0;
    uint64_t now = weft__monotonic_ns();

    (void)result;
    if (!scratch(w, count)) {
        snprintf(w->last_error, sizeof(w->last_error), "tail sampling: out of memory");
        return WEFT_ENOMEM;
    }
    /* Decisions first: a root ends after its children, often in the same batch. */
    for (size_t i = 0; i < count; i++) {
        uintptr_t d = decision_of(spans[i]);
        struct held *h = NULL;

        if (d == 0 || idmap_get(&w->decided, spans[i]->trace_id) != 0) {
            continue;
        }
        h = (struct held *)idmap_take(&w->held, spans[i]->trace_id);
        apply_decision(w, spans[i]->trace_id, h, d == 1, rule_of(spans[i]), t->opts.policy != NULL,
                       deadline);
    }
    for (size_t i = 0; i < count; i++) {
        uintptr_t d = idmap_get(&w->decided, spans[i]->trace_id);

        w->hold_of[i] = NULL;
        if (d == 1) {
            w->fw[nfw++] = spans[i];
        } else if (d == 2) {
            atomic_fetch_add(&t->spans_sampled_out, 1);
        } else {
            w->hold_of[i] = held_get(w, spans[i]->trace_id);
            if (w->hold_of[i] == NULL) {
                lost++;
            } else {
                w->hold_of[i]->pending++;
                if (t->opts.policy != NULL) {
                    uint64_t due = 0;

                    observe(w->hold_of[i], spans[i], now);
                    due = due_ns(w, w->hold_of[i]);
                    w->next_due_ns = due < w->next_due_ns ? due : w->next_due_ns;
                }
            }
        }
    }
    lost += hold(w, spans, count);
    if (lost > 0) {
        atomic_fetch_add(&t->spans_failed, lost);
        snprintf(w->last_error, sizeof(w->last_error), "tail sampling: %zu spans not held: %s",
                 lost, "out of memory");
        WEFT_LOG(WEFT_LOG_ERROR, "exporter %s: %s", w->ops.name, w->last_error);
    }
    forward(w, w->fw, nfw, deadline);
    enforce_bounds(w, deadline);
    if (t->opts.policy != NULL) {
        while (w->held.count > t->opts.max_traces) {
            decide_oldest_early(w, deadline);
        }
        decide_due(w, deadline, false);
    }
    return WEFT_OK;
}

static weft_err
tail_force_flush(void *self, uint64_t deadline)
{
    struct wrapper *w = self;

    return w->inner->ops->force_flush != NULL ? w->inner->ops->force_flush(w->inner->self, deadline)
                                              : WEFT_OK;
}

/* Undecided traces at shutdown are sent on as kept: their runs ended without a decision
 * (the process stops mid-run), and a run cut short is the one someone will look for. */
static weft_err
tail_shutdown(void *self, uint64_t deadline)
{
    struct wrapper *w = self;

    decide_due(w, deadline, true); /* a deciding buffer decides what it holds, as it stands */
    while (w->held.count > 0) {
        force_oldest(w, deadline, "shutdown before the run's end");
    }
    return w->inner->ops->shutdown != NULL ? w->inner->ops->shutdown(w->inner->self, deadline)
                                           : WEFT_OK;
}

static void
tail_destroy(void *self)
{
    struct wrapper *w = self;

    for (size_t i = 0; i < w->held.cap; i++) {
        struct held *h = (struct held *)w->held.slots[i].val;

        if (h != NULL) {
            atomic_fetch_add(&w->tail->spans_failed, h->spans);
            unaccount(w, h);
            held_free(h);
        }
    }
    weft__free(w->held.slots);
    weft__free(w->decided.slots);
    weft__free(w->order);
    weft__free(w->fw);
    weft__free(w->hold_of);
    weft__free(w->group);
    if (w->spill_fd >= 0) {
        close(w->spill_fd);
    }
    /* The processor shut the wrapper (and through it the wrapped exporter) down already. */
    if (w->inner->ops->destroy != NULL) {
        w->inner->ops->destroy(w->inner->self);
    }
    weft__free(w->inner);
    weft_tail_unref(w->tail);
    weft__free(w);
}

/* The wrapped exporter's background work (an OTLP exporter sends its spool) and spool
 * counters pass through: the buffer has none of its own. */
static bool
tail_idle(void *self, uint64_t deadline)
{
    struct wrapper *w = self;

    decide_due(w, deadline, false);
    return w->inner->ops->idle != NULL && w->inner->ops->idle(w->inner->self, deadline);
}

static void
tail_spool_stats(void *self, struct weft_spool_stats *out)
{
    struct wrapper *w = self;

    if (w->inner->ops->spool_stats != NULL) {
        w->inner->ops->spool_stats(w->inner->self, out);
    }
}

static size_t
tail_last_error(void *self, char *buf, size_t len)
{
    struct wrapper *w = self;

    if (w->last_error[0] == '\0') {
        return 0;
    }
    return (size_t)snprintf(buf, len, "%s", w->last_error);
}

/* ------------------------------------------------------------------------------------------ */
/* public API                                                                                  */

weft_err
weft_tail_new(const struct weft_tail_options *options, struct weft_tail **out)
{
    struct weft_tail *t = NULL;
    const char *dir = NULL;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    t = weft__calloc(1, sizeof(*t));
    if (t == NULL) {
        return WEFT_ENOMEM;
    }
    if (options != NULL) {
        t->opts = *options;
    }
    if (t->opts.max_memory_bytes == 0) {
        t->opts.max_memory_bytes =
            (size_t)weft__env_u64("WEFT_SAMPLING_MAX_MEMORY", DEFAULT_MEMORY, 1, SIZE_MAX / 4);
    }
    if (t->opts.max_spill_bytes == 0) {
        t->opts.max_spill_bytes =
            (size_t)weft__env_u64("WEFT_SAMPLING_MAX_SPILL", DEFAULT_SPILL, 0, SIZE_MAX / 4);
    }
    if (t->opts.max_decisions == 0) {
        t->opts.max_decisions = DEFAULT_DECISIONS;
    }
    if (t->opts.decision_wait_ms == 0) {
        t->opts.decision_wait_ms = DEFAULT_WAIT_MS;
    }
    if (t->opts.max_traces == 0) {
        t->opts.max_traces = DEFAULT_TRACES;
    }
    if (pthread_mutex_init(&t->rules_lock, NULL) != 0) {
        weft__free(t);
        return WEFT_ENOMEM;
    }
    dir = t->opts.spill_dir;
    if (dir == NULL || dir[0] == '\0') {
        dir = getenv("TMPDIR");
    }
    t->spill_dir = weft__strdup(dir != NULL && dir[0] != '\0' ? dir : "/tmp");
    if (t->spill_dir == NULL) {
        pthread_mutex_destroy(&t->rules_lock);
        weft__free(t);
        return WEFT_ENOMEM;
    }
    t->opts.spill_dir = t->spill_dir;
    atomic_init(&t->refs, 1);
    *out = t;
    return WEFT_OK;
}

void
weft_tail_unref(struct weft_tail *tail)
{
    if (tail == NULL || atomic_fetch_sub(&tail->refs, 1) != 1) {
        return;
    }
    pthread_mutex_destroy(&tail->rules_lock);
    weft__free(tail->gauges);
    weft__free(tail->spill_dir);
    weft__free(tail);
}

static const struct weft_exporter_ops tail_ops = {
    .name = "tail",
    .export_batch = tail_export,
    .force_flush = tail_force_flush,
    .shutdown = tail_shutdown,
    .destroy = tail_destroy,
    .last_error = tail_last_error,
    .idle = tail_idle,
    .spool_stats = tail_spool_stats,
};

weft_err
weft_tail_wrap(struct weft_tail *tail, struct weft_exporter *inner, struct weft_exporter **out)
{
    struct wrapper *w = NULL;

    if (out != NULL) {
        *out = NULL;
    }
    if (tail == NULL || inner == NULL || out == NULL) {
        weft_exporter_free(inner);
        return WEFT_EINVAL;
    }
    w = weft__calloc(1, sizeof(*w));
    if (w != NULL) {
        w->order = weft__calloc(tail->opts.max_decisions, sizeof(*w->order));
    }
    if (w == NULL || w->order == NULL) {
        weft__free(w);
        weft_exporter_free(inner);
        return WEFT_ENOMEM;
    }
    w->ops = tail_ops;
    w->ops.name = weft_exporter_name(inner); /* the processor and its stats read this name */
    if (inner->ops->idle == NULL && tail->opts.policy == NULL) {
        w->ops.idle = NULL;
    }
    if (inner->ops->spool_stats == NULL) {
        w->ops.spool_stats = NULL;
    }
    w->tail = tail;
    w->inner = inner;
    w->spill_fd = -1;
    w->next_due_ns = UINT64_MAX;
    atomic_fetch_add(&tail->refs, 1);
    return weft_exporter_new(&w->ops, w, out);
}

void
weft_tail_get_stats(const struct weft_tail *tail, struct weft_tail_stats *out)
{
    struct weft_tail *t = (struct weft_tail *)tail;

    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (t == NULL) {
        return;
    }
    out->traces_held = atomic_load(&t->traces_held);
    out->spans_held = atomic_load(&t->spans_held);
    out->bytes_held = atomic_load(&t->bytes_held);
    out->bytes_spilled = atomic_load(&t->bytes_spilled);
    out->spans_spilled = atomic_load(&t->spans_spilled);
    out->spans_kept = atomic_load(&t->spans_kept);
    out->spans_sampled_out = atomic_load(&t->spans_sampled_out);
    out->spans_failed = atomic_load(&t->spans_failed);
    out->traces_forced = atomic_load(&t->traces_forced);
    out->traces_kept = atomic_load(&t->traces_kept);
    out->traces_dropped = atomic_load(&t->traces_dropped);
    out->traces_early = atomic_load(&t->traces_early);
}

size_t
weft_tail_rule_counts(const struct weft_tail *tail, struct weft_tail_rule_count *out, size_t cap)
{
    struct weft_tail *t = (struct weft_tail *)tail;
    size_t n = 0;

    if (t == NULL) {
        return 0;
    }
    pthread_mutex_lock(&t->rules_lock);
    n = t->rule_count;
    for (size_t i = 0; i < n && i < cap && out != NULL; i++) {
        out[i] = t->rules[i];
    }
    pthread_mutex_unlock(&t->rules_lock);
    return n;
}

void
weft_tail_tick(struct weft_exporter *exporter)
{
    struct wrapper *w = NULL;

    if (exporter == NULL || exporter->ops->export_batch != tail_export) {
        return;
    }
    w = exporter->self;
    decide_due(w, weft__monotonic_ns() + 30000000000ull, false);
}

/* ------------------------------------------------------------------------------------------ */
/* metrics                                                                                     */

/* One gauge per counter of struct weft_tail_stats, read at each collection. */
static const struct {
    const char *name;
    const char *unit;
    const char *description;
    size_t offset;
} tail_gauges[] = {
    {"weft.sampling.traces.held", "{trace}", "Traces waiting for their sampling decision",
     offsetof(struct weft_tail_stats, traces_held)},
    {"weft.sampling.spans.held", "{span}", "Spans waiting for their trace's sampling decision",
     offsetof(struct weft_tail_stats, spans_held)},
    {"weft.sampling.held", "By", "Encoded bytes of held spans in memory",
     offsetof(struct weft_tail_stats, bytes_held)},
    {"weft.sampling.spilled", "By", "Encoded bytes of held spans in spill files",
     offsetof(struct weft_tail_stats, bytes_spilled)},
    {"weft.sampling.spans.spilled", "{span}", "Spans written to a spill file since start",
     offsetof(struct weft_tail_stats, spans_spilled)},
    {"weft.sampling.spans.kept", "{span}", "Spans sent on after a keep decision since start",
     offsetof(struct weft_tail_stats, spans_kept)},
    {"weft.sampling.spans.sampled_out", "{span}",
     "Spans dropped by a drop decision since start (intended, not a loss)",
     offsetof(struct weft_tail_stats, spans_sampled_out)},
    {"weft.sampling.spans.failed", "{span}",
     "Kept spans the wrapped exporter did not take since start",
     offsetof(struct weft_tail_stats, spans_failed)},
    {"weft.sampling.traces.forced", "{trace}",
     "Undecided traces sent on whole (a bound or shutdown) since start",
     offsetof(struct weft_tail_stats, traces_forced)},
};

struct gauge_ctx {
    struct weft_tail *tail;
    size_t index;
};

static void
observe_gauge(struct weft_instrument *gauge, void *user_data)
{
    const struct gauge_ctx *c = user_data;
    struct weft_tail_stats st;
    uint64_t v = 0;

    weft_tail_get_stats(c->tail, &st);
    memcpy(&v, (const char *)&st + tail_gauges[c->index].offset, sizeof(v));
    (void)weft_gauge_observe(gauge, (double)v, NULL, 0);
}

weft_err
weft_tail_observe(struct weft_tail *tail, struct weft_meter *meter)
{
    enum { N = sizeof(tail_gauges) / sizeof(tail_gauges[0]) };
    weft_err err = WEFT_OK;

    if (tail == NULL || meter == NULL) {
        return WEFT_EINVAL;
    }
    if (tail->gauges == NULL) {
        tail->gauges = weft__calloc(N, sizeof(*tail->gauges));
        if (tail->gauges == NULL) {
            return WEFT_ENOMEM;
        }
    }
    for (size_t i = 0; i < N && err == WEFT_OK; i++) {
        struct weft_instrument *g = NULL;

        tail->gauges[i] = (struct gauge_ctx){tail, i};
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, tail_gauges[i].name,
                                    tail_gauges[i].unit, tail_gauges[i].description, NULL, 0, &g);
        if (err == WEFT_OK) {
            err = weft_gauge_set_callback(g, observe_gauge, &tail->gauges[i]);
        }
    }
    return err;
}
