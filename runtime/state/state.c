/* runtime/state/state.c - the run state store's one interface over two backends (state.h): picks
 * the backend from the location, dispatches every call through the handle's ops table, and holds
 * what both backends share (the default location, owners, recovery reports, step JSON).
 *
 * The backends live in state_sqlite.c (the embedded default) and state_pg.c (PostgreSQL through
 * libpq); state_backend.h is the contract between them and this file. Callers never learn
 * which one they talk to, except through weft__state_backend_name() for messages.
 */
#include "runtime/state/state_backend.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "base/utf8.h"
#include "base/uuid.h"
#include "tracing/ids.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* Locations                                                                                   */

bool
weft__state_is_url(const char *location)
{
    return location != NULL && (strncmp(location, "postgresql://", 13) == 0 ||
                                strncmp(location, "postgres://", 11) == 0);
}

/* Append @p len bytes of @p s; remembers a failure in *err. */
static void
put(struct weft__buf *b, const char *s, size_t len, weft_err *err)
{
    if (*err == WEFT_OK) {
        *err = weft__buf_append(b, s, len);
    }
}

char *
weft__state_location_redacted(const char *location)
{
    struct weft__buf b;
    const char *authority = NULL;
    const char *end = NULL;
    const char *at = NULL;
    const char *colon = NULL;
    const char *p = NULL;
    weft_err err = WEFT_OK;

    if (location == NULL) {
        return NULL;
    }
    if (!weft__state_is_url(location)) {
        return weft__strdup(location);
    }
    weft__buf_init(&b, 0);
    authority = strstr(location, "://") + 3;
    end = authority + strcspn(authority, "/?#");
    /* The user information ends at the authority's last '@' (a password's own '@' must be
     * percent-encoded, but a stray one must not leak the rest of it). */
    for (p = authority; p < end; p++) {
        if (*p == '@') {
            at = p;
        }
    }
    colon = at != NULL ? memchr(authority, ':', (size_t)(at - authority)) : NULL;
    if (colon != NULL) {
        put(&b, location, (size_t)(colon + 1 - location), &err);
        put(&b, "****", 4, &err);
        put(&b, at, (size_t)(end - at), &err);
    } else {
        put(&b, location, (size_t)(end - location), &err);
    }
    /* The path, then the query, where a password may come as password=... up to '&' or '#'. */
    p = end;
    while (*p != '\0') {
        size_t len = *p == '?' || *p == '&' ? 1 + strcspn(p + 1, "&#") : strcspn(p, "?&#");

        if (*p == '#') {
            len = strlen(p);
        }
        if ((*p == '?' || *p == '&') && strncmp(p + 1, "password=", 9) == 0) {
            put(&b, p, 10, &err);
            put(&b, "****", 4, &err);
        } else {
            put(&b, p, len > 0 ? len : 1, &err);
            len = len > 0 ? len : 1;
        }
        p += len;
    }
    if (err != WEFT_OK || b.data == NULL) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data;
}

char *
weft__state_default_path(void)
{
    const char *url = weft__env("WEFT_STATE_URL");
    const char *home = weft__env("WEFT_HOME");
    struct weft__buf b;

    if (url != NULL && url[0] != '\0') {
        return weft__strdup(url);
    }
    if (home == NULL) {
        home = ".weft";
    }
    weft__buf_init(&b, 0);
    if (weft__buf_printf(&b, "%s/state.db", home) != WEFT_OK) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    (void)weft__mkdir_parents(b.data, 0700); /* weft__state_open() reports what still fails */
    return b.data;
}

static weft_err
state_open(const char *location, bool is_waiting, struct rt_state **out, char *err, size_t err_len)
{
    weft_err rc = WEFT_OK;

    if (out == NULL || err == NULL || err_len == 0) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    err[0] = '\0';
    if (location == NULL || location[0] == '\0') {
        snprintf(err, err_len, "state database: no location given");
        return WEFT_EINVAL;
    }
    if (weft__state_is_url(location)) {
        rc = weft__state_pg_open(location, is_waiting, out, err, err_len);
    } else {
        rc = weft__state_sqlite_open(location, out, err, err_len);
    }
    if (rc == WEFT_OK) {
        weft__state_skills_retention(*out, WEFT_SKILLS_MAX_PER_AGENT, WEFT_SKILLS_MAX_AGE_NS);
    }
    return rc;
}

weft_err
weft__state_open(const char *location, struct rt_state **out, char *err, size_t err_len)
{
    return state_open(location, false, out, err, err_len);
}

weft_err
weft__state_open_waiting(const char *location, struct rt_state **out, char *err, size_t err_len)
{
    return state_open(location, true, out, err, err_len);
}

const char *
weft__state_backend_name(const struct rt_state *st)
{
    return st != NULL ? st->ops->name : "none";
}

/* ------------------------------------------------------------------------------------------ */
/* Dispatch                                                                                    */

void
weft__state_close(struct rt_state *st)
{
    if (st != NULL) {
        (void)weft__state_flush(st); /* a held commit is kept, not rolled back */
        st->ops->close(st);
    }
}

/* A held transaction is adopted by the next begin: that pair's commit commits it, with what
 * was held. */
weft_err
weft__state_begin(struct rt_state *st)
{
    weft_err err = WEFT_OK;

    if (st->is_held) {
        st->is_held = false;
        st->depth = 1;
        return WEFT_OK;
    }
    err = st->ops->begin(st);
    if (err == WEFT_OK) {
        st->depth++;
    }
    return err;
}

weft_err
weft__state_begin_lazy(struct rt_state *st)
{
    weft_err err = WEFT_OK;

    if (st->is_held) {
        st->is_held = false; /* adopted: it keeps the ordinary durability it was begun with */
        st->depth = 1;
        return WEFT_OK;
    }
    err = st->ops->begin_lazy(st);
    if (err == WEFT_OK) {
        st->depth++;
    }
    return err;
}

weft_err
weft__state_commit(struct rt_state *st)
{
    if (st->depth > 0) {
        st->depth--;
    }
    return st->ops->commit(st);
}

weft_err
weft__state_commit_held(struct rt_state *st)
{
    if (st->depth != 1) {
        return weft__state_commit(st); /* nested: the outer pair commits */
    }
    st->depth = 0;
    st->is_held = true;
    return WEFT_OK;
}

weft_err
weft__state_flush(struct rt_state *st)
{
    if (st == NULL || !st->is_held) {
        return WEFT_OK;
    }
    st->is_held = false;
    return st->ops->commit(st);
}

bool
weft__state_in_transaction(const struct rt_state *st)
{
    return st != NULL && st->ops->in_transaction(st);
}

weft_err
weft__state_run_begin(struct rt_state *st,
                      const char *run_id,
                      const char *workflow,
                      const char *workflow_path,
                      const char *session_id,
                      const char *input,
                      uint64_t started_ns)
{
    return st->ops->run_begin(st, run_id, workflow, workflow_path, session_id, input, started_ns);
}

weft_err
weft__state_run_trace(struct rt_state *st,
                      const char *run_id,
                      const char *trace_id,
                      const char *root_span_id)
{
    return st->ops->run_trace(st, run_id, trace_id, root_span_id);
}

weft_err
weft__state_run_end(struct rt_state *st, const char *run_id, const struct weft__state_run_end *end)
{
    return st->ops->run_end(st, run_id, end);
}

weft_err
weft__state_step_save(struct rt_state *st,
                      const char *run_id,
                      size_t index,
                      const struct plan_step *step,
                      const char *actor)
{
    return st->ops->step_save(st, run_id, index, step, actor);
}

weft_err
weft__state_surgery(struct rt_state *st,
                    const char *run_id,
                    const struct plan *plan,
                    size_t failed,
                    size_t first_new,
                    unsigned seq,
                    const char *error_type,
                    const json_t *depends_before,
                    const json_t *depends_after,
                    const char *const *actors)
{
    return st->ops->surgery(st, run_id, plan, failed, first_new, seq, error_type, depends_before,
                            depends_after, actors);
}

weft_err
weft__state_messages_load(struct rt_state *st, const char *session_id, size_t limit, json_t **out)
{
    return st->ops->messages_load(st, session_id, limit, out);
}

weft_err
weft__state_message_add(struct rt_state *st,
                        const char *session_id,
                        const char *run_id,
                        const char *role,
                        const char *content,
                        const char *route)
{
    return st->ops->message_add(st, session_id, run_id, role, content, route);
}

weft_err
weft__state_cursors_load(struct rt_state *st,
                         const char *session_id,
                         const char *script,
                         json_t **out)
{
    return st->ops->cursors_load(st, session_id, script, out);
}

weft_err
weft__state_cursors_save(struct rt_state *st,
                         const char *session_id,
                         const char *script,
                         const json_t *cursors)
{
    return st->ops->cursors_save(st, session_id, script, cursors);
}

weft_err
weft__state_runs_each(struct rt_state *st, size_t limit, state_run_fn fn, void *user_data)
{
    return st->ops->runs_each(st, limit, fn, user_data);
}

weft_err
weft__state_run_resolve(
    struct rt_state *st, const char *ref, char *out, size_t out_len, char *err, size_t err_len)
{
    return st->ops->run_resolve(st, ref, out, out_len, err, err_len);
}

weft_err
weft__state_run_info(struct rt_state *st, const char *run_id, struct weft_run_info *info)
{
    return st->ops->run_info(st, run_id, info);
}

weft_err
weft__state_steps_each(struct rt_state *st, const char *run_id, state_step_fn fn, void *user_data)
{
    return st->ops->steps_each(st, run_id, fn, user_data);
}

weft_err
weft__state_corrections_each(struct rt_state *st,
                             const char *run_id,
                             state_correction_fn fn,
                             void *user_data)
{
    return st->ops->corrections_each(st, run_id, fn, user_data);
}

weft_err
weft__state_exchange_add(struct rt_state *st,
                         const char *run_id,
                         const char *who,
                         const char *purpose,
                         const json_t *entry)
{
    return st->ops->exchange_add(st, run_id, who, purpose, entry);
}

weft_err
weft__state_exchanges_script(struct rt_state *st, const char *run_id, json_t **out)
{
    return st->ops->exchanges_script(st, run_id, out);
}

weft_err
weft__state_exchange_counts(struct rt_state *st,
                            const char *run_id,
                            uint64_t before_ns,
                            json_t **out)
{
    return st->ops->exchange_counts(st, run_id, before_ns, out);
}

weft_err
weft__state_tool_result_add(struct rt_state *st,
                            const char *run_id,
                            const struct weft__state_tool_result *r)
{
    if (st == NULL || run_id == NULL || r == NULL || r->step_id == NULL || r->tool == NULL ||
        r->kind == NULL || r->request == NULL || r->outcome == NULL) {
        return WEFT_EINVAL;
    }
    return st->ops->tool_result_add(st, run_id, r);
}

weft_err
weft__state_tool_results_each(struct rt_state *st,
                              const char *run_id,
                              state_tool_result_fn fn,
                              void *user_data)
{
    if (st == NULL || run_id == NULL || fn == NULL) {
        return WEFT_EINVAL;
    }
    return st->ops->tool_results_each(st, run_id, fn, user_data);
}

weft_err
weft__state_run_origin(struct rt_state *st,
                       const char *run_id,
                       const char *kind,
                       const char *origin_run_id,
                       const char *origin_step)
{
    if (st == NULL || run_id == NULL || kind == NULL || origin_run_id == NULL) {
        return WEFT_EINVAL;
    }
    return st->ops->run_origin(st, run_id, kind, origin_run_id, origin_step);
}

weft_err
weft__state_run_pin(struct rt_state *st, const char *run_id, bool is_pinned)
{
    if (st == NULL || run_id == NULL) {
        return WEFT_EINVAL;
    }
    return st->ops->run_pin(st, run_id, is_pinned);
}

weft_err
weft__state_gc_scan(struct rt_state *st,
                    uint64_t cutoff_ns,
                    uint64_t after_ns,
                    const char *after_id,
                    size_t limit,
                    state_gc_fn fn,
                    void *user_data)
{
    if (st == NULL || fn == NULL || limit == 0) {
        return WEFT_EINVAL;
    }
    return st->ops->gc_scan(st, cutoff_ns, after_ns, after_id, limit, fn, user_data);
}

weft_err
weft__state_gc_kept(struct rt_state *st, uint64_t cutoff_ns, size_t *pinned, size_t *running)
{
    if (st == NULL || pinned == NULL || running == NULL) {
        return WEFT_EINVAL;
    }
    *pinned = 0;
    *running = 0;
    return st->ops->gc_kept(st, cutoff_ns, pinned, running);
}

weft_err
weft__state_gc_run(struct rt_state *st,
                   const char *run_id,
                   uint64_t cutoff_ns,
                   bool is_dry_run,
                   uint64_t *rows,
                   bool *is_deleted)
{
    if (st == NULL || run_id == NULL || rows == NULL || is_deleted == NULL) {
        return WEFT_EINVAL;
    }
    *rows = 0;
    *is_deleted = false;
    return st->ops->gc_run(st, run_id, cutoff_ns, is_dry_run, rows, is_deleted);
}

weft_err
weft__state_check(struct rt_state *st, char *err, size_t err_len)
{
    return st->ops->check(st, err, err_len);
}

weft_err
weft__state_lease_acquire(struct rt_state *st, const char *run_id, struct state_owner *holder)
{
    return st->ops->lease_acquire(st, run_id, holder);
}

weft_err
weft__state_lease_release(struct rt_state *st, const char *run_id)
{
    return st->ops->lease_release(st, run_id);
}

weft_err
weft__state_heartbeat(struct rt_state *st, const char *run_id)
{
    return st->ops->heartbeat(st, run_id);
}

weft_err
weft__state_run_root(struct rt_state *st,
                     const char *run_id,
                     const char *name,
                     const char *parent_span_id,
                     uint64_t started_ns)
{
    return st->ops->run_root(st, run_id, name, parent_span_id, started_ns);
}

weft_err
weft__state_run_hash_set(struct rt_state *st, const char *run_id, const char *hash)
{
    return st->ops->run_hash_set(st, run_id, hash);
}

weft_err
weft__state_run_hash_get(struct rt_state *st, const char *run_id, char *out, size_t out_len)
{
    return st->ops->run_hash_get(st, run_id, out, out_len);
}

weft_err
weft__state_run_snapshot_set(struct rt_state *st, const char *run_id, const char *snapshot)
{
    return st->ops->run_snapshot_set(st, run_id, snapshot);
}

weft_err
weft__state_run_snapshot_get(struct rt_state *st, const char *run_id, char **out)
{
    *out = NULL;
    return st->ops->run_snapshot_get(st, run_id, out);
}

weft_err
weft__state_recover(struct rt_state *st, state_interrupted_fn fn, void *user_data, size_t *count)
{
    struct weft__state_dead *dead = NULL;
    size_t n = 0;
    uint64_t now = weft__now_ns();
    weft_err err = WEFT_OK;

    if (count != NULL) {
        *count = 0;
    }
    if (st->ops->begin(st) != WEFT_OK) {
        return WEFT_EIO;
    }
    err = st->ops->dead_collect(st, now, &dead, &n);
    for (size_t i = 0; err == WEFT_OK && i < n; i++) {
        err = st->ops->dead_mark(st, &dead[i]);
    }
    /* The callbacks run once the transaction has ended, and only if it committed. */
    err = st->ops->end(st, err);
    for (size_t i = 0; i < n; i++) {
        if (err == WEFT_OK && fn != NULL) {
            weft__state_dead_report(&dead[i], fn, user_data);
        }
        weft__state_dead_free(&dead[i]);
    }
    weft__free(dead);
    if (err == WEFT_OK && count != NULL) {
        *count = n;
    }
    return err;
}

/* ------------------------------------------------------------------------------------------ */
/* Built on the ops                                                                            */

struct collect_runs {
    struct weft_run_info *infos;
    size_t count;
};

static weft_err
collect_run(struct weft_run_info *info, void *user_data)
{
    struct collect_runs *c = user_data;

    /* Take the strings over: the iterator then cleans up an empty record. */
    c->infos[c->count++] = *info;
    memset(info, 0, sizeof(*info));
    return WEFT_OK;
}

weft_err
weft__state_runs_list(struct rt_state *st, size_t limit, struct weft_run_info **out, size_t *count)
{
    struct collect_runs c = {NULL, 0};
    weft_err err = WEFT_OK;

    *out = NULL;
    *count = 0;
    c.infos = weft__calloc(limit > 0 ? limit : 1, sizeof(*c.infos));
    if (c.infos == NULL) {
        return WEFT_ENOMEM;
    }
    err = weft__state_runs_each(st, limit, collect_run, &c);
    if (err != WEFT_OK) {
        for (size_t i = 0; i < c.count; i++) {
            weft__state_info_cleanup(&c.infos[i]);
        }
        weft__free(c.infos);
        return err;
    }
    *out = c.infos;
    *count = c.count;
    return WEFT_OK;
}

void
weft__state_info_cleanup(struct weft_run_info *info)
{
    weft__free(info->run_id);
    weft__free(info->workflow);
    weft__free(info->workflow_path);
    weft__free(info->session_id);
    weft__free(info->input);
    weft__free(info->status);
    weft__free(info->reason);
    weft__free(info->trace_id);
    weft__free(info->root_span_id);
    weft__free(info->resumed_from_trace);
    weft__free(info->loops);
    weft__free(info->origin_kind);
    weft__free(info->origin_run_id);
    weft__free(info->origin_step);
    weft__free(info->trace_sampling);
    memset(info, 0, sizeof(*info));
}

/* ------------------------------------------------------------------------------------------ */
/* Shared by the backends                                                                      */

void
weft__state_hostname(char *out, size_t len)
{
    if (gethostname(out, len) != 0) {
        snprintf(out, len, "?");
    }
    out[len - 1] = '\0';
}

bool
weft__state_owner_is_alive(int64_t pid, const char *host, uint64_t heartbeat_ns, uint64_t now_ns)
{
    char me[256];

    if (host == NULL) {
        return true; /* no owner recorded (a run from before version 4): cannot tell */
    }
    weft__state_hostname(me, sizeof(me));
    if (strcmp(me, host) == 0) {
        /* EPERM: the process exists but belongs to someone else. */
        return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno != ESRCH);
    }
    return heartbeat_ns + STATE_OWNER_STALE_NS > now_ns;
}

void
weft__state_new_token(char out[33])
{
    uint8_t bytes[16];
    struct weft__rng *rng = weft__thread_rng();

    for (size_t i = 0; i < sizeof(bytes); i += 8) {
        uint64_t v = weft__rng_next(rng);
        memcpy(bytes + i, &v, 8);
    }
    weft_hex_encode(bytes, sizeof(bytes), out);
    out[32] = '\0';
}

void
weft__state_owner_view(struct weft_run_info *info,
                       int64_t pid,
                       const char *host,
                       uint64_t heartbeat_ns,
                       uint64_t last_step_ns,
                       bool *is_oom)
{
    char *status = NULL;

    if (info->status == NULL || strcmp(info->status, "running") != 0 ||
        weft__state_owner_is_alive(pid, host, heartbeat_ns, weft__now_ns())) {
        return;
    }
    status = weft__strdup("interrupted");
    if (status == NULL) {
        *is_oom = true;
        return;
    }
    weft__free(info->status);
    info->status = status;
    info->ended_ns = heartbeat_ns > last_step_ns ? heartbeat_ns : last_step_ns;
    if (info->ended_ns < info->started_ns) {
        info->ended_ns = info->started_ns;
    }
}

bool
weft__state_ref_is_valid(const char *ref, char *err, size_t err_len)
{
    /* LIKE wildcards (and PostgreSQL's LIKE escape) would turn a reference into a pattern. */
    if (strlen(ref) == 0 || strlen(ref) > 64 || strpbrk(ref, "%_\\") != NULL) {
        snprintf(err, err_len, "'%.64s' is not a run id", ref);
        return false;
    }
    return true;
}

char *
weft__state_deps_json(const struct plan_step *step)
{
    json_t *deps = json_array();
    char *text = NULL;

    for (size_t i = 0; deps != NULL && i < step->depends_count; i++) {
        if (json_array_append_new(deps, json_string(step->depends_on[i])) != 0) {
            json_decref(deps);
            return NULL;
        }
    }
    text = deps != NULL ? json_dumps(deps, JSON_COMPACT) : NULL;
    json_decref(deps);
    return text;
}

uint64_t
weft__state_dead_end(const struct weft__state_dead *d,
                     uint64_t heartbeat_ns,
                     uint64_t last_step_ns,
                     uint64_t started_ns)
{
    uint64_t end = heartbeat_ns > last_step_ns ? heartbeat_ns : last_step_ns;

    if (end < started_ns) {
        end = started_ns;
    }
    if (end < d->root_started_ns) {
        end = d->root_started_ns;
    }
    return end;
}

weft_err
weft__state_dead_reason(struct weft__state_dead *d)
{
    struct weft__buf reason;
    weft_err err = WEFT_OK;

    weft__buf_init(&reason, 0);
    err = weft__buf_printf(&reason,
                           "interrupted: its process (pid %lld on %s) ended without finishing "
                           "it; weft resume %s continues it",
                           (long long)d->pid, d->text[2] != NULL ? d->text[2] : "?", d->text[0]);
    if (err != WEFT_OK) {
        weft__buf_cleanup(&reason);
        return err;
    }
    weft__free(d->text[7]);
    d->text[7] = reason.data;
    return WEFT_OK;
}

weft_err
weft__state_dead_add_step(struct weft__state_dead *d,
                          const char *span_id,
                          const char *parent_span_id,
                          const char *agent,
                          uint64_t started_ns)
{
    struct weft_interrupted_step *grown =
        weft__realloc(d->open, (d->open_count + 1) * sizeof(*grown));
    struct weft__buf name;
    weft_err err = WEFT_OK;

    if (grown == NULL) {
        return WEFT_ENOMEM;
    }
    d->open = grown;
    weft__buf_init(&name, 0);
    err = weft__buf_printf(&name, "invoke_agent %s", agent != NULL ? agent : "?");
    grown = &d->open[d->open_count++];
    memset(grown, 0, sizeof(*grown));
    grown->span_id = weft__strdup(span_id);
    grown->parent_span_id = parent_span_id != NULL ? weft__strdup(parent_span_id) : NULL;
    grown->name = name.data;
    grown->started_ns = started_ns;
    if (err != WEFT_OK || grown->span_id == NULL || grown->name == NULL ||
        (parent_span_id != NULL && grown->parent_span_id == NULL)) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

void
weft__state_dead_report(const struct weft__state_dead *d, state_interrupted_fn fn, void *user_data)
{
    struct weft_interrupted_run run;

    memset(&run, 0, sizeof(run));
    run.run_id = d->text[0];
    run.workflow = d->text[1];
    run.owner_host = d->text[2];
    run.owner_pid = d->pid;
    run.trace_id = d->text[3];
    run.root_span_id = d->text[4];
    run.root_parent_span_id = d->text[5];
    run.root_name = d->text[6];
    run.reason = d->text[7];
    run.root_started_ns = d->root_started_ns;
    run.ended_ns = d->ended_ns;
    run.open_steps = d->open;
    run.open_step_count = d->open_count;
    fn(&run, user_data);
}

void
weft__state_dead_free(struct weft__state_dead *d)
{
    for (int k = 0; k < 8; k++) {
        weft__free(d->text[k]);
    }
    for (size_t k = 0; k < d->open_count; k++) {
        weft__free((char *)d->open[k].span_id);
        weft__free((char *)d->open[k].parent_span_id);
        weft__free((char *)d->open[k].name);
    }
    weft__free(d->open);
    memset(d, 0, sizeof(*d));
}

bool
weft__state_script_add(json_t *responses, const char *who, const char *purpose, json_t *entry)
{
    json_t *agent = NULL;
    json_t *list = NULL;

    if (entry == NULL) {
        return false;
    }
    agent = json_object_get(responses, who);
    if (agent == NULL) {
        agent = json_object();
        if (json_object_set_new(responses, who, agent) != 0) {
            json_decref(entry);
            return false;
        }
    }
    list = json_object_get(agent, purpose);
    if (list == NULL) {
        list = json_array();
        if (json_object_set_new(agent, purpose, list) != 0) {
            json_decref(entry);
            return false;
        }
    }
    return json_array_append_new(list, entry) == 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Skill memory                                                                                */

void
weft__state_skills_retention(struct rt_state *st, size_t max_per_agent, uint64_t max_age_ns)
{
    if (st != NULL) {
        st->skills_max_per_agent = max_per_agent;
        st->skills_max_age_ns = max_age_ns;
    }
}

static bool
is_word_byte(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c >= 0x80;
}

static unsigned char
lower(unsigned char c)
{
    return c >= 'A' && c <= 'Z' ? (unsigned char)(c - 'A' + 'a') : c;
}

void
weft__skill_task_hash(const char *task, char out[17])
{
    /* FNV-1a over the normalised bytes, fed word by word with one space between words: 64
     * bits are plenty for the tasks of one agent (a collision would merge two skills, never
     * lose data silently: the kept one is the better rewarded). */
    uint64_t h = 1469598103934665603ull;
    const unsigned char *p = (const unsigned char *)(task != NULL ? task : "");
    bool is_first = true;

    while (*p != '\0') {
        while (*p != '\0' && !is_word_byte(*p)) {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        if (!is_first) {
            h = (h ^ ' ') * 1099511628211ull;
        }
        is_first = false;
        while (is_word_byte(*p)) {
            h = (h ^ lower(*p)) * 1099511628211ull;
            p++;
        }
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

char *
weft__skill_cap(const char *text, size_t max)
{
    struct weft__buf b;
    size_t len = strlen(text);
    size_t keep = 0;
    char note[96];
    int note_len = 0;

    if (len <= max) {
        return weft__strdup(text);
    }
    note_len = snprintf(note, sizeof(note), "\n[weft: cut to %zu of %zu bytes]", max, len);
    keep = max > (size_t)note_len ? weft__utf8_cut(text, len, max - (size_t)note_len) : 0;
    weft__buf_init(&b, 0);
    if (weft__buf_append(&b, text, keep) != WEFT_OK ||
        weft__buf_append(&b, note, (size_t)note_len) != WEFT_OK || b.data == NULL) {
        weft__buf_cleanup(&b);
        return NULL;
    }
    return b.data;
}

/* Words too common to tell tasks apart: ORed, each would match most of the store and cost a
 * ranking of every row it matches. */
static const char *const stop_words[] = {
    "a",    "an", "and", "are", "as",   "at",   "be",   "by",   "for",  "from", "in",
    "is",   "it", "its", "of",  "on",   "or",   "so",   "than", "that", "the",  "then",
    "this", "to", "was", "we",  "were", "will", "with", "you",  "your", "our",  "not",
};

static bool
is_stop_word(const char *w, size_t len)
{
    for (size_t i = 0; i < sizeof(stop_words) / sizeof(stop_words[0]); i++) {
        if (strlen(stop_words[i]) == len && memcmp(stop_words[i], w, len) == 0) {
            return true;
        }
    }
    return false;
}

weft_err
weft__skill_query_terms(const char *query, const char *quote, const char *sep, char **out)
{
    struct weft__buf b;
    const unsigned char *p = (const unsigned char *)query;
    char seen[WEFT_SKILL_QUERY_TERMS][64];
    size_t seen_len[WEFT_SKILL_QUERY_TERMS];
    size_t terms = 0;
    weft_err err = WEFT_OK;

    *out = NULL;
    weft__buf_init(&b, 0);
    while (err == WEFT_OK && *p != '\0' && terms < WEFT_SKILL_QUERY_TERMS) {
        char *word = seen[terms];
        size_t len = 0;
        bool is_seen = false;

        while (*p != '\0' && !is_word_byte(*p)) {
            p++;
        }
        while (is_word_byte(*p)) {
            if (len < sizeof(seen[0])) {
                word[len++] = (char)lower(*p);
            }
            p++;
        }
        /* A word cut by the length cap must stay valid UTF-8 (PostgreSQL refuses other text). */
        len = weft__utf8_complete(word, len);
        for (size_t i = 0; i < terms; i++) {
            is_seen = is_seen || (seen_len[i] == len && memcmp(seen[i], word, len) == 0);
        }
        if (len == 0 || is_stop_word(word, len) || is_seen) {
            continue;
        }
        seen_len[terms] = len;
        if (terms > 0) {
            err = weft__buf_append(&b, sep, strlen(sep));
        }
        if (err == WEFT_OK) {
            err = weft__buf_printf(&b, "%s%.*s%s", quote, (int)len, word, quote);
        }
        terms++;
    }
    if (err != WEFT_OK) {
        weft__buf_cleanup(&b);
        return err;
    }
    *out = b.data; /* NULL when no word was found */
    return WEFT_OK;
}

bool
weft__skill_ref_is_valid(const char *ref)
{
    size_t len = ref != NULL ? strlen(ref) : 0;

    if (len < 4 || len > WEFT_UUID_LEN) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = ref[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
              c == '-')) {
            return false;
        }
    }
    return true;
}

void
weft__skill_cleanup(struct weft__skill *s)
{
    if (s == NULL) {
        return;
    }
    weft__free(s->agent);
    weft__free(s->task);
    weft__free(s->solution);
    weft__free(s->workflow);
    weft__free(s->run_id);
    memset(s, 0, sizeof(*s));
}

void
weft__skills_free(struct weft__skill *skills, size_t count)
{
    if (skills == NULL) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        weft__skill_cleanup(&skills[i]);
    }
    weft__free(skills);
}

static bool
is_hex_or_empty(const char *s, size_t len)
{
    size_t n = strnlen(s, len + 1);

    if (n == 0) {
        return true;
    }
    if (n != len) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return true;
}

static bool
is_short_text(const char *s)
{
    return s == NULL || strnlen(s, WEFT_SKILL_TEXT_MAX + 1) <= WEFT_SKILL_TEXT_MAX;
}

/* Vectors are stored as float32 little-endian whatever the host's order, so a store moved
 * between machines (or shared over PostgreSQL) reads the same numbers. */
static void
vec_encode(const float *values, size_t dims, unsigned char *out)
{
    for (size_t i = 0; i < dims; i++) {
        uint32_t u = 0;

        memcpy(&u, &values[i], sizeof(u));
        out[4 * i] = (unsigned char)(u & 0xffu);
        out[4 * i + 1] = (unsigned char)((u >> 8) & 0xffu);
        out[4 * i + 2] = (unsigned char)((u >> 16) & 0xffu);
        out[4 * i + 3] = (unsigned char)(u >> 24);
    }
}

static void
vec_decode(const unsigned char *bytes, size_t dims, float *out)
{
    for (size_t i = 0; i < dims; i++) {
        uint32_t u = (uint32_t)bytes[4 * i] | (uint32_t)bytes[4 * i + 1] << 8 |
                     (uint32_t)bytes[4 * i + 2] << 16 | (uint32_t)bytes[4 * i + 3] << 24;

        memcpy(&out[i], &u, sizeof(u));
    }
}

static bool
vec_is_valid(const struct weft__skill_vector *v)
{
    if (v->model == NULL || v->model[0] == '\0' || !is_short_text(v->model) || v->values == NULL ||
        v->dims == 0 || v->dims > WEFT_SKILL_VECTOR_DIMS_MAX) {
        return false;
    }
    for (size_t i = 0; i < v->dims; i++) {
        if (!isfinite(v->values[i])) {
            return false;
        }
    }
    return true;
}

static bool
skill_is_valid(const struct weft__skill *s)
{
    return s != NULL && s->agent != NULL && s->agent[0] != '\0' && s->task != NULL &&
           s->task[0] != '\0' && s->solution != NULL && is_short_text(s->agent) &&
           is_short_text(s->workflow) && is_short_text(s->run_id) &&
           is_hex_or_empty(s->trace_id, 32) && is_hex_or_empty(s->span_id, 16) &&
           (s->id[0] == '\0' || weft__uuid_is_valid(s->id));
}

weft_err
weft__state_skill_save(struct rt_state *st, const struct weft__skill *s, bool *is_new)
{
    return weft__state_skill_save_vec(st, s, NULL, is_new);
}

weft_err
weft__state_skill_save_vec(struct rt_state *st,
                           const struct weft__skill *s,
                           const struct weft__skill_vector *vec,
                           bool *is_new)
{
    struct weft__skill copy;
    struct weft__state_vec_blob blob;
    unsigned char *bytes = NULL;
    char hash[17];
    bool added = false;
    weft_err err = WEFT_OK;

    if (is_new != NULL) {
        *is_new = false;
    }
    if (st == NULL || !skill_is_valid(s) || (vec != NULL && !vec_is_valid(vec))) {
        return WEFT_EINVAL;
    }
    if (vec != NULL) {
        bytes = weft__malloc(4 * vec->dims);
        if (bytes == NULL) {
            return WEFT_ENOMEM;
        }
        vec_encode(vec->values, vec->dims, bytes);
        blob.model = vec->model;
        blob.bytes = bytes;
        blob.len = 4 * vec->dims;
    }
    /* The caps apply to a copy: the caller's skill is borrowed. */
    copy = *s;
    copy.task = weft__skill_cap(s->task, WEFT_SKILL_TASK_MAX);
    copy.solution = weft__skill_cap(s->solution, WEFT_SKILL_SOLUTION_MAX);
    if (copy.task == NULL || copy.solution == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    if (copy.id[0] == '\0') {
        weft__uuid_v4(copy.id);
    }
    for (char *c = copy.id; *c != '\0'; c++) {
        *c = (char)lower((unsigned char)*c); /* ids are stored lowercase: prefixes match */
    }
    if (copy.created_ns == 0) {
        copy.created_ns = weft__now_ns();
    }
    weft__skill_task_hash(s->task, hash);
    err = st->ops->skill_save(st, &copy, hash, vec != NULL ? &blob : NULL, &added);
    if (err == WEFT_OK && is_new != NULL) {
        *is_new = added;
    }
out:
    weft__free(copy.task);
    weft__free(copy.solution);
    weft__free(bytes);
    return err;
}

struct vec_scan {
    state_vector_fn fn;
    void *user_data;
    float *values; /* dims floats, reused for every row */
    size_t dims;
};

static bool
vec_scan_row(const char *id, const unsigned char *bytes, void *user_data)
{
    struct vec_scan *scan = user_data;

    vec_decode(bytes, scan->dims, scan->values);
    return scan->fn(id, scan->values, scan->user_data);
}

weft_err
weft__state_skill_vectors_each(struct rt_state *st,
                               const char *agent,
                               const char *model,
                               size_t dims,
                               state_vector_fn fn,
                               void *user_data)
{
    struct vec_scan scan;
    weft_err err = WEFT_OK;

    if (st == NULL || agent == NULL || model == NULL || fn == NULL || dims == 0 ||
        dims > WEFT_SKILL_VECTOR_DIMS_MAX) {
        return WEFT_EINVAL;
    }
    scan.fn = fn;
    scan.user_data = user_data;
    scan.dims = dims;
    scan.values = weft__malloc(dims * sizeof(float));
    if (scan.values == NULL) {
        return WEFT_ENOMEM;
    }
    err = st->ops->skill_vectors(st, agent, model, 4 * dims, WEFT_SKILL_VECTORS_SCAN_MAX,
                                 vec_scan_row, &scan);
    weft__free(scan.values);
    return err;
}

weft_err
weft__state_skills_search(struct rt_state *st,
                          const char *agent,
                          const char *query,
                          size_t k,
                          double min_score,
                          struct weft__skill **out,
                          size_t *count)
{
    char *terms = NULL;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    if (st == NULL || agent == NULL || query == NULL || out == NULL || count == NULL ||
        min_score != min_score) {
        return WEFT_EINVAL;
    }
    if (k == 0) {
        return WEFT_OK;
    }
    /* Words of letters and digits only, space-separated, so no character of the query is
     * query syntax; each backend picks the rarest and builds its own match from them. */
    err = weft__skill_query_terms(query, "", " ", &terms);
    if (err != WEFT_OK || terms == NULL) {
        return err;
    }
    err = st->ops->skills_search(st, agent, terms, k > WEFT_SKILLS_K_MAX ? WEFT_SKILLS_K_MAX : k,
                                 min_score, out, count);
    weft__free(terms);
    return err;
}

weft_err
weft__state_skill_used(struct rt_state *st, const char *id, uint64_t now_ns)
{
    if (st == NULL || !weft__uuid_is_valid(id)) {
        return WEFT_EINVAL;
    }
    return st->ops->skill_used(st, id, now_ns);
}

weft_err
weft__state_team_save(struct rt_state *st, struct weft__state_team *t)
{
    if (st == NULL || t == NULL || t->name == NULL || t->path == NULL || t->goal == NULL ||
        t->document == NULL) {
        return WEFT_EINVAL;
    }
    if (t->id[0] == '\0') {
        weft__uuid_v4(t->id);
    }
    if (t->created_ns == 0) {
        t->created_ns = weft__now_ns();
    }
    return st->ops->team_save(st, t);
}

weft_err
weft__state_teams_list(struct rt_state *st,
                       const char *run_id,
                       size_t limit,
                       struct weft__state_team **out,
                       size_t *count)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    if (st == NULL || out == NULL || count == NULL || limit > WEFT_SKILLS_LIST_MAX) {
        return WEFT_EINVAL;
    }
    return st->ops->teams_list(st, run_id, limit == 0 ? 50 : limit, out, count);
}

weft_err
weft__state_open_existing(const char *state_path, struct rt_state **out)
{
    char *path = state_path != NULL ? weft__strdup(state_path) : weft__state_default_path();
    char err[256];
    weft_err rc = WEFT_OK;

    *out = NULL;
    if (path == NULL) {
        return WEFT_ENOMEM;
    }
    if (!weft__state_is_url(path) && access(path, F_OK) != 0) {
        weft__free(path);
        return WEFT_ENOTFOUND;
    }
    rc = weft__state_open(path, out, err, sizeof(err));
    if (rc != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_ERROR, "%s", err);
    }
    weft__free(path);
    return rc;
}

void
weft__state_teams_free(struct weft__state_team *teams, size_t count)
{
    for (size_t i = 0; teams != NULL && i < count; i++) {
        weft__free(teams[i].name);
        weft__free(teams[i].path);
        weft__free(teams[i].goal);
        weft__free(teams[i].document);
        weft__free(teams[i].run_id);
    }
    weft__free(teams);
}

weft_err
weft__state_skills_list(
    struct rt_state *st, const char *agent, size_t limit, struct weft__skill **out, size_t *count)
{
    if (out != NULL) {
        *out = NULL;
    }
    if (count != NULL) {
        *count = 0;
    }
    if (st == NULL || out == NULL || count == NULL || limit > WEFT_SKILLS_LIST_MAX) {
        return WEFT_EINVAL;
    }
    return st->ops->skills_list(st, agent, limit == 0 ? 50 : limit, out, count);
}

weft_err
weft__state_skill_get(struct rt_state *st, const char *id_or_prefix, struct weft__skill *out)
{
    struct weft__skill *found = NULL;
    char ref[WEFT_UUID_LEN + 1];
    size_t n = 0;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        memset(out, 0, sizeof(*out));
    }
    if (st == NULL || out == NULL || !weft__skill_ref_is_valid(id_or_prefix)) {
        return WEFT_EINVAL;
    }
    for (n = 0; id_or_prefix[n] != '\0'; n++) {
        ref[n] = (char)lower((unsigned char)id_or_prefix[n]);
    }
    ref[n] = '\0';
    n = 0;
    err = st->ops->skill_get(st, ref, &found, &n);
    if (err != WEFT_OK) {
        return err;
    }
    /* An exact id wins over the longer ids it is a prefix of (the backend lists it first). */
    if (n == 0) {
        err = WEFT_ENOTFOUND;
    } else if (n > 1 && strcmp(found[0].id, ref) != 0) {
        err = WEFT_EINVAL;
    } else {
        *out = found[0];
        memset(&found[0], 0, sizeof(found[0]));
    }
    weft__skills_free(found, n);
    return err;
}

weft_err
weft__state_skills_forget(struct rt_state *st,
                          const char *id_or_prefix,
                          const char *agent,
                          size_t *removed)
{
    struct weft__skill s;
    weft_err err = WEFT_OK;

    if (removed != NULL) {
        *removed = 0;
    }
    if (st == NULL || (id_or_prefix == NULL && agent == NULL)) {
        return WEFT_EINVAL;
    }
    if (id_or_prefix == NULL) {
        return st->ops->skills_forget(st, NULL, agent, removed);
    }
    err = weft__state_skill_get(st, id_or_prefix, &s);
    if (err == WEFT_ENOTFOUND) {
        return WEFT_OK;
    }
    if (err != WEFT_OK) {
        return err;
    }
    err = st->ops->skills_forget(st, s.id, agent, removed);
    weft__skill_cleanup(&s);
    return err;
}

weft_err
weft__state_skills_prune(struct rt_state *st,
                         size_t max_per_agent,
                         uint64_t max_age_ns,
                         uint64_t now_ns,
                         size_t *removed)
{
    if (removed != NULL) {
        *removed = 0;
    }
    if (st == NULL) {
        return WEFT_EINVAL;
    }
    return st->ops->skills_prune(st, max_per_agent, max_age_ns, now_ns, removed);
}
