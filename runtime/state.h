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
                         const char *session_id,
                         const char *input,
                         uint64_t started_ns);

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
};

weft_err state_run_end(struct rt_state *st, const char *run_id, const struct state_run_end *end);

/* Insert or update step @p index of the run's plan. */
weft_err state_step_save(struct rt_state *st,
                         const char *run_id,
                         size_t index,
                         const struct plan_step *step,
                         const char *agent_name);

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
