/* runtime/workflow/plan.h - the plan every policy works on: an ordered list of steps with
 * dependencies and a status, and the checks a plan must pass (unique ids, known dependencies, no
 * cycles).
 *
 * The plan is the engine's state. Steps are only ever appended (loop-back replans, a final
 * step; DAG surgery will insert and rewire in a later module), and their order is the order
 * the router considers them in.
 *
 * Thread-safety: none; a plan belongs to its run.
 */
#ifndef WEFT_RUNTIME_PLAN_H
#define WEFT_RUNTIME_PLAN_H

#include "base/uuid.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <weft/trace.h>

#define PLAN_MAX_STEPS 100000 /* a bound on memory; appends beyond it fail with WEFT_ELIMIT */

typedef enum step_status {
    STEP_PENDING = 0,
    STEP_IN_PROGRESS,
    STEP_COMPLETED,
    STEP_FAILED,
    STEP_PAUSED,
    STEP_SKIPPED
} step_status;

const char *weft__step_status_name(step_status status);
/* @return false for an unknown name. */
bool weft__step_status_parse(const char *name, step_status *out);

/* Who carries a step out: an agent (LLM), or an executor that needs no model. */
typedef enum step_executor {
    EXEC_AGENT = 0,
    EXEC_COMMAND,     /* spec: argv, expect_output (regex), timeout_s */
    EXEC_FILE_WRITER, /* spec: path, content */
    EXEC_HTTP_CALL    /* spec: url, timeout_s */
} step_executor;

const char *weft__step_executor_name(step_executor executor);
bool weft__step_executor_parse(const char *name, step_executor *out);

struct plan_step {
    char *id;
    size_t agent; /* index into the workflow's agents */
    char *task;
    char **depends_on; /* step ids */
    size_t depends_count;
    step_status status;
    unsigned attempts;
    char *result;                       /* output of the last successful attempt */
    char *feedback;                     /* last reflection feedback or failure reason */
    char *requested_by;                 /* id of the step that asked for this one, or NULL */
    struct weft_span_context requester; /* span of the requesting step (for a link) */
    bool has_requester;
    step_executor executor;
    json_t *spec;  /* executor parameters (owned; NULL for agents without options) */
    char *parent;  /* correction steps: the failed step they repair */
    double reward; /* evaluator reward of the last evaluation */
    bool has_reward;
    char *error_type; /* last failure's type ("exit_status", "timeout", ...) */
    json_t *error;    /* last failure's details for the corrector (owned) */
    json_t *lesson;   /* the corrective plan that repaired this step (owned): kept as a lesson
                       * when the step then completes (lessons.c) */
    struct weft_span_context span; /* the last attempt's span (links from corrections) */
    uint64_t started_ns;
    uint64_t ended_ns;
    char *extra_input;                   /* flows: feedback of a loop that re-opened the step */
    struct weft_span_context parent_ctx; /* flows: the span to nest under (a fan-out item) */
    int flow_node;                       /* flows: index of the node, or -1 */
    int item;                            /* flows: fan-out item index, or -1 */
    /* Distributed runs (docs/distributed.md): the task's id on the broker and in the state
     * (tasks.task_id), made when the step is appended and kept across attempts and resumes. */
    char task_uuid[WEFT_UUID_LEN + 1];
    unsigned retries;   /* redeliveries of its task messages (a worker died or the broker
                         * restarted mid-task) */
    bool is_dispatched; /* handed to a remote executor and no result yet */
    bool is_running;    /* on a thread of the engine's step pool now (parallel.h) */
};

#define STEP_STATUS_COUNT 6

/* A plan keeps the answers to the engine's per-step questions (a step by id, how many steps
 * have a status, the first step that has not ended) current as it changes, so each costs the
 * same at step 10 and step 10,000. Every status change goes through weft__plan_set_status(). */
struct plan {
    struct plan_step *steps;
    size_t count;
    size_t cap;
    unsigned version;   /* bumped by every change of shape (append) */
    size_t next_number; /* for generated ids "s<N>" */
    size_t *ids;        /* open addressing over step ids: a slot holds an index + 1, 0 is empty */
    size_t ids_cap;     /* a power of two above twice count, or 0 (find scans) */
    size_t status_count[STEP_STATUS_COUNT]; /* steps per status */
    size_t open_from; /* every step before it has ended (completed, failed or skipped) */
};

void weft__plan_init(struct plan *plan);
void weft__plan_cleanup(struct plan *plan);

/* Append a step. @p id NULL generates "s<N>". Copies every string.
 * @return WEFT_OK, WEFT_ELIMIT (PLAN_MAX_STEPS), WEFT_ENOMEM; the plan is unchanged on error. */
weft_err weft__plan_append(struct plan *plan,
                           const char *id,
                           size_t agent,
                           const char *task,
                           const char *const *depends_on,
                           size_t depends_count,
                           size_t *index);

/* Drop the steps from @p count on (undoing appends). */
void weft__plan_truncate(struct plan *plan, size_t count);

/* Index of step @p id (the first step of that id), or (size_t)-1. */
size_t weft__plan_find(const struct plan *plan, const char *id);

/* Set the status of step @p i: the one way a step's status changes, so that the plan's counts
 * and its first open step stay right. */
void weft__plan_set_status(struct plan *plan, size_t i, step_status status);
/* The same for step @p s of @p plan (a step outside the plan only gets the status). */
void weft__plan_step_set_status(struct plan *plan, struct plan_step *s, step_status status);

/* The first step in progress that no thread runs now (one a resume found in progress), or
 * (size_t)-1. */
size_t weft__plan_in_progress(const struct plan *plan);

/* Mark pending steps whose dependencies failed or were skipped as skipped (repeatedly, so
 * the whole chain goes). @return how many were skipped. */
size_t weft__plan_skip_blocked(struct plan *plan);

/* True when every dependency of step @p i is completed. */
bool weft__plan_is_ready(const struct plan *plan, size_t i);

/* The first pending or paused step whose dependencies are completed and that no thread runs
 * (plan_step.is_running), or (size_t)-1. When
 * @p agent is not (size_t)-1, only agent steps of that agent count. A paused step is one
 * waiting for its corrective steps; once they complete it is retried. */
size_t weft__plan_next_ready(const struct plan *plan, size_t agent);

/* Count steps with @p status (kept as the plan changes: no scan). */
size_t weft__plan_count_status(const struct plan *plan, step_status status);

/* Checks on a list of (id, depends_on) pairs. */
struct plan_check {
    char **ids;
    const char *const **deps;
    size_t *dep_counts;
    size_t count;
    size_t cap;
    bool is_oom;
    size_t bad_index;  /* the first step at fault */
    char message[256]; /* what is wrong */
};

void weft__plan_check_init(struct plan_check *check);
/* Borrow @p id and @p deps until weft__plan_check_cleanup(). */
void weft__plan_check_add(struct plan_check *check,
                          const char *id,
                          const char *const *deps,
                          size_t dep_count);
/* @return WEFT_OK, WEFT_EPARSE (duplicate id, unknown dependency, self-dependency, cycle:
 * see message and bad_index), WEFT_ENOMEM. */
weft_err weft__plan_check_run(struct plan_check *check);
void weft__plan_check_cleanup(struct plan_check *check);

#endif /* WEFT_RUNTIME_PLAN_H */
