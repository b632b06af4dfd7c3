/* include/weft/compose.h - the architect: a model designs a team (a supervisor-star workflow
 * in weft's own format) for a goal, weft checks the design, and saves it as a workflow file an
 * agent can run as a team ("workflow" in docs/workflow.md). docs/architect.md.
 *
 * Thread-safety: weft_compose() may be called from any thread; calls share nothing.
 */
#ifndef WEFT_COMPOSE_H
#define WEFT_COMPOSE_H

#include <stddef.h>
#include <stdint.h>
#include <weft/common.h>
#include <weft/runtime.h>
#include <weft/trace.h>

#ifdef __cplusplus
extern "C" {
#endif

/** What the architect's run used (weft_compose_options.usage). */
struct weft_compose_usage {
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    size_t llm_calls;
    size_t tool_calls;
};

/** What to compose, with what. Zero-initialise; every pointer is borrowed for the call. */
struct weft_compose_options {
    /** The goal, e.g. "a team that researches stocks and writes a Python report". */
    const char *goal;
    /** The workflow whose models the architect uses (its supervisor's model designs) and whose
     * tools and MCP servers the team may use; the team's file goes beside it unless out_dir. */
    const struct weft_workflow *base;
    /** Directory for the team's file (created when missing); NULL: the base's directory. */
    const char *out_dir;
    /** Designs asked for at most (a rejected design goes back with the reasons); 0 means 3. */
    unsigned max_attempts;
    /** Where the architect's spans go (its runs, and a create_agent span per agent of the
     * accepted team); NULL: not traced. */
    struct weft_provider *provider;
    /** Where the architect's runs are kept; NULL: the default state store. */
    const char *state_path;
    /** The base's agent with "architect" whose model, instructions (text or a managed prompt)
     * and limits design; NULL: the base's first architect agent, else weft's built-in
     * architect on the supervisor's model. */
    const char *architect;
    /** Levels of composition allowed from here: 1 (a composed team has no architect of its
     * own) to 3; 0: the architect agent's max_depth, else 1. A design's architect agents get
     * one level less, and none is accepted at 1. */
    unsigned max_depth;
    /** The span the compose span (and the architect's run under it) nests under, e.g. the
     * step of a running workflow; NULL: a new trace. */
    const struct weft_span_context *parent;
    /** Record prompts and outputs on the architect's spans, as weft_run_options'
     * capture_content: 1 records, 0 (the default) never, -1 the environment decides. */
    int capture_content;
    /** The run the team is composed for, kept with the team in the state store's teams table
     * (a resumed run registers its teams again from it); NULL: the architect's own run. */
    const char *run_id;
    /** Receives what the architect's run used, whatever the outcome (zeroed first); NULL:
     * not wanted. The one field written to. */
    struct weft_compose_usage *usage;
};

/** Ask the architect for a team, check it and save it.
 * The design must be a workflow (weft_workflow_load() accepts it: schema, unique names, known
 * tools and models, no cycles), a supervisor-star (agents and a supervisor; no "flow"), and
 * made of single-purpose agents (each bound to at most one tool or MCP server), without team
 * files of its own, and with architect agents only while max_depth allows (recursive
 * composition, one level less each time). A rejected design is sent back with its reasons, up
 * to max_attempts designs.
 * The accepted team is also kept in the state store's teams table (name, file, goal, design,
 * run), so `weft teams` lists it; a store that cannot be written is logged, the file stands.
 * @param path receives the saved file's path (new; free with weft_compose_text_free()).
 * @param error receives the last rejection's reasons, or why the architect could not run.
 * @return WEFT_OK; WEFT_EPARSE (every design was rejected); WEFT_EINVAL (no goal or base);
 * WEFT_EIO (the file could not be written; the architect's run failed); WEFT_ENOMEM.
 * *path is NULL on error.
 * Ownership: borrows @p options; *path is the caller's.
 * Errors: as @return says. */
WEFT_API weft_err weft_compose(const struct weft_compose_options *options,
                               char **path,
                               char *error,
                               size_t error_len);

/** Free text from weft_compose(). NULL is a no-op.
 * Errors: none. Ownership: takes @p text. */
WEFT_API void weft_compose_text_free(char *text);

/** A composed team as the state store keeps it (`weft teams`). Strings are owned by the
 * array (weft_teams_free()). */
struct weft_team_record {
    char *id;       /**< a UUID */
    char *name;     /**< the team's name, the agent name it is registered under */
    char *path;     /**< its workflow file */
    char *goal;     /**< what it was composed for */
    char *document; /**< the accepted design, JSON */
    char *run_id;   /**< the run it was composed for; may be NULL */
    uint64_t created_ns;
};

/** The @p limit newest composed teams (of run @p run_id only, oldest first, when not NULL).
 * @param state_path the state store; NULL means $WEFT_STATE_URL, else $WEFT_HOME/state.db.
 * @param limit 1 to 10000; 0 means 50.
 * @return WEFT_OK (also when there are none: *out NULL), WEFT_ENOTFOUND (no database),
 * WEFT_EINVAL, WEFT_EIO, WEFT_ENOMEM. Errors: *out NULL and *count 0 on failure.
 * Ownership: borrows the arguments; caller owns *out (weft_teams_free(*out, *count)). */
WEFT_API weft_err weft_teams_list(const char *state_path,
                                  const char *run_id,
                                  size_t limit,
                                  struct weft_team_record **out,
                                  size_t *count);

/** Free an array from weft_teams_list(). NULL is a no-op.
 * Errors: none. Ownership: takes @p teams (the array and its strings). */
WEFT_API void weft_teams_free(struct weft_team_record *teams, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_COMPOSE_H */
