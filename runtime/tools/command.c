/* runtime/tools/command.c - command tools: an argv run without a shell, in a directory inside
 * the workspace, with a timeout and a cap on the output kept.
 *
 * posix_spawn rather than fork: the engine is multi-threaded (exporter threads hold locks),
 * and between fork and exec only async-signal-safe calls are allowed; glibc's posix_spawn does
 * the setup (new process group, /dev/null stdin, pipes, closing every other descriptor, chdir)
 * safely. The child gets its own process group so a timeout kills everything it started.
 * Output beyond the cap is read and discarded, so a chatty child never blocks on a full pipe.
 */
#define _GNU_SOURCE /* pipe2, posix_spawn_file_actions_addclosefrom_np, _addchdir_np */

#include "tools.h"

#include "../../tracing/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_MS 30000u
#define DEFAULT_MAX_OUTPUT (64u << 10)
#define MAX_ARGS           256

extern char **environ;

/* Text with invalid UTF-8 bytes replaced by '?', so it can travel in JSON. New string. */
static char *
utf8_clean(const char *s, size_t len)
{
    char *out = weft__malloc(len + 1);
    size_t i = 0;

    if (out == NULL) {
        return NULL;
    }
    while (i < len) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80           ? 1
                   : (c >> 5) == 0x6  ? 2
                   : (c >> 4) == 0xE  ? 3
                   : (c >> 3) == 0x1E ? 4
                                      : 0;
        bool is_ok = n > 0 && i + n <= len && c != 0;
        for (size_t k = 1; is_ok && k < n; k++) {
            is_ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        }
        if (is_ok && n == 2 && c < 0xC2) {
            is_ok = false; /* overlong */
        }
        if (!is_ok) {
            out[i] = '?';
            i++;
            continue;
        }
        memcpy(out + i, s + i, n);
        i += n;
    }
    out[len] = '\0';
    return out;
}

/* The working directory: the workspace, or cwd inside it (no absolute path, no "..", no
 * symlink leading out). New string or NULL. */
static char *
resolve_cwd(const char *workspace, const char *cwd, bool *is_escape)
{
    char joined[PATH_MAX];
    char real[PATH_MAX];
    size_t wl = strlen(workspace);

    *is_escape = false;
    if (cwd == NULL || cwd[0] == '\0' || strcmp(cwd, ".") == 0) {
        return weft__strdup(workspace);
    }
    if (cwd[0] == '/' || strstr(cwd, "..") != NULL) {
        *is_escape = true;
        return NULL;
    }
    snprintf(joined, sizeof(joined), "%s/%s", workspace, cwd);
    if (realpath(joined, real) == NULL) {
        return NULL;
    }
    if (strncmp(real, workspace, wl) != 0 || (real[wl] != '/' && real[wl] != '\0')) {
        *is_escape = true;
        return NULL;
    }
    return weft__strdup(real);
}

static weft_err
outcome_json(struct tool_outcome *out, json_t *j)
{
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    out->output = text != NULL ? weft__strdup(text) : NULL;
    free(text);
    return out->output != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
error_outcome(struct tool_outcome *out, const char *type, const char *message)
{
    out->is_error = true;
    snprintf(out->error_type, sizeof(out->error_type), "%s", type);
    return outcome_json(out, json_pack("{s:s, s:s}", "error", message, "type", type));
}

struct capture {
    struct weft__buf out;
    struct weft__buf err;
    size_t kept; /* bytes kept of both streams */
    size_t max;
    bool is_truncated;
};

/* Read what is available on @p fd into @p buf within the shared cap. @return false at EOF. */
static bool
drain(int fd, struct weft__buf *buf, struct capture *cap)
{
    char chunk[8192];
    ssize_t n = read(fd, chunk, sizeof(chunk));

    if (n < 0) {
        return errno == EINTR || errno == EAGAIN;
    }
    if (n == 0) {
        return false;
    }
    if (cap->kept < cap->max) {
        size_t keep = (size_t)n < cap->max - cap->kept ? (size_t)n : cap->max - cap->kept;
        if (weft__buf_append(buf, chunk, keep) == WEFT_OK) {
            cap->kept += keep;
        }
        if (keep < (size_t)n) {
            cap->is_truncated = true;
        }
    } else {
        cap->is_truncated = true;
    }
    return true;
}

weft_err
weft__tool_command(const struct tool_def *def,
                   const char *workspace,
                   const json_t *args,
                   struct tool_outcome *out)
{
    const json_t *extra = json_object_get(args, "args");
    size_t extra_count = def->append_args ? json_array_size(extra) : 0;
    char *argv[MAX_ARGS + 1];
    char *dir = NULL;
    bool is_escape = false;
    int out_pipe[2] = {-1, -1};
    int err_pipe[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    pid_t pid = -1;
    int status = 0;
    int rc = 0;
    struct capture cap;
    uint32_t timeout = def->timeout_ms != 0 ? def->timeout_ms : DEFAULT_TIMEOUT_MS;
    uint64_t deadline = weft__monotonic_ns() + (uint64_t)timeout * 1000000u;
    bool is_timed_out = false;
    bool is_out_open = true;
    bool is_err_open = true;
    char *clean_out = NULL;
    char *clean_err = NULL;
    weft_err err = WEFT_OK;

    if (def->argc == 0 || def->argc + extra_count > MAX_ARGS) {
        return error_outcome(out, "invalid_arguments", "too many or no arguments");
    }
    for (size_t i = 0; i < def->argc; i++) {
        argv[i] = def->argv[i];
    }
    for (size_t i = 0; i < extra_count; i++) {
        argv[def->argc + i] = (char *)json_string_value(json_array_get(extra, i));
        if (argv[def->argc + i] == NULL) {
            return error_outcome(out, "invalid_arguments", "args: expected strings");
        }
    }
    argv[def->argc + extra_count] = NULL;
    dir = resolve_cwd(workspace, def->cwd, &is_escape);
    if (dir == NULL) {
        return is_escape ? error_outcome(out, "path_escape", "cwd is outside the workspace")
                         : error_outcome(out, "io", "cwd does not exist");
    }
    memset(&cap, 0, sizeof(cap));
    cap.max = def->max_output != 0 ? def->max_output : DEFAULT_MAX_OUTPUT;
    weft__buf_init(&cap.out, 0);
    weft__buf_init(&cap.err, 0);
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
        err = error_outcome(out, "spawn_failed", "cannot create pipes");
        goto out;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    posix_spawn_file_actions_addchdir_np(&fa, dir);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0);
    {
        sigset_t none;
        sigset_t all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &all);
    }
    rc = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(out_pipe[1]);
    close(err_pipe[1]);
    out_pipe[1] = err_pipe[1] = -1;
    if (rc != 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "cannot run %.200s: %s", argv[0], strerror(rc));
        err = error_outcome(out, "spawn_failed", msg);
        goto out;
    }
    while (is_out_open || is_err_open) {
        struct pollfd pfd[2];
        nfds_t n = 0;
        uint64_t now = weft__monotonic_ns();
        int wait_ms = 0;

        if (!is_timed_out && now >= deadline) {
            /* The whole group: grandchildren must not outlive the timeout. */
            kill(-pid, SIGKILL);
            is_timed_out = true;
            deadline = now + 1000000000ull; /* a last second to collect the pipes */
        } else if (is_timed_out && now >= deadline) {
            break;
        }
        wait_ms = (int)((deadline - now) / 1000000u) + 1;
        if (is_out_open) {
            pfd[n].fd = out_pipe[0];
            pfd[n].events = POLLIN;
            n++;
        }
        if (is_err_open) {
            pfd[n].fd = err_pipe[0];
            pfd[n].events = POLLIN;
            n++;
        }
        rc = poll(pfd, n, wait_ms);
        if (rc < 0 && errno != EINTR) {
            break;
        }
        for (nfds_t i = 0; rc > 0 && i < n; i++) {
            if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
                continue;
            }
            if (pfd[i].fd == out_pipe[0] && !drain(out_pipe[0], &cap.out, &cap)) {
                is_out_open = false;
            } else if (pfd[i].fd == err_pipe[0] && !drain(err_pipe[0], &cap.err, &cap)) {
                is_err_open = false;
            }
        }
    }
    if (!is_timed_out) {
        /* Output closed: the child is exiting; a child that closed its pipes but lives on is
         * bounded by the same deadline. */
        while (waitpid(pid, &status, WNOHANG) == 0) {
            struct timespec ts = {0, 2000000};
            if (weft__monotonic_ns() >= deadline) {
                kill(-pid, SIGKILL);
                is_timed_out = true;
                break;
            }
            nanosleep(&ts, NULL);
        }
    }
    if (is_timed_out) {
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    out->exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : -1;
    out->is_truncated = cap.is_truncated;
    clean_out = utf8_clean(cap.out.data != NULL ? cap.out.data : "", cap.out.len);
    clean_err = utf8_clean(cap.err.data != NULL ? cap.err.data : "", cap.err.len);
    if (clean_out == NULL || clean_err == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    if (is_timed_out) {
        out->is_error = true;
        snprintf(out->error_type, sizeof(out->error_type), "%s", "timeout");
    } else if (out->exit_code != 0) {
        out->is_error = true;
        snprintf(out->error_type, sizeof(out->error_type), "%s", "exit_status");
    }
    err = outcome_json(out, json_pack("{s:i, s:s, s:s, s:b, s:b}", "exit_code", out->exit_code,
                                      "stdout", clean_out, "stderr", clean_err, "truncated",
                                      cap.is_truncated, "timed_out", is_timed_out));
out:
    for (int i = 0; i < 2; i++) {
        if (out_pipe[i] >= 0) {
            close(out_pipe[i]);
        }
        if (err_pipe[i] >= 0) {
            close(err_pipe[i]);
        }
    }
    weft__buf_cleanup(&cap.out);
    weft__buf_cleanup(&cap.err);
    weft__free(clean_out);
    weft__free(clean_err);
    weft__free(dir);
    return err;
}
