/* runtime/decide/evaluate.h - the evaluator (evaluate.c): a step's outcome scored as a reward. */
#ifndef WEFT_RUNTIME_EVALUATE_H
#define WEFT_RUNTIME_EVALUATE_H

#include "runtime/run/run.h"

typedef enum rt_eval { RT_EVAL_SUCCESS = 0, RT_EVAL_INVALID_OUTPUT, RT_EVAL_FAILURE } rt_eval;

const char *weft__rt_eval_name(rt_eval eval);
/* first-try success 1.0, success after retries 1.5, invalid output -0.5,
 * failure -1.0 - 0.1 * retries. */
double weft__rt_reward(rt_eval eval, unsigned retries);
/* Score step @p index (retries = attempts - 1), add it to the run's reward (replacing an
 * earlier score of the same step) and record it on @p span. Uses the plan state and the
 * telemetry part's result. */
void weft__rt_evaluate(struct run *run, size_t index, rt_eval eval, struct weft_span *span);

#endif /* WEFT_RUNTIME_EVALUATE_H */
