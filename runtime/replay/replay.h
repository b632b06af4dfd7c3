/* runtime/replay/replay.h - replaying a stored run (`weft replay`) and the one choke point every
 * tool call goes through, so that a run keeps its tool results and a replay answers them.
 *
 * Recording: each tool call (native, MCP, a command step's own tool, a command step's check) is
 * kept with the run in the state store, keyed by (step id, attempt, seq), seq counting the
 * calls of one step attempt from 1 on the thread that runs it (weft__rt_step_begin()). LLM
 * exchanges are kept by the engine already (llm_exchanges).
 *
 * Replaying: struct rt_replay holds the original run's exchanges and tool results. Its LLM
 * provider compares each request (model and messages, redacted as they were stored) with the
 * original's request at the same position of the same (agent or flow step, purpose) queue and
 * answers with the stored response; weft__rt_tool_call() compares each tool call with the
 * original's call of the same key and answers with its stored outcome, running nothing. The
 * first difference is kept (only the first: later ones follow from it) and the run stops at its
 * next check (weft__rt_aborted()); at the run's end, a stored call nobody asked for is a
 * difference too.
 *
 * Thread-safety: struct rt_replay is shared by a run's worker threads (its own mutex); the
 * current step is per thread.
 */
#ifndef WEFT_RUNTIME_REPLAY_H
#define WEFT_RUNTIME_REPLAY_H

#include "runtime/llm/llm.h"
#include "runtime/state/state.h"
#include "runtime/tools/tools.h"

#include <jansson.h>
#include <stdbool.h>
#include <weft/runtime.h>

struct run;
struct rt_replay;

/* The calling thread now runs attempt @p attempt of step @p step_id: its tool calls count from
 * 1 again. NULL clears it (between steps: supervisor calls belong to no step). */
void weft__rt_step_begin(const char *step_id, unsigned attempt);

/* Load what run @p ref (an id, a unique prefix or "last") stored: exchanges and tool results.
 * @return WEFT_OK, WEFT_ENOTFOUND (no such run: @p error says so), WEFT_EINVAL (ambiguous, or
 * the run is still running), WEFT_EIO, WEFT_ENOMEM. Ownership: caller owns *out
 * (weft__replay_free()); *info receives the run's stored row (weft__state_info_cleanup()). */
weft_err weft__replay_open(struct rt_state *st,
                           const char *ref,
                           struct rt_replay **out,
                           struct weft_run_info *info,
                           char *error,
                           size_t error_len);
void weft__replay_free(struct rt_replay *rp);

/* The original run's id (as stored, whatever ref named it). Borrowed until weft__replay_free(). */
const char *weft__replay_run_id(const struct rt_replay *rp);

/* The LLM provider that answers from @p rp (borrowed: free the provider first).
 * @return WEFT_OK, WEFT_ENOMEM. Ownership: caller owns *out (weft__llm_provider_free()). */
weft_err weft__replay_provider_new(struct rt_replay *rp, struct llm_provider **out);

/* Has the replay found a difference? With @p reason (may be NULL), a sentence naming it. */
bool weft__replay_diverged(struct rt_replay *rp, char *reason, size_t reason_len);

/* The end of a replay: stored calls never asked for count as a difference, the report is made
 * and its outcome put on @p root (weft.replay.*). Ownership: caller owns *out
 * (weft__replay_report_free()); NULL when out of memory. */
struct weft_replay_report *weft__replay_finish(struct rt_replay *rp, struct weft_span *root);
void weft__replay_report_free(struct weft_replay_report *report);

/* Runs one tool call: ctx is the caller's, out receives the outcome. Called without the run
 * lock. */
typedef weft_err (*rt_tool_fn)(void *ctx, struct tool_outcome *out);

/* One tool call of the current step attempt, named @p tool, of @p kind ("native", "mcp",
 * "step", "check") with arguments @p args (may be NULL). In a replay the original's outcome
 * answers it and @p fn is not called (a difference answers a failed outcome, error type
 * "replay_diverged"); otherwise @p fn runs it with the run lock released. Either way the call
 * is kept with the run. Called with the run lock held. @return what @p fn returned (or the
 * stored result). Ownership: *out is the caller's to clean up (weft__tool_outcome_cleanup()). */
weft_err weft__rt_tool_call(struct run *run,
                            const char *tool,
                            const char *kind,
                            const json_t *args,
                            rt_tool_fn fn,
                            void *ctx,
                            struct tool_outcome *out);

/* The span context of a stored run's root span (trace and span id in @p info), for a link;
 * zeroed when the run was not traced. */
void weft__rt_stored_root(const struct weft_run_info *info, struct weft_span_context *out);

#endif /* WEFT_RUNTIME_REPLAY_H */
