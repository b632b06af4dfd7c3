/* runtime/dist/worker.c - `weft worker` (worker.h).
 *
 * The calling thread owns the broker connection (librabbitmq is not thread-safe): it receives
 * deliveries into a job table, publishes finished jobs' results, acknowledges a delivery when
 * its result's publish is confirmed, and reconnects. `concurrency` executor threads take jobs,
 * decode them, run the step (runtime/engine/executor.h, weft__execute_task) under a CONSUMER span
 * whose parent is the message's traceparent, and encode the result. One mutex guards the table.
 */
#include "runtime/dist/worker.h"
#include "runtime/common/attr_keys.h"

#include "runtime/mcp/hub.h"

#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/uuid.h"
#include "runtime/dist/broker.h"
#include "runtime/dist/message.h"
#include "runtime/dist/sign.h"
#include "runtime/engine/executor.h"
#include "runtime/observe/dist_telemetry.h"
#include "runtime/workflow/workflow.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/trace.h>
#include <weft/weft.h>

#define MAX_CONCURRENCY 256
#define WF_CACHE        8
#define MAX_ALLOWED     64 /* programs on the allow-list */

typedef enum {
    JOB_FREE = 0,
    JOB_QUEUED,    /* received, not started */
    JOB_RUNNING,   /* on an executor thread */
    JOB_DONE,      /* result encoded, to publish */
    JOB_PUBLISHED, /* result published, waiting for its confirm */
    JOB_REJECT     /* not a task message: reject to the dead letters */
} job_state;

struct job {
    job_state state;
    uint64_t tag;        /* delivery tag */
    uint64_t generation; /* the connection it arrived on: tags are per connection */
    char *body;
    size_t body_len;
    char traceparent[WEFT_TRACEPARENT_LEN + 1];
    int64_t delivery_count;
    bool is_redelivered;
    uint64_t received_ns;
    char *result;
    size_t result_len;
    char task_id[WEFT_UUID_LEN + 1];
    bool is_success;
    uint64_t publish_seq;
    /* The task's reply_to when it names one of this deployment's results queues, else "" (the
     * shared results queue). Set to "" when the broker returned the result from it. */
    char reply_to[WEFT__BROKER_NAME_MAX];
    bool is_reply_bad; /* a reply_to was given but not taken: the fallback is counted */
    bool is_returned;  /* the broker returned the last publish: no queue took it */
};

struct cached_wf {
    char *path;
    json_t *doc;
    struct weft_workflow *wf;
    struct weft__mcp_hub *mcp; /* its MCP servers, started for the first task that needs them */
};

struct worker {
    const struct weft__worker_config *cfg;
    char id[320];
    struct weft__broker *broker;
    struct weft_tracer *tracer;
    struct weft__dist_metrics metrics;
    unsigned concurrency;
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct job *jobs;
    size_t job_cap;
    uint64_t generation;
    size_t running;
    bool is_stopping; /* no new task */
    bool is_exiting;  /* executor threads leave */
    volatile sig_atomic_t abort_tasks;
    struct cached_wf cache[WF_CACHE];
    pthread_mutex_t cache_lock;
    struct weft__worker_stats stats;
    struct weft__dist_keys keys; /* no current key: tasks are not authenticated */
    char *allow_text;            /* the allow-list, split in place: allowed[] point into it */
    const char *allowed[MAX_ALLOWED];
    size_t allowed_count; /* 0: any program */
};

/* ------------------------------------------------------------------------------------------ */
/* Workflows, cached by path and document                                                      */

/* The workflow of a task: from the cache, else loaded. Cached workflows are immutable and live
 * until the worker exits, so threads share them without references; once the cache is full, a
 * workflow not in it is loaded for its task alone (the caller frees it: workflow_is_cached()). */
static struct weft_workflow *
workflow_get(struct worker *w, const char *path, const json_t *doc, char *err, size_t err_len)
{
    struct cached_wf *free_slot = NULL;
    struct weft_diags diags;
    struct weft_workflow *wf = NULL;
    weft_err e = WEFT_OK;

    pthread_mutex_lock(&w->cache_lock);
    for (size_t i = 0; i < WF_CACHE; i++) {
        struct cached_wf *c = &w->cache[i];
        if (c->wf == NULL) {
            free_slot = free_slot != NULL ? free_slot : c;
        } else if (strcmp(c->path, path) == 0 && json_equal(c->doc, (json_t *)doc)) {
            pthread_mutex_unlock(&w->cache_lock);
            return c->wf;
        }
    }
    memset(&diags, 0, sizeof(diags));
    e = weft__workflow_load_doc(path, doc, &wf, &diags);
    if (e != WEFT_OK) {
        const struct weft_diag *d = diags.count > 0 ? &diags.items[0] : NULL;
        snprintf(err, err_len, "workflow %s: %s%s%s%s%s", path, weft_strerror(e),
                 d != NULL ? ": " : "", d != NULL ? d->path : "", d != NULL ? ": " : "",
                 d != NULL ? d->message : "");
    } else if (free_slot != NULL) {
        free_slot->path = weft__strdup(path);
        free_slot->doc = json_deep_copy(doc);
        if (free_slot->path != NULL && free_slot->doc != NULL) {
            free_slot->wf = wf;
        } else {
            weft__free(free_slot->path);
            json_decref(free_slot->doc);
            memset(free_slot, 0, sizeof(*free_slot));
        }
    }
    weft_diags_cleanup(&diags);
    pthread_mutex_unlock(&w->cache_lock);
    return wf;
}

static bool
workflow_is_cached(struct worker *w, const struct weft_workflow *wf)
{
    bool is_cached = false;

    pthread_mutex_lock(&w->cache_lock);
    for (size_t i = 0; i < WF_CACHE; i++) {
        is_cached = is_cached || w->cache[i].wf == wf;
    }
    pthread_mutex_unlock(&w->cache_lock);
    return is_cached;
}

/* The MCP servers of cached workflow @p wf, started the first time a task needs them and kept
 * until the worker exits, so a task does not pay a server's start. NULL: the workflow has no
 * servers or is not cached (its task starts its own). The start happens outside the cache's
 * lock; two threads starting at once keep the first hub. */
static struct weft__mcp_hub *
mcp_for(struct worker *w, const struct weft_workflow *wf)
{
    struct weft__mcp_hub_options o;
    struct weft__mcp_hub *hub = NULL;
    struct weft__mcp_hub *kept = NULL;
    struct cached_wf *entry = NULL;
    char why[256];

    if (wf == NULL || wf->mcp_count == 0) {
        return NULL;
    }
    pthread_mutex_lock(&w->cache_lock);
    for (size_t i = 0; i < WF_CACHE && entry == NULL; i++) {
        entry = w->cache[i].wf == wf ? &w->cache[i] : NULL;
    }
    hub = entry != NULL ? entry->mcp : NULL;
    pthread_mutex_unlock(&w->cache_lock);
    if (entry == NULL || hub != NULL) {
        return hub;
    }
    memset(&o, 0, sizeof(o));
    o.tracer = w->tracer;
    o.meter = w->cfg->meter;
    if (weft__mcp_hub_new(wf, &o, &hub, why, sizeof(why)) != WEFT_OK) {
        return NULL; /* out of memory: the task starts its own */
    }
    pthread_mutex_lock(&w->cache_lock);
    if (entry->mcp == NULL) {
        entry->mcp = hub;
        hub = NULL;
    }
    kept = entry->mcp;
    pthread_mutex_unlock(&w->cache_lock);
    weft__mcp_hub_free(hub); /* another thread's came first */
    return kept;
}

/* ------------------------------------------------------------------------------------------ */
/* Executor threads                                                                            */

static struct weft_span *
consumer_span(struct worker *w, const struct job *j, const struct weft__task_msg *t)
{
    const struct weft__broker_names *nm = weft__broker_names(w->broker);
    struct weft_span_start_options so;
    struct weft_span_context parent;
    struct weft_attr attrs[14 + WEFT__TASK_SPAN_ATTRS_MAX]; /* its own, then the run's */
    size_t n = 0;
    char name[WEFT__BROKER_NAME_MAX + 16];

    memset(&parent, 0, sizeof(parent));
    attrs[n++] = weft_attr_str("messaging.system", "rabbitmq");
    attrs[n++] = weft_attr_str("messaging.operation.type", "process");
    attrs[n++] = weft_attr_str("messaging.operation.name", "process");
    attrs[n++] = weft_attr_str("messaging.destination.name", nm->exchange);
    attrs[n++] = weft_attr_str("messaging.rabbitmq.destination.routing_key", "task");
    attrs[n++] = weft_attr_int("messaging.rabbitmq.message.delivery_tag", (int64_t)j->tag);
    attrs[n++] = weft_attr_str("messaging.message.id", t->task_id);
    attrs[n++] = weft_attr_int("messaging.message.body.size", (int64_t)j->body_len);
    attrs[n++] = weft_attr_str("weft.run.id", t->run_id);
    attrs[n++] = weft_attr_str("weft.step.id", t->step_id);
    attrs[n++] = weft_attr_int("weft.task.attempt", t->attempt);
    attrs[n++] = weft_attr_int("weft.task.redeliveries", j->delivery_count);
    attrs[n++] = weft_attr_str("weft.worker.id", w->id);
    for (size_t i = 0; i < t->span_attr_count && i < WEFT__TASK_SPAN_ATTRS_MAX; i++) {
        attrs[n++] = t->span_attrs[i]; /* the run's attributes, as on its other spans */
    }
    memset(&so, 0, sizeof(so));
    so.kind = WEFT_SPAN_KIND_CONSUMER;
    if (j->traceparent[0] != '\0' &&
        weft_traceparent_parse(j->traceparent, NULL, &parent) == WEFT_OK) {
        so.parent_context = &parent;
    } else {
        so.is_root = true;
    }
    so.attrs = attrs;
    so.attr_count = n;
    snprintf(name, sizeof(name), "process %s", nm->exchange);
    return weft_span_start(w->tracer, name, &so);
}

/* ------------------------------------------------------------------------------------------ */
/* The command allow-list                                                                      */

/* Split the comma-separated list @p text into w->allowed (blanks around names dropped). */
static weft_err
allow_parse(struct worker *w, const char *text, char *err, size_t err_len)
{
    char *save = NULL;

    if (text == NULL || text[0] == '\0') {
        return WEFT_OK;
    }
    w->allow_text = weft__strdup(text);
    if (w->allow_text == NULL) {
        return WEFT_ENOMEM;
    }
    for (char *tok = strtok_r(w->allow_text, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *end = tok + strlen(tok);
        while (*tok == ' ' || *tok == '\t') {
            tok++;
        }
        while (end > tok && (end[-1] == ' ' || end[-1] == '\t')) {
            *--end = '\0';
        }
        if (tok[0] == '\0') {
            continue;
        }
        if (w->allowed_count == MAX_ALLOWED) {
            snprintf(err, err_len, "--allow-commands: at most %d programs", MAX_ALLOWED);
            return WEFT_EINVAL;
        }
        w->allowed[w->allowed_count++] = tok;
    }
    return WEFT_OK;
}

/* Exact comparison, no basename: "sh" must not let "/tmp/x/sh" through. */
static bool
program_allowed(const struct worker *w, const char *program)
{
    if (w->allowed_count == 0) {
        return true;
    }
    for (size_t i = 0; program != NULL && i < w->allowed_count; i++) {
        if (strcmp(w->allowed[i], program) == 0) {
            return true;
        }
    }
    return false;
}

/* The first program task @p t could start that the allow-list refuses, or NULL: a command
 * step's argv[0]; an agent's command tools; the workflow's stdio MCP servers (a worker starts
 * them for the workflow's tasks). */
static const char *
denied_program(const struct worker *w,
               const struct weft_workflow *wf,
               const struct weft__task_msg *t)
{
    if (w->allowed_count == 0) {
        return NULL;
    }
    if (strcmp(t->kind, "command") == 0) {
        const char *p = json_string_value(json_array_get(json_object_get(t->spec, "argv"), 0));
        if (!program_allowed(w, p)) {
            return p != NULL ? p : "(none)";
        }
    }
    if (wf == NULL) {
        return NULL;
    }
    if (strcmp(t->kind, "agent") == 0) {
        size_t a = weft__wf_find_agent(wf, t->agent);
        for (size_t i = 0; a != WF_NONE && i < wf->agents[a].tool_count; i++) {
            const struct tool_def *d = &wf->tools[wf->agents[a].tools[i]];
            if (d->type == TOOL_COMMAND && d->argc > 0 && !program_allowed(w, d->argv[0])) {
                return d->argv[0];
            }
        }
    }
    for (size_t i = 0; i < wf->mcp_count; i++) {
        const struct weft__mcp_server_config *c = &wf->mcp[i].cfg;
        if (c->argc > 0 && !program_allowed(w, c->argv[0])) {
            return c->argv[0];
        }
    }
    return NULL;
}

/* Run the step of task @p t under @p span into @p r. */
static void
run_step(struct worker *w,
         const struct job *j,
         const struct weft__task_msg *t,
         struct weft_span *span,
         struct weft__result_msg *r)
{
    struct weft__step_task task;
    struct weft__task_run tr;
    struct weft__task_outcome out;
    struct weft_workflow *wf = NULL;
    const char *denied = NULL;
    char err[512] = "";
    weft_err e = WEFT_OK;

    /* A no-op task needs no workflow (its message may carry none): nothing to load. */
    wf = strcmp(t->kind, "noop") == 0
             ? NULL
             : workflow_get(w, t->workflow_path, t->workflow, err, sizeof(err));
    if (wf == NULL && strcmp(t->kind, "noop") != 0) {
        r->error = weft__strdup(err);
        r->error_type = weft__strdup("workflow_invalid");
        return;
    }
    denied = denied_program(w, wf, t);
    if (denied != NULL) {
        /* A step failure, not a crash or a rejected message: the orchestrator learns at once
         * why, and its correction or retry policy decides what follows. */
        snprintf(err, sizeof(err), "command '%.200s' not allowed on this worker", denied);
        WEFT_LOG(WEFT_LOG_WARN, "worker %s: task %s (step %s): %s (--allow-commands)", w->id,
                 t->task_id, t->step_id, err);
        r->error = weft__strdup(err);
        r->error_type = weft__strdup("command_not_allowed");
        pthread_mutex_lock(&w->lock);
        w->stats.commands_refused++;
        pthread_mutex_unlock(&w->lock);
        weft__dist_metrics_command_refused(&w->metrics);
        if (wf != NULL && !workflow_is_cached(w, wf)) {
            weft_workflow_free(wf);
        }
        return;
    }
    memset(&task, 0, sizeof(task));
    task.attempt = t->attempt;
    task.step_id = t->step_id;
    task.kind = t->kind;
    task.agent = t->agent;
    task.task = t->task;
    memset(&tr, 0, sizeof(tr));
    tr.wf = wf;
    tr.run_id = t->run_id;
    tr.task = &task;
    tr.context = t->context;
    tr.spec = t->spec;
    tr.cursors = t->cursors;
    weft_span_context_of(span, &task.parent);
    tr.parent = &task.parent;
    tr.provider = w->cfg->provider;
    tr.meter = w->cfg->meter;
    tr.abort_flag = &w->abort_tasks;
    tr.timeout_ms = t->timeout_ms;
    tr.capture_content = t->capture_content;
    tr.redeliveries = j->delivery_count;
    tr.mcp = mcp_for(w, wf);
    tr.span_attrs = t->span_attrs;
    tr.span_attr_count = t->span_attr_count;
    e = weft__execute_task(&tr, &out, err, sizeof(err));
    if (e != WEFT_OK) {
        r->error = weft__strdup(err);
        r->error_type = weft__strdup("task_setup");
    } else {
        r->is_success = out.is_success;
        r->output = out.output;
        r->error = out.error;
        r->error_type = out.error_type;
        r->details = out.details;
        r->cursors = out.cursors;
        r->requests = out.requests;
        r->input_tokens = out.input_tokens;
        r->output_tokens = out.output_tokens;
        r->cost_usd = out.cost_usd;
        r->llm_calls = out.llm_calls;
        r->tool_calls = out.tool_calls;
        r->agent_attempts = out.attempts;
        memset(&out, 0, sizeof(out));
    }
    if (wf != NULL && !workflow_is_cached(w, wf)) {
        weft_workflow_free(wf);
    }
}

/* Decode, run and encode job @p j (the lock is not held). @return false: not a task. */
static bool
job_run(struct worker *w, struct job *j)
{
    struct weft__task_msg t;
    struct weft__result_msg r;
    struct weft_span *span = NULL;
    char why[512];

    if (weft__task_msg_decode(j->body, j->body_len, &t, why, sizeof(why)) != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN, "worker %s: message rejected to the dead letters: %s", w->id, why);
        return false;
    }
    memset(&r, 0, sizeof(r));
    r.received_ns = j->received_ns;
    r.started_ns = weft__now_ns();
    WEFT_LOG(WEFT_LOG_INFO,
             "worker %s: task %s started: step %s of run %s, attempt %u, %lld earlier deliveries",
             w->id, t.task_id, t.step_id, t.run_id, t.attempt, (long long)j->delivery_count);
    span = consumer_span(w, j, &t);
    run_step(w, j, &t, span, &r);
    r.ended_ns = weft__now_ns();
    r.run_id = t.run_id;
    memcpy(r.task_id, t.task_id, sizeof(r.task_id));
    r.seq = t.seq;
    r.attempt = t.attempt;
    r.worker = w->id;
    r.delivery_count = j->delivery_count;
    if (!r.is_success) {
        weft_span_set_status(span, WEFT_STATUS_ERROR,
                             r.error_type != NULL ? r.error_type : "failed");
    }
    weft_span_end(span, 0);
    memcpy(j->task_id, t.task_id, sizeof(j->task_id));
    j->is_success = r.is_success;
    if (weft__result_msg_encode(&r, &j->result, &j->result_len) != WEFT_OK) {
        /* Too large or out of memory: say so in a result that fits. */
        struct weft__result_msg small = r;
        char note[] =
            "the step's result could not be encoded (larger than 16 MiB or out of memory)";
        small.output = NULL;
        small.details = NULL;
        small.cursors = r.cursors;
        small.is_success = false;
        small.error = note;
        small.error_type = (char *)"result_too_large";
        (void)weft__result_msg_encode(&small, &j->result, &j->result_len);
        j->is_success = false;
    }
    r.run_id = NULL; /* borrowed from t */
    r.worker = NULL;
    weft__result_msg_cleanup(&r);
    weft__task_msg_cleanup(&t);
    return true;
}

static void *
executor_main(void *arg)
{
    struct worker *w = arg;

    pthread_mutex_lock(&w->lock);
    for (;;) {
        struct job *j = NULL;
        bool is_task = false;
        for (size_t i = 0; i < w->job_cap && j == NULL; i++) {
            if (w->jobs[i].state == JOB_QUEUED) {
                j = &w->jobs[i];
            }
        }
        if (j == NULL) {
            if (w->is_exiting) {
                break;
            }
            pthread_cond_wait(&w->work, &w->lock);
            continue;
        }
        j->state = JOB_RUNNING;
        w->running++;
        weft__dist_metrics_worker_busy(&w->metrics, w->running, w->concurrency);
        pthread_mutex_unlock(&w->lock);
        is_task = job_run(w, j);
        pthread_mutex_lock(&w->lock);
        w->running--;
        weft__dist_metrics_worker_busy(&w->metrics, w->running, w->concurrency);
        j->state = is_task && j->result != NULL ? JOB_DONE : JOB_REJECT;
        weft__broker_wake(w->broker);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* The connection thread                                                                       */

static void
job_free(struct job *j)
{
    free(j->body);
    free(j->result);
    memset(j, 0, sizeof(*j));
}

/* The task id a refused message claims, for the log line: its message id, else the body's
 * "task_id", when either is a UUID (anything else is not printed: it came from whoever
 * published it and could carry control characters into the log). */
static void
claimed_task_id(const struct weft__broker_event *ev, char out[WEFT_UUID_LEN + 1])
{
    json_t *root = NULL;
    const char *id = ev->msg.message_id;

    snprintf(out, WEFT_UUID_LEN + 1, "(unknown)");
    if (id != NULL && weft__uuid_is_valid(id)) {
        snprintf(out, WEFT_UUID_LEN + 1, "%s", id);
        return;
    }
    if (ev->body_len <= WEFT__MSG_MAX) {
        root = json_loadb(ev->body, ev->body_len, 0, NULL);
    }
    id = json_string_value(json_object_get(root, "task_id"));
    if (id != NULL && weft__uuid_is_valid(id)) {
        snprintf(out, WEFT_UUID_LEN + 1, "%s", id);
    }
    json_decref(root);
}

/* With a key: is @p ev signed by the orchestrator? A refused task goes to the dead letters
 * unread (no requeue: another worker would refuse it too), logged and counted. */
static bool
task_verified(struct worker *w, const struct weft__broker_event *ev)
{
    weft__verify_result v = weft__dist_verify(&w->keys, &ev->msg, ev->body, ev->body_len);
    char task_id[WEFT_UUID_LEN + 1];

    if (v == WEFT__VERIFY_OK) {
        return true;
    }
    claimed_task_id(ev, task_id);
    WEFT_LOG(WEFT_LOG_WARN,
             "worker %s: task %s refused (%s): not signed with this deployment's key "
             "(WEFT_DIST_KEY); rejected to the dead letters without running",
             w->id, task_id, weft__verify_reason(v));
    (void)weft__broker_reject(w->broker, ev->delivery_tag, false);
    w->stats.refused++;
    weft__dist_metrics_refused(&w->metrics, weft__verify_reason(v));
    return false;
}

/* Take @p reply_to for job @p j when it names one of this deployment's results queues: the
 * shared one (kept as "": the exchange route) or a run's, "{prefix}results.{run id}". Any other
 * queue is refused (the result goes to the shared queue, counted): a task must not make a
 * worker publish into queues that are not results queues. */
static void
take_reply_to(struct worker *w, struct job *j, const char *reply_to)
{
    const struct weft__broker_names *nm = weft__broker_names(w->broker);

    j->reply_to[0] = '\0';
    j->is_reply_bad = false;
    if (reply_to == NULL || strcmp(reply_to, nm->results) == 0) {
        return;
    }
    if (weft__broker_is_results_name(w->broker, reply_to)) {
        snprintf(j->reply_to, sizeof(j->reply_to), "%s", reply_to);
        return;
    }
    /* The name is not logged: it came from the message and may hold anything. */
    WEFT_LOG(WEFT_LOG_WARN,
             "worker %s: a task's reply_to is not one of this deployment's results queues; "
             "its result goes to %s",
             w->id, nm->results);
    j->is_reply_bad = true;
}

static void
on_delivery(struct worker *w, const struct weft__broker_event *ev)
{
    struct job *j = NULL;

    for (size_t i = 0; i < w->job_cap && j == NULL; i++) {
        j = w->jobs[i].state == JOB_FREE ? &w->jobs[i] : NULL;
    }
    if (w->is_stopping || j == NULL) {
        (void)weft__broker_reject(w->broker, ev->delivery_tag, true); /* someone else's now */
        return;
    }
    w->stats.received++;
    if (!task_verified(w, ev)) {
        return;
    }
    j->body = malloc(ev->body_len + 1);
    if (j->body == NULL) {
        (void)weft__broker_reject(w->broker, ev->delivery_tag, true);
        return;
    }
    memcpy(j->body, ev->body, ev->body_len);
    j->body[ev->body_len] = '\0';
    j->body_len = ev->body_len;
    j->tag = ev->delivery_tag;
    j->generation = w->generation;
    j->delivery_count = ev->msg.delivery_count;
    j->is_redelivered = ev->msg.is_redelivered;
    j->received_ns = weft__now_ns();
    take_reply_to(w, j, ev->msg.reply_to);
    snprintf(j->traceparent, sizeof(j->traceparent), "%s",
             ev->msg.traceparent != NULL ? ev->msg.traceparent : "");
    j->state = JOB_QUEUED;
    pthread_cond_signal(&w->work);
}

/* The broker returned a result (mandatory publish to a run's queue that is gone): mark the
 * oldest unconfirmed publish of that task to its reply_to; its confirm, which follows, sends it
 * to the shared queue. */
static void
on_return(struct worker *w, const struct weft__broker_event *ev)
{
    struct job *hit = NULL;

    for (size_t i = 0; i < w->job_cap && ev->msg.message_id != NULL; i++) {
        struct job *j = &w->jobs[i];
        if (j->state == JOB_PUBLISHED && !j->is_returned && j->reply_to[0] != '\0' &&
            strcmp(j->task_id, ev->msg.message_id) == 0 &&
            (hit == NULL || j->publish_seq < hit->publish_seq)) {
            hit = j;
        }
    }
    if (hit != NULL) {
        hit->is_returned = true;
    }
}

static void
on_confirm(struct worker *w, const struct weft__broker_event *ev)
{
    for (size_t i = 0; i < w->job_cap; i++) {
        struct job *j = &w->jobs[i];
        if (j->state != JOB_PUBLISHED ||
            !(ev->is_multiple ? j->publish_seq <= ev->seq : j->publish_seq == ev->seq)) {
            continue;
        }
        if (ev->is_nack) {
            j->state = JOB_DONE; /* publish again */
            j->is_returned = false;
            continue;
        }
        if (j->is_returned) {
            /* No queue took it: the run's queue is gone (the run ended, or its orchestrator
             * has been away longer than the queue's expiry). The shared queue keeps it. */
            WEFT_LOG(WEFT_LOG_WARN,
                     "worker %s: task %s: results queue %s does not exist; result published to "
                     "the shared results queue",
                     w->id, j->task_id, j->reply_to);
            j->reply_to[0] = '\0';
            j->is_reply_bad = true;
            j->is_returned = false;
            j->state = JOB_DONE;
            continue;
        }
        if (j->is_reply_bad) {
            w->stats.fallbacks++;
            weft__dist_metrics_result_fallback(&w->metrics);
        }
        /* Acknowledged only now: had the worker died before, the task would come back. */
        if (j->generation == w->generation) {
            (void)weft__broker_ack(w->broker, j->tag);
        }
        if (j->is_success) {
            w->stats.succeeded++;
        } else {
            w->stats.failed++;
        }
        WEFT_LOG(WEFT_LOG_INFO, "worker %s: task %s ended: %s, result published", w->id, j->task_id,
                 j->is_success ? "success" : "failed");
        weft__dist_metrics_worker_task(&w->metrics, j->is_success ? "success" : "failed");
        job_free(j);
    }
}

/* Before results go out, the spans of their tasks go to the local span store (only the store:
 * a network exporter keeps its own pace): where the orchestrator shares that store (one machine,
 * `make distributed`), its run summary then counts the workers' spans with its own, as the trace
 * tree shows them. One flush per batch of results; a flush that fails or times out delays
 * nothing further (the spans follow with the next batch). */
static void
flush_store(struct worker *w)
{
    bool is_due = false;

    for (size_t i = 0; i < w->job_cap && !is_due; i++) {
        is_due = w->jobs[i].state == JOB_DONE;
    }
    for (size_t i = 0; is_due && w->cfg->provider != NULL; i++) {
        struct weft_processor *proc = weft_provider_processor(w->cfg->provider, i);

        if (proc == NULL) {
            break;
        }
        if (strcmp(weft_processor_exporter_name(proc), "store") == 0) {
            (void)weft_processor_force_flush(proc, 2000);
        }
    }
}

/* Publish finished jobs' results; reject the messages that were not tasks. */
static void
flush_jobs(struct worker *w)
{
    flush_store(w);
    for (size_t i = 0; i < w->job_cap && weft__broker_is_connected(w->broker); i++) {
        struct job *j = &w->jobs[i];
        if (j->state == JOB_REJECT) {
            if (j->generation == w->generation) {
                (void)weft__broker_reject(w->broker, j->tag, false);
            }
            w->stats.rejected++;
            weft__dist_metrics_worker_task(&w->metrics, "rejected");
            job_free(j);
        } else if (j->state == JOB_DONE) {
            struct weft__broker_msg msg;
            char signature[WEFT__SIGN_LEN];
            memset(&msg, 0, sizeof(msg));
            msg.message_id = j->task_id;
            msg.correlation_id = j->task_id;
            msg.type = WEFT__MSG_RESULT;
            msg.traceparent = j->traceparent[0] != '\0' ? j->traceparent : NULL;
            msg.timestamp_ms = weft__now_ns() / 1000000u;
            if (weft__dist_keys_enabled(&w->keys) &&
                weft__dist_sign(&w->keys, &msg, j->result, j->result_len, signature) != WEFT_OK) {
                continue; /* out of memory: tried again at the next flush */
            }
            /* To the run's own queue when the task named it; the signature covers the same
             * fields either way (a result carries no reply_to). */
            msg.is_mandatory = j->reply_to[0] != '\0';
            if (weft__broker_publish(w->broker, msg.is_mandatory ? j->reply_to : "result",
                                     msg.is_mandatory, &msg, j->result, j->result_len,
                                     &j->publish_seq) == WEFT_OK) {
                j->state = JOB_PUBLISHED;
            }
        }
    }
}

/* A new connection: tasks received on the old one come back from the broker; results not
 * confirmed are published again. */
static void
connection_lost(struct worker *w)
{
    w->generation++;
    for (size_t i = 0; i < w->job_cap; i++) {
        struct job *j = &w->jobs[i];
        if (j->state == JOB_QUEUED) {
            job_free(j);
        } else if (j->state == JOB_PUBLISHED) {
            j->state = JOB_DONE;
            j->is_returned = false;
        }
    }
}

static weft_err
connect_loop(struct worker *w, char *err, size_t err_len)
{
    unsigned backoff = 100;
    uint64_t deadline = w->cfg->connect_timeout_ms > 0
                            ? weft__monotonic_ns() + (uint64_t)w->cfg->connect_timeout_ms * 1000000u
                            : UINT64_MAX;

    while (!(w->cfg->stop != NULL && *w->cfg->stop)) {
        weft_err e = weft__broker_connect(w->broker, err, err_len);
        if (e == WEFT_OK) {
            e = weft__broker_consume(w->broker, weft__broker_names(w->broker)->dispatch);
        }
        if (e == WEFT_OK) {
            return WEFT_OK;
        }
        if (e == WEFT_EINVAL || weft__monotonic_ns() >= deadline) {
            return e;
        }
        WEFT_LOG(WEFT_LOG_WARN, "worker %s: %s; retrying in %u ms", w->id, err, backoff);
        weft__sleep_ms(backoff);
        backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
    }
    return WEFT_OK;
}

static size_t
count_state(const struct worker *w, job_state a, job_state b)
{
    size_t n = 0;

    for (size_t i = 0; i < w->job_cap; i++) {
        n += w->jobs[i].state == a || w->jobs[i].state == b ? 1 : 0;
    }
    return n;
}

/* After the stop: give back what did not start, let the rest finish (bounded), flush. */
static void
drain(struct worker *w)
{
    uint64_t deadline = weft__monotonic_ns() +
                        (uint64_t)(w->cfg->grace_ms != 0 ? w->cfg->grace_ms : 30000) * 1000000u;

    w->is_stopping = true;
    for (size_t i = 0; i < w->job_cap; i++) {
        if (w->jobs[i].state == JOB_QUEUED) {
            if (w->jobs[i].generation == w->generation) {
                (void)weft__broker_reject(w->broker, w->jobs[i].tag, true);
            }
            w->stats.requeued++;
            weft__dist_metrics_worker_task(&w->metrics, "requeued");
            job_free(&w->jobs[i]);
        }
    }
    while (count_state(w, JOB_RUNNING, JOB_DONE) + count_state(w, JOB_PUBLISHED, JOB_REJECT) > 0) {
        struct weft__broker_event ev;
        if (weft__monotonic_ns() >= deadline) {
            WEFT_LOG(WEFT_LOG_WARN,
                     "worker %s: %zu task(s) still running after the grace period: aborted and "
                     "left to the broker to deliver again",
                     w->id, count_state(w, JOB_RUNNING, JOB_RUNNING));
            w->abort_tasks = 1;
            break;
        }
        if (!weft__broker_is_connected(w->broker)) {
            break; /* nothing can be acknowledged: the broker redelivers them */
        }
        flush_jobs(w);
        pthread_mutex_unlock(&w->lock);
        (void)weft__broker_wait(w->broker, 100, &ev);
        pthread_mutex_lock(&w->lock);
        if (ev.kind == WEFT__BROKER_CONFIRM) {
            on_confirm(w, &ev);
        } else if (ev.kind == WEFT__BROKER_RETURNED) {
            on_return(w, &ev);
        } else if (ev.kind == WEFT__BROKER_DELIVERY) {
            (void)weft__broker_reject(w->broker, ev.delivery_tag, true);
        }
    }
}

static void
serve(struct worker *w, char *err, size_t err_len)
{
    pthread_mutex_lock(&w->lock);
    while (!(w->cfg->stop != NULL && *w->cfg->stop)) {
        struct weft__broker_event ev;
        if (!weft__broker_is_connected(w->broker)) {
            connection_lost(w);
            pthread_mutex_unlock(&w->lock);
            (void)connect_loop(w, err, err_len);
            pthread_mutex_lock(&w->lock);
            w->stats.reconnects++;
            continue;
        }
        flush_jobs(w);
        pthread_mutex_unlock(&w->lock);
        (void)weft__broker_wait(w->broker, 250, &ev);
        pthread_mutex_lock(&w->lock);
        if (ev.kind == WEFT__BROKER_DELIVERY) {
            on_delivery(w, &ev);
        } else if (ev.kind == WEFT__BROKER_CONFIRM) {
            on_confirm(w, &ev);
        } else if (ev.kind == WEFT__BROKER_RETURNED) {
            on_return(w, &ev);
        }
    }
    drain(w);
    w->is_exiting = true;
    pthread_cond_broadcast(&w->work);
    pthread_mutex_unlock(&w->lock);
}

/* Say once at start how far this worker trusts its tasks: the key id (never the key), or
 * that anyone who can publish to the broker can run its tasks. */
static void
log_trust(const struct worker *w)
{
    if (weft__dist_keys_enabled(&w->keys)) {
        WEFT_LOG(WEFT_LOG_INFO,
                 "worker %s: tasks must be signed: key %s%s%s; unsigned or forged ones are "
                 "refused",
                 w->id, w->keys.current.id,
                 w->keys.previous.secret != NULL ? ", previous key " : "",
                 w->keys.previous.secret != NULL ? w->keys.previous.id : "");
    } else {
        WEFT_LOG(WEFT_LOG_WARN,
                 "worker %s: tasks are not authenticated: anyone who can publish to the broker "
                 "can run commands here; set WEFT_DIST_KEY or WEFT_DIST_KEY_FILE "
                 "(docs/distributed.md, \"Trust\")",
                 w->id);
    }
    if (w->allowed_count > 0) {
        WEFT_LOG(WEFT_LOG_INFO, "worker %s: %zu program(s) allowed (--allow-commands)", w->id,
                 w->allowed_count);
    }
}

weft_err
weft__worker_run(const struct weft__worker_config *cfg,
                 struct weft__worker_stats *stats,
                 char *err,
                 size_t err_len)
{
    struct worker *w = weft__calloc(1, sizeof(*w));
    struct weft__broker_config bc;
    pthread_t threads[MAX_CONCURRENCY];
    size_t started = 0;
    char host[256] = "localhost";
    weft_err e = WEFT_OK;

    err[0] = '\0';
    if (w == NULL) {
        return WEFT_ENOMEM;
    }
    w->cfg = cfg;
    w->concurrency = cfg->concurrency == 0                ? 4
                     : cfg->concurrency > MAX_CONCURRENCY ? MAX_CONCURRENCY
                                                          : cfg->concurrency;
    (void)gethostname(host, sizeof(host) - 1);
    snprintf(w->id, sizeof(w->id), "%s", cfg->id != NULL ? cfg->id : "");
    if (w->id[0] == '\0') {
        snprintf(w->id, sizeof(w->id), "%s/%ld", host, (long)getpid());
    }
    memset(&bc, 0, sizeof(bc));
    bc.url = cfg->url;
    bc.prefix = cfg->prefix;
    bc.prefetch = w->concurrency;
    bc.max_redeliveries = cfg->max_redeliveries;
    bc.name = w->id;
    e = weft__broker_new(&bc, &w->broker, err, err_len);
    if (e == WEFT_OK) {
        e = weft__dist_keys_from_env(&w->keys, err, err_len);
    }
    if (e == WEFT_OK) {
        e = allow_parse(w,
                        cfg->allow_commands != NULL ? cfg->allow_commands
                                                    : weft__env("WEFT_WORKER_ALLOW_COMMANDS"),
                        err, err_len);
    }
    /* Room for a full prefetch on a new connection while the old one's tasks finish. */
    w->job_cap = 2 * (size_t)w->concurrency;
    w->jobs = e == WEFT_OK ? weft__calloc(w->job_cap, sizeof(*w->jobs)) : NULL;
    if (e == WEFT_OK && w->jobs == NULL) {
        e = WEFT_ENOMEM;
    }
    if (e == WEFT_OK) {
        pthread_mutex_init(&w->lock, NULL);
        pthread_mutex_init(&w->cache_lock, NULL);
        pthread_cond_init(&w->work, NULL);
        if (cfg->provider != NULL) {
            weft__rt_keys_init(); /* before the worker's first span */
            (void)weft_provider_get_tracer(cfg->provider, "weft.worker", WEFT_VERSION, &w->tracer);
        }
        weft__dist_metrics_init(&w->metrics, cfg->meter, WEFT__DIST_WORKER | WEFT__DIST_TRUST);
        weft__dist_metrics_worker_busy(&w->metrics, 0, w->concurrency);
        e = connect_loop(w, err, err_len);
    }
    if (e == WEFT_OK) {
        WEFT_LOG(WEFT_LOG_INFO, "worker %s: consuming %s on %s with %u slots", w->id,
                 weft__broker_names(w->broker)->dispatch, weft__broker_url_safe(w->broker),
                 w->concurrency);
        log_trust(w);
        for (; started < w->concurrency; started++) {
            if (pthread_create(&threads[started], NULL, executor_main, w) != 0) {
                break;
            }
        }
        serve(w, err, err_len);
        for (size_t i = 0; i < started; i++) {
            pthread_join(threads[i], NULL);
        }
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->job_cap; i++) {
            job_free(&w->jobs[i]); /* unacknowledged ones come back from the broker */
        }
        pthread_mutex_unlock(&w->lock);
    }
    if (stats != NULL) {
        *stats = w->stats;
    }
    if (w->jobs != NULL) {
        pthread_cond_destroy(&w->work);
        pthread_mutex_destroy(&w->cache_lock);
        pthread_mutex_destroy(&w->lock);
    }
    for (size_t i = 0; i < WF_CACHE; i++) {
        weft__free(w->cache[i].path);
        json_decref(w->cache[i].doc);
        weft__mcp_hub_free(w->cache[i].mcp); /* before the workflow it borrows */
        weft_workflow_free(w->cache[i].wf);
    }
    weft__dist_metrics_cleanup(&w->metrics);
    weft__broker_free(w->broker);
    weft__dist_keys_cleanup(&w->keys);
    weft__free(w->allow_text);
    weft__free(w->jobs);
    weft__free(w);
    return e;
}
