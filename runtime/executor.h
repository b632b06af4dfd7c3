/* runtime/executor.h - the executor interface: how the engine hands a ready plan step to be
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
 * always have. Today the engine waits for each step before it submits the next (flows overlap
 * steps on their worker threads); a remote executor is the next issue's work.
 */
#ifndef WEFT_RUNTIME_EXECUTOR_H
#define WEFT_RUNTIME_EXECUTOR_H

#include "plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/runtime.h>

struct run;

/* One step handed to an executor. All strings are borrowed for the submit call: an executor
 * that keeps the task copies what it needs. */
struct weft__step_task {
    uint64_t task_id; /* unique within the run, increasing from 1 */
    unsigned attempt; /* 1 on a step's first execution, then one more each time it runs again */
    size_t step;      /* plan index; meaningful to in-process executors only */
    const char *step_id;
    const char *kind;  /* "agent", "command", "file_writer" or "http_call" */
    const char *agent; /* the agent's name; for command steps the kind again */
    const char *task;  /* the task text */
    /* JSON object text: {dependency step id: its result}; "{}" for an executor that writes the
     * plan (it shares the run's memory and reads the dependencies there). */
    const char *context;
};

/* What came of a task. Strings are borrowed for the callback. */
struct weft__step_result {
    uint64_t task_id;
    step_status status; /* STEP_COMPLETED or STEP_FAILED */
    const char *output; /* NULL: none */
    const char *error;  /* why it failed (the step's feedback); NULL: none */
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

#endif /* WEFT_RUNTIME_EXECUTOR_H */
