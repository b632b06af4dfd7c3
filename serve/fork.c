/* serve/fork.c - POST /api/v1/runs/ID/fork (fork.h): the request checked as `weft fork` checks
 * it, then `weft fork` as a child process, one at a time, answered once its run row exists. */
#define _GNU_SOURCE /* mkostemp */

#include "fork.h"

#include "base/log.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <weft/runtime.h>

extern char **environ;

#define MAX_SETS      16
#define START_WAIT_MS 30000 /* for the fork's run row */
#define STOP_WAIT_MS  10000 /* for an interrupted fork to end, before SIGKILL */
#define POLL_MS       50
#define LIST_LIMIT    200

static const char keys_text[] = "supported keys: step.STEP.task, step.STEP.answer (STEP the "
                                "step forked from), agent.NAME.model, agent.NAME.instructions";

struct weft__serve_fork {
    char *exe;
    char *state_path;
    char *store_env; /* "WEFT_TRACE_STORE_URL=" the server's span store; NULL: the server's env */
    pthread_mutex_t lock;
    pid_t pid;    /* the fork running, 0: none */
    bool is_busy; /* a request is starting one */
};

/* What a request asks, checked. */
struct fork_req {
    json_t *doc;
    const char *from;
    struct weft_run_details *run;
    char *argv_sets[MAX_SETS];
    size_t set_count;
};

weft_err
weft__serve_fork_new(const char *exe,
                     const char *state_path,
                     const char *store_path,
                     struct weft__serve_fork **out)
{
    struct weft__serve_fork *sf = NULL;

    if (exe == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    sf = weft__calloc(1, sizeof(*sf));
    if (sf == NULL) {
        return WEFT_ENOMEM;
    }
    sf->exe = weft__strdup(exe);
    sf->state_path = state_path != NULL ? weft__strdup(state_path) : NULL;
    if (store_path != NULL && asprintf(&sf->store_env, "WEFT_TRACE_STORE_URL=%s", store_path) < 0) {
        sf->store_env = NULL;
    }
    if (sf->exe == NULL || (state_path != NULL && sf->state_path == NULL) ||
        (store_path != NULL && sf->store_env == NULL) || pthread_mutex_init(&sf->lock, NULL) != 0) {
        weft__free(sf->exe);
        weft__free(sf->state_path);
        free(sf->store_env);
        weft__free(sf);
        return WEFT_ENOMEM;
    }
    *out = sf;
    return WEFT_OK;
}

static void
sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void
req_cleanup(struct fork_req *r)
{
    json_decref(r->doc);
    weft_run_details_free(r->run);
    for (size_t i = 0; i < r->set_count; i++) {
        free(r->argv_sets[i]);
    }
}

/* The body's shape: {"from": STEP, "set": {KEY: TEXT}} ("set" optional). */
static bool
parse_body(struct fork_req *r, const char *body, size_t len, char *why, size_t why_len)
{
    json_error_t jerr;
    const char *key = NULL;
    json_t *v = NULL;
    const json_t *set = NULL;

    r->doc = body != NULL ? json_loadb(body, len, 0, &jerr) : NULL;
    if (!json_is_object(r->doc)) {
        snprintf(why, why_len,
                 "the body: expected a JSON object {\"from\": STEP, \"set\": "
                 "{KEY: TEXT}}");
        return false;
    }
    json_object_foreach(r->doc, key, v)
    {
        if (strcmp(key, "from") != 0 && strcmp(key, "set") != 0) {
            snprintf(why, why_len,
                     "the body: unknown member \"%.60s\"; expected \"from\" and "
                     "\"set\"",
                     key);
            return false;
        }
    }
    r->from = json_string_value(json_object_get(r->doc, "from"));
    set = json_object_get(r->doc, "set");
    if (r->from == NULL || r->from[0] == '\0') {
        snprintf(why, why_len, "the body: \"from\" must name the step to fork from");
        return false;
    }
    if (set != NULL && (!json_is_object(set) || json_object_size(set) > MAX_SETS)) {
        snprintf(why, why_len, "the body: \"set\" must be an object of at most %d KEY: TEXT",
                 MAX_SETS);
        return false;
    }
    return true;
}

/* One "set" key as weft fork takes it: a step key of the step forked from, or an agent's. */
static bool
check_key(const struct fork_req *r, const char *key, char *why, size_t why_len)
{
    size_t from_len = strlen(r->from);

    if (strncmp(key, "step.", 5) == 0) {
        const char *field = key + 5 + from_len;
        bool is_ours = strncmp(key + 5, r->from, from_len) == 0 &&
                       (strcmp(field, ".task") == 0 || strcmp(field, ".answer") == 0);
        if (!is_ours) {
            snprintf(why, why_len,
                     "set: %.80s: only step.%.64s.task and step.%.64s.answer (the step forked "
                     "from) can be set; %s",
                     key, r->from, r->from, keys_text);
        }
        return is_ours;
    }
    if (strncmp(key, "agent.", 6) == 0 && strchr(key + 6, '.') != NULL) {
        const char *field = strrchr(key, '.');
        if (strcmp(field, ".model") == 0 || strcmp(field, ".instructions") == 0) {
            return true;
        }
    }
    snprintf(why, why_len, "set: %.80s: unknown key; %s", key, keys_text);
    return false;
}

/* The run and the step as weft fork checks them, the sets as its arguments.
 * @return the HTTP status to answer when refused, 0 when the request is good. */
static int
check_request(const struct weft__serve_fork *sf,
              struct fork_req *r,
              const char *run_ref,
              char *why,
              size_t why_len)
{
    const json_t *set = json_object_get(r->doc, "set");
    const char *key = NULL;
    json_t *v = NULL;
    weft_err err = weft_run_load(sf->state_path, run_ref, &r->run);
    size_t used = 0;
    bool is_step = false;

    if (err == WEFT_ENOTFOUND || err == WEFT_EINVAL) {
        snprintf(why, why_len, "fork: no run '%.64s' in the state database%s", run_ref,
                 err == WEFT_EINVAL ? " (an ambiguous prefix)" : "");
        return err == WEFT_ENOTFOUND ? 404 : 400;
    }
    if (err != WEFT_OK) {
        snprintf(why, why_len, "fork: the state database: %s", weft_strerror(err));
        return 500;
    }
    if (strcmp(r->run->info.status, "running") == 0) {
        snprintf(why, why_len, "fork: run %s is still running; fork it once it ended",
                 r->run->info.run_id);
        return 409;
    }
    for (size_t i = 0; i < r->run->step_count; i++) {
        is_step = is_step || strcmp(r->run->steps[i].id, r->from) == 0;
    }
    if (!is_step) {
        used = (size_t)snprintf(why, why_len, "fork: run %s has no step '%.64s' (its steps: ",
                                r->run->info.run_id, r->from);
        for (size_t i = 0; i < r->run->step_count && used + 2 < why_len; i++) {
            int n = snprintf(why + used, why_len - used, "%s%s", i > 0 ? ", " : "",
                             r->run->steps[i].id);
            used += n > 0 ? (size_t)n : 0;
        }
        if (used + 2 < why_len) {
            snprintf(why + used, why_len - used, ")");
        }
        return 400;
    }
    json_object_foreach((json_t *)set, key, v)
    {
        if (!json_is_string(v)) {
            snprintf(why, why_len, "set: %.80s: expected text", key);
            return 400;
        }
        if (!check_key(r, key, why, why_len)) {
            return 400;
        }
        if (asprintf(&r->argv_sets[r->set_count], "%s=%s", key, json_string_value(v)) < 0) {
            snprintf(why, why_len, "out of memory");
            return 500;
        }
        r->set_count++;
    }
    return 0;
}

/* The ids of the forks of @p run_id the state database holds now, as a JSON array. */
static json_t *
forks_of(const struct weft__serve_fork *sf, const char *run_id)
{
    struct weft_run_info *runs = NULL;
    size_t count = 0;
    json_t *ids = json_array();

    if (ids != NULL && weft_runs_list(sf->state_path, LIST_LIMIT, &runs, &count) == WEFT_OK) {
        for (size_t i = 0; i < count; i++) {
            if (runs[i].origin_kind != NULL && strcmp(runs[i].origin_kind, "fork") == 0 &&
                runs[i].origin_run_id != NULL && strcmp(runs[i].origin_run_id, run_id) == 0) {
                json_array_append_new(ids, json_string(runs[i].run_id));
            }
        }
    }
    weft_run_infos_free(runs, count);
    return ids;
}

/* A fork of @p run_id not among @p before: its id into @p out. */
static bool
find_new_fork(const struct weft__serve_fork *sf,
              const char *run_id,
              const json_t *before,
              char *out,
              size_t out_len)
{
    json_t *now = forks_of(sf, run_id);
    bool is_found = false;

    for (size_t i = 0; !is_found && i < json_array_size(now); i++) {
        const char *id = json_string_value(json_array_get(now, i));
        bool is_old = false;
        for (size_t j = 0; !is_old && j < json_array_size(before); j++) {
            is_old = strcmp(json_string_value(json_array_get(before, j)), id) == 0;
        }
        if (!is_old) {
            snprintf(out, out_len, "%s", id);
            is_found = true;
        }
    }
    json_decref(now);
    return is_found;
}

/* The environment for the child: the server's without WEFT_SERVE_TOKEN, and with the span
 * store the server reads (its --store) as WEFT_TRACE_STORE_URL, so the fork's spans land where
 * its page looks for them. New array of borrowed strings (free() the array). */
static char **
child_env(const struct weft__serve_fork *sf)
{
    size_t n = 0;
    char **env = NULL;
    size_t k = 0;

    while (environ[n] != NULL) {
        n++;
    }
    env = calloc(n + 2, sizeof(*env));
    for (size_t i = 0; env != NULL && i < n; i++) {
        bool is_store = strncmp(environ[i], "WEFT_TRACE_STORE_URL=", 21) == 0;
        if (strncmp(environ[i], "WEFT_SERVE_TOKEN=", 17) != 0 &&
            !(is_store && sf->store_env != NULL)) {
            env[k++] = environ[i];
        }
    }
    if (env != NULL && sf->store_env != NULL) {
        env[k] = sf->store_env;
    }
    return env;
}

/* Start `weft fork` for @p r, its stderr into @p err_fd. @return the child's pid, or -1. */
static pid_t
spawn_fork(const struct weft__serve_fork *sf, const struct fork_req *r, int err_fd)
{
    const char *argv[2 * MAX_SETS + 12];
    size_t n = 0;
    posix_spawn_file_actions_t fa;
    char **env = child_env(sf);
    pid_t pid = -1;
    int rc = 0;

    argv[n++] = sf->exe;
    argv[n++] = "fork";
    argv[n++] = r->run->info.run_id;
    argv[n++] = "--from";
    argv[n++] = r->from;
    for (size_t i = 0; i < r->set_count; i++) {
        argv[n++] = "--set";
        argv[n++] = r->argv_sets[i];
    }
    if (sf->state_path != NULL) {
        argv[n++] = "--state";
        argv[n++] = sf->state_path;
    }
    argv[n++] = "-q";
    argv[n] = NULL;
    if (env == NULL || posix_spawn_file_actions_init(&fa) != 0) {
        free(env);
        return -1;
    }
    rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    rc = rc == 0 ? posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) : rc;
    rc = rc == 0 ? posix_spawn_file_actions_adddup2(&fa, err_fd, 2) : rc;
    rc = rc == 0 ? posix_spawn(&pid, sf->exe, &fa, NULL, (char *const *)argv, env) : rc;
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (rc != 0) {
        WEFT_LOG(WEFT_LOG_WARN, "serve: fork: cannot start %s: %s", sf->exe, strerror(rc));
        return -1;
    }
    return pid;
}

/* What the child said on stderr before it ended (its first line without "weft fork: "). */
static void
child_said(int err_fd, char *out, size_t out_len)
{
    ssize_t n = pread(err_fd, out, out_len - 1, 0);
    char *nl = NULL;

    out[n > 0 ? n : 0] = '\0';
    nl = strchr(out, '\n');
    if (nl != NULL) {
        *nl = '\0';
    }
    if (strncmp(out, "weft fork: ", 11) == 0) {
        memmove(out, out + 11, strlen(out + 11) + 1);
    }
    if (out[0] == '\0') {
        snprintf(out, out_len, "the fork ended before its run started");
    }
}

/* Whether child @p pid has ended: reaped now, or already reaped by someone else (ECHILD), so
 * a child that another waitpid(-1) took never reads as running forever. */
static bool
child_ended(pid_t pid)
{
    pid_t got = waitpid(pid, NULL, WNOHANG);

    return got == pid || (got < 0 && errno == ECHILD);
}

/* Start the fork and wait for its run row. @return the status; @p out: the new run id or why. */
static int
start_and_wait(struct weft__serve_fork *sf, const struct fork_req *r, char *out, size_t out_len)
{
    char path[] = "/tmp/weft-serve-fork-XXXXXX";
    int err_fd = mkostemp(path, O_CLOEXEC);
    json_t *before = forks_of(sf, r->run->info.run_id);
    pid_t pid = -1;
    int code = 500;

    if (err_fd >= 0) {
        (void)unlink(path);
        pid = spawn_fork(sf, r, err_fd);
    }
    snprintf(out, out_len, "the fork could not be started");
    for (unsigned waited = 0; pid > 0; waited += POLL_MS) {
        int st = 0;
        bool is_ended = waitpid(pid, &st, WNOHANG) == pid;
        if (find_new_fork(sf, r->run->info.run_id, before, out, out_len)) {
            code = 202;
        } else if (is_ended) {
            child_said(err_fd, out, out_len);
            code = 400;
        } else if (waited >= START_WAIT_MS) {
            snprintf(out, out_len, "the fork's run did not start within %d s",
                     START_WAIT_MS / 1000);
            code = 500;
        } else {
            sleep_ms(POLL_MS);
            continue;
        }
        pthread_mutex_lock(&sf->lock);
        sf->pid = is_ended ? 0 : pid; /* a running one is reaped later, or stopped at the end */
        pthread_mutex_unlock(&sf->lock);
        break;
    }
    if (err_fd >= 0) {
        close(err_fd);
    }
    json_decref(before);
    return code;
}

int
weft__serve_fork_post(struct weft__serve_fork *sf,
                      const char *run_ref,
                      const char *body,
                      size_t body_len,
                      char *text,
                      size_t text_len)
{
    struct fork_req r;
    int code = 0;
    bool is_busy = false;

    memset(&r, 0, sizeof(r));
    text[0] = '\0';
    if (!parse_body(&r, body, body_len, text, text_len)) {
        req_cleanup(&r);
        return 400;
    }
    code = check_request(sf, &r, run_ref, text, text_len);
    if (code != 0) {
        req_cleanup(&r);
        return code;
    }
    pthread_mutex_lock(&sf->lock);
    if (sf->pid > 0 && child_ended(sf->pid)) {
        sf->pid = 0;
    }
    is_busy = sf->is_busy || sf->pid > 0;
    if (!is_busy) {
        sf->is_busy = true; /* ours until start_and_wait() has answered */
    }
    pthread_mutex_unlock(&sf->lock);
    if (is_busy) {
        snprintf(text, text_len, "another fork is running; try again when it has ended");
        req_cleanup(&r);
        return 429;
    }
    code = start_and_wait(sf, &r, text, text_len);
    pthread_mutex_lock(&sf->lock);
    sf->is_busy = false;
    pthread_mutex_unlock(&sf->lock);
    req_cleanup(&r);
    return code;
}

void
weft__serve_fork_free(struct weft__serve_fork *sf)
{
    if (sf == NULL) {
        return;
    }
    if (sf->pid > 0 && !child_ended(sf->pid)) {
        unsigned waited = 0;
        (void)kill(sf->pid, SIGINT); /* as Ctrl-C: it stops at its next check */
        while (!child_ended(sf->pid)) {
            if (waited >= STOP_WAIT_MS) {
                (void)kill(sf->pid, SIGKILL);
                (void)waitpid(sf->pid, NULL, 0);
                break;
            }
            sleep_ms(POLL_MS);
            waited += POLL_MS;
        }
    }
    pthread_mutex_destroy(&sf->lock);
    weft__free(sf->exe);
    weft__free(sf->state_path);
    free(sf->store_env);
    weft__free(sf);
}
