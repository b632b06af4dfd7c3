/* runtime/engine/executor.h - the executor interface: how the engine hands a ready plan step to be
 * executed and gets its result back.
 *
 * Naming: an "executor" here is whatever runs a step (this interface). The kinds of plan steps
 * that run a tool instead of an agent (command, file_writer, http_call, named by a step's
 * `executor` field in workflow files) are "command steps" (command_step.h).
 *
 * Shape: submit and complete, with results that may arrive later and several tasks in flight.
 * The engine describes each step as plain data (struct weft__step_task: ids, attempt, agent,
 * task text, the dependencies' results as JSON) that a remote executor can serialise into a
 * message, and calls ops->submit() with a completion callback. The result comes back through
 * that callback exactly once, keyed by task id: from inside submit() for an executor that runs
 * the step on the spot, or from ops->poll() for one whose results arrive asynchronously (a
 * queue consumer). The engine keeps at most max_in_flight tasks submitted and not completed,
 * and polls while it waits. A result for a task the engine no longer waits for (it gave up at
 * the run's deadline) is ignored.
 *
 * The in-process executor (executor.c) runs the step on the calling thread with agent.c or
 * command_step.c. It shares the run's memory, so it writes the step's status, result, spans,
 * reward and saved row itself (writes_plan); for an executor that does not, the engine applies
 * the result: the step's status, output and error, its evaluation and its saved row.
 *
 * Threads: the engine calls submit and poll with the run lock held, from the engine thread or,
 * in a parallel flow, from a flow worker; callbacks run on the thread that called submit or
 * poll. The in-process executor releases the lock around LLM and tool calls as agent steps
 * always have. Steps overlap on threads: a flow's workers, or a batch of ready plan steps
 * (parallel.c), each thread submitting one task and polling until its own result came (a
 * poll may deliver another thread's result: poll must be thread-safe).
 */
#ifndef WEFT_RUNTIME_EXECUTOR_H
#define WEFT_RUNTIME_EXECUTOR_H

#include "runtime/workflow/plan.h"

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/runtime.h>

struct run;
struct weft_meter;

/* The most attributes a task carries for its spans: a run's options.span_attrs kept (16) and
 * its root span's id (run.h RUN_MAX_SPAN_ATTRS + 1; engine.c checks they agree). */
#define WEFT__TASK_SPAN_ATTRS_MAX 17

/* One step handed to an executor. All strings are borrowed for the submit call: an executor
 * that keeps the task copies what it needs. */
struct weft__step_task {
    uint64_t task_id; /* unique within the run, increasing from 1 */
    unsigned attempt; /* 1 on a step's first execution, then one more each time it runs again */
    size_t step;      /* plan index; meaningful to in-process executors only */
    const char *step_id;
    const char *kind;  /* "agent", "command", "file_writer", "http_call" or "noop" */
    const char *agent; /* the agent's name; for command steps the kind again */
    const char *task;  /* the task text */
    /* JSON object text: {dependency step id: its result}; "{}" for an executor that writes the
     * plan (it shares the run's memory and reads the dependencies there). */
    const char *context;
    /* For executors that work on a copy (NULL / empty otherwise): */
    const char *run_id;
    const char *task_uuid;           /* plan_step.task_uuid */
    const json_t *spec;              /* command steps' parameters, or NULL */
    const json_t *cursors;           /* {script path: cursors} of the run's scripts, or NULL */
    struct weft_span_context parent; /* the span the task's spans nest under */
    uint32_t timeout_ms;             /* time left in the run; 0: none */
    bool capture_content;
    /* The same task and attempt as before a resume (it was dispatched when the orchestrator
     * stopped): its result may already be waiting. */
    bool is_reclaim;
    /* Attributes on every span the task starts (run->tel.span_attrs: options.span_attrs and
     * the root span's id), at most WEFT__TASK_SPAN_ATTRS_MAX; NULL: none. */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
};

/* What came of a task. Strings are borrowed for the callback. */
struct weft__step_result {
    uint64_t task_id;
    step_status status; /* STEP_COMPLETED or STEP_FAILED */
    const char *output; /* NULL: none */
    const char *error;  /* why it failed (the step's feedback); NULL: none */
    /* Remote executors (zero / NULL otherwise): */
    const char *error_type;
    const json_t *details; /* the failure's details for the corrector */
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    size_t llm_calls;
    size_t tool_calls;
    const json_t *cursors; /* the scripts' positions after the task */
    /* Loop-back requests the agent made: [{"agent", "query", "requester": traceparent}] */
    const json_t *requests;
    unsigned redeliveries; /* deliveries of the task message before the one that ran */
    uint64_t started_ns;   /* when the worker started and ended it (its wall clock); 0: unknown */
    uint64_t ended_ns;
};

/* Called once per submitted task with its result. */
typedef void (*weft__step_done_fn)(void *user_data, const struct weft__step_result *result);

struct weft__executor;

struct weft__executor_ops {
    /* Take @p task. @p done is called exactly once with the task's result: before submit
     * returns or from a later poll().
     * @return WEFT_OK; any other code: the task was not taken and done will not be called. */
    weft_err (*submit)(struct weft__executor *ex,
                       const struct weft__step_task *task,
                       weft__step_done_fn done,
                       void *user_data);
    /* Deliver results that arrived (their done callbacks), waiting at most @p timeout_ms for
     * one. NULL for executors that complete every task inside submit.
     * @return WEFT_OK when at least one result was delivered, WEFT_ETIMEDOUT when none was,
     * another code when results can no longer arrive (the engine fails the waiting steps). */
    weft_err (*poll)(struct weft__executor *ex, uint32_t timeout_ms);
    /* Release the executor (NULL: nothing to release). */
    void (*destroy)(struct weft__executor *ex);
    /* Record what the executor measures for the run (weft.tasks.*, weft.task.*) into
     * @p run_meter too: the run's own meter, whose snapshots the state database keeps
     * (metrics_store.h). The engine binds it when the run starts and passes NULL before it
     * frees that meter; the executor may be called from its own threads meanwhile, so it
     * swaps the meter under its own lock. NULL: the executor measures nothing per run (the
     * in-process executor: its steps record into the run's meters themselves). */
    void (*bind_run_meter)(struct weft__executor *ex, struct weft_meter *run_meter);
};

struct weft__executor {
    const struct weft__executor_ops *ops;
    const char *name;       /* "in_process", ...: logs */
    unsigned max_in_flight; /* tasks submitted and not completed at once; 0 counts as 1 */
    bool writes_plan;       /* the executor writes the step into the run itself (in-process) */
};

/* The in-process executor: runs each task on the calling thread (agent.c for agent steps,
 * command_step.c for the others). Ownership: borrows @p run for its lifetime. */
struct weft__inproc_executor {
    struct weft__executor base;
    struct run *run;
};

void weft__inproc_executor_init(struct weft__inproc_executor *ex, struct run *run);

/* weft_run() with its steps handed to @p executor instead of the in-process one (NULL: the
 * in-process one). The executor is borrowed for the call and not destroyed.
 * @return as weft_run(). */
weft_err weft__run_with_executor(const struct weft_workflow *workflow,
                                 const struct weft_run_options *options,
                                 struct weft__executor *executor,
                                 struct weft_run_result **out,
                                 char *error,
                                 size_t error_len);

/* ------------------------------------------------------------------------------------------ */
/* Task runs: one step of a run that lives elsewhere, executed here (`weft worker`)            */

struct weft_provider;

/* Everything borrowed for the call. */
struct weft__task_run {
    const struct weft_workflow *wf;
    const char *run_id;                     /* the orchestrator's run: weft.run.id, the workspace */
    const struct weft__step_task *task;     /* step_id, kind, agent, task, attempt */
    const json_t *context;                  /* {dependency step id: its result}; NULL: none */
    const json_t *spec;                     /* command steps' parameters; NULL: none */
    const json_t *cursors;                  /* {script path: cursors} to start the scripts from */
    const struct weft_span_context *parent; /* the spans nest under it (the consumer span) */
    struct weft_provider *provider;         /* where the spans go; NULL: not traced */
    struct weft_meter *meter;               /* collaboration metrics; NULL: none */
    const volatile sig_atomic_t *abort_flag;
    uint32_t timeout_ms; /* 0: no deadline */
    bool capture_content;
    int64_t redeliveries; /* earlier deliveries of the task message (on execute_tool spans) */
    /* The workflow's MCP servers, already started (a worker keeps them across tasks); NULL:
     * the task starts its own and stops them when it ends. */
    struct weft__mcp_hub *mcp;
    /* Attributes on every span of the task (the orchestrator's run->tel.span_attrs, from the
     * task message), at most WEFT__TASK_SPAN_ATTRS_MAX kept; NULL: none. */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
};

/* How a task run ended. Owned strings; clean up with weft__task_outcome_cleanup(). */
struct weft__task_outcome {
    bool is_success;
    char *output;
    char *error;
    char *error_type;
    json_t *details; /* the failure's details for the corrector, or NULL */
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    size_t llm_calls;
    size_t tool_calls;
    unsigned attempts; /* agent attempts in this run (reflection retries included) */
    json_t *cursors;   /* {script path: cursors} after the step, or NULL (no scripted model) */
    json_t *requests;  /* loop-back requests: [{"agent", "query", "requester"}], or NULL */
};

/* Run @p t's step here, as the in-process executor runs it (agent with its LLM calls, tools and
 * reflection; or a command step), without a state database: the orchestrator keeps the state.
 * A task of kind "noop" runs nothing and succeeds at once with an empty output (t->wf may then
 * be NULL).
 * The step's spans nest under t->parent. @return WEFT_OK (the step ran: see out->is_success),
 * WEFT_EINVAL (no such agent, bad kind: @p err says which), WEFT_ENOMEM, or what setting up the
 * providers or the workspace returned (reason in @p err). Ownership: caller cleans @p out up. */
weft_err weft__execute_task(const struct weft__task_run *t,
                            struct weft__task_outcome *out,
                            char *err,
                            size_t err_len);
void weft__task_outcome_cleanup(struct weft__task_outcome *out);

#endif /* WEFT_RUNTIME_EXECUTOR_H */
