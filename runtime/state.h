/* runtime/state.h - the run state store: runs, their plan steps and conversation messages in
 * an embedded SQLite database ($WEFT_HOME/state.db by default).
 *
 * Every change is one transaction, so a reader (`weft runs`, a resumed run) sees a run's
 * state as of a whole decision. The schema is versioned with PRAGMA user_version and written
 * in SQL that PostgreSQL also accepts, so a second backend can follow behind this interface.
 *
 * Thread-safety: confine a handle to one thread (each run opens its own).
 */
#ifndef WEFT_RUNTIME_STATE_H
#define WEFT_RUNTIME_STATE_H

#include "plan.h"

#include <jansson.h>
#include <stdint.h>
#include <weft/common.h>

struct rt_state;

/* Open (creating file and schema when missing). @return WEFT_OK, WEFT_EIO (message in @p err),
 * WEFT_ENOMEM. */
weft_err state_open(const char *path, struct rt_state **out, char *err, size_t err_len);
void state_close(struct rt_state *st);

/* The default path: $WEFT_HOME/state.db (WEFT_HOME defaults to ./.weft, created on demand).
 * Ownership: returns new (weft__free). */
char *state_default_path(void);

weft_err state_run_begin(struct rt_state *st,
                         const char *run_id,
                         const char *workflow,
                         const char *workflow_path,
                         const char *session_id,
                         const char *input,
                         uint64_t started_ns);

/* Record the run's trace as soon as its root span exists, so a killed run can be resumed with
 * a link to it. */
weft_err state_run_trace(struct rt_state *st,
                         const char *run_id,
                         const char *trace_id,
                         const char *root_span_id);

struct state_run_end {
    const char *status;
    const char *reason;
    const char *trace_id;
    const char *output;
    size_t iterations;
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    uint64_t ended_ns;
    double reward;
    size_t corrections;
    const char *loops; /* JSON object {kind: count} */
};

weft_err state_run_end(struct rt_state *st, const char *run_id, const struct state_run_end *end);

/* Insert or update step @p index of the run's plan; @p actor is its agent or executor name. */
weft_err state_step_save(struct rt_state *st,
                         const char *run_id,
                         size_t index,
                         const struct plan_step *step,
                         const char *actor);

/* DAG surgery in one transaction: insert steps [first_new, plan->count), update the failed
 * step (paused, rewired) and record correction @p seq. @p actors[i] names step i's agent or
 * executor. On failure everything is rolled back. @return WEFT_OK, WEFT_EIO, WEFT_ENOMEM. */
weft_err state_surgery(struct rt_state *st,
                       const char *run_id,
                       const struct plan *plan,
                       size_t failed,
                       size_t first_new,
                       unsigned seq,
                       const char *error_type,
                       const json_t *depends_before,
                       const json_t *depends_after,
                       const char *const *actors);

/* The session's messages, oldest first, as [{"role", "content", "route"}] (route may be
 * null), at most the last @p limit. Ownership: caller owns *out (json_decref). */
weft_err
state_messages_load(struct rt_state *st, const char *session_id, size_t limit, json_t **out);

weft_err state_message_add(struct rt_state *st,
                           const char *session_id,
                           const char *run_id,
                           const char *role,
                           const char *content,
                           const char *route);

/* Scripted-provider cursors of a session (see llm_scripted_cursors()), keyed by script path.
 * *out is NULL when none were saved. Ownership: caller owns *out (json_decref). */
weft_err
state_cursors_load(struct rt_state *st, const char *session_id, const char *script, json_t **out);
weft_err state_cursors_save(struct rt_state *st,
                            const char *session_id,
                            const char *script,
                            const json_t *cursors);

#endif /* WEFT_RUNTIME_STATE_H */
