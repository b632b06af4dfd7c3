/* runtime/state/state_backend.h - what the two state backends (state_sqlite.c, state_pg.c) and the
 * dispatcher (state.c) share; nothing outside runtime/state*.c includes it.
 *
 * A handle is a backend's own struct whose first member is a struct rt_state, so the
 * dispatcher can read the ops table and the backend can cast back. Each entry of the ops
 * table implements the weft__state_* function of the same name (state.h documents them);
 * every entry is required.
 */
#ifndef WEFT_RUNTIME_STATE_BACKEND_H
#define WEFT_RUNTIME_STATE_BACKEND_H

#include "runtime/state/state.h"

struct weft__state_dead;
struct weft__state_arg;
struct weft__state_row;

/* The statements of datasets and experiments (runtime/state/datasets.c): each backend spells
 * every one in its dialect (state_sqlite_datasets.c, state_pg_datasets.c) with the same values
 * in the same order and the same columns selected, so datasets.c binds and reads them once. */
enum weft__ds_stmt {
    WEFT__DS_CREATE,      /* name, description, evaluators, created_ns; RETURNING name */
    WEFT__DS_GET,         /* name -> DS columns */
    WEFT__DS_LIST,        /* -> DS columns, by name */
    WEFT__DS_VERSION,     /* name, version */
    WEFT__DS_DROP_ITEMS,  /* name */
    WEFT__DS_DROP,        /* name; RETURNING name */
    WEFT__DS_ITEM_ADD,    /* id, dataset, input, expected, assertions, metadata, run_id,
                           * trace_id, fail_step, added_version */
    WEFT__DS_ITEM_REMOVE, /* dataset, id, version; RETURNING id */
    WEFT__DS_ITEMS,       /* dataset, version, limit, offset -> ITEM columns, in the order
                           * added */
    WEFT__DS_ITEMS_COUNT, /* dataset, version -> count */
    WEFT__EXP_BEGIN,      /* id, name, dataset, dataset_version, workflow, workflow_hash,
                           * from_failure, started_ns, status */
    WEFT__EXP_ITEM_PUT,   /* experiment_id, item_id, run_id, status, scores, tokens, cost,
                           * duration_ns, loops, stuck_loops, corrections, llm_calls, error;
                           * insert or replace */
    WEFT__EXP_END,        /* id, status, summary, ended_ns; RETURNING id */
    WEFT__EXP_LIST,       /* dataset or NULL -> EXP columns, newest first */
    WEFT__EXP_GET,        /* id -> EXP columns */
    WEFT__EXP_ITEMS,      /* experiment_id -> EXP ITEM columns, in the order first put */
    WEFT__DS_STMT_COUNT
};
/* The columns the statements above select, the same in both dialects, in the order datasets.c
 * reads them (read_dataset(), read_item(), read_experiment(), read_exp_item()). */
#define WEFT__DS_COLUMNS                                              \
    "d.name, d.description, d.evaluators, d.created_ns, d.version,"   \
    " (SELECT count(*) FROM dataset_items i WHERE i.dataset = d.name" \
    " AND i.removed_version IS NULL)"
#define WEFT__DS_ITEM_COLUMNS                                                 \
    "id, input, expected, assertions, metadata, run_id, trace_id, fail_step," \
    " added_version, removed_version"
#define WEFT__EXP_COLUMNS                                                        \
    "id, name, dataset, dataset_version, workflow, workflow_hash, from_failure," \
    " started_ns, ended_ns, status, summary"
#define WEFT__EXP_ITEM_COLUMNS                                                        \
    "item_id, run_id, status, scores, tokens, cost, duration_ns, loops, stuck_loops," \
    " corrections, llm_calls, error"

/* A skill's vector as stored: float32 little-endian bytes (state.c encodes and decodes). */
struct weft__state_vec_blob {
    const char *model;
    const unsigned char *bytes;
    size_t len;
};
/* One stored vector of a scan: the skill's id and @p len bytes. false stops the scan. */
typedef bool (*state_blob_fn)(const char *id, const unsigned char *bytes, void *user_data);

struct weft__state_ops {
    const char *name; /* "sqlite", "postgresql" */
    void (*close)(struct rt_state *st);
    weft_err (*begin)(struct rt_state *st);
    weft_err (*begin_lazy)(struct rt_state *st);
    weft_err (*commit)(struct rt_state *st);
    bool (*in_transaction)(const struct rt_state *st);
    weft_err (*run_begin)(struct rt_state *st,
                          const char *run_id,
                          const char *workflow,
                          const char *workflow_path,
                          const char *session_id,
                          const char *input,
                          uint64_t started_ns);
    weft_err (*run_trace)(struct rt_state *st,
                          const char *run_id,
                          const char *trace_id,
                          const char *root_span_id);
    weft_err (*run_end)(struct rt_state *st,
                        const char *run_id,
                        const struct weft__state_run_end *end);
    weft_err (*step_save)(struct rt_state *st,
                          const char *run_id,
                          size_t index,
                          const struct plan_step *step,
                          const char *actor);
    weft_err (*surgery)(struct rt_state *st,
                        const char *run_id,
                        const struct plan *plan,
                        size_t failed,
                        size_t first_new,
                        unsigned seq,
                        const char *error_type,
                        const json_t *depends_before,
                        const json_t *depends_after,
                        const char *const *actors);
    weft_err (*messages_load)(struct rt_state *st,
                              const char *session_id,
                              size_t limit,
                              json_t **out);
    weft_err (*message_add)(struct rt_state *st,
                            const char *session_id,
                            const char *run_id,
                            const char *role,
                            const char *content,
                            const char *route);
    weft_err (*cursors_load)(struct rt_state *st,
                             const char *session_id,
                             const char *script,
                             json_t **out);
    weft_err (*cursors_save)(struct rt_state *st,
                             const char *session_id,
                             const char *script,
                             const json_t *cursors);
    weft_err (*runs_each)(struct rt_state *st, size_t limit, state_run_fn fn, void *user_data);
    weft_err (*run_resolve)(
        struct rt_state *st, const char *ref, char *out, size_t out_len, char *err, size_t err_len);
    weft_err (*run_info)(struct rt_state *st, const char *run_id, struct weft_run_info *info);
    weft_err (*steps_each)(struct rt_state *st,
                           const char *run_id,
                           state_step_fn fn,
                           void *user_data);
    weft_err (*corrections_each)(struct rt_state *st,
                                 const char *run_id,
                                 state_correction_fn fn,
                                 void *user_data);
    weft_err (*exchange_add)(struct rt_state *st,
                             const char *run_id,
                             const char *who,
                             const char *purpose,
                             const json_t *entry);
    weft_err (*exchanges_script)(struct rt_state *st, const char *run_id, json_t **out);
    weft_err (*exchange_counts)(struct rt_state *st,
                                const char *run_id,
                                uint64_t before_ns,
                                json_t **out);
    weft_err (*tool_result_add)(struct rt_state *st,
                                const char *run_id,
                                const struct weft__state_tool_result *r);
    weft_err (*tool_results_each)(struct rt_state *st,
                                  const char *run_id,
                                  state_tool_result_fn fn,
                                  void *user_data);
    weft_err (*run_origin)(struct rt_state *st,
                           const char *run_id,
                           const char *kind,
                           const char *origin_run_id,
                           const char *origin_step);
    weft_err (*check)(struct rt_state *st, char *err, size_t err_len);
    weft_err (*lease_acquire)(struct rt_state *st, const char *run_id, struct state_owner *holder);
    weft_err (*lease_release)(struct rt_state *st, const char *run_id);
    weft_err (*heartbeat)(struct rt_state *st, const char *run_id);
    weft_err (*run_root)(struct rt_state *st,
                         const char *run_id,
                         const char *name,
                         const char *parent_span_id,
                         uint64_t started_ns);
    weft_err (*run_hash_set)(struct rt_state *st, const char *run_id, const char *hash);
    weft_err (*run_hash_get)(struct rt_state *st, const char *run_id, char *out, size_t out_len);
    weft_err (*run_snapshot_set)(struct rt_state *st, const char *run_id, const char *snapshot);
    weft_err (*run_snapshot_get)(struct rt_state *st, const char *run_id, char **out);
    /* End a transaction of begin(): committed when @p err is WEFT_OK or a refusal that wrote
     * nothing (WEFT_ESTATE, WEFT_ENOTFOUND), else rolled back. @return @p err, or the
     * commit's failure. */
    weft_err (*end)(struct rt_state *st, weft_err err);
    /* Recovery (weft__state_recover() in state.c runs the transaction and the reports): the
     * runs marked running whose owner is gone, locked against other scans (*dead: new array of
     * *n, each filled as state.c's weft__state_dead_* helpers describe), and marking one of
     * them interrupted. */
    weft_err (*dead_collect)(struct rt_state *st,
                             uint64_t now,
                             struct weft__state_dead **dead,
                             size_t *n);
    weft_err (*dead_mark)(struct rt_state *st, struct weft__state_dead *d);
    /* Skill memory: state.c checks the arguments and applies the caps (s->task and
     * s->solution are already cut, s->id set, @p hash the task's weft__skill_task_hash());
     * @p terms is weft__skill_query_terms()'s words joined by single spaces, never NULL. */
    weft_err (*skill_save)(struct rt_state *st,
                           const struct weft__skill *s,
                           const char *hash,
                           const struct weft__state_vec_blob *vec,
                           bool *is_new);
    /* Each of @p agent's vectors of @p model that are @p len bytes long, at most @p limit. */
    weft_err (*skill_vectors)(struct rt_state *st,
                              const char *agent,
                              const char *model,
                              size_t len,
                              size_t limit,
                              state_blob_fn fn,
                              void *user_data);
    weft_err (*skills_search)(struct rt_state *st,
                              const char *agent,
                              const char *terms,
                              size_t k,
                              double min_score,
                              struct weft__skill **out,
                              size_t *count);
    weft_err (*skill_used)(struct rt_state *st, const char *id, uint64_t now_ns);
    weft_err (*team_save)(struct rt_state *st, const struct weft__state_team *t);
    weft_err (*teams_list)(struct rt_state *st,
                           const char *run_id,
                           size_t limit,
                           struct weft__state_team **out,
                           size_t *count);
    weft_err (*skills_list)(struct rt_state *st,
                            const char *agent,
                            size_t limit,
                            struct weft__skill **out,
                            size_t *count);
    /* The skills whose id starts with @p prefix: at most 2 (enough to tell "ambiguous"). */
    weft_err (*skill_get)(struct rt_state *st,
                          const char *prefix,
                          struct weft__skill **out,
                          size_t *count);
    /* Delete by exact @p id (may be NULL) and/or @p agent (may be NULL), not both NULL. */
    weft_err (*skills_forget)(struct rt_state *st,
                              const char *id,
                              const char *agent,
                              size_t *removed);
    weft_err (*skills_prune)(
        struct rt_state *st,
        size_t max_per_agent,
        uint64_t max_age_ns,
        uint64_t now_ns,
        size_t *removed); /* Retention (state.h documents each; state.c checks the arguments). */
    weft_err (*run_pin)(struct rt_state *st, const char *run_id, bool is_pinned);
    weft_err (*gc_scan)(struct rt_state *st,
                        uint64_t cutoff_ns,
                        uint64_t after_ns,
                        const char *after_id,
                        size_t limit,
                        state_gc_fn fn,
                        void *user_data);
    weft_err (*gc_kept)(struct rt_state *st, uint64_t cutoff_ns, size_t *pinned, size_t *running);
    weft_err (*gc_run)(struct rt_state *st,
                       const char *run_id,
                       uint64_t cutoff_ns,
                       bool is_dry_run,
                       uint64_t *rows,
                       bool *is_deleted);
    /* Datasets and experiments: run statement @p which with @p args (datasets.c binds them as
     * the enum says); each row goes to @p fn (NULL: a write whose rows are not wanted). */
    weft_err (*ds_run)(struct rt_state *st,
                       enum weft__ds_stmt which,
                       const struct weft__state_arg *args,
                       size_t n,
                       weft_err (*fn)(const struct weft__state_row *row, void *ctx),
                       void *ctx);
};

/* The first member of every backend's handle. */
struct rt_state {
    const struct weft__state_ops *ops;
    /* Skill retention applied by each new skill's save (weft__state_skills_retention()); the
     * backends' open leaves them 0 and weft__state_open() sets the defaults. */
    size_t skills_max_per_agent;
    uint64_t skills_max_age_ns;
    /* Held commits (weft__state_commit_held()): the callers' open weft__state_begin() pairs,
     * and whether the backend's transaction is left open for the next commit or flush. While
     * held, the backend is one transaction deep and depth is 0. */
    unsigned depth;
    bool is_held;
};

/* Open a backend (weft__state_open() picks one). Same contract as weft__state_open();
 * @p is_waiting: a server that cannot be reached is waited for (weft__state_open_waiting()). */
weft_err
weft__state_sqlite_open(const char *path, struct rt_state **out, char *err, size_t err_len);
weft_err weft__state_pg_open(
    const char *url, bool is_waiting, struct rt_state **out, char *err, size_t err_len);

/* ------------------------------------------------------------------------------------------ */
/* Helpers both backends use (state.c)                                                         */

/* This host's name ("?" when it has none), NUL-terminated within @p len. */
void weft__state_hostname(char *out, size_t len);

/* A fresh random lease token: 32 hex digits and a NUL. */
void weft__state_new_token(char out[33]);

/* A stored run that reads "running" while its owner is gone reads "interrupted", ended at its
 * last sign of life (@p heartbeat_ns, @p last_step_ns, at least its start). Sets *is_oom when
 * the copy of the new status cannot be made. */
void weft__state_owner_view(struct weft_run_info *info,
                            int64_t pid,
                            const char *host,
                            uint64_t heartbeat_ns,
                            uint64_t last_step_ns,
                            bool *is_oom);

/* Is @p ref acceptable to weft__state_run_resolve() (not "last")? When not, @p err says why. */
bool weft__state_ref_is_valid(const char *ref, char *err, size_t err_len);

/* The step's dependencies as a compact JSON array of step ids. Ownership: returns new (free()),
 * NULL when out of memory. */
char *weft__state_deps_json(const struct plan_step *step);

/* One run found dead by weft__state_recover(): the backend fills it, state.c reports and
 * frees it. */
struct weft__state_dead {
    char *text[8]; /* id, workflow, host, trace, root span, root parent, root name, reason */
    int64_t pid;
    uint64_t root_started_ns;
    uint64_t ended_ns;
    struct weft_interrupted_step *open; /* steps in progress with their spans */
    size_t open_count;
};

/* Its end: the latest of @p heartbeat_ns, @p last_step_ns and @p started_ns, and never before
 * its root span's start. */
uint64_t weft__state_dead_end(const struct weft__state_dead *d,
                              uint64_t heartbeat_ns,
                              uint64_t last_step_ns,
                              uint64_t started_ns);
/* Build d->text[7], the reason stored for it (names its process and `weft resume`).
 * @return WEFT_OK, WEFT_ENOMEM. */
weft_err weft__state_dead_reason(struct weft__state_dead *d);
/* Append an open step to @p d (copies the strings; @p agent may be NULL). */
weft_err weft__state_dead_add_step(struct weft__state_dead *d,
                                   const char *span_id,
                                   const char *parent_span_id,
                                   const char *agent,
                                   uint64_t started_ns);
/* Tell @p fn about @p d's run; the strings it sees are borrowed from @p d for the call. */
void
weft__state_dead_report(const struct weft__state_dead *d, state_interrupted_fn fn, void *user_data);
/* Free what @p d owns (not @p d itself). */
void weft__state_dead_free(struct weft__state_dead *d);

/* Append one stored LLM exchange @p entry (taken) to a replay script's @p responses, under
 * {who: {purpose: [...]}}. @return false when @p entry is NULL (a damaged row) or memory ran
 * out (nothing added). */
bool weft__state_script_add(json_t *responses, const char *who, const char *purpose, json_t *entry);

#endif /* WEFT_RUNTIME_STATE_BACKEND_H */
