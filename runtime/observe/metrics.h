/* runtime/observe/metrics.h - collaboration metrics: recorded by the runtime at the places that
 * emit spans, with bounded labels only (workflow, agent, tool, verdict, loop kind, outcome, model;
 * never a run or trace id: those belong to spans and exemplars).
 *
 * Every family is created when a run starts, so a scrape lists them all (at zero) before the
 * first event. A run without a meter records nothing and pays one NULL test per hook.
 *
 * Thread-safety: hooks may be called from any run thread (the metrics SDK is thread-safe).
 */
#ifndef WEFT_RUNTIME_METRICS_H
#define WEFT_RUNTIME_METRICS_H

#include <stdbool.h>
#include <stdint.h>
#include <weft/metrics.h>
#include <weft/runtime.h>

struct rt_metrics;

/* Create (or find) every instrument on @p meter. NULL meter: returns NULL (metrics off). */
struct rt_metrics *weft__rt_metrics_new(struct weft_meter *meter, const char *workflow);
/* As weft__rt_metrics_new() on @p run_meter (the run's own meter, persisted by metrics_store.c),
 * with every measurement also recorded on @p meter (the caller's, may be NULL). A NULL
 * @p run_meter is weft__rt_metrics_new(meter, workflow). Free with weft__rt_metrics_free(). */
struct rt_metrics *weft__rt_metrics_new_tee(struct weft_meter *run_meter,
                                            struct weft_meter *meter,
                                            const char *workflow);
void weft__rt_metrics_free(struct rt_metrics *m);
/* How many measurements @p m has taken (0 for NULL): tells a snapshot whether anything moved. */
uint64_t weft__rt_metrics_events(struct rt_metrics *m);
/* The workflow label of @p m ("" when none). */
const char *weft__rt_metrics_workflow(const struct rt_metrics *m);

void weft__rt_metrics_run_start(struct rt_metrics *m, uint64_t *token);
void weft__rt_metrics_run_end(struct rt_metrics *m,
                              uint64_t token,
                              const struct weft_run_result *result);
void
weft__rt_metrics_agent(struct rt_metrics *m, const char *agent, bool is_success, double seconds);
void weft__rt_metrics_handoff(struct rt_metrics *m, const char *from, const char *to);
/* Create the series of @p m's workflow whose labels are known in advance at 0: stuck loops of
 * every watchdog kind and breaker trips, so that their first event is an increase in Prometheus.
 * Nothing for a NULL @p m or an empty workflow. weft__rt_metrics_new_tee() calls it for the
 * caller's meter; weft serve's fold for the workflows of the most recent runs. */
void weft__rt_metrics_zero_known(struct rt_metrics *m);
void weft__rt_metrics_loop(struct rt_metrics *m, weft_loop_kind kind);
void weft__rt_metrics_verdict(struct rt_metrics *m, const char *agent, const char *verdict);
void weft__rt_metrics_tool(struct rt_metrics *m, const char *tool, bool is_success, double seconds);
/* A tool call of @p agent that failed, by @p kind (weft.tool.errors, error.type): one of the
 * fixed set agent.c names (server_down, timeout, protocol_error, oversized, tool_error,
 * unknown_tool, invalid_arguments, jsonrpc_error, error), so series stay bounded. */
void weft__rt_metrics_tool_error(struct rt_metrics *m, const char *agent, const char *kind);
/* Skill memory (memory.c): a lookup for @p agent that found something or not; a skill kept
 * (new, or an existing one updated or kept); an agent step's outcome with or without injected
 * skills (weft.skills.lookups, .saved, .step_outcomes). */
void weft__rt_metrics_skill_lookup(struct rt_metrics *m, const char *agent, bool is_hit);
void weft__rt_metrics_skill_saved(struct rt_metrics *m, const char *agent, bool is_new);
void weft__rt_metrics_skill_outcome(struct rt_metrics *m,
                                    const char *agent,
                                    bool had_skill,
                                    bool is_success);

/* Skill memory's embeddings calls (memory.c): one call for @p operation (lookup, save) that
 * succeeded (@p error_type NULL) or failed with @p error_type (weft.skills.embeddings by
 * outcome; failures also weft.skills.embedding_errors by error.type). */
void
weft__rt_metrics_embedding(struct rt_metrics *m, const char *operation, const char *error_type);

/* Lessons (lessons.c): one learned, or used to guide a corrector or to repair a step before it
 * ran (@p outcome learned, guided, preempted); a step failure, repeated when a lesson covered it
 * (weft.lessons, weft.lessons.mistakes). */
void weft__rt_metrics_lesson(struct rt_metrics *m, const char *outcome);
void weft__rt_metrics_mistake(struct rt_metrics *m, const char *error_type, bool is_repeated);

/* An MCP tool call to @p server: @p outcome is success, tool_error, timeout, server_down,
 * protocol, jsonrpc_error or invalid_arguments (a bounded set: weft.mcp.calls); @p is_cut:
 * its result was cut at max_output_bytes (weft.mcp.truncated_results). */
void
weft__rt_metrics_mcp(struct rt_metrics *m, const char *server, const char *outcome, bool is_cut);
void weft__rt_metrics_correction(struct rt_metrics *m, bool is_rewired);
void weft__rt_metrics_stuck(struct rt_metrics *m, const char *kind);
void weft__rt_metrics_llm(struct rt_metrics *m,
                          const char *provider,
                          const char *model,
                          const char *purpose,
                          int64_t input_tokens,
                          int64_t output_tokens,
                          double cost_usd,
                          double seconds,
                          const char *error_type);

/* weft serve: fold what the state store knows into the metrics. A stored run that has not
 * ended counts as active; a finished one adds to runs{status}, duration, reward, cost (by
 * workflow only: the store keeps no per-model split) and loops by kind. */
void weft__rt_metrics_stored_run(struct rt_metrics *m, const struct weft_run_info *info);
/* weft serve, for a run whose per-run snapshots hold its collaboration metrics: only the
 * runs-in-progress gauge, plus (when @p is_end_missing and the row has ended) the end-of-run
 * families (runs by status, duration, reward, loops per run) from the row. */
void weft__rt_metrics_stored_end(struct rt_metrics *m,
                                 const struct weft_run_info *info,
                                 bool is_end_missing);
void weft__rt_metrics_stored_agents(struct rt_metrics *m,
                                    const char *agent,
                                    bool is_success,
                                    uint64_t count);
/* Replace the process-local oldest-active-run gauge with the store's value. */
void weft__rt_metrics_stored_oldest(struct rt_metrics *m, double age_s);

#endif /* WEFT_RUNTIME_METRICS_H */
