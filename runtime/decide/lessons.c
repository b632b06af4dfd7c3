/* runtime/decide/lessons.c - lessons from rewards (lessons.h).
 *
 * A lesson is a skill-store item of the pseudo-agent "weft.lessons": its task is the failed
 * step's task, its solution a JSON text {"error_type", "message", "plan"} with the corrective
 * plan that worked, its reward the repaired step's. Finding lessons uses the same coverage
 * ranking as skills (memory.c), so "a task that resembles one that failed before" means the
 * same thing for both. The thresholds differ on purpose: guiding a corrector needs only a
 * likely match (COVER_GUIDE), repairing a step before it runs needs a near-identical task
 * (COVER_PREEMPT), since it changes the plan without asking anyone.
 *
 * With memory.embeddings, a lesson is saved with its task's vector as a skill is, but lessons
 * are still found by coverage alone: a preemptive repair changes the plan without asking
 * anyone, so "the same task" stays a matter of shared words, not of nearby meanings.
 */
#include "runtime/decide/lessons.h"
#include "runtime/common/attr_keys.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "runtime/decide/correct.h"
#include "runtime/memory/embed.h"
#include "runtime/memory/memory.h"
#include "runtime/observe/metrics.h"
#include "runtime/state/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LESSONS_AGENT   "weft.lessons"
#define COVER_GUIDE     0.5
#define COVER_PREEMPT   0.9
#define GUIDE_K         2u
#define PLAN_LESSON_MAX 1500 /* bytes of one lesson shown to the planner */

static const char *
error_type_of(const struct plan_step *s)
{
    const char *t = json_string_value(json_object_get(s->error, "error_type"));

    return t != NULL ? t : s->error_type != NULL ? s->error_type : "failed";
}

/* The best lessons whose failed task covers @p task at least @p min_score. */
static void
find(struct run *run,
     const char *task,
     size_t k,
     double min_score,
     struct weft__skill **hits,
     size_t *n)
{
    if (weft__rt_memory_search(run, LESSONS_AGENT, task, k, min_score, hits, n) != WEFT_OK) {
        *hits = NULL;
        *n = 0;
    }
}

void
weft__rt_lessons_learn(struct run *run, size_t index)
{
    const struct plan_step *s = &run->ps.plan.steps[index];
    struct weft__skill lesson;
    struct rt_embedding vec;
    json_t *text = NULL;
    char *solution = NULL;

    if (!run->cfg.wf->memory.is_lessons || s->task == NULL) {
        return;
    }
    if (s->status != STEP_COMPLETED || s->lesson == NULL || !s->has_reward ||
        run->store.state == NULL) {
        return;
    }
    /* The vector first: the call releases the run lock, so the step is read again after it. */
    (void)weft__rt_memory_embed(run, s->task, &s->span, &vec);
    s = &run->ps.plan.steps[index];
    text = json_pack("{s:s, s:s?, s:O}", "error_type", error_type_of(s), "message",
                     json_string_value(json_object_get(s->error, "message")), "plan", s->lesson);
    solution = text != NULL ? json_dumps(text, JSON_COMPACT) : NULL;
    if (solution != NULL) {
        memset(&lesson, 0, sizeof(lesson));
        lesson.agent = LESSONS_AGENT;
        lesson.task = s->task;
        lesson.solution = solution;
        lesson.workflow = run->cfg.wf->name;
        lesson.run_id = run->store.run_id;
        lesson.reward = s->reward;
        if (weft__rt_memory_save(run, &lesson, &vec, NULL) == WEFT_OK) {
            weft__rt_metrics_lesson(run->tel.metrics, "learned");
        }
    }
    weft__rt_embedding_cleanup(&vec);
    free(solution);
    json_decref(text);
}

void
weft__rt_lessons_mistake(struct run *run, size_t index)
{
    const struct plan_step *s = &run->ps.plan.steps[index];
    struct weft__skill *hits = NULL;
    size_t n = 0;

    if (!run->cfg.wf->memory.is_lessons || s->task == NULL || s->status != STEP_FAILED) {
        return;
    }
    find(run, s->task, 1, COVER_GUIDE, &hits, &n);
    weft__rt_metrics_mistake(run->tel.metrics, error_type_of(s), n > 0);
    weft__skills_free(hits, n);
}

json_t *
weft__rt_lessons_for(struct run *run, size_t index, struct weft_span *span)
{
    const struct plan_step *s = &run->ps.plan.steps[index];
    struct weft__skill *hits = NULL;
    size_t n = 0;
    json_t *out = NULL;
    const char *ids[GUIDE_K];
    size_t shown = 0;

    if (!run->cfg.wf->memory.is_lessons || s->task == NULL) {
        return NULL;
    }
    find(run, s->task, GUIDE_K, COVER_GUIDE, &hits, &n);
    out = n > 0 ? json_array() : NULL;
    for (size_t i = 0; out != NULL && i < n; i++) {
        json_t *lesson = json_loads(hits[i].solution, 0, NULL);

        if (lesson == NULL) {
            WEFT_LOG(WEFT_LOG_WARN, "lesson %s: its stored plan is not JSON: not shown",
                     hits[i].id);
            continue;
        }
        if (json_array_append_new(out, json_pack("{s:s, s:f, s:o}", "id", hits[i].id, "reward",
                                                 hits[i].reward, "lesson", lesson)) == 0) {
            ids[shown++] = hits[i].id;
        }
    }
    if (shown > 0) {
        weft__rk_set_str_array(span, WEFT__RK_LESSONS_USED, ids, shown);
        weft__rt_metrics_lesson(run->tel.metrics, "guided");
    } else {
        json_decref(out);
        out = NULL;
    }
    weft__skills_free(hits, n);
    return out;
}

void
weft__rt_lessons_preempt(struct run *run)
{
    size_t count = run->ps.plan.count;

    if (!run->cfg.wf->memory.is_lessons) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        struct weft__skill *hits = NULL;
        size_t n = 0;
        json_t *lesson = NULL;
        if (run->ps.plan.steps[i].status != STEP_PENDING || run->ps.plan.steps[i].task == NULL ||
            run->ps.plan.steps[i].parent != NULL) {
            continue;
        }
        find(run, run->ps.plan.steps[i].task, 1, COVER_PREEMPT, &hits, &n);
        lesson = n > 0 && hits[0].reward > 0 ? json_loads(hits[0].solution, 0, NULL) : NULL;
        if (json_is_object(json_object_get(lesson, "plan")) &&
            weft__rt_correct_preempt(run, i, json_object_get(lesson, "plan"), hits[0].id)) {
            weft__rt_metrics_lesson(run->tel.metrics, "preempted");
        }
        json_decref(lesson);
        weft__skills_free(hits, n);
    }
}

void
weft__rt_lessons_for_plan(struct run *run,
                          const char *request,
                          struct weft_span *span,
                          struct weft__buf *prompt)
{
    struct weft__skill *hits = NULL;
    size_t n = 0;
    const char *ids[GUIDE_K];

    if (!run->cfg.wf->memory.is_lessons || request == NULL) {
        return;
    }
    find(run, request, GUIDE_K, COVER_GUIDE, &hits, &n);
    for (size_t i = 0; i < n; i++) {
        if (i == 0) {
            weft__buf_printf(prompt, "\n\nLessons from earlier runs (a task that failed, why, "
                                     "and the corrective steps that made it work; plan so the "
                                     "mistake does not happen again):");
        }
        weft__buf_printf(prompt, "\n- lesson %s (reward %.2f): task \"%.300s\": %.*s", hits[i].id,
                         hits[i].reward, hits[i].task, PLAN_LESSON_MAX, hits[i].solution);
        ids[i] = hits[i].id;
    }
    if (n > 0) {
        weft__rk_set_str_array(span, WEFT__RK_LESSONS_USED, ids, n);
        weft__rt_metrics_lesson(run->tel.metrics, "planned");
    }
    weft__skills_free(hits, n);
}
