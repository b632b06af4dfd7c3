/* runtime/correct.h - correction mode (correct.c). */
#ifndef WEFT_RUNTIME_CORRECT_H
#define WEFT_RUNTIME_CORRECT_H

#include "run.h"

/* Ask for a corrective plan for failed step @p index and perform the DAG surgery.
 * @return true when the plan was rewired (the step is paused and will be retried after the
 * corrective steps); false when this attempt failed (invalid plan, LLM or store failure:
 * traced, counted). */
bool weft__rt_correct(struct run *run, size_t index);

#endif /* WEFT_RUNTIME_CORRECT_H */
