/* runtime/experiment/runner.c - the experiment runner's pool (runner.h): a producer reads items
 * a page at a time into a bounded queue; concurrency threads take them, run, score and record
 * each, and add it to the report. */
#include "runtime/experiment/runner.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <weft/runtime.h>

#define MAX_TAGS 9  /* "experiment" and up to 8 of the caller's */
#define PAGE_MIN 32 /* items read per page at least (see weft__exp_run()) */

const char *
weft_experiment_outcome_name(weft_experiment_outcome outcome)
{
    switch (outcome) {
    case WEFT_EXPERIMENT_PASSED:
        return "passed";
    case WEFT_EXPERIMENT_FAILED:
        return "failed";
    default:
        return "errored";
    }
}

void
weft__exp_item_cleanup(struct weft__exp_item *item)
{
    if (item == NULL) {
        return;
    }
    free(item->id);
    free(item->input);
    free(item->expected);
    free(item->run_id);
    free(item->fail_step);
    memset(item, 0, sizeof(*item));
}

static uint64_t
now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

char *
weft__exp_status_scores(const struct weft_run_result *result, weft_experiment_outcome *out)
{
    bool is_passed = result != NULL && result->status == WEFT_RUN_COMPLETED;
    char why[160];
    json_t *score = NULL;
    char *text = NULL;

    if (result == NULL) {
        snprintf(why, sizeof(why), "the run never started");
    } else {
        snprintf(why, sizeof(why), "the run %s", weft_run_status_name(result->status));
    }
    *out = result == NULL ? WEFT_EXPERIMENT_ERRORED
                          : (is_passed ? WEFT_EXPERIMENT_PASSED : WEFT_EXPERIMENT_FAILED);
    score = json_pack("[{s:s, s:f, s:b, s:s}]", "evaluator", "status", "value",
                      is_passed ? 1.0 : 0.0, "passed", is_passed, "explanation", why);
    if (score != NULL) {
        text = json_dumps(score, JSON_COMPACT);
        json_decref(score);
    }
    return text;
}

/* ------------------------------------------------------------------------------------------ */
/* What a fork saved                                                                           */

/* Is exchange @p who one of the steps before @p fail_step that completed? */
static bool
is_reused(const struct weft_run_details *d, const char *fail_step, const char *who)
{
    for (size_t i = 0; i < d->step_count; i++) {
        const struct weft_run_step *s = &d->steps[i];

        if (s->id != NULL && strcmp(s->id, fail_step) == 0) {
            return false; /* steps from the failing one on run again */
        }
        if (s->status == NULL || strcmp(s->status, "completed") != 0 || who == NULL) {
            continue;
        }
        if ((s->agent != NULL && strcmp(s->agent, who) == 0) ||
            (s->id != NULL && strcmp(s->id, who) == 0)) {
            return true;
        }
    }
    return false;
}

void
weft__exp_saved(const char *state_path,
                const char *source_run,
                const char *fail_step,
                size_t *calls,
                int64_t *tokens,
                double *cost_usd)
{
    struct weft_run_details *d = NULL;
    struct weft_run_exchange *ex = NULL;
    size_t count = 0;
    size_t reused = 0;

    *calls = 0;
    *tokens = 0;
    *cost_usd = 0;
    if (source_run == NULL || fail_step == NULL ||
        weft_run_load(state_path, source_run, &d) != WEFT_OK) {
        return;
    }
    if (weft_run_exchanges_load(state_path, d->info.run_id, &ex, &count) == WEFT_OK) {
        for (size_t i = 0; i < count; i++) {
            reused += is_reused(d, fail_step, ex[i].who) ? 1 : 0;
        }
    }
    if (reused > 0) {
        double share = (double)reused / (double)count;

        *calls = reused;
        *tokens = (int64_t)((double)(d->info.input_tokens + d->info.output_tokens) * share + 0.5);
        *cost_usd = d->info.cost_usd * share;
    }
    weft_run_exchanges_free(ex, count);
    weft_run_details_free(d);
}

/* ------------------------------------------------------------------------------------------ */
/* The pool                                                                                    */

struct pool {
    const struct weft_experiment_options *o;
    const struct weft__exp_io *io;
    pthread_mutex_t lock;
    pthread_cond_t has_item;
    pthread_cond_t has_room;
    struct weft__exp_item *queue; /* a ring of cap items */
    size_t cap;
    size_t head;
    size_t len;
    bool is_done; /* the producer has no more items */
    /* The report and the first failure, under report_lock (put() is called under it too). */
    pthread_mutex_t report_lock;
    struct weft_experiment_report *report;
    double reward_sum;
    size_t rewarded;
    weft_err failure;
    char *err;
    size_t err_len;
};

/* The run's input: a JSON string unquoted, any other JSON text as it is. New text or NULL. */
static char *
run_input(const char *json)
{
    json_t *v = NULL;
    char *text = NULL;

    if (json == NULL) {
        return NULL;
    }
    if (json[0] == '"') {
        v = json_loads(json, JSON_DECODE_ANY, NULL);
        if (json_is_string(v)) {
            text = strdup(json_string_value(v));
        }
        json_decref(v);
        if (text != NULL) {
            return text;
        }
    }
    return strdup(json);
}

static bool
is_aborted(const struct pool *p)
{
    return p->o->abort_flag != NULL && *p->o->abort_flag != 0;
}

/* Add one item's result to the report and record it (under report_lock). */
static void
account(struct pool *p,
        const struct weft__exp_item *item,
        const struct weft__exp_result *r,
        const struct weft_run_result *result,
        bool is_fork,
        size_t saved,
        int64_t saved_tokens,
        double saved_cost)
{
    struct weft_experiment_report *rep = p->report;
    char err[512] = "";
    weft_err e = WEFT_OK;

    pthread_mutex_lock(&p->report_lock);
    e = p->io->put(p->io->user, item, r, err, sizeof(err));
    if (e != WEFT_OK && p->failure == WEFT_OK) {
        p->failure = e;
        snprintf(p->err, p->err_len, "%s", err[0] != '\0' ? err : weft_strerror(e));
    }
    rep->items++;
    rep->passed += r->outcome == WEFT_EXPERIMENT_PASSED ? 1 : 0;
    rep->failed += r->outcome == WEFT_EXPERIMENT_FAILED ? 1 : 0;
    rep->errored += r->outcome == WEFT_EXPERIMENT_ERRORED ? 1 : 0;
    rep->tokens += r->tokens;
    rep->cost_usd += r->cost_usd;
    rep->run_ns += r->duration_ns;
    rep->loops += r->loops;
    rep->stuck_loops += r->stuck_loops;
    rep->corrections += r->corrections;
    rep->llm_calls += r->llm_calls;
    if (result != NULL) {
        p->reward_sum += result->reward;
        p->rewarded++;
    }
    if (is_fork) {
        rep->forked++;
        rep->saved_llm_calls += saved;
        rep->saved_tokens += saved_tokens;
        rep->saved_cost_usd += saved_cost;
    }
    if (p->o->progress != NULL) {
        p->o->progress(rep->items, p->io->total, rep->passed, p->o->progress_user_data);
    }
    pthread_mutex_unlock(&p->report_lock);
}

size_t
weft__exp_lf_attrs(const char *experiment_id,
                   const char *name,
                   const char *dataset,
                   const char *dataset_version,
                   const char *item_id,
                   struct weft_attr *attrs)
{
    size_t n = 0;

    attrs[n++] = weft_attr_str("langfuse.experiment.id", experiment_id);
    attrs[n++] = weft_attr_str("langfuse.experiment.name",
                               name != NULL && name[0] != '\0' ? name : experiment_id);
    attrs[n++] = weft_attr_str("langfuse.experiment.dataset.id", dataset != NULL ? dataset : "");
    if (dataset_version != NULL && dataset_version[0] != '\0') {
        attrs[n++] = weft_attr_str("langfuse.experiment.metadata.dataset_version", dataset_version);
    }
    attrs[n++] = weft_attr_str("langfuse.experiment.item.id", item_id);
    return n;
}

/* What an item run's spans carry besides weft's own: the weft.* experiment attributes on the
 * root; Langfuse's experiment and item context on every span, with the root's id; the item's
 * expected output on the root when the run records content (the engine puts the input and the
 * output there under the same rule). */
struct item_attrs {
    struct weft_attr root[5];
    struct weft_attr spans[WEFT__EXP_LF_ATTRS];
    struct weft_attr content[1];
};

/* The item run's options: tags, span attributes, a fork of its source run. */
static void
item_options(const struct pool *p,
             const struct weft__exp_item *item,
             bool is_fork,
             struct weft_run_options *ro,
             const char **tags,
             struct item_attrs *ia)
{
    struct weft_attr *attrs = ia->root;
    const struct weft_experiment_options *o = p->o;
    size_t n = 0;

    memset(ro, 0, sizeof(*ro));
    ro->provider = o->provider;
    ro->state_path = o->state_path;
    ro->capture_content = -1;
    ro->abort_flag = o->abort_flag;
    ro->is_sampling_off = true; /* an experiment's runs are kept whole: they are compared */
    tags[n++] = "experiment";
    for (size_t i = 0; i < o->tag_count && n < MAX_TAGS; i++) {
        tags[n++] = o->tags[i];
    }
    ro->tags = tags;
    ro->tag_count = n;
    attrs[0] = weft_attr_str("weft.experiment.id", p->io->experiment);
    attrs[1] = weft_attr_str("weft.experiment.name", o->name != NULL ? o->name : "");
    attrs[2] = weft_attr_str("weft.dataset.name", o->dataset);
    attrs[3] = weft_attr_str("weft.dataset.version",
                             p->io->dataset_version != NULL ? p->io->dataset_version : "");
    attrs[4] = weft_attr_str("weft.dataset.item_id", item->id);
    ro->root_attrs = attrs;
    ro->root_attr_count = 5;
    ro->span_attrs = ia->spans;
    ro->span_attr_count = weft__exp_lf_attrs(p->io->experiment, o->name, o->dataset,
                                             p->io->dataset_version, item->id, ia->spans);
    ro->root_span_id_attr = WEFT__EXP_ROOT_ID_ATTR;
    if (item->expected != NULL) {
        ia->content[0] = weft_attr_str("langfuse.experiment.item.expected_output", item->expected);
        ro->root_content_attrs = ia->content;
        ro->root_content_attr_count = 1;
    }
    if (is_fork) {
        ro->fork_run_id = item->run_id;
        ro->fork_from_step = item->fail_step;
    }
}

/* Run, score and record one item. */
static void
run_item(struct pool *p, const struct weft__exp_item *item)
{
    const struct weft_experiment_options *o = p->o;
    struct weft_run_options ro;
    const char *tags[MAX_TAGS];
    struct item_attrs attrs;
    struct weft_run_result *result = NULL;
    struct weft__exp_verdict v;
    struct weft__exp_result r;
    char error[512] = "";
    bool is_fork = o->from_failure && item->run_id != NULL && item->fail_step != NULL;
    size_t saved = 0;
    int64_t saved_tokens = 0;
    double saved_cost = 0;
    char *input = run_input(item->input);
    weft_err err = WEFT_OK;

    item_options(p, item, is_fork, &ro, tags, &attrs);
    ro.input = input;
    err = o->run != NULL ? o->run(o->workflow, &ro, &result, error, sizeof(error), o->run_user_data)
                         : weft_run(o->workflow, &ro, &result, error, sizeof(error));
    if (err != WEFT_OK) {
        weft_run_result_free(result);
        result = NULL;
        if (error[0] == '\0') {
            snprintf(error, sizeof(error), "the run could not start: %s", weft_strerror(err));
        }
    }
    memset(&v, 0, sizeof(v));
    if (result != NULL && p->io->score != NULL) {
        if (p->io->score(p->io->user, item, result, &v) != WEFT_OK) {
            v.outcome = WEFT_EXPERIMENT_ERRORED;
            free(v.error);
            v.error = strdup("the evaluators could not score the run (out of memory)");
        }
    } else {
        v.scores = weft__exp_status_scores(result, &v.outcome);
    }
    memset(&r, 0, sizeof(r));
    r.outcome = v.outcome;
    r.scores = v.scores != NULL ? v.scores : "[]";
    r.error = result == NULL ? error : v.error;
    r.tokens = v.tokens;
    r.cost_usd = v.cost_usd;
    if (result != NULL) {
        r.run_id = result->run_id;
        r.tokens += result->input_tokens + result->output_tokens;
        r.cost_usd += result->cost_usd;
        r.duration_ns = result->duration_ns;
        for (size_t k = 0; k < WEFT_LOOP_KIND_COUNT; k++) {
            r.loops += result->loops[k];
        }
        r.stuck_loops = result->status == WEFT_RUN_STUCK ? 1 : 0;
        r.corrections = result->corrections;
        r.llm_calls = result->llm_calls;
        r.reward = result->reward;
        if (is_fork && result->reused_steps > 0) {
            weft__exp_saved(o->state_path, item->run_id, item->fail_step, &saved, &saved_tokens,
                            &saved_cost);
        }
    }
    account(p, item, &r, result, is_fork && result != NULL, saved, saved_tokens, saved_cost);
    free(v.scores);
    free(v.error);
    free(input);
    weft_run_result_free(result);
}

static void *
worker(void *arg)
{
    struct pool *p = arg;

    for (;;) {
        struct weft__exp_item item;

        pthread_mutex_lock(&p->lock);
        while (p->len == 0 && !p->is_done) {
            pthread_cond_wait(&p->has_item, &p->lock);
        }
        if (p->len == 0) {
            pthread_mutex_unlock(&p->lock);
            return NULL;
        }
        item = p->queue[p->head];
        p->head = (p->head + 1) % p->cap;
        p->len--;
        pthread_cond_signal(&p->has_room);
        pthread_mutex_unlock(&p->lock);
        if (is_aborted(p)) {
            weft__exp_item_cleanup(&item);
            continue; /* drained, not run */
        }
        run_item(p, &item);
        weft__exp_item_cleanup(&item);
    }
}

/* Read the items a page at a time into the queue. @return the page reader's failure. */
static weft_err
produce(struct pool *p, struct weft__exp_item *page, size_t page_cap)
{
    size_t offset = 0;

    for (;;) {
        size_t count = 0;
        weft_err err = WEFT_OK;

        if (is_aborted(p)) {
            return WEFT_OK;
        }
        memset(page, 0, page_cap * sizeof(*page));
        err = p->io->page(p->io->user, offset, page_cap, page, &count);
        if (err != WEFT_OK || count == 0) {
            return err;
        }
        offset += count;
        for (size_t i = 0; i < count; i++) {
            pthread_mutex_lock(&p->lock);
            while (p->len == p->cap) {
                pthread_cond_wait(&p->has_room, &p->lock);
            }
            p->queue[(p->head + p->len) % p->cap] = page[i];
            p->len++;
            pthread_cond_signal(&p->has_item);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

weft_err
weft__exp_run(const struct weft_experiment_options *o,
              const struct weft__exp_io *io,
              struct weft_experiment_report *report,
              char *err,
              size_t err_len)
{
    unsigned k = o->concurrency != 0 ? o->concurrency : 4;
    /* Items read per page: each page is one read of the state store (a connection of its
     * own), so not fewer than PAGE_MIN however small the pool. */
    size_t page_cap = k < PAGE_MIN ? PAGE_MIN : k;
    struct pool p;
    pthread_t threads[WEFT_EXPERIMENT_CONCURRENCY_MAX];
    size_t started = 0;
    struct weft__exp_item *page = NULL;
    uint64_t t0 = now_ns();
    weft_err e = WEFT_OK;

    if (k > WEFT_EXPERIMENT_CONCURRENCY_MAX) {
        snprintf(err, err_len, "concurrency: expected 1 to %u, got %u",
                 WEFT_EXPERIMENT_CONCURRENCY_MAX, k);
        return WEFT_EINVAL;
    }
    memset(&p, 0, sizeof(p));
    p.o = o;
    p.io = io;
    p.cap = k;
    p.report = report;
    p.err = err;
    p.err_len = err_len;
    p.queue = calloc(k, sizeof(*p.queue));
    page = calloc(page_cap, sizeof(*page));
    if (p.queue == NULL || page == NULL) {
        free(p.queue);
        free(page);
        return WEFT_ENOMEM;
    }
    pthread_mutex_init(&p.lock, NULL);
    pthread_mutex_init(&p.report_lock, NULL);
    pthread_cond_init(&p.has_item, NULL);
    pthread_cond_init(&p.has_room, NULL);
    for (; started < k; started++) {
        if (pthread_create(&threads[started], NULL, worker, &p) != 0) {
            break;
        }
    }
    e = started == 0 ? WEFT_ENOMEM : produce(&p, page, page_cap);
    pthread_mutex_lock(&p.lock);
    p.is_done = true;
    pthread_cond_broadcast(&p.has_item);
    pthread_mutex_unlock(&p.lock);
    for (size_t i = 0; i < started; i++) {
        pthread_join(threads[i], NULL);
    }
    for (; p.len > 0; p.len--, p.head = (p.head + 1) % p.cap) {
        weft__exp_item_cleanup(&p.queue[p.head]); /* no thread could start */
    }
    if (e != WEFT_OK && p.failure == WEFT_OK) {
        snprintf(err, err_len, "%s: %s",
                 started == 0 ? "starting the pool's threads" : "reading the items",
                 weft_strerror(e));
    }
    e = e != WEFT_OK ? e : p.failure;
    report->pass_rate = report->items > 0 ? (double)report->passed / (double)report->items : 0;
    report->mean_reward = p.rewarded > 0 ? p.reward_sum / (double)p.rewarded : 0;
    report->duration_ns = now_ns() - t0;
    report->is_aborted = is_aborted(&p);
    pthread_cond_destroy(&p.has_item);
    pthread_cond_destroy(&p.has_room);
    pthread_mutex_destroy(&p.lock);
    pthread_mutex_destroy(&p.report_lock);
    free(p.queue);
    free(page);
    return e;
}
