/* runtime/dist/message.h - the task and result messages of distributed runs (JSON bodies;
 * docs/distributed.md "Messages" is the reference).
 *
 * A task message carries everything a worker needs to run one step without a copy of the
 * workflow: the workflow document and its path (relative files such as scripts resolve
 * against that path's directory), the step (kind, agent, task text, command parameters), the
 * dependencies' results, the scripted providers' positions, the time left in the run and the
 * content-capture choice. Secrets never travel: API keys come from the worker's environment.
 * A result message says how the task ended, with its usage and timings.
 *
 * Decoding checks every field and fails with a sentence naming the first bad one: a malformed
 * or foreign message is rejected (to the dead-letter queue), never half-used.
 */
#ifndef WEFT_RUNTIME_DIST_MESSAGE_H
#define WEFT_RUNTIME_DIST_MESSAGE_H

#include "base/uuid.h"
#include "runtime/engine/executor.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>
#include <weft/trace.h>

#define WEFT__MSG_TASK   "weft.task.v1" /* AMQP type property and the body's "type" */
#define WEFT__MSG_RESULT "weft.result.v1"
#define WEFT__MSG_MAX    (16u << 20) /* bodies above this are refused, both ways */

/* Bounds of a task's "span_attrs" (at most WEFT__TASK_SPAN_ATTRS_MAX entries): a message over
 * one is refused; the encoder keeps within them (it drops or cuts what would not fit). */
#define WEFT__MSG_ATTR_KEY_MAX   256u        /* bytes of a key */
#define WEFT__MSG_ATTR_VALUE_MAX 4096u       /* bytes of a string value */
#define WEFT__MSG_ATTRS_MAX      (16u << 10) /* bytes of all keys and string values together */

struct weft__task_msg {
    char *run_id;
    char task_id[WEFT_UUID_LEN + 1]; /* the step's task UUID */
    uint64_t seq;                    /* the orchestrator's task number within the run */
    unsigned attempt;                /* the step's attempt this task executes */
    char *step_id;
    char *kind;  /* "agent", "command", "file_writer", "http_call" or "noop" */
    char *agent; /* agent name (the kind again for command steps) */
    char *task;
    json_t *context;     /* {dependency step id: result} */
    json_t *spec;        /* command steps' parameters, or NULL */
    char *workflow_path; /* may be NULL for "noop" */
    json_t *workflow;    /* the document, or NULL for "noop" */
    json_t *cursors;     /* {script path: {"agent/purpose": n}}, or NULL */
    bool capture_content;
    uint32_t timeout_ms; /* time left in the run when sent; 0: none */
    uint64_t sent_ns;    /* wall clock at publish */
    /* "span_attrs": {key: string, boolean, integer or number}, the run's attributes for every
     * span of the task (options.span_attrs and the root span's id: run->tel.span_attrs).
     * Encode: borrowed, NULL: none; string, bool, int and double values are sent (arrays are
     * not), in order, a later key replacing an earlier one. Decode: points into span_attr_store
     * (the strings into span_attr_doc), NULL when the message has none (older orchestrators);
     * a decoded message is used where it was decoded, never copied by value. */
    const struct weft_attr *span_attrs;
    size_t span_attr_count;
    struct weft_attr span_attr_store[WEFT__TASK_SPAN_ATTRS_MAX];
    json_t *span_attr_doc;
};

struct weft__result_msg {
    char *run_id;
    char task_id[WEFT_UUID_LEN + 1];
    uint64_t seq;
    unsigned attempt;
    bool is_success;
    char *output;     /* may be NULL */
    char *error;      /* the failure's feedback; may be NULL */
    char *error_type; /* may be NULL */
    json_t *details;  /* the failure's details for the corrector, or NULL */
    char *worker;     /* "host/pid" of the worker */
    int64_t delivery_count;
    uint64_t received_ns, started_ns, ended_ns; /* worker wall clock */
    int64_t input_tokens, output_tokens;
    double cost_usd;
    uint64_t llm_calls, tool_calls;
    unsigned agent_attempts; /* attempts inside the worker (reflection retries) */
    json_t *cursors;         /* scripted positions after the step, or NULL */
    json_t *requests;        /* loop-back requests [{"agent", "query", "requester"}], or NULL */
};

/* Encode @p m as JSON text. Ownership: caller owns *out (free()). @return WEFT_OK,
 * WEFT_ENOMEM, WEFT_ELIMIT (larger than WEFT__MSG_MAX). */
weft_err weft__task_msg_encode(const struct weft__task_msg *m, char **out, size_t *len);
weft_err weft__result_msg_encode(const struct weft__result_msg *m, char **out, size_t *len);

/* Decode @p len bytes of @p body into @p m (zeroed first). @return WEFT_OK, WEFT_EPARSE with
 * the reason in @p err ("task message: field \"attempt\": expected a positive integer"),
 * WEFT_ENOMEM. On failure @p m holds nothing to free. Ownership: caller cleans @p m up. */
weft_err weft__task_msg_decode(
    const void *body, size_t len, struct weft__task_msg *m, char *err, size_t err_len);
weft_err weft__result_msg_decode(
    const void *body, size_t len, struct weft__result_msg *m, char *err, size_t err_len);

void weft__task_msg_cleanup(struct weft__task_msg *m);
void weft__result_msg_cleanup(struct weft__result_msg *m);

#endif /* WEFT_RUNTIME_DIST_MESSAGE_H */
