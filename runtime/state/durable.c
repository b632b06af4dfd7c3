/* runtime/state/durable.c - what makes a run survive its process (docs/durability.md): one owner
 * per run (a lease in the state database, refused while a live process holds it), heartbeats and
 * the checkpoint option at each saved step, the workflow file's hash checked on resume, and the
 * root span's identity kept so that recovery can close it.
 *
 * The engine calls these at a few points (engine.c); the state database does the work
 * (state.c). Nothing here knows exporters: the checkpoint option is the embedding program's.
 */
#include "runtime/state/durable.h"
#include "runtime/state/snapshot.h"
#include "runtime/state/state.h"
#include "runtime/workflow/workflow.h"

#include "base/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define HASH_HEX_LEN 32

/* The hash of the file's bytes ("fnv1a64:" and 16 hex digits): enough to notice an edit, not
 * a defence against a forger. @return false when the file cannot be read. */
static bool
file_hash(const char *path, char out[HASH_HEX_LEN])
{
    FILE *f = path != NULL ? fopen(path, "rb") : NULL;
    uint64_t h = 14695981039346656037ull;
    unsigned char buf[8192];
    size_t n = 0;

    if (f == NULL) {
        return false;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        for (size_t i = 0; i < n; i++) {
            h = (h ^ buf[i]) * 1099511628211ull;
        }
    }
    if (ferror(f)) {
        fclose(f);
        return false;
    }
    fclose(f);
    snprintf(out, HASH_HEX_LEN, "fnv1a64:%016llx", (unsigned long long)h);
    return true;
}

void
weft__rt_checkpoint(struct run *run)
{
    (void)weft__state_heartbeat(run->store.state, run->store.run_id);
    if (run->cfg.opts->checkpoint != NULL) {
        run->cfg.opts->checkpoint(run->cfg.opts->checkpoint_user_data);
    }
}

static void
format_clock(uint64_t ns, char *buf, size_t len)
{
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;

    if (ns == 0 || localtime_r(&secs, &tm) == NULL) {
        snprintf(buf, len, "?");
        return;
    }
    strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
}

static weft_err
claim(struct run *run, const char *run_id, char *error, size_t error_len)
{
    struct state_owner holder;
    weft_err err = weft__state_lease_acquire(run->store.state, run_id, &holder);

    if (err == WEFT_ESTATE) {
        char since[32];
        char beat[32];

        format_clock(holder.since_ns, since, sizeof(since));
        format_clock(holder.heartbeat_ns, beat, sizeof(beat));
        snprintf(error, error_len,
                 "run %.64s is owned by pid %lld on host %.64s since %s (last heartbeat %s): it "
                 "is still running there; wait for it to end, or stop that process, then "
                 "weft resume %.64s",
                 run_id, (long long)holder.pid, holder.host, since, beat, run_id);
    } else if (err == WEFT_ENOTFOUND) {
        snprintf(error, error_len, "resume: no run '%.64s' in the state database", run_id);
    } else if (err != WEFT_OK && weft__state_check(run->store.state, error, error_len) == WEFT_OK) {
        snprintf(error, error_len, "state database: cannot take ownership of run %.64s", run_id);
    }
    return err;
}

weft_err
weft__rt_run_claim(struct run *run, char *error, size_t error_len)
{
    char hash[HASH_HEX_LEN];
    weft_err err = claim(run, run->store.run_id, error, error_len);

    if (err == WEFT_OK && file_hash(run->cfg.wf->path, hash)) {
        err = weft__state_run_hash_set(run->store.state, run->store.run_id, hash);
    }
    if (err == WEFT_OK) {
        /* What replay, fork and resume load when the file moved (snapshot.c). */
        weft__rt_snapshot_save(run->store.state, run->store.run_id, run->cfg.wf,
                               run->cfg.opts->snapshot_root);
    }
    return err;
}

weft_err
weft__rt_resume_claim(struct run *run, char *error, size_t error_len)
{
    const char *id = run->cfg.opts->resume_run_id;
    char stored[64];
    char now[HASH_HEX_LEN];
    weft_err err = claim(run, id, error, error_len);

    if (err != WEFT_OK) {
        return err;
    }
    err = weft__state_run_hash_get(run->store.state, id, stored, sizeof(stored));
    if (err == WEFT_ENOTFOUND) {
        return WEFT_OK; /* a run from before hashes were kept */
    }
    if (err == WEFT_OK && file_hash(run->cfg.wf->path, now) && strcmp(now, stored) != 0) {
        if (run->cfg.opts->resume_force) {
            WEFT_LOG(WEFT_LOG_WARN,
                     "resume: the workflow file %s changed since run %s started; continuing "
                     "with the changed file (--force)",
                     run->cfg.wf->path, id);
        } else {
            snprintf(error, error_len,
                     "resume: the workflow file %.200s changed since run %.64s started (hash %s, "
                     "now %s): its stored steps may not match the file; resume with --force to "
                     "continue with the changed file",
                     run->cfg.wf->path, id, stored, now);
            err = WEFT_EINVAL;
        }
    }
    if (err != WEFT_OK) {
        (void)weft__state_lease_release(run->store.state, id);
        if (error[0] == '\0') {
            snprintf(error, error_len, "resume: the state of run %.64s cannot be read", id);
        }
    }
    return err;
}

void
weft__rt_run_root_saved(struct run *run)
{
    const struct weft_span_context *parent = run->cfg.opts->parent_context;
    char parent_hex[2 * WEFT_SPAN_ID_SIZE + 1];
    char name[256];
    bool has_parent = parent != NULL && weft_span_context_is_valid(parent);

    if (has_parent) {
        weft_hex_encode(parent->span_id, WEFT_SPAN_ID_SIZE, parent_hex);
    }
    /* The name weft__rt_span_start gives the root (spans.c). */
    snprintf(name, sizeof(name), "invoke_workflow %s", run->cfg.wf->name);
    (void)weft__state_run_root(run->store.state, run->store.run_id, name,
                               has_parent ? parent_hex : NULL, run->tel.root_started_ns);
}
