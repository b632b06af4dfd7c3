/* runtime/decide/evaluate.c - the evaluator: every step's outcome turned into a reward.
 *
 * Validation is per step type (command_step.c for command, file_writer and http_call; agent.c
 * for the reflection verdict and the optional output schema); this module scores the verdict:
 *
 *   first-try success 1.0, success after retries 1.5, output that fails validation -0.5,
 *   failure -1.0 - 0.1 * retries   (retries = attempts - 1)
 */
#include "runtime/decide/evaluate.h"
#include "runtime/common/attr_keys.h"

#include <stddef.h>

static const char *const eval_names[] = {"success", "invalid_output", "failure"};

const char *
weft__rt_eval_name(rt_eval eval)
{
    return (size_t)eval < sizeof(eval_names) / sizeof(eval_names[0]) ? eval_names[eval] : "unknown";
}

double
weft__rt_reward(rt_eval eval, unsigned retries)
{
    switch (eval) {
    case RT_EVAL_SUCCESS:
        return retries == 0 ? 1.0 : 1.5;
    case RT_EVAL_INVALID_OUTPUT:
        return -0.5;
    case RT_EVAL_FAILURE:
    default:
        return -1.0 - 0.1 * (double)retries;
    }
}

void
weft__rt_evaluate(struct run *run, size_t index, rt_eval eval, struct weft_span *span)
{
    struct plan_step *s = &run->ps.plan.steps[index];
    unsigned retries = s->attempts > 0 ? s->attempts - 1 : 0;
    double reward = weft__rt_reward(eval, retries);

    /* Every evaluation counts in the run's reward: a failed attempt's penalty stays when a
     * retry after correction succeeds, so a run that failed and recovered earns less than one
     * that did not fail (lessons.c avoids the failure). The step keeps its latest reward. */
    s->reward = reward;
    s->has_reward = true;
    run->tel.result->reward += reward;
    weft__rk_set_str(span, WEFT__RK_EVALUATION_RESULT, weft__rt_eval_name(eval));
    weft__rk_set_double(span, WEFT__RK_STEP_REWARD, reward);
    weft__rk_set_int(span, WEFT__RK_STEP_RETRIES, retries);
}
