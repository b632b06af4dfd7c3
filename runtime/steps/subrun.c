/* runtime/steps/subrun.c - another workflow run as one step (subrun.h): the flow engine's
 * "workflow" nodes and team agents share it. The sub-run is an ordinary run (started through the
 * run service run_nested) with this run's options, so it is traced, stored and budgeted like any
 * run, and its root span nests under the step.
 */
#include "runtime/steps/subrun.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"
#include "runtime/decide/evaluate.h"
#include "runtime/workflow/workflow.h"

#include <string.h>

void
weft__rt_run_subworkflow(struct run *run,
                         size_t index,
                         const struct weft_workflow *subwf,
                         const struct weft_span_context *under)
{
    struct plan_step *s = &run->ps.plan.steps[index];
    struct weft_run_options ro;
    struct weft_run_result *res = NULL;
    struct weft_span_context parent;
    struct weft__buf input;
    char error[256] = "";
    weft_err err = WEFT_OK;

    weft__plan_step_set_status(&run->ps.plan, s, STEP_IN_PROGRESS);
    s->started_ns = weft__now_ns();
    weft__rt_save_step(run, index);
    weft__buf_init(&input, 0);
    weft__buf_printf(&input, "%s", s->task);
    for (size_t d = 0; d < s->depends_count; d++) {
        size_t j = weft__plan_find(&run->ps.plan, s->depends_on[d]);
        if (j != (size_t)-1 && run->ps.plan.steps[j].result != NULL) {
            weft__buf_printf(&input, "\n\nResult of %s: %s", run->ps.plan.steps[j].id,
                             run->ps.plan.steps[j].result);
        }
    }
    parent = under != NULL && weft_span_context_is_valid(under) ? *under : s->parent_ctx;
    if (!weft_span_context_is_valid(&parent)) {
        weft_span_context_of(run->tel.root, &parent);
    }
    parent.trace_state = NULL;
    memset(&ro, 0, sizeof(ro));
    ro.provider = run->cfg.opts->provider;
    ro.state_path = run->cfg.opts->state_path;
    ro.workspace = run->cfg.workspace;
    ro.session_id = run->store.session_id;
    ro.input = input.data;
    ro.capture_content = run->cfg.capture_content ? 1 : 0;
    ro.abort_flag = run->cfg.opts->abort_flag;
    ro.tools = run->cfg.opts->tools;
    ro.user_id = run->cfg.opts->user_id;
    ro.tags = run->cfg.opts->tags;
    ro.tag_count = run->cfg.opts->tag_count;
    /* The caller's span attributes with this run's root id: the sub-run's spans belong to the
     * same trace and, for Langfuse, to the same experiment item. */
    ro.span_attrs = run->tel.span_attrs;
    ro.span_attr_count = run->tel.span_attr_count;
    ro.parent_context = weft_span_context_is_valid(&parent) ? &parent : NULL;
    weft__rt_unlock(run);
    err = run->svc->run_nested(run->svc->ctx, subwf, &ro, &res, error, sizeof(error));
    weft__rt_lock(run);
    weft__buf_cleanup(&input);
    s = &run->ps.plan.steps[index];
    s->ended_ns = weft__now_ns();
    if (err == WEFT_OK) {
        run->tel.result->input_tokens += res->input_tokens;
        run->tel.result->output_tokens += res->output_tokens;
        run->tel.result->cost_usd += res->cost_usd;
        run->tel.result->llm_calls += res->llm_calls;
        run->tel.result->tool_calls += res->tool_calls;
    }
    weft__free(s->result);
    s->result = NULL;
    if (err == WEFT_OK && res->status == WEFT_RUN_COMPLETED) {
        s->result = res->output != NULL ? weft__strdup(res->output) : weft__strdup("");
        weft__plan_step_set_status(&run->ps.plan, s, STEP_COMPLETED);
        weft__rt_evaluate(run, index, RT_EVAL_SUCCESS, NULL);
    } else {
        weft__free(s->feedback);
        s->feedback = weft__strdup(err != WEFT_OK ? error : res->reason);
        weft__plan_step_set_status(&run->ps.plan, s, STEP_FAILED);
        weft__rt_evaluate(run, index, RT_EVAL_FAILURE, NULL);
    }
    weft_run_result_free(res);
    weft__rt_save_step(run, index);
}
