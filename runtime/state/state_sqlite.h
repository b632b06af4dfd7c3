/* runtime/state/state_sqlite.h - what the files of the SQLite state backend share
 * (state_sqlite.c, state_sqlite_skills.c, state_sqlite_gc.c); nothing else includes it.
 *
 * The handle (struct lite_state) with its statement cache, and the backend's one way of running
 * statements: prepare() or cached() a statement, then weft__lite_each() (rows to a
 * state_row_fn, state_rows.h), weft__lite_one() or weft__lite_exec() (a write through
 * finish(), which marks the open transaction to roll back on failure).
 */
#ifndef WEFT_RUNTIME_STATE_SQLITE_H
#define WEFT_RUNTIME_STATE_SQLITE_H

#include "runtime/state/state_backend.h"
#include "runtime/state/state_rows.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Distinct weft__lite_cached SQL texts; more than this are prepared per call (still correct). */
#define STMT_CACHE 24

struct cached_stmt {
    const char *sql; /* a string literal: compared by address */
    sqlite3_stmt *stmt;
    bool is_busy; /* handed out and not yet released: a nested use prepares its own */
};

struct lite_state {
    struct rt_state base; /* first: the handle callers hold */
    sqlite3 *db;
    struct cached_stmt cache[STMT_CACHE];
    unsigned tx_depth;    /* weft__state_begin() nesting: only the outermost pair touches SQLite */
    bool is_tx_failed;    /* a write inside the open transaction failed: roll it back */
    bool is_tx_refused;   /* its caller ended it with an error it reports itself: no log */
    bool is_damaged;      /* SQLite said the file is corrupt (durable.c) */
    int last_rc;          /* the result code of weft__lite_each()'s last failed statement */
    char owner_token[33]; /* this handle's lease token; "" when it owns no run */
    uint64_t last_heartbeat_mono; /* heartbeats are written at most once a second */
    /* The step rows this handle knows are stored for run rows_run, by index: the hash of the
     * dependencies last written (0: not known). A step saved again with the same dependencies
     * is an UPDATE of the columns that change (status, result, times...), not a whole upsert
     * with its dependencies serialised again. Forgotten on any rollback and on a surgery. */
    char *rows_run;
    uint64_t *rows_deps;
    size_t rows_cap;
};

/* The handle of @p base (its first member); file-local in each file of the backend. */
static inline struct lite_state *
lite(struct rt_state *base)
{
    return (struct lite_state *)base;
}

/* Forget which step rows are known to be stored (rows_deps): the next save of each step is a
 * whole upsert again (after a rollback, a surgery, a retention run). */
static inline void
weft__lite_rows_forget(struct lite_state *st)
{
    if (st->rows_deps != NULL) {
        memset(st->rows_deps, 0, st->rows_cap * sizeof(*st->rows_deps));
    }
}

/* The schema version this weft writes (PRAGMA user_version), as a number and as SQL text. */
#define WEFT__LITE_SCHEMA_VERSION      16
#define WEFT__LITE_SCHEMA_VERSION_TEXT "16"

/* state_sqlite_schema.c: bring the schema from @p version up to WEFT__LITE_SCHEMA_VERSION, in
 * the caller's write transaction. @return SQLITE_OK, or SQLite's code with *errmsg set
 * (sqlite3_free() it). */
int weft__lite_schema_migrate(sqlite3 *db, int version, char **errmsg);
/* The connection's settings (WAL, synchronous=NORMAL, a 32 MiB page cache), then BEGIN
 * IMMEDIATE for the schema check. Switching a new file to WAL takes it exclusively and SQLite's
 * busy handler does not wait for that: two connections opening a new file at once (runs of one
 * experiment, two `weft run`s) saw "database is locked"; the switch is tried again, for up to
 * 5 s. @return an SQLite result code, *errmsg set (sqlite3_free) on failure. */
int weft__lite_open_settings(sqlite3 *db, char **errmsg);

/* state_sqlite.c: the ops table, statements, the query helpers, transactions, payloads. */
void weft__lite_bind_key(sqlite3_stmt *stmt, int i, const char *key);
void weft__lite_release(struct lite_state *st, sqlite3_stmt *stmt);
weft_err weft__lite_finish(struct lite_state *st, sqlite3_stmt *stmt, const char *what);
sqlite3_stmt *weft__lite_prepare(struct lite_state *st, const char *sql);
sqlite3_stmt *weft__lite_cached(struct lite_state *st, const char *sql);
weft_err weft__lite_each(struct lite_state *st,
                         sqlite3_stmt *stmt,
                         const struct weft__state_arg *args,
                         size_t n,
                         state_row_fn fn,
                         void *ctx);
weft_err weft__lite_one(struct lite_state *st,
                        sqlite3_stmt *stmt,
                        const struct weft__state_arg *args,
                        size_t n,
                        state_row_fn fn,
                        void *ctx);
weft_err weft__lite_exec(struct lite_state *st,
                         const char *what,
                         sqlite3_stmt *stmt,
                         const struct weft__state_arg *args,
                         size_t n);
weft_err weft__lite_exec_count(struct lite_state *st,
                               const char *what,
                               sqlite3_stmt *stmt,
                               const struct weft__state_arg *args,
                               size_t n,
                               size_t *changes);
weft_err weft__lite_begin(struct rt_state *base);
weft_err weft__lite_payload_get(void *user,
                                const char *const *hashes,
                                size_t count,
                                weft__payload_each_fn each,
                                void *each_user);
void weft__lite_state_note_error(struct lite_state *st, int rc);
char *weft__lite_state_col_text(sqlite3_stmt *stmt, int i);
weft_err weft__lite_tx_end(struct lite_state *st, weft_err err);

/* state_sqlite_skills.c: weft_skill_rank() and skill memory and teams (ops entries). */
bool weft__lite_register_rank(sqlite3 *db);
weft_err weft__lite_skill_vectors(struct rt_state *base,
                                  const char *agent,
                                  const char *model,
                                  size_t len,
                                  size_t limit,
                                  state_blob_fn fn,
                                  void *user_data);
weft_err weft__lite_skill_save(struct rt_state *base,
                               const struct weft__skill *s,
                               const char *hash,
                               const struct weft__state_vec_blob *vec,
                               bool *is_new);
weft_err weft__lite_skills_search(struct rt_state *base,
                                  const char *agent,
                                  const char *terms,
                                  size_t k,
                                  double min_score,
                                  struct weft__skill **out,
                                  size_t *count);
weft_err weft__lite_skill_used(struct rt_state *base, const char *id, uint64_t now_ns);
weft_err weft__lite_skills_list(struct rt_state *base,
                                const char *agent,
                                size_t limit,
                                struct weft__skill **out,
                                size_t *count);
weft_err weft__lite_team_save(struct rt_state *base, const struct weft__state_team *t);
weft_err weft__lite_teams_list(struct rt_state *base,
                               const char *run_id,
                               size_t limit,
                               struct weft__state_team **out,
                               size_t *count);
weft_err weft__lite_skill_get(struct rt_state *base,
                              const char *prefix,
                              struct weft__skill **out,
                              size_t *count);
weft_err
weft__lite_skills_forget(struct rt_state *base, const char *id, const char *agent, size_t *removed);
weft_err weft__lite_skills_prune(struct rt_state *base,
                                 size_t max_per_agent,
                                 uint64_t max_age_ns,
                                 uint64_t now_ns,
                                 size_t *removed);

/* state_sqlite_gc.c: retention (ops entries). */
/* state_sqlite_datasets.c: datasets and experiments (the ds_run ops entry). */
weft_err weft__lite_ds_run(struct rt_state *base,
                           enum weft__ds_stmt which,
                           const struct weft__state_arg *args,
                           size_t n,
                           state_row_fn fn,
                           void *ctx);
weft_err weft__lite_run_pin(struct rt_state *base, const char *run_id, bool is_pinned);
weft_err weft__lite_gc_scan(struct rt_state *base,
                            uint64_t cutoff_ns,
                            uint64_t after_ns,
                            const char *after_id,
                            size_t limit,
                            state_gc_fn fn,
                            void *user_data);
weft_err
weft__lite_gc_kept(struct rt_state *base, uint64_t cutoff_ns, size_t *pinned, size_t *running);
weft_err weft__lite_gc_run(struct rt_state *base,
                           const char *run_id,
                           uint64_t cutoff_ns,
                           bool is_dry_run,
                           uint64_t *rows,
                           bool *is_deleted);

#endif /* WEFT_RUNTIME_STATE_SQLITE_H */
