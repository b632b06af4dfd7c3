/* runtime/state/state_pg.h - what the files of the PostgreSQL state backend share (state_pg.c,
 * state_pg_conn.c, state_pg_schema.c, state_pg_skills.c, state_pg_metrics.c, state_pg_gc.c);
 * nothing else includes it.
 *
 * The handle (struct pg_state), the text parameters of a statement (struct params), and the
 * connection's one way of running statements: weft__pg_run() and the helpers over it
 * (weft__pg_exec(), weft__pg_each(), weft__pg_one(), weft__pg_append()), which go through
 * weft__pg_run_sql_as(), the wrapper that waits out an outage and sends the open transaction's
 * journal again (state_pg.c's file comment). Rows are read through state_rows.h.
 */
#ifndef WEFT_RUNTIME_STATE_PG_H
#define WEFT_RUNTIME_STATE_PG_H

#include "runtime/state/state_backend.h"
#include "runtime/state/state_rows.h"

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_PARAMS   28
#define PREPARED_MAX 48 /* distinct statements prepared per connection */

/* The advisory lock payload writers hold shared and their collection exclusively (payload_begin):
 * "payb" in ASCII. A literal, as it is spelled into SQL texts. */
#define PAYLOAD_LOCK "1885436258"

/* ------------------------------------------------------------------------------------------ */
/* The handle                                                                                  */

/* A statement prepared in the current session (see send_sql()). */
struct prepared {
    const char *sql; /* a string literal: compared by address; NULL: a free slot */
    char name[16];
    bool is_ready; /* prepared in this session (a reconnect starts a new one) */
};

/* One statement of the open transaction, kept to be sent again after a reconnect: its text
 * (the same literal, so the prepared statement cache still knows it) and copies of its
 * parameters. */
struct journal_entry {
    const char *sql;
    char *v[MAX_PARAMS]; /* owned copies; NULL for SQL NULL */
    int len[MAX_PARAMS];
    int fmt[MAX_PARAMS];
    int n;
    bool has_binary;
    bool is_binary_result;
};

struct pg_state {
    struct rt_state base; /* first: the handle callers hold */
    PGconn *conn;
    struct prepared prepared[PREPARED_MAX];
    char *where;        /* the URL without its password, for messages */
    unsigned tx_depth;  /* weft__state_begin() nesting: only the outermost pair reaches PG */
    bool is_tx_failed;  /* a statement inside the open transaction failed: roll it back */
    bool is_tx_refused; /* its caller ended it with an error it reports itself: no log */
    bool is_lost;       /* an outage outlasted the wait: some write is missing (sticky) */
    bool is_committing; /* weft__pg_commit() is sending COMMIT: a lost answer replays the journal */
    uint64_t reconnect_ms; /* the wait for a lost connection (WEFT_STATE_RECONNECT_MS) */
    const char *begin_sql; /* how the open transaction began ("BEGIN" or the lazy one) */
    /* The open transaction's statements (see the file comment); is_replayable false once it
     * read rows or outgrew JOURNAL_MAX_BYTES / JOURNAL_MAX_ENTRIES, or a copy failed. */
    struct journal_entry *journal;
    size_t journal_count;
    size_t journal_cap;
    size_t journal_bytes;
    bool is_replayable;
    unsigned reconnects;          /* connections made again after a loss, for tests and logs */
    char owner_token[33];         /* this handle's lease token; "" when it owns no run */
    uint64_t last_heartbeat_mono; /* heartbeats are written at most once a second */
};

/* The handle of @p base (its first member). */
static inline struct pg_state *
weft__pg(struct rt_state *base)
{
    return (struct pg_state *)base;
}

/* ------------------------------------------------------------------------------------------ */
/* Parameters: text values for PQexecParams, owning what they had to copy                      */

struct params {
    const char *v[MAX_PARAMS];
    char *owned[MAX_PARAMS];
    char num[MAX_PARAMS][32];
    int len[MAX_PARAMS]; /* binary parameters' lengths (weft__pg_p_bytes) */
    int fmt[MAX_PARAMS]; /* 1 for a binary parameter */
    int n;
    bool is_oom;
    bool has_binary;       /* a weft__pg_p_bytes() parameter: lengths and formats go along */
    bool is_binary_result; /* columns come back in binary (bytea as its bytes) */
};

/* ------------------------------------------------------------------------------------------ */
/* state_pg_conn.c: parameters, statements, reconnects, the journal, open, close, transactions */

void weft__pg_params_init(struct params *p);
void weft__pg_params_cleanup(struct params *p);
void weft__pg_p_text(struct params *p, const char *s);
void weft__pg_p_key(struct params *p, const char *s);
void weft__pg_p_raw(struct params *p, const char *s);
void weft__pg_p_bytes(struct params *p, const unsigned char *bytes, size_t len);
void weft__pg_p_i64(struct params *p, int64_t v);
void weft__pg_p_u64(struct params *p, uint64_t v);
void weft__pg_p_double(struct params *p, double v);
void weft__pg_p_bool(struct params *p, bool v);
void weft__pg_error_text(const struct pg_state *st, const PGresult *res, char *out, size_t len);
void weft__pg_journal_clear(struct pg_state *st);
void weft__pg_journal_drop(struct pg_state *st);
PGresult *weft__pg_run_sql(
    struct pg_state *st, const char *what, const char *sql, const struct params *p, bool may_retry);
PGresult *
weft__pg_query(struct pg_state *st, const char *what, const char *sql, const struct params *p);
weft_err
weft__pg_exec_sql(struct pg_state *st, const char *what, const char *sql, const struct params *p);
weft_err weft__pg_exec_append(struct pg_state *st,
                              const char *what,
                              const char *sql,
                              const char *resend,
                              const struct params *p);
int64_t weft__pg_col_i64(const PGresult *res, int row, int col);
weft_err weft__pg_run(struct pg_state *st,
                      const char *what,
                      const char *sql,
                      const char *resend,
                      const struct weft__state_arg *args,
                      size_t n,
                      state_row_fn fn,
                      void *ctx,
                      size_t *count);
weft_err weft__pg_exec(struct pg_state *st,
                       const char *what,
                       const char *sql,
                       const struct weft__state_arg *args,
                       size_t n);
weft_err weft__pg_append(struct pg_state *st,
                         const char *what,
                         const char *sql,
                         const char *resend,
                         const struct weft__state_arg *args,
                         size_t n);
weft_err weft__pg_each(struct pg_state *st,
                       const char *what,
                       const char *sql,
                       const struct weft__state_arg *args,
                       size_t n,
                       state_row_fn fn,
                       void *ctx);
weft_err weft__pg_one(struct pg_state *st,
                      const char *what,
                      const char *sql,
                      const struct weft__state_arg *args,
                      size_t n,
                      state_row_fn fn,
                      void *ctx);
void weft__pg_close(struct rt_state *base);
weft_err weft__pg_begin(struct rt_state *base);
weft_err weft__pg_begin_lazy(struct rt_state *base);
bool weft__pg_in_transaction(const struct rt_state *base);
weft_err weft__pg_commit(struct rt_state *base);
weft_err weft__pg_tx_end(struct pg_state *st, weft_err err);

/* state_pg_schema.c: versioned migrations under an advisory lock. */
weft_err weft__pg_migrate(struct pg_state *st, char *err, size_t err_len);

/* state_pg.c: the ops table, and payload records read for the garbage collection. */
extern const struct weft__state_ops weft__pg_ops;
weft_err weft__pg_payload_get(void *user,
                              const char *const *hashes,
                              size_t count,
                              weft__payload_each_fn each,
                              void *each_user);

/* state_pg_datasets.c: datasets and experiments (the ds_run ops entry). */
weft_err weft__pg_ds_run(struct rt_state *base,
                         enum weft__ds_stmt which,
                         const struct weft__state_arg *args,
                         size_t n,
                         state_row_fn fn,
                         void *ctx);

/* state_pg_skills.c: skill memory and teams (ops entries). */
weft_err weft__pg_skill_vectors(struct rt_state *base,
                                const char *agent,
                                const char *model,
                                size_t len,
                                size_t limit,
                                state_blob_fn fn,
                                void *user_data);
weft_err weft__pg_skill_save(struct rt_state *base,
                             const struct weft__skill *s,
                             const char *hash,
                             const struct weft__state_vec_blob *vec,
                             bool *is_new);
weft_err weft__pg_skills_search(struct rt_state *base,
                                const char *agent,
                                const char *terms,
                                size_t k,
                                double min_score,
                                struct weft__skill **out,
                                size_t *count);
weft_err weft__pg_skill_used(struct rt_state *base, const char *id, uint64_t now_ns);
weft_err weft__pg_skills_list(struct rt_state *base,
                              const char *agent,
                              size_t limit,
                              struct weft__skill **out,
                              size_t *count);
weft_err weft__pg_team_save(struct rt_state *base, const struct weft__state_team *t);
weft_err weft__pg_teams_list(struct rt_state *base,
                             const char *run_id,
                             size_t limit,
                             struct weft__state_team **out,
                             size_t *count);
weft_err weft__pg_skill_get(struct rt_state *base,
                            const char *prefix,
                            struct weft__skill **out,
                            size_t *count);
weft_err
weft__pg_skills_forget(struct rt_state *base, const char *id, const char *agent, size_t *removed);
weft_err weft__pg_skills_prune(struct rt_state *base,
                               size_t max_per_agent,
                               uint64_t max_age_ns,
                               uint64_t now_ns,
                               size_t *removed);

/* state_pg_gc.c: retention (ops entries). */
weft_err weft__pg_run_pin(struct rt_state *base, const char *run_id, bool is_pinned);
weft_err weft__pg_gc_scan(struct rt_state *base,
                          uint64_t cutoff_ns,
                          uint64_t after_ns,
                          const char *after_id,
                          size_t limit,
                          state_gc_fn fn,
                          void *user_data);
weft_err
weft__pg_gc_kept(struct rt_state *base, uint64_t cutoff_ns, size_t *pinned, size_t *running);
weft_err weft__pg_gc_run(struct rt_state *base,
                         const char *run_id,
                         uint64_t cutoff_ns,
                         bool is_dry_run,
                         uint64_t *rows,
                         bool *is_deleted);

#endif /* WEFT_RUNTIME_STATE_PG_H */
