/* runtime/experiment/experiment.c - weft_experiment_run() (include/weft/experiment.h): the
 * runner's interface (runner.h) mapped onto the datasets and experiments of the state store
 * (include/weft/dataset.h) and the evaluators (include/weft/eval.h). Thin on purpose: the pool
 * is runner.c's. */
#include "runtime/experiment/runner.h"
#include "runtime/llm/llm.h"
#include "runtime/replay/replay.h"
#include "runtime/state/snapshot.h"
#include "runtime/workflow/workflow.h"

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <weft/dataset.h>
#include <weft/eval.h>
#include <weft/experiment.h>

struct adapter {
    const struct weft_experiment_options *o;
    uint64_t version;                   /* the dataset version run, read a page at a time */
    size_t count;                       /* its items */
    struct weft_evaluators *evaluators; /* NULL: the run's status decides */
    struct weft_tracer *tracer;         /* the score spans; NULL: untraced */
    /* The LLM judges' provider (the workflow's model they name), NULL when no judge; its
     * calls are made one at a time (judge_lock), whatever the experiment's concurrency. */
    struct llm_provider *judge;
    pthread_mutex_t judge_lock;
    char id[37];
    char name[2 * WEFT_DATASET_NAME_MAX + 2]; /* the experiment's */
    const char *version_text;                 /* the dataset version as text */
};

static char *
dup_or_null(const char *s)
{
    return s != NULL ? strdup(s) : NULL;
}

static weft_err
page(void *user, size_t offset, size_t max, struct weft__exp_item *items, size_t *count)
{
    struct adapter *a = user;
    struct weft_dataset_item *got = NULL;
    size_t got_count = 0;
    size_t n = 0;
    weft_err err = weft_dataset_items_page(a->o->state_path, a->o->dataset, a->version, offset, max,
                                           NULL, &got, &got_count, NULL);

    *count = 0;
    if (err != WEFT_OK) {
        return err;
    }
    for (size_t i = 0; i < got_count; i++, n++) {
        const struct weft_dataset_item *d = &got[i];

        items[n].id = dup_or_null(d->id);
        items[n].input = dup_or_null(d->input != NULL ? d->input : "\"\"");
        items[n].expected = dup_or_null(d->expected);
        items[n].run_id = dup_or_null(d->run_id);
        items[n].fail_step = dup_or_null(d->fail_step);
        if (items[n].id == NULL || items[n].input == NULL) {
            for (size_t j = 0; j <= n; j++) {
                weft__exp_item_cleanup(&items[j]);
            }
            weft_dataset_items_free(got, got_count);
            return WEFT_ENOMEM;
        }
    }
    weft_dataset_items_free(got, got_count);
    *count = n;
    return WEFT_OK;
}

/* The status score (no evaluators) as the event weft_eval_score_record() writes. */
static void
status_event(struct weft_span *span, const struct weft_run_result *result)
{
    bool is_passed = result->status == WEFT_RUN_COMPLETED;
    char why[96];
    struct weft_attr ev[5];

    snprintf(why, sizeof(why), "the run %s", weft_run_status_name(result->status));
    ev[0] = weft_attr_str("gen_ai.evaluation.name", "status");
    ev[1] = weft_attr_double("gen_ai.evaluation.score.value", is_passed ? 1.0 : 0.0);
    ev[2] = weft_attr_str("gen_ai.evaluation.score.label", is_passed ? "pass" : "fail");
    ev[3] = weft_attr_str("gen_ai.evaluation.explanation", why);
    ev[4] = weft_attr_str("weft.evaluation.type", "status");
    (void)weft_span_add_event(span, "gen_ai.evaluation.result", ev, 5, 0);
}

/* Langfuse's experiment and item context of @p item's trace (runner.h), with its root span's
 * id @p root_hex: what the item run's own spans carry, for the spans made here. */
static size_t
lf_attrs(const struct adapter *a,
         const struct weft__exp_item *item,
         const char *root_hex,
         struct weft_attr *attrs)
{
    size_t n = weft__exp_lf_attrs(a->id, a->name, a->o->dataset, a->version_text, item->id, attrs);

    attrs[n++] = weft_attr_str(WEFT__EXP_ROOT_ID_ATTR, root_hex);
    return n;
}

/* The `evaluate EXPERIMENT` span under the run's root span, which holds the scores as events
 * (the Langfuse exporter sends them as the trace's scores, weft_eval_score_record()) and the
 * judges' calls as children; NULL when untraced or the run's trace is unknown. The span carries
 * the item's Langfuse context, left in @p lf (room for WEFT__EXP_LF_ATTRS + 1; it borrows
 * @p root_hex, room for 17 characters) for the judges' spans. */
static struct weft_span *
eval_span(const struct adapter *a,
          const struct weft__exp_item *item,
          const struct weft_run_result *result,
          char *root_hex,
          struct weft_attr *lf,
          size_t *lf_count)
{
    struct weft_run_details *d = NULL;
    struct weft_span_context parent;
    struct weft_span_start_options so;
    struct weft_attr attrs[3 + WEFT__EXP_LF_ATTRS + 1];
    struct weft_span *span = NULL;
    char name[2 * WEFT_DATASET_NAME_MAX + 16];

    if (a->tracer == NULL || result->run_id == NULL ||
        weft_run_load(a->o->state_path, result->run_id, &d) != WEFT_OK) {
        return NULL;
    }
    weft__rt_stored_root(&d->info, &parent); /* zeroed when the run was not traced */
    if (parent.trace_flags != 0) {
        attrs[0] = weft_attr_str("weft.experiment.id", a->id);
        attrs[1] = weft_attr_str("weft.run.id", result->run_id);
        attrs[2] = weft_attr_str("langfuse.observation.type", "evaluator");
        memcpy(root_hex, d->info.root_span_id, 2 * WEFT_SPAN_ID_SIZE + 1); /* d is freed below */
        *lf_count = lf_attrs(a, item, root_hex, lf);
        memcpy(attrs + 3, lf, *lf_count * sizeof(attrs[0]));
        memset(&so, 0, sizeof(so));
        so.parent_context = &parent;
        so.attrs = attrs;
        so.attr_count = 3 + *lf_count;
        snprintf(name, sizeof(name), "evaluate %s", a->name);
        span = weft_span_start(a->tracer, name, &so);
    }
    weft_run_details_free(d);
    return span;
}

/* The scores (NULL: the status score) as events of @p span (may be NULL), then end it. */
static void
record_scores(struct weft_span *span,
              const struct weft_run_result *result,
              const struct weft_eval_scores *scores)
{
    if (span == NULL) {
        return;
    }
    for (size_t i = 0; scores != NULL && i < scores->count; i++) {
        (void)weft_eval_score_record(span, &scores->scores[i]);
    }
    if (scores == NULL) {
        status_event(span, result);
    }
    weft_span_end(span, 0);
}

static weft_err
score(void *user,
      const struct weft__exp_item *item,
      const struct weft_run_result *result,
      struct weft__exp_verdict *out)
{
    struct adapter *a = user;
    struct weft_eval_subject subject;
    struct weft_eval_scores scores;
    struct weft_eval_context ctx;
    struct weft_span_context parent;
    struct weft_span *span = NULL;
    struct weft_attr lf[WEFT__EXP_LF_ATTRS + 1];
    size_t lf_count = 0;
    char root_hex[2 * WEFT_SPAN_ID_SIZE + 1] = "";
    json_t *arr = NULL;
    weft_err err = WEFT_OK;

    if (a->evaluators == NULL) {
        record_scores(eval_span(a, item, result, root_hex, lf, &lf_count), result, NULL);
        out->scores = weft__exp_status_scores(result, &out->outcome);
        return out->scores != NULL ? WEFT_OK : WEFT_ENOMEM;
    }
    memset(&subject, 0, sizeof(subject));
    subject.input = item->input;
    subject.expected = item->expected;
    subject.output = result->output;
    subject.result = result;
    span = eval_span(a, item, result, root_hex, lf, &lf_count);
    memset(&ctx, 0, sizeof(ctx));
    ctx.judge_provider = a->judge;
    ctx.tracer = a->tracer;
    if (span != NULL) {
        weft_span_context_of(span, &parent);
        ctx.parent = &parent;
        ctx.span_attrs = lf;
        ctx.span_attr_count = lf_count;
    }
    if (a->judge != NULL) {
        pthread_mutex_lock(&a->judge_lock);
    }
    err = weft_evaluators_score(a->evaluators, &subject, &ctx, &scores);
    if (a->judge != NULL) {
        pthread_mutex_unlock(&a->judge_lock);
    }
    if (err != WEFT_OK) {
        if (span != NULL) {
            weft_span_end(span, 0); /* nothing was scored: no score event */
        }
        return err;
    }
    arr = json_array();
    for (size_t i = 0; arr != NULL && i < scores.count; i++) {
        const struct weft_eval_score *s = &scores.scores[i];

        json_array_append_new(arr, json_pack("{s:s, s:f, s:b, s:b, s:s}", "evaluator", s->name,
                                             "value", s->value, "passed", s->is_passed, "errored",
                                             s->is_errored, "explanation", s->explanation));
        if (s->is_errored && out->error == NULL) {
            out->error = strdup(s->explanation);
        }
    }
    out->scores = arr != NULL ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    out->outcome = out->error != NULL ? WEFT_EXPERIMENT_ERRORED
                   : scores.is_passed ? WEFT_EXPERIMENT_PASSED
                                      : WEFT_EXPERIMENT_FAILED;
    out->tokens = scores.input_tokens + scores.output_tokens;
    out->cost_usd = scores.cost_usd;
    record_scores(span, result, &scores);
    weft_eval_scores_cleanup(&scores);
    return out->scores != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
put(void *user,
    const struct weft__exp_item *item,
    const struct weft__exp_result *r,
    char *err,
    size_t err_len)
{
    struct adapter *a = user;
    struct weft_experiment_item it;

    memset(&it, 0, sizeof(it));
    it.item_id = item->id;
    it.run_id = (char *)r->run_id;
    it.status = (char *)weft_experiment_outcome_name(r->outcome);
    it.scores = (char *)r->scores;
    it.tokens = r->tokens > 0 ? (uint64_t)r->tokens : 0;
    it.cost_usd = r->cost_usd;
    it.duration_ns = r->duration_ns;
    it.loops = r->loops;
    it.stuck_loops = r->stuck_loops;
    it.corrections = r->corrections;
    it.llm_calls = r->llm_calls;
    it.error = (char *)r->error;
    return weft_experiment_item_put(a->o->state_path, a->id, &it, err, err_len);
}

/* The experiment's summary (schema weft.experiment/v1's numbers); new text or NULL. */
static char *
summary_json(const struct weft_experiment_report *r)
{
    json_t *doc = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:I, s:f, s:f, s:I, s:f, s:I, s:I, s:I, s:I, s:I, s:I, s:I, "
        "s:I, s:f}",
        "schema", "weft.experiment/v1", "items", (json_int_t)r->items, "passed",
        (json_int_t)r->passed, "failed", (json_int_t)r->failed, "errored", (json_int_t)r->errored,
        "forked", (json_int_t)r->forked, "pass_rate", r->pass_rate, "mean_reward", r->mean_reward,
        "tokens", (json_int_t)r->tokens, "cost_usd", r->cost_usd, "duration_ns",
        (json_int_t)r->duration_ns, "run_ns", (json_int_t)r->run_ns, "loops", (json_int_t)r->loops,
        "stuck_loops", (json_int_t)r->stuck_loops, "corrections", (json_int_t)r->corrections,
        "llm_calls", (json_int_t)r->llm_calls, "saved_llm_calls", (json_int_t)r->saved_llm_calls,
        "saved_tokens", (json_int_t)r->saved_tokens, "saved_cost_usd", r->saved_cost_usd);
    char *text = doc != NULL ? json_dumps(doc, JSON_COMPACT) : NULL;

    json_decref(doc);
    return text;
}

/* The provider of the workflow's model the LLM judges name (by its key in "models" or its
 * model name), when any evaluator is a judge; they must all name the same one. */
static weft_err
judge_setup(struct adapter *a, char *err, size_t err_len)
{
    const struct weft_workflow *wf = a->o->workflow;
    const char *model = NULL;

    for (size_t i = 0; i < weft_evaluators_count(a->evaluators); i++) {
        const char *m = weft_evaluators_model(a->evaluators, i);
        if (m != NULL && model != NULL && strcmp(m, model) != 0) {
            snprintf(err, err_len,
                     "evaluators: the LLM judges name models %s and %s: one model per experiment",
                     model, m);
            return WEFT_EINVAL;
        }
        model = m != NULL ? m : model;
    }
    if (model == NULL) {
        return WEFT_OK;
    }
    for (size_t i = 0; i < wf->model_count; i++) {
        const struct wf_model *m = &wf->models[i];
        if (strcmp(m->name, model) == 0 || (m->model != NULL && strcmp(m->model, model) == 0)) {
            return weft__wf_model_provider(m, &a->judge, err, err_len);
        }
    }
    snprintf(err, err_len,
             "evaluators: the LLM judge's model %s is not one of the workflow's models (give it "
             "under \"models\" in %s)",
             model, weft_workflow_name(wf));
    return WEFT_EINVAL;
}

/* Load the dataset version and the evaluators; begin the experiment. */
static weft_err
setup(struct adapter *a, struct weft_dataset *ds, char *version, char *err, size_t err_len)
{
    const struct weft_experiment_options *o = a->o;
    const char *ev = NULL;
    struct weft_experiment e;
    char hash[WEFT_RUN_SNAPSHOT_HASH_LEN];
    char why[256];
    struct weft_dataset_item *none = NULL;
    size_t none_count = 0;
    weft_err rc = weft_dataset_items_page(o->state_path, o->dataset, o->dataset_version, 0, 0, ds,
                                          &none, &none_count, &a->count);

    if (rc != WEFT_OK) {
        snprintf(err, err_len, "dataset %s%s: %s", o->dataset,
                 o->dataset_version != 0 ? " (that version)" : "",
                 rc == WEFT_ENOTFOUND ? "no such dataset" : weft_strerror(rc));
        return rc;
    }
    ev = o->evaluators != NULL ? o->evaluators : ds->evaluators;
    if (ev != NULL && ev[0] != '\0') {
        rc = weft_evaluators_parse(ev, o->evaluators != NULL ? "--evaluators" : "evaluators",
                                   &a->evaluators, err, err_len);
        if (rc == WEFT_OK && weft_evaluators_count(a->evaluators) == 0) {
            /* "[]" is no evaluators: the run's status decides, not an empty (vacuous) pass */
            weft_evaluators_free(a->evaluators);
            a->evaluators = NULL;
        }
        if (rc == WEFT_OK) {
            rc = judge_setup(a, err, err_len);
        }
        if (rc != WEFT_OK) {
            return rc;
        }
    }
    a->version = o->dataset_version != 0 ? o->dataset_version : ds->version;
    snprintf(version, 24, "%llu", (unsigned long long)a->version);
    if (o->name != NULL) {
        snprintf(a->name, sizeof(a->name), "%s", o->name);
    } else {
        snprintf(a->name, sizeof(a->name), "%s@%s", weft_workflow_name(o->workflow), o->dataset);
    }
    memset(&e, 0, sizeof(e));
    e.name = a->name;
    e.dataset = (char *)o->dataset;
    e.dataset_version = o->dataset_version != 0 ? o->dataset_version : ds->version;
    e.workflow = (char *)weft_workflow_name(o->workflow);
    /* The workflow's version: the hash its runs' snapshots carry; a workflow too large or
     * holding what looks like a credential keeps none, and the experiment records none. */
    if (weft__rt_snapshot_hash(o->workflow, hash, why, sizeof(why)) == WEFT_OK) {
        e.workflow_hash = hash;
    }
    e.from_failure = o->from_failure;
    return weft_experiment_begin(o->state_path, &e, a->id, err, err_len);
}

weft_err
weft_experiment_run(const struct weft_experiment_options *o,
                    struct weft_experiment_report *report,
                    char *err,
                    size_t err_len)
{
    struct adapter a;
    struct weft_dataset ds;
    struct weft__exp_io io;
    struct weft_experiment_options opts;
    char version[24] = "";
    char *summary = NULL;
    weft_err rc = WEFT_OK;

    if (o == NULL || report == NULL || o->workflow == NULL || o->dataset == NULL) {
        snprintf(err, err_len, "experiment: expected a workflow and a dataset");
        return WEFT_EINVAL;
    }
    if (o->concurrency > WEFT_EXPERIMENT_CONCURRENCY_MAX) {
        snprintf(err, err_len, "concurrency: expected 1 to %u, got %u",
                 WEFT_EXPERIMENT_CONCURRENCY_MAX, o->concurrency);
        return WEFT_EINVAL;
    }
    memset(report, 0, sizeof(*report));
    memset(&a, 0, sizeof(a));
    memset(&ds, 0, sizeof(ds));
    a.o = o;
    pthread_mutex_init(&a.judge_lock, NULL);
    if (o->provider != NULL) {
        (void)weft_provider_get_tracer(o->provider, "weft.experiment", NULL, &a.tracer);
    }
    rc = setup(&a, &ds, version, err, err_len);
    if (rc == WEFT_OK) {
        memcpy(report->id, a.id, sizeof(report->id));
        opts = *o;
        opts.name = a.name;
        memset(&io, 0, sizeof(io));
        io.page = page;
        io.score = score;
        io.put = put;
        io.user = &a;
        io.total = a.count;
        io.experiment = a.id;
        io.dataset_version = version;
        a.version_text = version;
        rc = weft__exp_run(&opts, &io, report, err, err_len);
        summary = summary_json(report);
        (void)weft_experiment_end(o->state_path, a.id,
                                  rc != WEFT_OK        ? "failed"
                                  : report->is_aborted ? "aborted"
                                                       : "completed",
                                  summary, NULL, 0);
        free(summary);
    }
    weft_evaluators_free(a.evaluators);
    weft__llm_provider_free(a.judge);
    pthread_mutex_destroy(&a.judge_lock);
    weft_dataset_cleanup(&ds);
    return rc;
}
