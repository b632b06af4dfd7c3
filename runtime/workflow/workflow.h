/* runtime/workflow/workflow.h - the loaded form of a workflow file (see docs/workflow.md).
 *
 * The loader (workflow.c) turns the JSON into these structs once, resolving every name to an
 * index, so the engine never looks anything up by string on its hot path and never meets an
 * invalid reference. Everything is immutable after weft_workflow_load().
 */
#ifndef WEFT_RUNTIME_WORKFLOW_H
#define WEFT_RUNTIME_WORKFLOW_H

#include "runtime/llm/prompts.h"
#include "runtime/mcp/config.h"
#include "runtime/observe/watchdog.h"
#include "runtime/tools/tools.h"
#include "runtime/workflow/plan.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/runtime.h>
#include <weft/sampling.h>

#define WF_NONE ((size_t)-1)
/* The keys weft_workflow_set() takes, and those `weft fork --set` takes besides (its error). */
#define WF_SET_KEYS                                                               \
    "supported keys: agent.NAME.model, agent.NAME.instructions (weft fork also: " \
    "step.STEP.task, step.STEP.answer)"

typedef enum wf_provider { WF_PROVIDER_SCRIPTED = 0, WF_PROVIDER_OPENAI = 1 } wf_provider;

struct wf_model {
    char *name; /* key in "models" */
    wf_provider provider;
    char *model;        /* model name sent to the backend */
    char *base_url;     /* openai */
    char *api_key_env;  /* openai: name of the variable holding the key; never the key */
    char *script;       /* scripted: absolute path of the script file */
    json_t *script_doc; /* scripted: the script as the loader checked it (read-only), or NULL */
    double temperature; /* < 0: backend default */
    int64_t max_tokens; /* <= 0: backend default */
    uint32_t timeout_ms;
    unsigned max_retries;
    double input_price;  /* USD per 1M input tokens */
    double output_price; /* USD per 1M output tokens */
    bool has_prices;
};

struct wf_reflection {
    size_t model;
    char *instructions;
    struct rt_prompt_ref *prompt; /* instructions kept in Langfuse; NULL: the text above */
    unsigned max_retries;         /* REJECTED verdicts re-run the agent at most this often */
};

struct wf_agent {
    char *name;
    size_t model;
    char *instructions;
    struct rt_prompt_ref *prompt; /* instructions kept in Langfuse; NULL: the text above */
    size_t *tools;                /* indices into workflow.tools */
    size_t tool_count;
    size_t *can_request; /* agent indices */
    size_t can_request_count;
    char **replan_keywords; /* replan_on: case-insensitive substrings of the output */
    size_t replan_keyword_count;
    size_t replan_agent; /* WF_NONE without replan_on */
    bool has_reflection;
    struct wf_reflection reflection;
    unsigned max_tool_rounds; /* default 8 */
    uint32_t timeout_ms;      /* per step; 0: the supervisor's step_timeout */
    char *description;        /* what the supervisor is told the agent does; NULL: nothing */
    size_t *mcp_servers;      /* indices into workflow.mcp: their tools are the agent's too */
    size_t mcp_server_count;
    bool is_mcp; /* made for an MCP server (mcp_agent_<name>), not declared in "agents" */
    /* "workflow": a team, another workflow file this agent runs as one step (subrun.h): the
     * supervisor routes to it like any agent. NULL: an LLM agent. */
    struct weft_workflow *team;
    struct wf_architect *architect; /* NULL: not an architect */
};

/* "architect" on an agent (docs/architect.md): its step composes a team for the step's task
 * (weft_compose(), with this agent's model and instructions) and registers the team for the
 * rest of the run (architect.h). */
struct wf_architect {
    unsigned max_attempts; /* designs asked for at most (default 3) */
    unsigned max_depth;    /* levels of composition from here (default 1: a composed team has
                            * no architect of its own; each level down has one less) */
    char *out_dir;         /* where teams are saved, absolute (default: <workflow dir>/teams) */
};

/* "memory" (docs/memory.md): skill memory and how much of a conversation an agent sees. */
/* "memory.embeddings": an OpenAI-compatible embeddings endpoint for vector similarity. */
struct wf_embeddings {
    char *base_url;    /* NULL: no embeddings (text ranking only); environment expanded */
    char *model;       /* sent as "model"; stored with each vector */
    char *api_key_env; /* name of the variable holding the key; never the key; may be NULL */
    double weight;     /* share of the score the cosine takes, in [0, 1] (default 0.5) */
    uint32_t timeout_ms;
    size_t dimensions; /* 0: the model's own length */
};

struct wf_memory {
    bool is_skills;            /* save successful steps as skills and inject similar ones */
    bool is_lessons;           /* keep corrections as lessons, and use them (lessons.c) */
    unsigned k;                /* skills injected at most (default 3) */
    double min_score;          /* relevance a skill needs to be injected (default 0.2) */
    size_t max_per_agent;      /* retention: skills kept per agent (default 1000) */
    uint64_t max_age_ns;       /* retention: 0 none (default 180 days) */
    unsigned history_messages; /* a conversation's last N messages an agent sees (default 200) */
    struct wf_embeddings embeddings;
};

typedef enum wf_policy {
    WF_POLICY_PLAN_EXECUTE = 0, /* plan, then route by priority (optionally with the LLM) */
    WF_POLICY_ROUTER = 1        /* conversational: one routed turn per run */
} wf_policy;

struct wf_supervisor {
    char *name; /* span name suffix: "plan {name}" */
    size_t model;
    char *instructions;
    struct rt_prompt_ref *prompt; /* instructions kept in Langfuse; NULL: the text above */
    wf_policy policy;
    bool route_with_llm;
    unsigned max_iterations;       /* default 50 */
    uint32_t timeout_ms;           /* whole run; 0: none */
    uint32_t step_timeout_ms;      /* default per agent step; 0: none */
    int64_t max_tokens;            /* 0: none */
    double max_cost_usd;           /* 0: none */
    unsigned circuit_breaker;      /* default 2 */
    size_t final_agent;            /* WF_NONE: end */
    bool has_correction;           /* correction mode after a failed step */
    char *correction_instructions; /* the corrector's guidance (correction.instructions) */
    struct rt_prompt_ref *correction_prompt; /* or kept in Langfuse; NULL: the text above */
    unsigned max_corrections;                /* default 2 */
    /* Ready steps run at once in plan mode; 0: not set (1 in process, the executor's
     * max_in_flight for a remote one; engine.c parallel_width()). */
    unsigned max_parallel;
    struct watchdog_config watchdog;
};

struct wf_route {
    char *name;
    size_t agent;
};

struct wf_router {
    size_t model;
    char *instructions;
    struct rt_prompt_ref *prompt; /* instructions kept in Langfuse; NULL: the text above */
    double temperature;           /* default 0.1 */
    struct wf_route *routes;
    size_t route_count;
    size_t default_route;        /* index into routes */
    size_t clarification_route;  /* index into routes; WF_NONE when there is none */
    unsigned max_clarifications; /* default 2 */
    char **vague_patterns;       /* a reply matching one is not an answer (pattern layer) */
    size_t vague_pattern_count;
};

struct wf_step {
    char *id;
    size_t agent; /* WF_NONE for executor steps */
    char *task;
    char **depends_on; /* step ids */
    size_t depends_count;
    step_executor executor;
    json_t *spec; /* executor parameters (owned), see plan.h */
};

struct expr;

/* A flow node's loop: after the node runs, when condition_field of its JSON result is true and
 * fewer than max_iterations loops happened, loop_back_to and everything between it and the
 * node run again with the node's result as feedback; break_condition ends the loop early. */
struct wf_loop {
    size_t back_to; /* node index in the same flow */
    char *condition_field;
    unsigned max_iterations;
    struct expr *brk;    /* NULL: none */
    bool is_fail_on_max; /* on_max_iterations "fail" (default "continue") */
};

struct wf_flow;

struct wf_flow_node {
    char *id;
    size_t agent; /* WF_NONE for a fan-out node */
    char *task;   /* what the node does (default: "Run <id>.") */
    size_t *upstream;
    size_t upstream_count;
    bool is_required;
    bool has_loop;
    struct wf_loop loop;
    char *for_each;              /* fan-out: field of an upstream result holding the list */
    struct wf_flow *sub;         /* fan-out: the sub-flow run once per item */
    unsigned max_parallel;       /* fan-out: items in flight (default 4) */
    struct weft_workflow *subwf; /* sub-flow node: another workflow file run as one step */
};

struct wf_flow {
    struct wf_flow_node *nodes;
    size_t count;
    unsigned max_parallel; /* top level: worker threads (default 4) */
};

void weft__wf_flow_free(struct wf_flow *flow);
/* Release @p count strings and the array (NULL is a no-op). */
void weft__wf_free_str_array(char **arr, size_t count);
/* Release a prompt reference and its struct (NULL is a no-op). */
void weft__wf_prompt_ref_free(struct rt_prompt_ref *ref);

/* Where the run's steps execute when neither a flag nor the environment says
 * (docs/distributed.md). The broker URL is never in a workflow file: it carries credentials. */
struct wf_executor {
    char *kind;             /* "in_process" or "amqp"; NULL: not set */
    char *queue_prefix;     /* NULL: not set */
    unsigned max_in_flight; /* 0: not set */
};

struct weft_workflow {
    char *path;
    char *dir;   /* directory of the file: relative paths resolve against it */
    json_t *doc; /* the document as loaded (task messages carry it to workers) */
    char *name;
    struct weft_sampling_policy *sampling; /* "sampling": tail sampling; NULL keeps all */
    char *description;
    struct wf_model *models;
    size_t model_count;
    struct wf_supervisor supervisor;
    struct wf_agent *agents;
    size_t agent_count;
    struct tool_def *tools; /* declared tools, then implicit built-ins */
    size_t tool_count;
    struct wf_step *plan; /* optional initial plan */
    size_t plan_count;
    bool has_router;
    struct wf_router router;
    struct wf_flow *flow; /* a DAG flow instead of a supervisor plan, or NULL */
    char *workspace;      /* absolute, or NULL */
    int capture_content;  /* -1 unset, 0, 1 */
    struct wf_executor executor;
    struct wf_memory memory;
    /* MCP servers ("mcp_servers", then "mcp_servers_file"'s "mcpServers"): runtime/mcp/. */
    struct weft__mcp_entry *mcp;
    size_t mcp_count;
};

/* Append a problem to @p d (copies every string; past 256 problems only counted).
 * @return WEFT_OK, WEFT_ENOMEM (nothing added). */
weft_err weft__diags_add(struct weft_diags *d,
                         const char *file,
                         const char *path,
                         int line,
                         int column,
                         const char *message);

/* May agent @p from hand work to agent @p to with request_agent (its can_request list)? */
bool weft__wf_agent_can_request(const struct wf_agent *from, size_t to);
size_t weft__wf_find_agent(const struct weft_workflow *wf, const char *name);

struct llm_provider;
/* The provider model entry @p m describes (model_provider.c): scripted over its script, or an
 * OpenAI-compatible client whose key is read from m->api_key_env. @return WEFT_OK (*out new,
 * weft__llm_provider_free), WEFT_EINVAL (the key's variable unset), or the script's or client's
 * error; @p error says which model and why. */
weft_err weft__wf_model_provider(const struct wf_model *m,
                                 struct llm_provider **out,
                                 char *error,
                                 size_t error_len);

/* Check an executor step's parameters (argv, expect_output, path, content, url) and copy them
 * into a new spec object. @p why receives the problem ("argv: expected ..."), else "".
 * Shared by workflow files and corrective plans. @return the spec, or NULL (why set, or out
 * of memory when why is ""). */
json_t *
weft__wf_executor_spec(step_executor executor, const json_t *step, char *why, size_t why_len);
size_t weft__wf_find_tool(const struct weft_workflow *wf, const char *name);

/* Load a workflow from its document @p doc (a task message's copy, docs/distributed.md) as if
 * it were the file @p path: relative paths (scripts, sub-workflows, workspace) resolve against
 * @p path's directory, which must exist where they are used. Diagnostics as weft_workflow_load().
 * @return as weft_workflow_load(); WEFT_EINVAL for a NULL @p doc.
 * Ownership: borrows @p doc; caller owns *out (weft_workflow_free). */
weft_err weft__workflow_load_doc(const char *path,
                                 const json_t *doc,
                                 struct weft_workflow **out,
                                 struct weft_diags *diags);

#endif /* WEFT_RUNTIME_WORKFLOW_H */
