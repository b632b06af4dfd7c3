/* runtime/llm/llm.h - the LLM provider interface the engine calls, and its implementations:
 * the OpenAI-compatible chat-completions client (openai.c), the scripted provider (scripted.c)
 * and the recorder that wraps any provider for `weft run --record` (record.c).
 *
 * Messages, tools and tool calls use the OpenAI chat-completions JSON shapes (jansson values),
 * because that is the lingua franca of every backend weft talks to; the scripted provider
 * reads the same shapes from its script.
 *
 * A provider never touches tracing: the engine opens the `chat {model}` span around
 * weft__llm_complete() and records what the response reports (usage, model, finish reason, error).
 *
 * Thread-safety: a provider is used by one engine thread at a time.
 */
#ifndef WEFT_RUNTIME_LLM_H
#define WEFT_RUNTIME_LLM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>

/* What the engine asks the model for; the scripted provider keys responses by it. */
typedef enum llm_purpose {
    LLM_PURPOSE_PLAN = 0,
    LLM_PURPOSE_ROUTE,
    LLM_PURPOSE_ACT,
    LLM_PURPOSE_REFLECT,
    LLM_PURPOSE_CORRECT,
    LLM_PURPOSE_SUMMARIZE,
    LLM_PURPOSE_EVALUATE /* an LLM-judge evaluator (runtime/eval/) */
} llm_purpose;

const char *weft__llm_purpose_name(llm_purpose purpose);
/* @return false for an unknown name. */
bool weft__llm_purpose_parse(const char *name, llm_purpose *out);

struct llm_request {
    const char *agent; /* who asks ("supervisor", "router", an agent name); never NULL */
    /* Flows: the step asking ("per_chunk[2].audit"), so that scripts stay deterministic when
     * steps run in parallel: a script queue keyed by the step wins over the agent's. NULL
     * outside flows. */
    const char *step_key;
    llm_purpose purpose;
    const char *model;      /* model name sent to the backend */
    const json_t *messages; /* borrowed: array of {"role", "content", ...} (OpenAI shape) */
    const json_t *tools;    /* borrowed: OpenAI "tools" array, or NULL for none */
    bool json_mode;         /* ask for a JSON object (response_format json_object) */
    double temperature;     /* < 0 means the backend's default */
    int64_t max_tokens;     /* <= 0 means the backend's default */
    uint32_t timeout_ms;    /* whole call including retries; 0 means none */
};

/* One tool call the model asked for. */
struct llm_tool_call {
    char *id;        /* the model's call id ("call_..."); never NULL (generated when absent) */
    char *name;      /* tool name */
    char *arguments; /* JSON text exactly as the model sent it (may be invalid JSON) */
};

struct llm_response {
    char *content; /* assistant text; NULL when the model only called tools */
    struct llm_tool_call *tool_calls;
    size_t tool_call_count;
    int64_t input_tokens;  /* -1 when the backend did not say */
    int64_t output_tokens; /* -1 when the backend did not say */
    char *response_model;  /* may be NULL */
    char *response_id;     /* may be NULL */
    char *finish_reason;   /* may be NULL */
    unsigned attempts;     /* HTTP attempts made (1 without retries) */
};

void weft__llm_response_cleanup(struct llm_response *response); /* zeroes it; NULL is a no-op */

/* Error detail of a failed call: a short machine-friendly type (for error.type: "timeout",
 * "http_429", "http_500", "connection", "invalid_response", "script_exhausted", ...) and a
 * human sentence. Never contains credentials or message content. */
struct llm_error {
    char type[48];
    char message[256];
};

struct llm_provider_ops {
    /* Run one chat completion. On failure *response is zeroed and *error is filled.
     * @return WEFT_OK, WEFT_ETIMEDOUT, WEFT_EHTTP, WEFT_EIO (transport), WEFT_EPARSE
     * (unusable answer), WEFT_ENOTFOUND (scripted: no response left), WEFT_ENOMEM. */
    weft_err (*complete)(void *self,
                         const struct llm_request *request,
                         struct llm_response *response,
                         struct llm_error *error);
    void (*free)(void *self);
};

struct llm_provider {
    const struct llm_provider_ops *ops;
    void *self;
    const char *provider_name; /* gen_ai.provider.name: "openai", "weft.scripted", ... */
};

/* Calls through the vtable; both accept NULL providers (EINVAL / no-op).
 * weft__llm_complete() is the ingress of every answer: it scrubs the configured secrets
 * (include/weft/secrets.h) from the content, the tool calls, the model, id and finish reason,
 * and from the error message, before the caller sees them (WEFT_ENOMEM when it cannot).
 * weft__llm_provider_free() calls ops->free(self) and then weft__free(provider): constructors
 * allocate the struct llm_provider itself with weft__malloc(). */
weft_err weft__llm_complete(struct llm_provider *provider,
                            const struct llm_request *request,
                            struct llm_response *response,
                            struct llm_error *error);
void weft__llm_provider_free(struct llm_provider *provider);

/* OpenAI-compatible chat completions over libcurl. */
struct llm_openai_options {
    const char *base_url; /* e.g. "https://api.openai.com/v1"; "/chat/completions" appended */
    const char *api_key;  /* may be NULL (local servers); copied, never logged */
    unsigned max_retries; /* retries on 429/500/502/503/504/transport; default 3 when 0 */
    uint32_t initial_backoff_ms; /* default 500 when 0 */
    uint32_t max_backoff_ms;     /* default 8000 when 0 */
    const char *provider_name;   /* gen_ai.provider.name; NULL means "openai" */
};
/* @return WEFT_OK, WEFT_EINVAL (no base_url), WEFT_ENOMEM. Ownership: copies every string;
 * free the result with weft__llm_provider_free(). */
weft_err weft__llm_openai_new(const struct llm_openai_options *options, struct llm_provider **out);

/* Parse a 2xx chat-completions answer (@p len bytes of @p data, not NUL-terminated) into
 * @p out, checking the type of every member used. Tool calls without an id get
 * "call_<++*generated_ids>". Exposed for the fuzz harness (tests/fuzz/fuzz_llm_response.c).
 * @return WEFT_OK, WEFT_EPARSE (@p error set), WEFT_ENOMEM. On failure @p out holds what was
 * parsed so far: the caller cleans it up with weft__llm_response_cleanup() either way. */
weft_err weft__llm_openai_parse(const char *data,
                                size_t len,
                                uint64_t *generated_ids,
                                struct llm_response *out,
                                struct llm_error *error);

/* Scripted provider: responses from a script (see docs/workflow.md, "Scripts"), keyed by agent
 * and purpose and consumed in order.
 * @param script the parsed script. The provider keeps a reference to its "responses" (no copy:
 *        a script is as large as the run), so nobody may change the script afterwards.
 * @param origin file name for error messages.
 * @return WEFT_OK, WEFT_EPARSE (message in @p error), WEFT_ENOMEM. */
weft_err weft__llm_scripted_new(json_t *script,
                                const char *origin,
                                struct llm_provider **out,
                                struct llm_error *error);

/* Scripted providers only: how many responses of each "agent/purpose" queue were used, as
 * {"agent/purpose": n}, so that a conversation spread over several runs (one per turn)
 * continues where it left off. NULL for other providers (or out of memory). Thread-safe.
 * Ownership: returns a new reference (json_decref). */
json_t *weft__llm_scripted_cursors(const struct llm_provider *provider);
/* Scripted providers only: the cursors of the queues used since the last call, in the same
 * form (the first call: since creation or restore), for an incremental save. NULL for other
 * providers (or out of memory: the queues stay marked). Thread-safe.
 * Ownership: returns a new reference (json_decref). */
json_t *weft__llm_scripted_cursors_changed(struct llm_provider *provider);
/* Restore cursors saved from weft__llm_scripted_cursors(). @return WEFT_OK, WEFT_EINVAL (not a
 * scripted provider or not an object), WEFT_ENOMEM. */
weft_err weft__llm_scripted_restore(struct llm_provider *provider, const json_t *cursors);

/* Read a script file's JSON for weft__llm_scripted_new(), which checks it. @return WEFT_OK,
 * WEFT_ENOTFOUND, WEFT_EPARSE (message with line and column in @p error), WEFT_ENOMEM.
 * Ownership: caller owns *out (json_decref). */
weft_err weft__llm_script_load(const char *path, json_t **out, struct llm_error *error);

/* What is wrong with a script file, for `weft validate` and the workflow loader. */
struct llm_script_problem {
    int line;          /* of a JSON syntax error (jansson's), else 0 */
    int column;        /* likewise */
    char field[192];   /* the offending field as a path ("responses.coder.act[0].usage"), or "" */
    char message[256]; /* what was expected, or the syntax error */
};

/* Check a script file with the scripted provider's own rules (what weft__llm_scripted_new()
 * would refuse). @p doc, when not NULL, receives the checked script on WEFT_OK (NULL
 * otherwise), so that a provider can be made from it without reading the file again.
 * @return WEFT_OK, WEFT_ENOTFOUND (cannot open), WEFT_EPARSE (see *out), WEFT_ENOMEM.
 * Ownership: caller owns *doc (json_decref). */
weft_err weft__llm_script_check(const char *path, struct llm_script_problem *out, json_t **doc);

/* Recording of every exchange of a run (`weft run --record FILE`), in the script format so
 * that the file replays as is. The file is rewritten (temp file + rename) after every call,
 * so a crashed run still leaves what it did. It holds message content but never credentials
 * (requests carry only model and messages). */
struct llm_recording;

/* Start a recording: writes an empty script to @p path at once (mode 0600), so that a path
 * that cannot be written is found before the run starts.
 * @return WEFT_OK, WEFT_EINVAL (NULL argument, or @p path cannot be written: @p error names
 * the path and the system's reason), WEFT_ENOMEM. */
weft_err weft__llm_recording_new(const char *path,
                                 struct llm_recording **out,
                                 char *error,
                                 size_t error_len);
/* Append one exchange (the response, or the error when @p response is NULL) and save.
 * @return WEFT_OK, WEFT_EIO (logged once per run of failures; the run goes on), WEFT_ENOMEM. */
weft_err weft__llm_recording_add(struct llm_recording *rec,
                                 const struct llm_request *request,
                                 const char *provider_name,
                                 const struct llm_response *response,
                                 const struct llm_error *error);
void weft__llm_recording_free(struct llm_recording *rec);

/* One exchange as a script entry (the response, or {"error"} when @p response is NULL, plus the
 * request for reference). Ownership: returns new (json_decref); NULL when out of memory. */
json_t *weft__llm_exchange_json(const struct llm_request *request,
                                const char *provider_name,
                                const struct llm_response *response,
                                const struct llm_error *error);

#endif /* WEFT_RUNTIME_LLM_H */
