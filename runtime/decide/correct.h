/* runtime/decide/correct.h - correction mode (correct.c). */
#ifndef WEFT_RUNTIME_CORRECT_H
#define WEFT_RUNTIME_CORRECT_H

#include "runtime/run/run.h"

/* Ask for a corrective plan for failed step @p index and perform the DAG surgery.
 * @return true when the plan was rewired (the step is paused and will be retried after the
 * corrective steps); false when this attempt failed (invalid plan, LLM or store failure:
 * traced, counted). */
bool weft__rt_correct(struct run *run, size_t index);

/* A lesson's corrective @p plan ({"steps": [..., {"executor": "retry", ...}]}) applied to step
 * @p index before it runs, as DAG surgery without asking the model: the step waits for the
 * corrective steps (paused) and then runs. The `correct` span says weft.correction.preemptive
 * and weft.lessons.used. @return true when applied. Run lock held. */
bool
weft__rt_correct_preempt(struct run *run, size_t index, const json_t *plan, const char *lesson_id);

#endif /* WEFT_RUNTIME_CORRECT_H */
