/* runtime/decide/lessons.h - lessons from rewards: the "learn" step of correction mode
 * (docs/memory.md, "Lessons"). A correction that repaired a step is kept, once the step
 * completes, as a lesson: the failure's category (error type and normalised message), the
 * failed task, the corrective plan and the reward. A later failure of a known category gets the
 * best-rewarded lessons in the corrector's context; a later step whose task matches a lesson's
 * is repaired before it runs (the mistake avoided, not fixed). Lessons live in the skill store
 * under the agent name "weft.lessons". Off unless the workflow's "memory" says "lessons".
 * Run lock held for every call. */
#ifndef WEFT_RUNTIME_LESSONS_H
#define WEFT_RUNTIME_LESSONS_H

#include "runtime/run/run.h"

#include "base/buf.h"

#include <jansson.h>

/* After step @p index completed: kept as a lesson when a correction repaired it. */
void weft__rt_lessons_learn(struct run *run, size_t index);

/* Step @p index failed: a mistake, counted as repeated when a lesson already covers it
 * (weft.lessons.mistakes, the repeated-mistake rate). */
void weft__rt_lessons_mistake(struct run *run, size_t index);

/* The lessons for failed step @p index (for the corrector's context): a JSON array of
 * {"id", "reward", "lesson"} best first, or NULL (none, or lessons off). Their ids go on
 * @p span as weft.lessons.used. Ownership: returns new. */
json_t *weft__rt_lessons_for(struct run *run, size_t index, struct weft_span *span);

/* Before the plan runs: each pending step whose task a lesson's failed task covers is repaired
 * before it runs (weft__rt_correct_preempt()). */
void weft__rt_lessons_preempt(struct run *run);

/* Before the LLM plans @p request: the best lessons whose failed task the request covers at
 * least halfway are appended to @p prompt (the planner avoids the mistake), their ids go on
 * @p span as weft.lessons.used. Nothing when none match or lessons are off. */
void weft__rt_lessons_for_plan(struct run *run,
                               const char *request,
                               struct weft_span *span,
                               struct weft__buf *prompt);

#endif /* WEFT_RUNTIME_LESSONS_H */
