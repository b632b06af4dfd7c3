/* runtime/dist/amqp_executor.c - the executor interface over RabbitMQ (amqp_executor.h).
 *
 * Each submitted task is an entry of a fixed table (max_in_flight entries) under one mutex:
 * its encoded message, its producer span, its publish confirm number (0: to be published,
 * again after a reconnect) and, once one arrived, its result. The I/O thread publishes,
 * consumes and reconnects; poll() takes the results out. Nothing here blocks the agent thread
 * on the network: submit() only encodes and queues.
 */
#include "runtime/dist/amqp_executor.h"
#include "runtime/common/attr_keys.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/uuid.h"
#include "runtime/dist/broker.h"
#include "runtime/dist/broker_probe.h"
#include "runtime/dist/message.h"
#include "runtime/dist/sign.h"
#include "runtime/observe/dist_telemetry.h"
#include "runtime/workflow/workflow.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/metrics.h>
#include <weft/trace.h>
#include <weft/weft.h>

#define MAX_SLOTS   256
#define MAX_BOUNCES 20  /* a foreign result goes back to the queue at most this often */
#define MAX_PARKED  256 /* results kept for a submit after a resume */
/* (task, attempt) keys of the latest results taken: a later copy is a duplicate, not kept. */
#define MAX_ANSWERED 512
/* A run's results queue is removed by the broker after this long without a consumer: an
 * orchestrator that died and is never resumed leaves nothing behind for good, and one resumed
 * within it finds the results that came meanwhile. */
#define RUN_QUEUE_EXPIRES_MS (30u * 60u * 1000u)

struct slot {
    bool is_used;
    uint64_t seq; /* the engine's task id */
    char task_uuid[WEFT_UUID_LEN + 1];
    unsigned attempt;
    char *body;
    size_t body_len;
    char traceparent[WEFT_TRACEPARENT_LEN + 1];
    struct weft_span *span; /* producer span, ended at the confirm */
    uint64_t publish_seq;   /* confirm number on the current connection; 0: not published */
    bool is_confirmed;
    uint64_t sent_ns;
    uint64_t submit_mono; /* for the confirm wait in the stats */
    weft__step_done_fn done;
    void *user_data;
    bool has_result;
    struct weft__result_msg result; /* valid when has_result */
    char *dead_note;                /* dead-lettered: why (the result is a failure) */
    /* The run's attributes for every span (the task's span_attrs), copied: its result's
     * CONSUMER span may start after the run has ended. One allocation; NULL: none. */
    struct weft_attr *span_attrs;
    size_t span_attr_count;
};

/* A result of this run for a task not submitted (yet): kept for its submit after a resume. */
struct parked {
    bool is_used;
    uint64_t order; /* the oldest goes first when the table is full */
    struct weft__result_msg result;
};

struct answered {
    char task_uuid[WEFT_UUID_LEN + 1];
    unsigned attempt;
};

struct amqp_ex {
    struct weft__executor base;
    const struct weft_workflow *wf;
    /* The workflow document the tasks carry: the file's, without its "plan" (a worker runs the
     * one step its task names; a wide plan would otherwise travel in every task, and be parsed
     * by the worker each time). Shares the file document's values. */
    json_t *doc;
    /* The workflow file's absolute path (the workflow's directory, absolute since it was
     * loaded, and its file name): workers resolve the workflow's relative paths against it,
     * whatever directory the orchestrator was started in. */
    char *workflow_path;
    struct weft__broker *broker;
    struct weft_tracer *tracer;
    struct weft__dist_metrics metrics;     /* the caller's meter: task families and broker gauges */
    struct weft__dist_metrics run_metrics; /* the run's own meter (persisted): task families */
    pthread_t io;
    bool has_io;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    /* Results handed to the engine so far: a poll() returns when another thread's poll
     * delivered a result meanwhile (it may be the one this thread waits for). */
    uint64_t delivered;
    bool is_stopping;
    bool is_broken; /* the I/O thread gave up (never: it reconnects until destroyed) */
    struct slot slots[MAX_SLOTS];
    size_t slot_count;
    struct weft__amqp_executor_stats stats;
    uint64_t next_stats_ns;
    char run_id[80]; /* the run of the tasks submitted (config, or set by the first) */
    /* The run's results queue, named once the run id is known ("": not yet, or the run id
     * cannot name a queue and results use the shared queue). Tasks are published only once
     * the queues are consumed on the current connection (is_consuming). */
    char queue[WEFT__BROKER_NAME_MAX];
    bool is_consuming;
    bool is_declared; /* the run's queue was declared: destroy deletes it when nothing waits */
    struct parked parked[MAX_PARKED];
    uint64_t parked_order;
    struct answered answered[MAX_ANSWERED]; /* a ring */
    size_t answered_next;
    struct weft__dist_keys keys; /* a current key: tasks are signed, results verified */
};

static struct slot *
slot_by_uuid(struct amqp_ex *ex, const char *uuid, unsigned attempt)
{
    for (size_t i = 0; i < ex->slot_count; i++) {
        struct slot *s = &ex->slots[i];
        if (s->is_used && s->attempt == attempt && strcmp(s->task_uuid, uuid) == 0) {
            return s;
        }
    }
    return NULL;
}

static size_t
in_flight(const struct amqp_ex *ex)
{
    size_t n = 0;

    for (size_t i = 0; i < ex->slot_count; i++) {
        n += ex->slots[i].is_used ? 1 : 0;
    }
    return n;
}

static void
slot_free(struct slot *s)
{
    free(s->body);
    weft__result_msg_cleanup(&s->result);
    weft__free(s->dead_note);
    weft__free(s->span_attrs);
    weft_span_end(s->span, 0);
    memset(s, 0, sizeof(*s));
}

/* A copy of @p n attributes in one allocation (the array, then the strings), keeping what a
 * task message carries: string, boolean, integer and double values. NULL: none, or out of
 * memory (the spans then go without them). */
static struct weft_attr *
attrs_copy(const struct weft_attr *in, size_t n, size_t *count)
{
    struct weft_attr *out = NULL;
    size_t bytes = 0;
    size_t kept = 0;
    char *p = NULL;

    *count = 0;
    n = in != NULL && n < WEFT__TASK_SPAN_ATTRS_MAX ? n
        : in != NULL                                ? WEFT__TASK_SPAN_ATTRS_MAX
                                                    : 0;
    for (size_t i = 0; i < n; i++) {
        bytes += strlen(in[i].key) + 1;
        bytes += in[i].value.type == WEFT_VALUE_STRING ? in[i].value.len + 1 : 0;
    }
    out = n > 0 ? weft__malloc(n * sizeof(*out) + bytes) : NULL;
    if (out == NULL) {
        return NULL;
    }
    p = (char *)(out + n);
    for (size_t i = 0; i < n; i++) {
        const struct weft_attr *a = &in[i];
        size_t key_len = strlen(a->key);
        if (a->value.type > WEFT_VALUE_DOUBLE) {
            continue; /* arrays: not in the task message either */
        }
        out[kept] = *a;
        out[kept].key = memcpy(p, a->key, key_len + 1);
        p += key_len + 1;
        if (a->value.type == WEFT_VALUE_STRING) {
            if (a->value.len > 0) {
                memcpy(p, a->value.u.str, a->value.len);
            }
            p[a->value.len] = '\0';
            out[kept].value.u.str = p;
            p += a->value.len + 1;
        }
        kept++;
    }
    *count = kept;
    return out;
}

static bool
was_answered(const struct amqp_ex *ex, const char *uuid, unsigned attempt)
{
    for (size_t i = 0; i < MAX_ANSWERED; i++) {
        if (ex->answered[i].attempt == attempt && strcmp(ex->answered[i].task_uuid, uuid) == 0) {
            return true;
        }
    }
    return false;
}

static void
remember_answered(struct amqp_ex *ex, const char *uuid, unsigned attempt)
{
    struct answered *a = &ex->answered[ex->answered_next];

    snprintf(a->task_uuid, sizeof(a->task_uuid), "%s", uuid);
    a->attempt = attempt;
    ex->answered_next = (ex->answered_next + 1) % MAX_ANSWERED;
}

/* Keep @p r (taken) for a submit to come; the oldest kept result makes room, as a duplicate. */
static void
park(struct amqp_ex *ex, struct weft__result_msg *r)
{
    struct parked *p = NULL;

    for (size_t i = 0; i < MAX_PARKED; i++) {
        if (!ex->parked[i].is_used) {
            p = &ex->parked[i];
            break;
        }
        if (p == NULL || ex->parked[i].order < p->order) {
            p = &ex->parked[i];
        }
    }
    if (p->is_used) {
        ex->stats.duplicates++;
        weft__dist_metrics_duplicate(&ex->metrics, ex->wf->name);
        weft__result_msg_cleanup(&p->result);
    }
    p->is_used = true;
    p->order = ++ex->parked_order;
    p->result = *r;
    memset(r, 0, sizeof(*r));
}

/* The kept result for @p s's task and attempt, moved into the slot: its task is answered
 * without being published (under the lock). */
static bool
unpark(struct amqp_ex *ex, struct slot *s)
{
    for (size_t i = 0; i < MAX_PARKED; i++) {
        struct parked *p = &ex->parked[i];
        if (p->is_used && p->result.attempt == s->attempt &&
            strcmp(p->result.task_id, s->task_uuid) == 0) {
            s->result = p->result;
            s->has_result = true;
            s->is_confirmed = true;
            memset(p, 0, sizeof(*p));
            remember_answered(ex, s->task_uuid, s->attempt);
            ex->stats.results++;
            ex->stats.reclaimed++;
            weft__rk_set_bool(s->span, WEFT__RK_TASK_RECLAIMED, true);
            weft_span_end(s->span, 0);
            s->span = NULL;
            WEFT_LOG(WEFT_LOG_INFO,
                     "task %s (attempt %u): its result came while no "
                     "orchestrator ran; taken without running it again",
                     s->task_uuid, s->attempt);
            return true;
        }
    }
    return false;
}

/* The run ended: results kept and never asked for were duplicates after all (under the lock;
 * counted in the stats and the metrics at once, so the summary and /metrics agree). */
static void
drop_parked(struct amqp_ex *ex)
{
    for (size_t i = 0; i < MAX_PARKED; i++) {
        if (ex->parked[i].is_used) {
            ex->stats.duplicates++;
            weft__dist_metrics_duplicate(&ex->metrics, ex->wf->name);
            weft__result_msg_cleanup(&ex->parked[i].result);
            memset(&ex->parked[i], 0, sizeof(ex->parked[i]));
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* submit and poll (engine threads)                                                            */

static void
producer_span(struct amqp_ex *ex, struct slot *s, const struct weft__step_task *task)
{
    const struct weft__broker_names *nm = weft__broker_names(ex->broker);
    struct weft_span_start_options so;
    struct weft_attr attrs[12 + WEFT__TASK_SPAN_ATTRS_MAX]; /* its own, then the run's */
    size_t n = 0;
    char name[WEFT__BROKER_NAME_MAX + 16];
    struct weft_span_context ctx;

    attrs[n++] = weft_attr_str("messaging.system", "rabbitmq");
    attrs[n++] = weft_attr_str("messaging.operation.type", "send");
    attrs[n++] = weft_attr_str("messaging.operation.name", "publish");
    attrs[n++] = weft_attr_str("messaging.destination.name", nm->exchange);
    attrs[n++] = weft_attr_str("messaging.rabbitmq.destination.routing_key", "task");
    attrs[n++] = weft_attr_str("messaging.message.id", s->task_uuid);
    attrs[n++] = weft_attr_int("messaging.message.body.size", (int64_t)s->body_len);
    attrs[n++] = weft_attr_str("weft.step.id", task->step_id);
    attrs[n++] = weft_attr_int("weft.task.attempt", task->attempt);
    attrs[n++] = weft_attr_str("weft.run.id", task->run_id != NULL ? task->run_id : "");
    for (size_t i = 0;
         task->span_attrs != NULL && i < task->span_attr_count && i < WEFT__TASK_SPAN_ATTRS_MAX;
         i++) {
        attrs[n++] = task->span_attrs[i]; /* as on every span of the run */
    }
    memset(&so, 0, sizeof(so));
    so.kind = WEFT_SPAN_KIND_PRODUCER;
    so.parent_context = weft_span_context_is_valid(&task->parent) ? &task->parent : NULL;
    so.is_root = so.parent_context == NULL;
    so.attrs = attrs;
    so.attr_count = n;
    snprintf(name, sizeof(name), "publish %s", nm->exchange);
    s->span = weft_span_start(ex->tracer, name, &so);
    weft_span_context_of(s->span, &ctx);
    if (!weft_span_context_is_valid(&ctx)) {
        ctx = task->parent; /* not traced here: pass the step's own context on */
    }
    if (weft_span_context_is_valid(&ctx)) {
        (void)weft_traceparent_format(&ctx, s->traceparent, sizeof(s->traceparent));
    }
}

static weft_err
amqp_submit(struct weft__executor *base,
            const struct weft__step_task *task,
            weft__step_done_fn done,
            void *user_data)
{
    struct amqp_ex *ex = (struct amqp_ex *)base;
    struct weft__task_msg m;
    struct slot *s = NULL;
    json_t *context = NULL;
    weft_err e = WEFT_OK;

    if (task->task_uuid == NULL || task->run_id == NULL) {
        return WEFT_EINVAL;
    }
    context = json_loads(task->context != NULL ? task->context : "{}", 0, NULL);
    memset(&m, 0, sizeof(m));
    m.run_id = (char *)task->run_id;
    snprintf(m.task_id, sizeof(m.task_id), "%s", task->task_uuid);
    m.seq = task->task_id;
    m.attempt = task->attempt;
    m.step_id = (char *)task->step_id;
    m.kind = (char *)task->kind;
    m.agent = (char *)task->agent;
    m.task = (char *)task->task;
    m.context = context;
    m.spec = (json_t *)task->spec;
    m.workflow_path = ex->workflow_path;
    m.workflow = ex->doc;
    m.cursors = (json_t *)task->cursors;
    m.capture_content = task->capture_content;
    m.timeout_ms = task->timeout_ms;
    m.sent_ns = weft__now_ns();
    m.span_attrs = task->span_attrs;
    m.span_attr_count = task->span_attr_count;
    pthread_mutex_lock(&ex->lock);
    for (size_t i = 0; i < MAX_SLOTS && s == NULL; i++) {
        if (!ex->slots[i].is_used) {
            s = &ex->slots[i];
            if (i >= ex->slot_count) {
                ex->slot_count = i + 1;
            }
        }
    }
    if (s == NULL) {
        pthread_mutex_unlock(&ex->lock);
        json_decref(context);
        return WEFT_ELIMIT;
    }
    memset(s, 0, sizeof(*s));
    e = weft__task_msg_encode(&m, &s->body, &s->body_len);
    json_decref(context);
    if (e != WEFT_OK) {
        memset(s, 0, sizeof(*s));
        pthread_mutex_unlock(&ex->lock);
        return e;
    }
    s->is_used = true;
    snprintf(ex->run_id, sizeof(ex->run_id), "%s", task->run_id);
    s->seq = task->task_id;
    memcpy(s->task_uuid, m.task_id, sizeof(s->task_uuid));
    s->attempt = task->attempt;
    s->sent_ns = m.sent_ns;
    s->submit_mono = weft__monotonic_ns();
    s->done = done;
    s->user_data = user_data;
    s->span_attrs = attrs_copy(task->span_attrs, task->span_attr_count, &s->span_attr_count);
    producer_span(ex, s, task);
    if (task->is_reclaim) {
        weft__rk_set_bool(s->span, WEFT__RK_TASK_RESUMED, true);
    }
    if (unpark(ex, s)) {
        pthread_cond_broadcast(&ex->changed);
    } else {
        weft__dist_metrics_dispatched(&ex->metrics, ex->wf->name);
    }
    weft__dist_metrics_in_flight(&ex->metrics, ex->wf->name, in_flight(ex));
    pthread_mutex_unlock(&ex->lock);
    weft__broker_wake(ex->broker);
    return WEFT_OK;
}

/* Hand @p s's result to the engine (under the lock; the engine's callback never calls back). */
static void
deliver(struct amqp_ex *ex, struct slot *s)
{
    struct weft__step_result r;
    const struct weft__result_msg *m = &s->result;

    memset(&r, 0, sizeof(r));
    r.task_id = s->seq;
    if (s->dead_note != NULL) {
        r.status = STEP_FAILED;
        r.error = s->dead_note;
        r.error_type = "dead_lettered";
        r.redeliveries = (unsigned)m->delivery_count;
    } else {
        r.status = m->is_success ? STEP_COMPLETED : STEP_FAILED;
        r.output = m->output;
        r.error = m->error;
        r.error_type = m->error_type;
        r.details = m->details;
        r.input_tokens = m->input_tokens;
        r.output_tokens = m->output_tokens;
        r.cost_usd = m->cost_usd;
        r.llm_calls = (size_t)m->llm_calls;
        r.tool_calls = (size_t)m->tool_calls;
        r.cursors = m->cursors;
        r.requests = m->requests;
        r.redeliveries = (unsigned)m->delivery_count;
        r.started_ns = m->started_ns;
        r.ended_ns = m->ended_ns;
    }
    s->done(s->user_data, &r);
    slot_free(s);
    ex->delivered++;
    weft__dist_metrics_in_flight(&ex->metrics, ex->wf->name, in_flight(ex));
}

static weft_err
amqp_poll(struct weft__executor *base, uint32_t timeout_ms)
{
    struct amqp_ex *ex = (struct amqp_ex *)base;
    uint64_t deadline = weft__monotonic_ns() + (uint64_t)timeout_ms * 1000000u;
    size_t delivered = 0;
    uint64_t seen = 0;

    pthread_mutex_lock(&ex->lock);
    seen = ex->delivered;
    for (;;) {
        for (size_t i = 0; i < ex->slot_count; i++) {
            if (ex->slots[i].is_used && ex->slots[i].has_result) {
                deliver(ex, &ex->slots[i]);
                delivered++;
            }
        }
        if (ex->delivered != seen) {
            /* Wake the other pollers: one of the results may be theirs. */
            pthread_cond_broadcast(&ex->changed);
            delivered = delivered > 0 ? delivered : 1;
        }
        if (delivered > 0 || ex->is_broken || weft__monotonic_ns() >= deadline) {
            break;
        }
        weft__cond_timedwait_ns(&ex->changed, &ex->lock, deadline);
    }
    pthread_mutex_unlock(&ex->lock);
    if (delivered > 0) {
        return WEFT_OK;
    }
    return ex->is_broken ? WEFT_EIO : WEFT_ETIMEDOUT;
}

/* ------------------------------------------------------------------------------------------ */
/* The I/O thread                                                                              */

/* Publish every task not published on this connection (under the lock). */
static void
publish_pending(struct amqp_ex *ex)
{
    uint64_t t0 = weft__monotonic_ns();
    bool has_published = false;

    for (size_t i = 0; i < ex->slot_count && weft__broker_is_connected(ex->broker); i++) {
        struct slot *s = &ex->slots[i];
        struct weft__broker_msg msg;
        char signature[WEFT__SIGN_LEN];
        if (!s->is_used || s->publish_seq != 0 || s->has_result) {
            continue;
        }
        memset(&msg, 0, sizeof(msg));
        msg.message_id = s->task_uuid;
        msg.correlation_id = s->task_uuid;
        msg.type = WEFT__MSG_TASK;
        msg.reply_to = ex->queue[0] != '\0' ? ex->queue : weft__broker_names(ex->broker)->results;
        msg.traceparent = s->traceparent[0] != '\0' ? s->traceparent : NULL;
        msg.attempt = s->attempt;
        msg.timestamp_ms = weft__now_ns() / 1000000u;
        /* Signed at each publish: the sent time it covers is this publish's. */
        if (weft__dist_keys_enabled(&ex->keys) &&
            weft__dist_sign(&ex->keys, &msg, s->body, s->body_len, signature) != WEFT_OK) {
            continue; /* out of memory: tried again at the next pass */
        }
        if (weft__broker_publish(ex->broker, "task", false, &msg, s->body, s->body_len,
                                 &s->publish_seq) != WEFT_OK) {
            s->publish_seq = 0;
        }
        has_published = true;
    }
    if (has_published) {
        ex->stats.publish_ns += weft__monotonic_ns() - t0;
    }
}

static void
on_confirm(struct amqp_ex *ex, const struct weft__broker_event *ev)
{
    for (size_t i = 0; i < ex->slot_count; i++) {
        struct slot *s = &ex->slots[i];
        bool is_hit = s->is_used && s->publish_seq != 0 && !s->is_confirmed &&
                      (ev->is_multiple ? s->publish_seq <= ev->seq : s->publish_seq == ev->seq);
        if (!is_hit) {
            continue;
        }
        if (ev->is_nack) {
            WEFT_LOG(WEFT_LOG_WARN, "broker refused task %s (attempt %u): publishing again",
                     s->task_uuid, s->attempt);
            s->publish_seq = 0;
            continue;
        }
        s->is_confirmed = true;
        ex->stats.published++;
        ex->stats.confirm_wait_ns += weft__monotonic_ns() - s->submit_mono;
        weft_span_end(s->span, 0);
        s->span = NULL;
    }
}

/* The CONSUMER span of a result taken. */
static void
consumer_span(struct amqp_ex *ex,
              const struct weft__broker_event *ev,
              const char *task_uuid,
              unsigned attempt,
              const char *error,
              const struct slot *s)
{
    struct weft_span_start_options so;
    struct weft_attr attrs[10 + WEFT__TASK_SPAN_ATTRS_MAX]; /* its own, then the run's */
    struct weft_span_context parent;
    size_t n = 0;
    char name[WEFT__BROKER_NAME_MAX + 16];
    struct weft_span *span = NULL;

    memset(&parent, 0, sizeof(parent));
    if (ev->msg.traceparent == NULL ||
        weft_traceparent_parse(ev->msg.traceparent, NULL, &parent) != WEFT_OK) {
        return;
    }
    attrs[n++] = weft_attr_str("messaging.system", "rabbitmq");
    attrs[n++] = weft_attr_str("messaging.operation.type", "process");
    attrs[n++] = weft_attr_str("messaging.operation.name", "process");
    attrs[n++] =
        weft_attr_str("messaging.destination.name", weft__broker_names(ex->broker)->exchange);
    attrs[n++] = weft_attr_str("messaging.rabbitmq.destination.routing_key", "result");
    attrs[n++] =
        weft_attr_int("messaging.rabbitmq.message.delivery_tag", (int64_t)ev->delivery_tag);
    attrs[n++] = weft_attr_str("messaging.message.id", task_uuid);
    attrs[n++] = weft_attr_int("messaging.message.body.size", (int64_t)ev->body_len);
    attrs[n++] = weft_attr_int("weft.task.attempt", attempt);
    for (size_t i = 0; s != NULL && i < s->span_attr_count; i++) {
        attrs[n++] = s->span_attrs[i]; /* as on every span of the run */
    }
    memset(&so, 0, sizeof(so));
    so.kind = WEFT_SPAN_KIND_CONSUMER;
    so.parent_context = &parent;
    so.attrs = attrs;
    so.attr_count = n;
    snprintf(name, sizeof(name), "process %s", weft__broker_names(ex->broker)->exchange);
    span = weft_span_start(ex->tracer, name, &so);
    if (error != NULL) {
        weft_span_set_status(span, WEFT_STATUS_ERROR, error);
    }
    weft_span_end(span, 0);
}

/* A task message came back through the dead-letter exchange: fail its task. */
static void
on_dead_task(struct amqp_ex *ex, const struct weft__broker_event *ev)
{
    struct weft__task_msg t;
    char why[256];
    struct slot *s = NULL;
    const char *reason = ev->msg.death_reason != NULL ? ev->msg.death_reason : "unknown";

    if (weft__task_msg_decode(ev->body, ev->body_len, &t, why, sizeof(why)) != WEFT_OK) {
        /* A foreign or malformed message a worker rejected: its copy stays in the dead-letter
         * queue for an operator; nothing of ours waits for it. */
        ex->stats.malformed++;
        weft__dist_metrics_dead_lettered(&ex->metrics, ex->wf->name, "malformed");
        (void)weft__broker_ack(ex->broker, ev->delivery_tag);
        return;
    }
    s = slot_by_uuid(ex, t.task_id, t.attempt);
    weft__dist_metrics_dead_lettered(&ex->metrics, ex->wf->name,
                                     strcmp(reason, "delivery_limit") == 0 ? "delivery_limit"
                                                                           : "rejected");
    if (s != NULL && !s->has_result) {
        char note[512];
        snprintf(
            note, sizeof(note),
            "task %s of step %s (attempt %u) was dead-lettered by the broker (%s) after %lld "
            "deliveries without a result: a worker crashed or was killed on it each time, "
            "or rejected it; the message is in %s",
            t.task_id, t.step_id, t.attempt, reason,
            (long long)(ev->msg.delivery_count > 0 ? ev->msg.delivery_count : ev->msg.death_count),
            weft__broker_names(ex->broker)->dead);
        s->dead_note = weft__strdup(note);
        s->has_result = true;
        s->result.delivery_count = ev->msg.delivery_count;
        ex->stats.dead_lettered++;
        consumer_span(ex, ev, s->task_uuid, s->attempt, "dead_lettered", s);
        pthread_cond_broadcast(&ex->changed);
    }
    weft__task_msg_cleanup(&t);
    (void)weft__broker_ack(ex->broker, ev->delivery_tag);
}

/* The task id a refused message claims (its message id when it is a UUID), for the log. */
static const char *
claimed_id(const struct weft__broker_event *ev)
{
    const char *id = ev->msg.message_id;

    return id != NULL && weft__uuid_is_valid(id) ? id : "(unknown)";
}

/* With a key: is @p ev signed with this deployment's key? A refused message decides nothing
 * (not even a failure: whoever forged it must not be able to fail a step either): its task
 * waits for a genuine result and, without one, ends like a lost result at the run's timeout.
 * A refused result goes to the dead letters; a refused task that came back through them is
 * acknowledged (its copy is there already). */
static bool
verified(struct amqp_ex *ex, const struct weft__broker_event *ev)
{
    weft__verify_result v = weft__dist_verify(&ex->keys, &ev->msg, ev->body, ev->body_len);
    bool is_task = ev->msg.type != NULL && strcmp(ev->msg.type, WEFT__MSG_TASK) == 0;

    if (v == WEFT__VERIFY_OK) {
        return true;
    }
    WEFT_LOG(WEFT_LOG_WARN,
             "results queue: %s for task %s refused (%s): not signed with this deployment's key "
             "(WEFT_DIST_KEY); the task waits for a genuine result",
             is_task ? "dead-lettered task" : "result", claimed_id(ev), weft__verify_reason(v));
    ex->stats.refused++;
    weft__dist_metrics_refused(&ex->metrics, weft__verify_reason(v));
    if (is_task) {
        (void)weft__broker_ack(ex->broker, ev->delivery_tag);
    } else {
        (void)weft__broker_reject(ex->broker, ev->delivery_tag, false);
    }
    return false;
}

static void
on_result(struct amqp_ex *ex, const struct weft__broker_event *ev)
{
    struct weft__result_msg r;
    char why[256];
    struct slot *s = NULL;
    /* Workers publish to the run's queue by its name through the default exchange. */
    bool is_own = ex->queue[0] != '\0' && ev->msg.routing_key != NULL &&
                  strcmp(ev->msg.routing_key, ex->queue) == 0;

    if (!verified(ex, ev)) {
        return;
    }
    if (ev->msg.type != NULL && strcmp(ev->msg.type, WEFT__MSG_TASK) == 0) {
        on_dead_task(ex, ev);
        return;
    }
    if (weft__result_msg_decode(ev->body, ev->body_len, &r, why, sizeof(why)) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "results queue: message rejected to the dead letters: %s", why);
        ex->stats.malformed++;
        weft__dist_metrics_dead_lettered(&ex->metrics, ex->wf->name, "malformed");
        (void)weft__broker_reject(ex->broker, ev->delivery_tag, false);
        return;
    }
    s = slot_by_uuid(ex, r.task_id, r.attempt);
    if (s == NULL && ex->run_id[0] != '\0' && strcmp(r.run_id, ex->run_id) == 0 &&
        !was_answered(ex, r.task_id, r.attempt)) {
        /* This run's, for a task not submitted (yet): after a resume, its submit comes. */
        consumer_span(ex, ev, r.task_id, r.attempt, r.is_success ? NULL : "task failed", NULL);
        park(ex, &r);
        (void)weft__broker_ack(ex->broker, ev->delivery_tag);
        return;
    }
    if (s == NULL && strcmp(r.run_id, ex->run_id) != 0 && is_own) {
        /* Another run's result in this run's own queue: misaddressed (a worker publishes to the
         * queue its task names). Never bounced: to the dead letters, where an operator sees it. */
        WEFT_LOG(WEFT_LOG_WARN,
                 "results queue %s: result of task %s of another run rejected to the dead "
                 "letters",
                 ex->queue, r.task_id);
        ex->stats.foreign++;
        weft__result_msg_cleanup(&r);
        (void)weft__broker_reject(ex->broker, ev->delivery_tag, false);
        return;
    }
    if (s == NULL && strcmp(r.run_id, ex->run_id) != 0 && ev->msg.bounces < MAX_BOUNCES) {
        /* Another orchestrator's, on the shared results queue (an older worker's result, or
         * one whose run queue was gone): back to the queue's tail for it, a bounded number of
         * times (a result of a run no orchestrator waits for any more is dropped then, and
         * counted). */
        struct weft__broker_msg msg;
        uint64_t seq = 0;
        /* Passed on as it came, signature included (x-weft-bounces is outside what it
         * covers), so the orchestrator it belongs to verifies the worker's signature. */
        memset(&msg, 0, sizeof(msg));
        msg.type = WEFT__MSG_RESULT;
        msg.message_id = ev->msg.message_id != NULL ? ev->msg.message_id : r.task_id;
        msg.correlation_id = ev->msg.correlation_id;
        msg.reply_to = ev->msg.reply_to;
        msg.traceparent = ev->msg.traceparent;
        msg.tracestate = ev->msg.tracestate;
        msg.attempt = ev->msg.attempt;
        msg.timestamp_ms = ev->msg.timestamp_ms;
        msg.signature = ev->msg.signature;
        msg.bounces = ev->msg.bounces + 1;
        ex->stats.foreign++;
        if (weft__broker_publish(ex->broker, "result", false, &msg, ev->body, ev->body_len, &seq) ==
            WEFT_OK) {
            (void)weft__broker_ack(ex->broker, ev->delivery_tag);
        }
        weft__result_msg_cleanup(&r);
        return;
    }
    if (s == NULL || s->has_result) {
        ex->stats.duplicates++;
        weft__dist_metrics_duplicate(&ex->metrics, ex->wf->name);
        WEFT_LOG(WEFT_LOG_INFO, "result for task %s attempt %u ignored: already answered",
                 r.task_id, r.attempt);
        weft__result_msg_cleanup(&r);
        (void)weft__broker_ack(ex->broker, ev->delivery_tag);
        return;
    }
    s->result = r;
    s->has_result = true;
    remember_answered(ex, s->task_uuid, s->attempt);
    ex->stats.results++;
    if (!is_own) {
        ex->stats.shared_results++;
    }
    ex->stats.redeliveries += (uint64_t)(r.delivery_count > 0 ? r.delivery_count : 0);
    weft__dist_metrics_result(&ex->metrics, ex->wf->name, &r, s->sent_ns);
    consumer_span(ex, ev, s->task_uuid, s->attempt, r.is_success ? NULL : "task failed", s);
    pthread_cond_broadcast(&ex->changed);
    (void)weft__broker_ack(ex->broker, ev->delivery_tag);
}

/* Declare the run's results queue and consume it and the shared one (an older worker, or one
 * whose publish to the run's queue was returned, answers there), once the run id is known
 * (under the lock, released for the requests). @return false: the connection is gone. */
static bool
start_consuming(struct amqp_ex *ex, char *err, size_t err_len)
{
    struct weft__broker *b = ex->broker;
    char run_id[sizeof(ex->run_id)];
    char queue[WEFT__BROKER_NAME_MAX] = "";
    bool is_ok = true;

    snprintf(run_id, sizeof(run_id), "%s", ex->run_id);
    pthread_mutex_unlock(&ex->lock);
    if (weft__broker_results_name(b, run_id, queue, sizeof(queue)) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "run %s: its id cannot name a results queue; results use the shared queue %s",
                 run_id, weft__broker_names(b)->results);
        queue[0] = '\0';
    } else {
        is_ok =
            weft__broker_declare_results(b, queue, RUN_QUEUE_EXPIRES_MS, err, err_len) == WEFT_OK &&
            weft__broker_consume(b, queue) == WEFT_OK;
    }
    is_ok = is_ok && weft__broker_consume(b, weft__broker_names(b)->results) == WEFT_OK;
    if (!is_ok && err[0] == '\0') {
        snprintf(err, err_len, "broker %s: cannot consume the results queues",
                 weft__broker_url_safe(b));
    }
    if (!is_ok) {
        weft__broker_close(b); /* a new connection starts over */
    }
    pthread_mutex_lock(&ex->lock);
    if (is_ok) {
        snprintf(ex->queue, sizeof(ex->queue), "%s", queue);
        ex->is_declared = ex->is_declared || queue[0] != '\0';
        ex->is_consuming = true;
    }
    return is_ok;
}

static void
reconnect(struct amqp_ex *ex, unsigned *backoff_ms)
{
    char err[512] = "";
    bool is_ok = false;

    ex->is_consuming = false;
    pthread_mutex_unlock(&ex->lock);
    is_ok = weft__broker_connect(ex->broker, err, sizeof(err)) == WEFT_OK;
    pthread_mutex_lock(&ex->lock);
    if (is_ok && ex->run_id[0] != '\0') {
        is_ok = start_consuming(ex, err, sizeof(err));
    }
    if (is_ok) {
        ex->stats.reconnects++;
        *backoff_ms = 100;
        WEFT_LOG(WEFT_LOG_INFO, "broker %s: connected again", weft__broker_url_safe(ex->broker));
        for (size_t i = 0; i < ex->slot_count; i++) {
            if (ex->slots[i].is_used && !ex->slots[i].is_confirmed) {
                ex->slots[i].publish_seq = 0; /* unconfirmed: publish again */
            }
        }
        return;
    }
    pthread_mutex_unlock(&ex->lock);
    WEFT_LOG(WEFT_LOG_WARN, "%s; retrying in %u ms", err, *backoff_ms);
    weft__sleep_ms(*backoff_ms);
    *backoff_ms = *backoff_ms * 2 > 5000 ? 5000 : *backoff_ms * 2;
    pthread_mutex_lock(&ex->lock);
}

static void
refresh_stats(struct amqp_ex *ex)
{
    uint64_t now = weft__monotonic_ns();

    if (now < ex->next_stats_ns || !weft__broker_is_connected(ex->broker)) {
        return;
    }
    ex->next_stats_ns = now + 2000000000ull;
    weft__dist_metrics_queues(&ex->metrics, ex->broker);
}

static void *
io_main(void *arg)
{
    struct amqp_ex *ex = arg;
    unsigned backoff_ms = 100;

    pthread_mutex_lock(&ex->lock);
    while (!ex->is_stopping) {
        struct weft__broker_event ev;
        if (!weft__broker_is_connected(ex->broker)) {
            reconnect(ex, &backoff_ms);
            continue;
        }
        if (!ex->is_consuming && ex->run_id[0] != '\0') {
            /* The first task told the run id: its queue before its first publish. */
            char err[512] = "";
            if (!start_consuming(ex, err, sizeof(err))) {
                WEFT_LOG(WEFT_LOG_WARN, "%s", err);
            }
            continue;
        }
        if (ex->is_consuming) {
            publish_pending(ex);
        }
        refresh_stats(ex);
        pthread_mutex_unlock(&ex->lock);
        (void)weft__broker_wait(ex->broker, 200, &ev);
        pthread_mutex_lock(&ex->lock);
        switch (ev.kind) {
        case WEFT__BROKER_DELIVERY: {
            uint64_t t0 = weft__monotonic_ns();
            on_result(ex, &ev);
            ex->stats.result_ns += weft__monotonic_ns() - t0;
            break;
        }
        case WEFT__BROKER_CONFIRM:
            on_confirm(ex, &ev);
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&ex->lock);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Life                                                                                        */

static void
amqp_destroy(struct weft__executor *base)
{
    struct amqp_ex *ex = (struct amqp_ex *)base;

    if (ex == NULL) {
        return;
    }
    if (ex->has_io) {
        pthread_mutex_lock(&ex->lock);
        ex->is_stopping = true;
        pthread_mutex_unlock(&ex->lock);
        weft__broker_wake(ex->broker);
        pthread_join(ex->io, NULL);
        /* The run ended with nothing in flight: its queue has no use left. With tasks still in
         * flight (the run stopped early) it stays, for a resume, until it expires; a crashed
         * orchestrator never gets here. */
        if (ex->is_declared && in_flight(ex) == 0 && weft__broker_is_connected(ex->broker) &&
            weft__broker_delete_queue(ex->broker, ex->queue) == WEFT_OK) {
            WEFT_LOG(WEFT_LOG_DEBUG, "results queue %s deleted", ex->queue);
        }
    }
    for (size_t i = 0; i < ex->slot_count; i++) {
        if (ex->slots[i].is_used) {
            slot_free(&ex->slots[i]);
        }
    }
    drop_parked(ex);
    weft__broker_free(ex->broker);
    weft__dist_keys_cleanup(&ex->keys);
    json_decref(ex->doc);
    weft__free(ex->workflow_path);
    weft__dist_metrics_cleanup(&ex->metrics);
    weft__dist_metrics_cleanup(&ex->run_metrics);
    pthread_cond_destroy(&ex->changed);
    pthread_mutex_destroy(&ex->lock);
    weft__free(ex);
}

/* The run's own meter: every task measurement from now on goes to it too (the tee), so the
 * run's snapshots in the state database carry weft.tasks.* and weft.task.* and `weft serve`
 * shows them. Swapped under the lock that every recording call holds. */
static void
amqp_bind_run_meter(struct weft__executor *base, struct weft_meter *run_meter)
{
    struct amqp_ex *ex = (struct amqp_ex *)base;

    pthread_mutex_lock(&ex->lock);
    if (run_meter == NULL) {
        drop_parked(ex); /* the run ends: counted in its meter too, while the tee stands */
    }
    weft__dist_metrics_tee(&ex->metrics, NULL);
    weft__dist_metrics_cleanup(&ex->run_metrics);
    if (run_meter != NULL) {
        weft__dist_metrics_init(&ex->run_metrics, run_meter, WEFT__DIST_TASKS);
        weft__dist_metrics_tee(&ex->metrics, &ex->run_metrics);
    }
    pthread_mutex_unlock(&ex->lock);
}

static const struct weft__executor_ops amqp_ops = {amqp_submit, amqp_poll, amqp_destroy,
                                                   amqp_bind_run_meter};

/* wf->path made absolute with wf->dir (absolute already). NULL: out of memory. */
static char *
absolute_path(const struct weft_workflow *wf)
{
    const char *slash = strrchr(wf->path, '/');
    const char *name = slash != NULL ? slash + 1 : wf->path;
    size_t len = strlen(wf->dir) + strlen(name) + 2;
    char *out = NULL;

    if (wf->path[0] == '/') {
        return weft__strdup(wf->path);
    }
    out = weft__malloc(len);
    if (out != NULL) {
        snprintf(out, len, "%s/%s", wf->dir, name);
    }
    return out;
}

weft_err
weft__amqp_executor_new(const struct weft__amqp_executor_config *cfg,
                        const struct weft_workflow *wf,
                        uint32_t connect_timeout_ms,
                        struct weft__executor **out,
                        char *err,
                        size_t err_len)
{
    struct weft__broker_config bc;
    struct amqp_ex *ex = NULL;
    uint64_t deadline = weft__monotonic_ns() + (uint64_t)connect_timeout_ms * 1000000u;
    unsigned backoff = 100;
    weft_err e = WEFT_OK;

    *out = NULL;
    err[0] = '\0';
    if (wf == NULL || wf->doc == NULL || wf->path == NULL) {
        snprintf(err, err_len, "amqp executor: the workflow document is required");
        return WEFT_EINVAL;
    }
    ex = weft__calloc(1, sizeof(*ex));
    if (ex == NULL) {
        return WEFT_ENOMEM;
    }
    memset(&bc, 0, sizeof(bc));
    bc.url = cfg->url;
    bc.prefix = cfg->prefix;
    bc.max_redeliveries = cfg->max_redeliveries;
    bc.name = "weft orchestrator";
    e = weft__broker_new(&bc, &ex->broker, err, err_len);
    if (e == WEFT_OK) {
        e = weft__dist_keys_from_env(&ex->keys, err, err_len);
    }
    if (e != WEFT_OK) {
        weft__broker_free(ex->broker);
        weft__dist_keys_cleanup(&ex->keys);
        weft__free(ex);
        return e;
    }
    ex->doc = json_copy(wf->doc);
    ex->workflow_path = absolute_path(wf);
    if (ex->doc == NULL || ex->workflow_path == NULL) {
        json_decref(ex->doc);
        weft__free(ex->workflow_path);
        weft__broker_free(ex->broker);
        weft__dist_keys_cleanup(&ex->keys);
        weft__free(ex);
        return WEFT_ENOMEM;
    }
    (void)json_object_del(ex->doc, "plan");
    pthread_mutex_init(&ex->lock, NULL);
    weft__cond_init_monotonic(&ex->changed);
    ex->wf = wf;
    if (cfg->run_id != NULL) {
        snprintf(ex->run_id, sizeof(ex->run_id), "%s", cfg->run_id);
    }
    ex->base.ops = &amqp_ops;
    ex->base.name = "amqp";
    ex->base.max_in_flight = cfg->max_in_flight == 0          ? 64
                             : cfg->max_in_flight > MAX_SLOTS ? MAX_SLOTS
                                                              : cfg->max_in_flight;
    ex->base.writes_plan = false;
    if (cfg->provider != NULL) {
        weft__rt_keys_init(); /* before the executor's first span */
        (void)weft_provider_get_tracer(cfg->provider, "weft.dist", WEFT_VERSION, &ex->tracer);
    }
    weft__dist_metrics_init(&ex->metrics, cfg->meter,
                            WEFT__DIST_TASKS | WEFT__DIST_BROKER | WEFT__DIST_TRUST);
    weft__dist_metrics_zero(&ex->metrics, wf->name);
    for (;;) {
        /* Only the connection here: the queues are consumed by the I/O thread once the run id
         * is known (a resumed run's at once), before any task is published. */
        e = weft__broker_connect(ex->broker, err, err_len);
        if (e == WEFT_OK || e == WEFT_EINVAL ||
            weft__monotonic_ns() + backoff * 1000000ull >= deadline) {
            break;
        }
        weft__sleep_ms(backoff);
        backoff = backoff * 2 > 2000 ? 2000 : backoff * 2;
    }
    if (e == WEFT_OK && pthread_create(&ex->io, NULL, io_main, ex) != 0) {
        snprintf(err, err_len, "amqp executor: cannot start its thread");
        e = WEFT_ENOMEM;
    }
    if (e != WEFT_OK) {
        amqp_destroy(&ex->base);
        return e;
    }
    ex->has_io = true;
    *out = &ex->base;
    return WEFT_OK;
}

void
weft__amqp_executor_stats(struct weft__executor *base, struct weft__amqp_executor_stats *out)
{
    struct amqp_ex *ex = (struct amqp_ex *)base;

    pthread_mutex_lock(&ex->lock);
    *out = ex->stats;
    pthread_mutex_unlock(&ex->lock);
}
