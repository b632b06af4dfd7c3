/* runtime/state/state.h - the run state store: runs, their plan steps and conversation messages,
 * behind one interface with two backends:
 * - SQLite (state_sqlite.c), the embedded default: a file, $WEFT_HOME/state.db unless told
 *   otherwise, its schema versioned with PRAGMA user_version;
 * - PostgreSQL (state_pg.c, libpq) for a postgresql:// or postgres:// URL: the design's
 *   `workflows` and `tasks` tables with weft's own columns beside them, created by versioned
 *   migrations (docs/distributed.md, "PostgreSQL state").
 * weft__state_open() picks the backend from the location; nothing else differs for callers.
 *
 * Every change is one transaction, so a reader (`weft runs`, a resumed run) sees a run's
 * state as of a whole decision.
 *
 * Concurrency between processes: SQLite serialises writers (BEGIN IMMEDIATE, WAL readers).
 * On PostgreSQL, weft__state_lease_acquire() reads the run's row with SELECT ... FOR UPDATE,
 * so of two processes taking a run at once the second waits and then sees the first one's
 * lease; weft__state_recover() scans running runs with FOR UPDATE SKIP LOCKED, so a scan never
 * waits on (or marks) a run another process is taking over at that moment; migrations run
 * under pg_advisory_xact_lock, so processes starting together migrate once. A PostgreSQL call
 * that fails because the connection dropped waits for the server (WEFT_STATE_RECONNECT_MS,
 * default 60 s) and is sent again, with the open transaction's statements before it; when the
 * wait runs out the error is returned (logged), the transaction rolls back, and
 * weft__state_check() reports the handle lost (state_pg.c, docs/durability.md). Nothing here
 * exits or aborts.
 *
 * Errors and logs name the database: the file, or the URL with its password replaced by
 * "****" (weft__state_location_redacted()).
 *
 * Thread-safety: confine a handle to one thread (each run opens its own).
 */
#ifndef WEFT_RUNTIME_STATE_H
#define WEFT_RUNTIME_STATE_H

#include "runtime/workflow/plan.h"

#include "base/uuid.h"

#include <jansson.h>
#include <stdint.h>
#include <weft/runtime.h>

struct rt_state;

/* Open the state at @p location: a PostgreSQL connection URI (postgresql:// or postgres://,
 * see weft__state_is_url()) or else a SQLite file path, creating the file, schema or
 * migrations when missing. @return WEFT_OK, WEFT_EINVAL (no location), WEFT_EIO (a sentence
 * naming the file or the password-free URL in @p err: cannot open or connect, a schema newer
 * than this weft, a failed migration), WEFT_ENOMEM. *out is NULL on failure.
 * Ownership: borrows @p location; caller owns *out (weft__state_close()). */
weft_err weft__state_open(const char *location, struct rt_state **out, char *err, size_t err_len);
/* weft__state_open(), except that a PostgreSQL server that cannot be reached is waited for as a
 * lost connection is (WEFT_STATE_RECONNECT_MS): for a `weft worker`'s task, which must not fail
 * for a short outage. Same contract otherwise. */
weft_err
weft__state_open_waiting(const char *location, struct rt_state **out, char *err, size_t err_len);

/* For readers (`weft skills`, `weft teams`): open the store at @p state_path (NULL: the
 * default location) only when it exists: a missing SQLite file is WEFT_ENOTFOUND, never a new
 * empty file; a PostgreSQL URL is always opened. Failures are logged.
 * @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EIO, WEFT_ENOMEM. Ownership: *out is the caller's. */
weft_err weft__state_open_existing(const char *state_path, struct rt_state **out);
/* Close the handle (NULL is a no-op); an open transaction is rolled back. */
void weft__state_close(struct rt_state *st);

/* The default location: $WEFT_STATE_URL when set and not empty (a PostgreSQL URL, or a file),
 * else $WEFT_HOME/state.db (WEFT_HOME defaults to ./.weft, created on demand). Callers use it
 * when given no explicit path. Ownership: returns new (weft__free); NULL when out of memory. */
char *weft__state_default_path(void);

/* Does @p location name a PostgreSQL database (starts with postgresql:// or postgres://)?
 * false for NULL. */
bool weft__state_is_url(const char *location);

/* @p location fit for a message or a log line: a URL's password (user:PASSWORD@ and any
 * password= query parameter) replaced by "****"; a file path as it is. Ownership: borrows
 * @p location; returns new (weft__free), NULL for NULL or when out of memory. */
char *weft__state_location_redacted(const char *location);

/* "sqlite" or "postgresql" ("none" for NULL): for messages. Ownership: returns static. */
const char *weft__state_backend_name(const struct rt_state *st);

/* Group the writes until the matching weft__state_commit() into one transaction (one commit, so a
 * step and what goes with it cost one WAL write). Nestable: only the outermost pair counts.
 * A write that fails inside makes the commit roll everything back. Never hold a transaction
 * across a blocking call (an LLM call, a tool): other processes' writes wait on it.
 * @return WEFT_OK, WEFT_EIO (logged). */
weft_err weft__state_begin(struct rt_state *st);
weft_err weft__state_commit(struct rt_state *st);
/* weft__state_begin() for writes whose loss in a crash of the database's machine is harmless,
 * because a later ordinary commit rewrites them or a resumed run redoes what they record (the
 * mark that a step was handed to a remote executor): the commit returns without waiting for
 * the disk. The order of commits is kept (a later ordinary commit makes this one durable too);
 * a crash of weft loses nothing. PostgreSQL: synchronous_commit off for this transaction;
 * SQLite: as weft__state_begin() (WAL with synchronous=NORMAL never waits at commit). Inside
 * an open transaction it nests like weft__state_begin() and that transaction's durability
 * holds. @return WEFT_OK, WEFT_EIO (logged). */
weft_err weft__state_begin_lazy(struct rt_state *st);
/* weft__state_commit() that, for the outermost pair, leaves the transaction open instead: the
 * writes after it (outside any pair) join it, the next pair adopts it and its commit commits
 * everything, and weft__state_flush() commits it. So a step's end, its LLM exchange and the
 * next step's start cost one commit. The caller must flush before anything that blocks or
 * leaves the process (the engine does it whenever a run lets go of its lock: an LLM call, a
 * tool, a remote executor's wait), since other processes' writes wait on the open
 * transaction, and everything held is lost to a crash until then. Nested inside an open pair
 * it is weft__state_commit(). @return WEFT_OK, WEFT_EIO (logged). */
weft_err weft__state_commit_held(struct rt_state *st);
/* Commit a transaction weft__state_commit_held() left open; WEFT_OK when none is (and for
 * NULL). A failure rolls everything held back and is noted for weft__state_check().
 * @return WEFT_OK, WEFT_EIO (logged). */
weft_err weft__state_flush(struct rt_state *st);
/* Inside a weft__state_begin() pair, or holding a commit (false for NULL). */
bool weft__state_in_transaction(const struct rt_state *st);

weft_err weft__state_run_begin(struct rt_state *st,
                               const char *run_id,
                               const char *workflow,
                               const char *workflow_path,
                               const char *session_id,
                               const char *input,
                               uint64_t started_ns);

/* Record the run's trace as soon as its root span exists, so a killed run can be resumed with
 * a link to it. */
weft_err weft__state_run_trace(struct rt_state *st,
                               const char *run_id,
                               const char *trace_id,
                               const char *root_span_id);

struct weft__state_run_end {
    const char *status;
    const char *reason;
    const char *trace_id;
    const char *output;
    size_t iterations;
    int64_t input_tokens;
    int64_t output_tokens;
    double cost_usd;
    uint64_t ended_ns;
    double reward;
    size_t corrections;
    const char *loops;          /* JSON object {kind: count} */
    const char *trace_sampling; /* "kept:RULE", "dropped:RULE", or NULL (no policy) */
};

weft_err
weft__state_run_end(struct rt_state *st, const char *run_id, const struct weft__state_run_end *end);

/* Insert or update step @p index of the run's plan; @p actor is its agent or executor name. */
weft_err weft__state_step_save(struct rt_state *st,
                               const char *run_id,
                               size_t index,
                               const struct plan_step *step,
                               const char *actor);

/* DAG surgery in one transaction: insert steps [first_new, plan->count), update the failed
 * step (paused, rewired) and record correction @p seq. @p actors[i] names step i's agent or
 * executor. On failure everything is rolled back. @return WEFT_OK, WEFT_EIO, WEFT_ENOMEM. */
weft_err weft__state_surgery(struct rt_state *st,
                             const char *run_id,
                             const struct plan *plan,
                             size_t failed,
                             size_t first_new,
                             unsigned seq,
                             const char *error_type,
                             const json_t *depends_before,
                             const json_t *depends_after,
                             const char *const *actors);

/* The session's messages, oldest first, as [{"role", "content", "route"}] (route may be
 * null), at most the last @p limit. Ownership: caller owns *out (json_decref). */
weft_err
weft__state_messages_load(struct rt_state *st, const char *session_id, size_t limit, json_t **out);

weft_err weft__state_message_add(struct rt_state *st,
                                 const char *session_id,
                                 const char *run_id,
                                 const char *role,
                                 const char *content,
                                 const char *route);

/* Scripted-provider cursors of a session (see weft__llm_scripted_cursors()), keyed by script path.
 * *out is NULL when none were saved. Ownership: caller owns *out (json_decref). */
weft_err weft__state_cursors_load(struct rt_state *st,
                                  const char *session_id,
                                  const char *script,
                                  json_t **out);
/* Save the queues in @p cursors ({"agent/purpose": n}: all of them or only those that changed,
 * see weft__llm_scripted_cursors_changed()); queues not named keep their saved value. One row per
 * queue, so a step's save costs the same whatever the plan's size. */
weft_err weft__state_cursors_save(struct rt_state *st,
                                  const char *session_id,
                                  const char *script,
                                  const json_t *cursors);

/* Reading runs back (runs.c builds the public API on these). */
weft_err
weft__state_runs_list(struct rt_state *st, size_t limit, struct weft_run_info **out, size_t *count);
/* Call @p fn for the @p limit most recent runs, newest first, without holding them all. The
 * record is freed after the call; @p fn may take its strings over by zeroing it. Stops at the
 * first error @p fn returns. */
typedef weft_err (*state_run_fn)(struct weft_run_info *info, void *user_data);
weft_err weft__state_runs_each(struct rt_state *st, size_t limit, state_run_fn fn, void *user_data);
/* Finished agent steps counted by workflow, agent and outcome (the metrics fold's rows for
 * runs stored before snapshots existed). */
typedef weft_err (*state_agent_count_fn)(
    const char *workflow, const char *agent, bool is_success, uint64_t count, void *user_data);
void weft__state_info_cleanup(struct weft_run_info *info);
/* Resolve "last", an id or a unique prefix into @p out. @return WEFT_OK, WEFT_ENOTFOUND,
 * WEFT_EINVAL (ambiguous or malformed; @p err says which), WEFT_EIO. */
weft_err weft__state_run_resolve(
    struct rt_state *st, const char *ref, char *out, size_t out_len, char *err, size_t err_len);
weft_err weft__state_run_info(struct rt_state *st, const char *run_id, struct weft_run_info *info);

/* One stored step; every pointer is borrowed for the callback. */
struct state_step_row {
    const char *id;
    const char *actor;
    const char *task;
    const char *depends_on; /* JSON array */
    const char *status;
    unsigned attempts;
    const char *result;
    const char *feedback;
    const char *requested_by;
    const char *executor;
    const char *spec; /* JSON or NULL */
    const char *parent;
    bool has_reward;
    double reward;
    const char *error_type;
    const char *error; /* JSON or NULL */
    uint64_t started_ns;
    uint64_t ended_ns;
    const char *task_uuid; /* the step's task id (plan_step.task_uuid); NULL: none stored */
    unsigned retries;
    bool is_dispatched;
};
typedef weft_err (*state_step_fn)(const struct state_step_row *row, void *user_data);
typedef weft_err (*state_correction_fn)(const struct weft_run_correction *c, void *user_data);
/* Call @p fn for each step of the run in plan order / each correction in order; stops at the
 * first error @p fn returns. */
weft_err
weft__state_steps_each(struct rt_state *st, const char *run_id, state_step_fn fn, void *user_data);
weft_err weft__state_corrections_each(struct rt_state *st,
                                      const char *run_id,
                                      state_correction_fn fn,
                                      void *user_data);

/* Keep one LLM exchange of a run (a script entry, see weft__llm_exchange_json()). */
weft_err weft__state_exchange_add(struct rt_state *st,
                                  const char *run_id,
                                  const char *who,
                                  const char *purpose,
                                  const json_t *entry);
/* The run's exchanges as a replayable script. @return WEFT_OK, WEFT_ENOTFOUND (none), WEFT_EIO,
 * WEFT_ENOMEM. Ownership: caller owns *out. */
weft_err weft__state_exchanges_script(struct rt_state *st, const char *run_id, json_t **out);
/* How many LLM exchanges of each queue the run had made before @p before_ns (its clock):
 * {"who/purpose": n}, the scripted provider's cursors at that moment (a fork positions its
 * scripts there, runtime/engine/fork.c). @return WEFT_OK (an empty object when there are none),
 * WEFT_EIO, WEFT_ENOMEM. Ownership: caller owns *out. */
weft_err weft__state_exchange_counts(struct rt_state *st,
                                     const char *run_id,
                                     uint64_t before_ns,
                                     json_t **out);

/* ------------------------------------------------------------------------------------------ */
/* Tool results and run origins (replay and fork, docs/replay.md)                              */

/* Bytes of a stored tool request or outcome; a longer one is cut on a UTF-8 boundary with a
 * note (a replay of that call then answers the cut text, and the run diverges from there). */
#define WEFT_TOOL_RESULT_MAX (1u << 20)

/* One tool call of a run, as `weft replay` answers it: keyed by (run, step, attempt, seq), seq
 * counting the step attempt's calls from 1. Every pointer is borrowed. */
struct weft__state_tool_result {
    const char *step_id;
    unsigned attempt;
    unsigned seq;
    const char *tool;    /* the tool's name ("search", "command", "read_file") */
    const char *kind;    /* "native", "mcp", "step" (a command step's own tool), "check" */
    const char *request; /* JSON text: the arguments */
    const char *outcome; /* JSON text: {"rc", "output", "is_error", "error_type", ...} */
};

/* Keep one tool call of @p run_id (a second save of the same key replaces it: a resumed step
 * attempt runs its calls again). Request and outcome are redacted and capped at
 * WEFT_TOOL_RESULT_MAX. @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (logged), WEFT_ENOMEM. */
weft_err weft__state_tool_result_add(struct rt_state *st,
                                     const char *run_id,
                                     const struct weft__state_tool_result *r);

/* Call @p fn for each stored tool call of @p run_id in the order they were made; stops at the
 * first error @p fn returns. @return WEFT_OK (also for none), WEFT_EIO, or @p fn's error. */
typedef weft_err (*state_tool_result_fn)(const struct weft__state_tool_result *r, void *user_data);
weft_err weft__state_tool_results_each(struct rt_state *st,
                                       const char *run_id,
                                       state_tool_result_fn fn,
                                       void *user_data);

/* Record where run @p run_id came from: @p kind "replay" or "fork", the original run's id and,
 * for a fork, the step it forked from (may be NULL). Read back in weft_run_info.origin_*.
 * @return WEFT_OK, WEFT_EIO. */
weft_err weft__state_run_origin(struct rt_state *st,
                                const char *run_id,
                                const char *kind,
                                const char *origin_run_id,
                                const char *origin_step);

/* ------------------------------------------------------------------------------------------ */
/* Retention (retention.c, docs/retention.md)                                                  */

/* Pin or unpin run @p run_id (a full id). @return WEFT_OK, WEFT_EINVAL, WEFT_ENOTFOUND (no such
 * run), WEFT_EIO (logged). */
weft_err weft__state_run_pin(struct rt_state *st, const char *run_id, bool is_pinned);

/* One run weft__state_gc_scan() found; @p run_id is borrowed for the call, and @p fn must not
 * use the handle. A non-OK return stops the scan and is returned. */
typedef weft_err (*state_gc_fn)(const char *run_id, uint64_t ended_ns, void *user_data);
/* Call @p fn for at most @p limit runs that retention may delete (ended before @p cutoff_ns, not
 * stored as running, not pinned), in (ended_ns, id) order, strictly after (@p after_ns,
 * @p after_id) when @p after_id is not NULL: a page at a time, whether or not the previous
 * page was deleted. @return WEFT_OK, WEFT_EINVAL, WEFT_EIO, or @p fn's error. */
weft_err weft__state_gc_scan(struct rt_state *st,
                             uint64_t cutoff_ns,
                             uint64_t after_ns,
                             const char *after_id,
                             size_t limit,
                             state_gc_fn fn,
                             void *user_data);
/* How many runs retention keeps although they are old: pinned runs that ended before
 * @p cutoff_ns (not running), and runs stored as running that started before it.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO. */
weft_err
weft__state_gc_kept(struct rt_state *st, uint64_t cutoff_ns, size_t *pinned, size_t *running);
/* Delete run @p run_id with its rows in every run-keyed table, and its session's messages and
 * cursors when no other run of that session remains, in one transaction that first checks
 * again that the run may go (ended before @p cutoff_ns, not running, not pinned); with
 * @p is_dry_run, count the same rows and delete nothing. *rows: the rows deleted (or counted);
 * *is_deleted: false when the run may no longer go (or is gone), with *rows 0.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (logged; rolled back). */
weft_err weft__state_gc_run(struct rt_state *st,
                            const char *run_id,
                            uint64_t cutoff_ns,
                            bool is_dry_run,
                            uint64_t *rows,
                            bool *is_deleted);

/* ------------------------------------------------------------------------------------------ */
/* Run metric snapshots in a PostgreSQL state (metrics_store.c)                                */

/* A SQLite state's snapshots are written and folded by metrics_store.c over a connection of its
 * own; a PostgreSQL state's go through these, on a handle metrics_store.c opens for itself, so
 * they share this backend's migrations, prepared statements and outage handling. Each
 * returns WEFT_EINVAL for a SQLite handle. */

/* One stored series of a run's snapshot (table run_metrics); every pointer is borrowed. */
struct weft__state_metric {
    const char *name;
    int kind; /* weft_instrument_kind */
    const char *unit;
    const char *description;
    const char *labels; /* JSON object */
    double value;       /* sums and gauges */
    uint64_t count;     /* histograms */
    double sum;
    bool has_range; /* min and max are set (a histogram with observations) */
    double min;
    double max;
    const char *bounds;  /* JSON array; NULL but for histograms */
    const char *buckets; /* JSON array; NULL but for histograms */
    uint64_t saved_ns;
};

/* The attempt number of @p run_id's next snapshot (@p is_next: one past the highest stored, 0
 * when none) or of its latest (0 when none) into *out. @return WEFT_OK, WEFT_EINVAL, WEFT_EIO. */
weft_err
weft__state_metrics_attempt(struct rt_state *st, const char *run_id, bool is_next, int64_t *out);

/* Replace the rows of (@p run_id, @p attempt) by @p rows in one transaction (@p is_self_only:
 * only its span pipeline rows, weft.spans.* and weft.exporter.*). On failure nothing changes.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (logged), WEFT_ENOMEM. Ownership: borrows @p rows. */
weft_err weft__state_metrics_save(struct rt_state *st,
                                  const char *run_id,
                                  int64_t attempt,
                                  bool is_self_only,
                                  const struct weft__state_metric *rows,
                                  size_t count);

/* What weft__state_metrics_fold() reads, row by row; every pointer is borrowed for the call. A
 * callback's error stops the fold and is returned. */
struct weft__state_metrics_fold {
    /* The @p limit most recent runs, newest first: whether the run has snapshots and whether
     * they include its end (the weft.runs counter). */
    weft_err (*run)(const struct weft_run_info *info,
                    bool has_snapshot,
                    bool has_end,
                    void *user_data);
    /* Finished agent steps of runs without snapshots (stored before they existed). */
    state_agent_count_fn agents;
    /* Sums and up-down sums added up per (name, labels) in m->value; histograms row by row. */
    weft_err (*sum)(const struct weft__state_metric *m, void *user_data);
    /* The labels of every distinct weft.tasks.dispatched series. */
    weft_err (*task_labels)(const char *labels, void *user_data);
    /* Gauges per (name, labels), m->value folded: queue fill, "failing" and tasks in flight
     * count only for runs in progress whose snapshot is at least @p fresh_ns, the fill and
     * "failing" as the maximum; everything else is the sum. */
    weft_err (*gauge)(const struct weft__state_metric *m, void *user_data);
};

/* Read every stored run's snapshots through @p cb, all as of one moment (one read-only
 * REPEATABLE READ transaction). @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (logged), or a
 * callback's error. */
weft_err weft__state_metrics_fold(struct rt_state *st,
                                  size_t limit,
                                  uint64_t fresh_ns,
                                  const struct weft__state_metrics_fold *cb,
                                  void *user_data);

/* ------------------------------------------------------------------------------------------ */
/* Durability (docs/durability.md)                                                             */

/* A run whose owner is on another host is taken over when its heartbeat is this old. */
#define STATE_OWNER_STALE_NS (600ull * 1000000000ull)
/* Heartbeats are written at checkpoints, at most once per this interval. */
#define STATE_HEARTBEAT_MIN_INTERVAL_NS 1000000000ull

/* Is the owner alive? On this host: its pid exists (kill(pid, 0) is not ESRCH); on another:
 * its heartbeat is younger than STATE_OWNER_STALE_NS. No host recorded counts as alive. */
bool
weft__state_owner_is_alive(int64_t pid, const char *host, uint64_t heartbeat_ns, uint64_t now_ns);

/* WEFT_EIO with a sentence in @p err once the store is unusable: SQLite reported the file
 * damaged (SQLITE_CORRUPT, SQLITE_NOTADB; the sentence names the file), or PostgreSQL's
 * connection was lost and could not be made again (it names the password-free URL); else
 * WEFT_OK. */
weft_err weft__state_check(struct rt_state *st, char *err, size_t err_len);

/* Who holds a run. */
struct state_owner {
    int64_t pid;
    char host[256];
    uint64_t since_ns;
    uint64_t heartbeat_ns;
};

/* Make this handle the run's only owner, in one transaction (SQLite: IMMEDIATE; PostgreSQL: the
 * run's row read FOR UPDATE): taken when the run has no owner or its owner is gone (see
 * weft__state_owner_is_alive()). @return WEFT_OK, WEFT_ENOTFOUND (no such run), WEFT_ESTATE (a live
 * owner holds it: @p holder says who), WEFT_EIO. */
weft_err
weft__state_lease_acquire(struct rt_state *st, const char *run_id, struct state_owner *holder);
/* Give the run up (no-op when this handle does not own it); the heartbeat keeps its time. */
weft_err weft__state_lease_release(struct rt_state *st, const char *run_id);
/* Refresh the owner's heartbeat (at most once per STATE_HEARTBEAT_MIN_INTERVAL_NS). */
weft_err weft__state_heartbeat(struct rt_state *st, const char *run_id);

/* The run's root span, kept so recovery can close it: name, parent span id (hex, may be
 * NULL) and start. */
weft_err weft__state_run_root(struct rt_state *st,
                              const char *run_id,
                              const char *name,
                              const char *parent_span_id,
                              uint64_t started_ns);

/* The hash of the workflow file the run was started (or last resumed) with. get: WEFT_OK,
 * WEFT_ENOTFOUND (none stored), WEFT_EIO. */
weft_err weft__state_run_hash_set(struct rt_state *st, const char *run_id, const char *hash);
weft_err
weft__state_run_hash_get(struct rt_state *st, const char *run_id, char *out, size_t out_len);
/* The snapshot of the workflow's files the run was started with (a JSON text, snapshot.c).
 * get: WEFT_OK, WEFT_ENOTFOUND (none stored: an older run, or one over the cap), WEFT_EIO,
 * WEFT_ENOMEM. Ownership: set copies; caller owns *out (weft__free). */
weft_err
weft__state_run_snapshot_set(struct rt_state *st, const char *run_id, const char *snapshot);
weft_err weft__state_run_snapshot_get(struct rt_state *st, const char *run_id, char **out);

/* Mark every running run whose owner is gone as interrupted (ended at its last sign of life,
 * owner cleared), in one transaction (PostgreSQL: rows another process has locked are
 * skipped, FOR UPDATE SKIP LOCKED), then call @p fn (may be NULL) for each, after the
 * commit. @p count receives how many were marked. @return WEFT_OK, WEFT_EIO, WEFT_ENOMEM. */
typedef void (*state_interrupted_fn)(const struct weft_interrupted_run *run, void *user_data);
weft_err
weft__state_recover(struct rt_state *st, state_interrupted_fn fn, void *user_data, size_t *count);

/* ------------------------------------------------------------------------------------------ */
/* Skill memory (docs/memory.md)                                                               */

/* A skill is a step that succeeded (reflection APPROVED or FIXED, evaluator reward > 0), kept
 * so that a later step of the same agent on a similar task can be shown how it was done. Both
 * backends store skills in a table `skills`, one row per (agent, normalised task hash): the
 * task text lowercased, punctuation dropped, whitespace collapsed, digits kept (see
 * weft__skill_task_hash()). Retrieval is full-text ranking over the task text, filtered by
 * agent: SQLite FTS5 with weft's own BM25 (weft_skill_rank(), state_sqlite.c), PostgreSQL
 * ts_rank_cd over a GIN-indexed tsvector; both rank only the query's rarest words within a
 * budget, so a search's cost does not grow with the store (docs/memory.md).
 *
 * Caps: a task is cut to WEFT_SKILL_TASK_MAX bytes and a solution to WEFT_SKILL_SOLUTION_MAX,
 * on a UTF-8 boundary, with a note saying so at the end of the cut text. The dedup hash is of
 * the whole task, before the cut. Free text is redacted like every other stored text.
 *
 * Retention: every save of a new row drops the skills older than the handle's maximum age and
 * the agent's skills beyond its maximum count (lowest reward first, then oldest): two indexed
 * deletes that touch nothing when nothing is due, never a scan of the table
 * (weft__state_skills_retention() sets the limits; WEFT_SKILLS_* below are the defaults). */

#define WEFT_SKILL_TASK_MAX       2048u /* bytes of a stored task (a longer one is cut) */
#define WEFT_SKILL_SOLUTION_MAX   8192u /* bytes of a stored solution (a longer one is cut) */
#define WEFT_SKILL_TEXT_MAX       256u  /* bytes of an agent, workflow or run id */
#define WEFT_SKILLS_MAX_PER_AGENT 1000u
#define WEFT_SKILLS_MAX_AGE_NS    (180ull * 24 * 3600 * 1000000000ull) /* 180 days */
#define WEFT_SKILLS_K_MAX         64u    /* most hits one search returns */
#define WEFT_SKILLS_LIST_MAX      10000u /* most skills one list returns */
#define WEFT_SKILL_QUERY_TERMS    32u    /* distinct query words a search uses, in order */

/* One stored skill. Every string is owned by the struct (weft__skill_cleanup()); only agent,
 * task and solution are required to save one (the others may be NULL or empty). */
struct weft__skill {
    char id[WEFT_UUID_LEN + 1]; /* a UUID; "" on save: a new one is made */
    char *agent;
    char *task;
    char *solution;    /* final output, code, the tool calls that worked: the caller's text */
    char *workflow;    /* may be NULL */
    char *run_id;      /* may be NULL */
    char trace_id[33]; /* hex, "" when none */
    char span_id[17];  /* hex, "" when none */
    double reward;
    uint64_t created_ns;   /* on save: 0 means now */
    uint64_t last_used_ns; /* 0: never injected */
    uint64_t uses;         /* times it was injected (weft__state_skill_used()) */
    double score;          /* search results only: relevance in [0, 1), higher is better */
};

/* Set the handle's retention for later saves: at most @p max_per_agent skills per agent (0: no
 * count limit) and none older than @p max_age_ns (0: no age limit). A handle starts with
 * WEFT_SKILLS_MAX_PER_AGENT and WEFT_SKILLS_MAX_AGE_NS. Nothing is deleted by this call. */
void weft__state_skills_retention(struct rt_state *st, size_t max_per_agent, uint64_t max_age_ns);

/* Save skill @p s (copied; the caps above applied). When the agent already has a skill for the
 * same normalised task, that row is replaced (its id, uses and last use kept; task, solution,
 * provenance, reward and created_ns new) when s->reward is at least its reward, else left as it
 * is. *is_new (may be NULL) says whether a row was added. One transaction, retention included.
 * @return WEFT_OK (also when an existing better skill was kept), WEFT_EINVAL (NULL or empty
 * agent or task, NULL solution, a malformed id), WEFT_EIO (logged), WEFT_ENOMEM.
 * Ownership: borrows @p s. */
weft_err weft__state_skill_save(struct rt_state *st, const struct weft__skill *s, bool *is_new);

/* A skill's embedding (docs/memory.md, "Embeddings"): the vector of its task as @p model
 * made it. Stored as float32 little-endian bytes beside the skill (SQLite: skill_vectors, a BLOB
 * keyed by the skill's row; PostgreSQL: skill_vectors, bytea keyed by the skill's id, deleted
 * with it), and only ever compared with vectors of the same model and length. */
struct weft__skill_vector {
    const char *model;   /* at most WEFT_SKILL_TEXT_MAX bytes */
    const float *values; /* dims finite floats */
    size_t dims;         /* 1..WEFT_SKILL_VECTOR_DIMS_MAX */
};

#define WEFT_SKILL_VECTOR_DIMS_MAX 8192u
/* Most vectors one scan reads: retention keeps 1,000 skills per agent by default, so a scan
 * reads them all; an agent allowed more is compared on its first 20,000 vectors only. */
#define WEFT_SKILL_VECTORS_SCAN_MAX 20000u

/* weft__state_skill_save() with the task's vector @p vec (NULL: none). The vector is stored
 * (replacing the skill's previous one) when the skill row is added or replaced, in the same
 * transaction; a skill kept because it earned more keeps its own vector.
 * @return as weft__state_skill_save(); also WEFT_EINVAL for a malformed vector. */
weft_err weft__state_skill_save_vec(struct rt_state *st,
                                    const struct weft__skill *s,
                                    const struct weft__skill_vector *vec,
                                    bool *is_new);

/* Called for each stored vector: the skill's id and its @p dims values (borrowed for the call).
 * Return false to stop the scan. */
typedef bool (*state_vector_fn)(const char *id, const float *values, void *user_data);

/* Call @p fn for each of @p agent's skills that has a vector made by @p model with @p dims
 * numbers (vectors of another model or length are never shown), at most
 * WEFT_SKILL_VECTORS_SCAN_MAX of them, in no particular order. A brute-force scan: one agent's
 * skills are capped by retention (1,000 by default), so there is no vector index.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO, WEFT_ENOMEM. Ownership: borrows everything. */
weft_err weft__state_skill_vectors_each(struct rt_state *st,
                                        const char *agent,
                                        const char *model,
                                        size_t dims,
                                        state_vector_fn fn,
                                        void *user_data);

/* The @p k (at most WEFT_SKILLS_K_MAX) skills of @p agent whose task best matches @p query,
 * best first, only those whose score is at least @p min_score (their relevance in [0, 1):
 * s/(s+1) of the BM25 sum s on SQLite, ts_rank_cd with normalisation 32 on PostgreSQL; the
 * two are not the same number, see docs/memory.md). The query is
 * untrusted text: only its words count (at most WEFT_SKILL_QUERY_TERMS distinct ones, ORed),
 * never its syntax. *out is NULL when nothing matched. @return WEFT_OK, WEFT_EINVAL, WEFT_EIO,
 * WEFT_ENOMEM. Ownership: caller owns *out (weft__skills_free(*out, *count)). */
weft_err weft__state_skills_search(struct rt_state *st,
                                   const char *agent,
                                   const char *query,
                                   size_t k,
                                   double min_score,
                                   struct weft__skill **out,
                                   size_t *count);

/* Count one injection of skill @p id (uses + 1, last used at @p now_ns).
 * @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EINVAL, WEFT_EIO. */
weft_err weft__state_skill_used(struct rt_state *st, const char *id, uint64_t now_ns);

/* The @p limit (1..WEFT_SKILLS_LIST_MAX; 0 means 50) newest skills of @p agent (NULL: of every
 * agent), newest first. *out is NULL when there are none. @return WEFT_OK, WEFT_EINVAL,
 * WEFT_EIO, WEFT_ENOMEM. Ownership: caller owns *out (weft__skills_free()). */
weft_err weft__state_skills_list(
    struct rt_state *st, const char *agent, size_t limit, struct weft__skill **out, size_t *count);

/* The skill whose id is @p id_or_prefix or starts with it (at least 4 characters of a UUID).
 * @return WEFT_OK, WEFT_ENOTFOUND, WEFT_EINVAL (malformed, or a prefix of several), WEFT_EIO,
 * WEFT_ENOMEM. Ownership: caller cleans *out up (weft__skill_cleanup()); zeroed on error. */
weft_err
weft__state_skill_get(struct rt_state *st, const char *id_or_prefix, struct weft__skill *out);

/* Delete the skill @p id_or_prefix (as weft__state_skill_get() finds it), or every skill of
 * @p agent, or, with both, that skill when it is @p agent's. *removed (may be NULL) gets the
 * count. @return WEFT_OK (also when none matched: *removed is 0), WEFT_EINVAL (both NULL, a
 * malformed or ambiguous prefix), WEFT_EIO. */
weft_err weft__state_skills_forget(struct rt_state *st,
                                   const char *id_or_prefix,
                                   const char *agent,
                                   size_t *removed);

/* Composed teams (docs/architect.md): one row per team an architect composed: its name, its
 * file, the goal, the design (JSON text), the run it was composed for (an architect agent's
 * run; for `weft compose`, the architect's own run) and when. A resumed run registers its
 * teams again from these rows. Strings are owned by the struct (weft__state_teams_free()). */
struct weft__state_team {
    char id[WEFT_UUID_LEN + 1]; /* made by weft__state_team_save() when empty */
    char *name;
    char *path;
    char *goal;
    char *document;
    char *run_id; /* may be NULL */
    uint64_t created_ns;
};

/* Keep team @p t (the id made when empty; created_ns 0 means now). @return WEFT_OK,
 * WEFT_EINVAL (NULL or a missing name, path, goal or document), WEFT_EIO. */
weft_err weft__state_team_save(struct rt_state *st, struct weft__state_team *t);

/* The @p limit (1..WEFT_SKILLS_LIST_MAX; 0 means 50) teams composed for run @p run_id (NULL:
 * for any run), oldest first for a run (the order they were registered in), newest first
 * otherwise. @return WEFT_OK (*out NULL when none), WEFT_EINVAL, WEFT_EIO, WEFT_ENOMEM.
 * Ownership: caller owns *out (weft__state_teams_free()). */
weft_err weft__state_teams_list(struct rt_state *st,
                                const char *run_id,
                                size_t limit,
                                struct weft__state_team **out,
                                size_t *count);
void weft__state_teams_free(struct weft__state_team *teams, size_t count);

/* Apply a retention policy to the whole store now: drop skills created before @p now_ns -
 * @p max_age_ns (0: no age limit), then keep at most @p max_per_agent (0: no limit) per agent,
 * the highest reward and then the newest. One transaction. @return WEFT_OK, WEFT_EIO. */
weft_err weft__state_skills_prune(struct rt_state *st,
                                  size_t max_per_agent,
                                  uint64_t max_age_ns,
                                  uint64_t now_ns,
                                  size_t *removed);

/* Free what weft__skill_cleanup() frees in each of @p count skills, then the array. NULL is a
 * no-op. */
void weft__skills_free(struct weft__skill *skills, size_t count);
/* Free @p s's strings and zero it (not @p s itself). NULL is a no-op. */
void weft__skill_cleanup(struct weft__skill *s);

/* Helpers both backends use (state.c). */

/* The dedup key of @p task: 16 hex digits (FNV-1a 64 of the normalised text: lowercase ASCII,
 * every run of characters that are not letters or digits one space, no leading or trailing
 * space; bytes >= 0x80 are kept as they are, so non-ASCII words still count). */
void weft__skill_task_hash(const char *task, char out[17]);

/* @p text cut to @p max bytes on a UTF-8 boundary, ending with a note of how much was cut
 * when it was. Ownership: returns new (weft__free); NULL when out of memory. */
char *weft__skill_cap(const char *text, size_t max);

/* The distinct words of @p query (lowercased ASCII letters and digits, and bytes >= 0x80),
 * without a few very common English words, at most WEFT_SKILL_QUERY_TERMS of 64 bytes, each
 * wrapped in @p quote and joined by @p sep (a search uses "" and " ", and each backend builds
 * its own match from the words). *out is NULL when the query has no word. @return WEFT_OK,
 * WEFT_ENOMEM. Ownership: caller owns *out (weft__free). */
weft_err weft__skill_query_terms(const char *query, const char *quote, const char *sep, char **out);

/* Is @p ref a UUID or a prefix of one (4 to 36 characters of hex digits and hyphens)? */
bool weft__skill_ref_is_valid(const char *ref);

#endif /* WEFT_RUNTIME_STATE_H */
