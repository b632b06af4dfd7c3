/* runtime/engine/engine_services.c - the small run services every module of a run calls through
 * run.h: the clock and the budgets, progress events, the run lock and its condition, saving a
 * step, counting loops, decisions and verdicts into the result, the parallel width. Private to
 * the engine (engine.h); engine.c wires them into the run's services. */
#define _GNU_SOURCE /* strcasestr, realpath */

#include "runtime/common/secrets.h"
#include "runtime/decide/correct.h"
#include "runtime/decide/evaluate.h"
#include "runtime/decide/lessons.h"
#include "runtime/decide/router.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/fork.h"
#include "runtime/engine/parallel.h"
#include "runtime/mcp/hub.h"
#include "runtime/memory/embed.h"
#include "runtime/observe/metrics_store.h"
#include "runtime/observe/semconv.h"
#include "runtime/observe/spans.h"
#include "runtime/replay/replay.h"
#include "runtime/state/durable.h"
#include "runtime/state/snapshot.h"
#include "runtime/steps/agent.h"
#include "runtime/steps/architect.h"
#include "runtime/steps/command_step.h"
#include "runtime/steps/flow.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "tracing/ids.h"

#include <weft/weft.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------------------------------ */
/* Time, budgets, progress, result bookkeeping                                                 */

void
weft__eng_lock(void *ctx)
{
    if (ENG(ctx)->is_parallel) {
        pthread_mutex_lock(&ENG(ctx)->lock);
    }
}

/* Letting go of the run is where it may block (an LLM call, a tool, a remote executor's
 * wait): what the step held back is committed first (weft__state_commit_held()), so that no
 * other process waits on it and a crash from here on loses none of it. */
void
weft__eng_unlock(void *ctx)
{
    struct run *run = ctx;

    (void)weft__state_flush(run->store.state);
    if (ENG(ctx)->is_parallel) {
        pthread_mutex_unlock(&ENG(ctx)->lock);
    }
}

void
weft__eng_set_parallel(void *ctx, bool is_parallel)
{
    ENG(ctx)->is_parallel = is_parallel;
}

void
weft__eng_cond_wait(void *ctx, pthread_cond_t *cond)
{
    pthread_cond_wait(cond, &ENG(ctx)->lock);
}

uint64_t
weft__eng_now_mono(void *ctx)
{
    (void)ctx;
    return weft__monotonic_ns();
}

void
weft__eng_count_loop(void *ctx, weft_loop_kind kind)
{
    struct run *run = ctx;

    run->tel.result->loops[kind]++;
    weft__rt_metrics_loop(run->tel.metrics, kind);
}

void
weft__eng_progress(void *ctx,
                   weft_run_event_kind kind,
                   const struct plan_step *step,
                   const char *detail)
{
    struct run *run = ctx;
    struct weft_run_event ev;
    const struct weft_run_result *r = run->tel.result;

    if (run->cfg.opts->progress == NULL) {
        return;
    }
    memset(&ev, 0, sizeof(ev));
    ev.kind = kind;
    ev.run_id = run->store.run_id;
    ev.step_id = step != NULL ? step->id : NULL;
    ev.agent = step != NULL ? weft__rt_step_actor(run, step) : NULL;
    ev.detail = detail != NULL ? detail : "";
    ev.iteration = r->iterations;
    ev.steps_done = weft__plan_count_status(&run->ps.plan, STEP_COMPLETED);
    ev.steps_total = run->ps.plan.count;
    ev.elapsed_ns = weft__monotonic_ns() - run->cfg.started_mono;
    ev.input_tokens = r->input_tokens;
    ev.output_tokens = r->output_tokens;
    ev.cost_usd = r->cost_usd;
    run->cfg.opts->progress(&ev, run->cfg.opts->progress_user_data);
}

static bool
grow(void **items, size_t *cap, size_t count, size_t size)
{
    void *grown = NULL;
    size_t new_cap = *cap == 0 ? 16 : *cap * 2;

    if (count < *cap) {
        return true;
    }
    grown = weft__realloc(*items, new_cap * size);
    if (grown == NULL) {
        return false;
    }
    *items = grown;
    *cap = new_cap;
    return true;
}

void
weft__eng_add_decision(void *ctx, rt_layer layer, const char *next, const char *reason)
{
    struct run *run = ctx;
    struct weft_run_result *r = run->tel.result;
    struct weft_run_decision *d = NULL;

    if (!grow((void **)&r->decisions, &ENG(run)->decisions_cap, r->decision_count, sizeof(*d))) {
        ENG(run)->oom = WEFT_ENOMEM;
        return;
    }
    d = &r->decisions[r->decision_count];
    d->layer = weft__strdup(weft__rt_layer_name(layer));
    d->next = weft__strdup(next);
    d->reason = weft__strdup(reason);
    if (d->layer == NULL || d->next == NULL || d->reason == NULL) {
        weft__free(d->layer);
        weft__free(d->next);
        weft__free(d->reason);
        ENG(run)->oom = WEFT_ENOMEM;
        return;
    }
    r->decision_count++;
}

void
weft__eng_add_verdict(void *ctx, const char *agent, const char *verdict)
{
    struct run *run = ctx;
    struct weft_run_result *r = run->tel.result;
    struct weft__buf b;

    if (!grow((void **)&r->verdicts, &ENG(run)->verdicts_cap, r->verdict_count, sizeof(char *))) {
        ENG(run)->oom = WEFT_ENOMEM;
        return;
    }
    weft__buf_init(&b, 0);
    if (weft__buf_printf(&b, "%s:%s", agent, verdict) != WEFT_OK) {
        weft__buf_cleanup(&b);
        ENG(run)->oom = WEFT_ENOMEM;
        return;
    }
    r->verdicts[r->verdict_count++] = b.data;
}

void
weft__eng_save_step(void *ctx, size_t index)
{
    struct run *run = ctx;
    const struct plan_step *s = &run->ps.plan.steps[index];
    bool is_final = s->status == STEP_COMPLETED || s->status == STEP_FAILED;
    uint64_t events = 0;

    if (run->store.state == NULL) {
        return;
    }
    /* A step that ended is saved with the script cursors it moved, in one transaction, and a
     * resumed run never finds the step done with its answers not taken (or the other way
     * round). Its commit is held (weft__state_commit_held()): the decision's writes and the
     * next step's start join it, and the run's next letting go of its lock commits them all,
     * before anything leaves the process (weft__eng_unlock()). */
    if (is_final) {
        (void)weft__state_begin(run->store.state);
    }
    (void)weft__state_step_save(run->store.state, run->store.run_id, index, s,
                                weft__rt_step_actor(run, s));
    if (is_final) {
        weft__rt_cursors_save(run);
        (void)weft__state_commit_held(run->store.state);
    }
    if (s->status != STEP_PENDING && s->status != STEP_IN_PROGRESS) {
        weft__rt_checkpoint(run); /* heartbeat, spans written through (durable.c) */
    }
    /* Throttled; never inside a transaction of the run's own (the initial plan's): the metrics
     * store writes on a connection of its own and would wait on that transaction's lock. A
     * held commit is flushed first when a snapshot is due; when none is, the events are only
     * noted, and the store's flusher writes them one interval later. */
    events = weft__rt_metrics_events(run->tel.metrics);
    if (weft__rt_mstore_is_due(run->tel.mstore, events)) {
        (void)weft__state_flush(run->store.state);
    }
    if (!weft__state_in_transaction(run->store.state)) {
        weft__rt_mstore_checkpoint(run->tel.mstore, events, false);
    } else {
        weft__rt_mstore_note(run->tel.mstore, events);
    }
}
