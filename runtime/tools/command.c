/* runtime/tools/command.c - command tools: an argv run without a shell, in a directory inside
 * the workspace, with a timeout and a cap on the output kept.
 *
 * posix_spawn rather than fork: the engine is multi-threaded (exporter threads hold locks),
 * and between fork and exec only async-signal-safe calls are allowed; glibc's posix_spawn does
 * the setup (new process group, /dev/null stdin, pipes, fchdir, closing every other
 * descriptor, default signal dispositions and an empty mask) in the child safely. Our pipes
 * are created O_CLOEXEC, so a command spawned concurrently by another thread never inherits
 * them (it would hold our pipe open and stall the read loop).
 *
 * The working directory is opened with the file tools' openat walk (fs.c) and entered with
 * fchdir in the child, so the directory checked is the directory used (no path is resolved a
 * second time).
 *
 * The child gets its own process group so a timeout kills everything it started (a
 * grandchild that creates its own session escapes the group; only a cgroup would catch it).
 * Output beyond the cap is read and discarded, so a chatty child never blocks on a full pipe.
 * Invariant: every child spawned here is reaped before weft__tool_command() returns.
 */
#define _GNU_SOURCE /* pipe2 */

#include "tools.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/spawn.h"
#include "base/time.h"
#include "base/utf8.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
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

/* Is the variable "NAME=value" a credential? Commands run what a model asked for; the engine's
 * API keys must not reach them (a model could ask to print the environment). */
static bool
is_secret_var(const char *entry)
{
    static const char *const marks[] = {"KEY",    "TOKEN",      "SECRET", "PASSWORD",
                                        "PASSWD", "CREDENTIAL", "AUTH"};
    size_t len = strcspn(entry, "=");
    char name[256];

    if (len >= sizeof(name)) {
        return true; /* an absurd name: leave it out */
    }
    for (size_t i = 0; i < len; i++) {
        name[i] = (char)toupper((unsigned char)entry[i]);
    }
    name[len] = '\0';
    for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
        if (strstr(name, marks[i]) != NULL) {
            return true;
        }
    }
    return false;
}

/* Does one of the @p n strings of @p extra set the variable @p entry ("NAME=value") sets? */
static bool
is_named_in(const char *entry, const char *const *extra, size_t n)
{
    size_t len = strcspn(entry, "=");

    for (size_t i = 0; i < n; i++) {
        if (strncmp(extra[i], entry, len) == 0 && extra[i][len] == '=') {
            return true;
        }
    }
    return false;
}

/* The environment a command gets: @p extra (may be NULL) and the engine's, without
 * credentials and without the variables @p extra sets. Ownership: returns a
 * new array of borrowed strings (weft__free the array only); NULL when out of memory. */
static char **
command_environ(const char *const *extra)
{
    size_t n = 0;
    size_t n_extra = 0;
    size_t kept = 0;
    char **env = NULL;

    while (environ[n] != NULL) {
        n++;
    }
    while (extra != NULL && extra[n_extra] != NULL) {
        n_extra++;
    }
    env = weft__calloc(n + n_extra + 1, sizeof(*env));
    /* The extra entries first: getenv() finds the first of a name. */
    for (size_t i = 0; env != NULL && i < n_extra; i++) {
        env[kept++] = (char *)extra[i];
    }
    for (size_t i = 0; env != NULL && i < n; i++) {
        if (!is_secret_var(environ[i]) && !is_named_in(environ[i], extra, n_extra)) {
            env[kept++] = environ[i];
        }
    }
    return env;
}

/* A descriptor reading @p text from its start: an unlinked temporary file (no pipe to feed
 * while the output is collected). @return the descriptor (O_CLOEXEC), or -1. */
static int
stdin_file(const char *text)
{
    const char *dir = getenv("TMPDIR");
    char path[PATH_MAX];
    size_t len = strlen(text);
    size_t done = 0;
    int fd = -1;

    snprintf(path, sizeof(path), "%s/weft-stdin-XXXXXX",
             dir != NULL && *dir != '\0' ? dir : "/tmp");
    fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    unlink(path);
    while (done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    if (lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Text with every byte that is not part of valid UTF-8 replaced by '?', so that it can travel
 * in JSON (command output is often binary, or cut in the middle of a character by the cap).
 * New string of the same length, or NULL. */
static char *
utf8_clean(const char *s, size_t len)
{
    char *out = weft__malloc(len + 1);
    size_t i = 0;

    if (out == NULL) {
        return NULL;
    }
    while (i < len) {
        bool is_valid = true;
        size_t n = weft__utf8_seq((const uint8_t *)s + i, len - i, &is_valid);

        if (!is_valid || s[i] == '\0') { /* jansson would cut the string at a NUL */
            memset(out + i, '?', n);
        } else {
            memcpy(out + i, s + i, n);
        }
        i += n;
    }
    out[len] = '\0';
    return out;
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
        } else {
            keep = 0; /* out of memory: dropped like output past the cap */
        }
        if (keep < (size_t)n) {
            cap->is_truncated = true;
        }
    } else {
        cap->is_truncated = true;
    }
    return true;
}

/* A pipe whose ends are both O_CLOEXEC and above stderr: in a process started with closed
 * stdio, pipe2 could hand out 0, 1 or 2, and the child's dup2 calls would then clobber one
 * end with another. @return 0 or -1. */
static int
make_pipe(int fds[2])
{
    if (pipe2(fds, O_CLOEXEC) != 0) {
        fds[0] = fds[1] = -1;
        return -1;
    }
    for (int i = 0; i < 2; i++) {
        if (fds[i] <= 2) {
            int high = fcntl(fds[i], F_DUPFD_CLOEXEC, 3);
            close(fds[i]);
            fds[i] = high;
        }
    }
    if (fds[0] < 0 || fds[1] < 0) {
        for (int i = 0; i < 2; i++) {
            if (fds[i] >= 0) {
                close(fds[i]);
            }
            fds[i] = -1;
        }
        return -1;
    }
    return 0;
}

/* Spawn @p argv with stdout/stderr on the pipes' write ends, stdin from /dev/null (or @p def's
 * stdin_text), the environment without credentials plus @p def's env_extra, in the
 * directory @p dir_fd, in a new process group, with every other descriptor closed.
 * @return 0 or an errno value (ENOENT for a missing program). */
static int
spawn(const struct tool_def *def, char **argv, int dir_fd, int out_fd, int err_fd, pid_t *pid)
{
    char **env = command_environ(def->env_extra);
    int in_fd = def->stdin_text != NULL ? stdin_file(def->stdin_text) : -1;
    struct weft__spawn s = {argv, env, in_fd, out_fd, err_fd, NULL, dir_fd};
    int rc = ENOMEM;

    if (env != NULL) {
        rc = def->stdin_text != NULL && in_fd < 0 ? EIO : weft__spawn(&s, pid);
    }

    if (in_fd >= 0) {
        close(in_fd);
    }
    weft__free(env);
    return rc;
}

/* The argv of @p def plus, when it appends them, the call's string "args"; NULL-terminated in
 * @p argv (MAX_ARGS + 1 slots, borrowed strings). @return true, or false with the error
 * outcome in @p out and *err what building it returned. */
static bool
build_argv(const struct tool_def *def,
           const json_t *args,
           char **argv,
           struct tool_outcome *out,
           weft_err *err)
{
    const json_t *extra = json_object_get(args, "args");
    size_t extra_count = def->append_args ? json_array_size(extra) : 0;

    if (def->argc == 0 || def->argv == NULL || def->argv[0] == NULL ||
        def->argc + extra_count > MAX_ARGS) {
        *err = error_outcome(out, "invalid_arguments", "too many or no arguments");
        return false;
    }
    for (size_t i = 0; i < def->argc; i++) {
        argv[i] = def->argv[i];
    }
    for (size_t i = 0; i < extra_count; i++) {
        argv[def->argc + i] = (char *)json_string_value(json_array_get(extra, i));
        if (argv[def->argc + i] == NULL) {
            *err = error_outcome(out, "invalid_arguments", "args: expected strings");
            return false;
        }
    }
    argv[def->argc + extra_count] = NULL;
    return true;
}

/* Read the child's stdout and stderr into @p cap until both close. At *deadline the whole
 * process group is killed (*is_timed_out) and the pipes get one last second. */
static void
collect_output(
    pid_t pid, int out_fd, int err_fd, struct capture *cap, uint64_t *deadline, bool *is_timed_out)
{
    bool is_out_open = true;
    bool is_err_open = true;

    while (is_out_open || is_err_open) {
        struct pollfd pfd[2];
        nfds_t n = 0;
        uint64_t now = weft__monotonic_ns();
        int rc = 0;

        if (!*is_timed_out && now >= *deadline) {
            /* The whole group: grandchildren must not outlive the timeout. The child is not
             * reaped yet, so its pid still names our group and cannot have been reused. */
            kill(-pid, SIGKILL);
            *is_timed_out = true;
            *deadline = now + 1000000000ull; /* a last second to collect the pipes */
        } else if (*is_timed_out && now >= *deadline) {
            break; /* a process outside the group still holds the pipes */
        }
        if (is_out_open) {
            pfd[n].fd = out_fd;
            pfd[n].events = POLLIN;
            n++;
        }
        if (is_err_open) {
            pfd[n].fd = err_fd;
            pfd[n].events = POLLIN;
            n++;
        }
        rc = poll(pfd, n, (int)((*deadline - now) / 1000000u) + 1);
        if (rc < 0 && errno != EINTR) {
            break;
        }
        for (nfds_t i = 0; rc > 0 && i < n; i++) {
            if ((pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
                continue;
            }
            if (pfd[i].fd == out_fd) {
                is_out_open = drain(out_fd, &cap->out, cap);
            } else {
                is_err_open = drain(err_fd, &cap->err, cap);
            }
        }
    }
}

/* Wait for the child whose output has closed: it is exiting, and one that closed its pipes but
 * lives on is bounded by the same deadline. @return true when reaped (*status set). */
static bool
reap(pid_t pid, uint64_t deadline, bool *is_timed_out, int *status)
{
    bool is_reaped = false;

    while (!*is_timed_out) {
        struct timespec ts = {0, 2000000};
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid) {
            return true;
        }
        if (w < 0 && errno != EINTR) {
            return false; /* ECHILD: reaped elsewhere (SIGCHLD ignored by the host program) */
        }
        if (weft__monotonic_ns() >= deadline) {
            kill(-pid, SIGKILL);
            *is_timed_out = true;
            break;
        }
        nanosleep(&ts, NULL);
    }
    if (*is_timed_out) {
        pid_t w = -1;
        do {
            w = waitpid(pid, status, 0);
        } while (w < 0 && errno == EINTR);
        is_reaped = w == pid;
    }
    return is_reaped;
}

/* The outcome of a finished child: exit code, error type, and the JSON result with its output
 * made valid UTF-8. */
static weft_err
command_outcome(struct tool_outcome *out,
                const struct capture *cap,
                bool is_reaped,
                int status,
                bool is_timed_out)
{
    char *clean_out = NULL;
    char *clean_err = NULL;
    weft_err err = WEFT_OK;

    out->exit_code = !is_reaped            ? -1
                     : WIFEXITED(status)   ? WEXITSTATUS(status)
                     : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                           : -1;
    out->is_truncated = cap->is_truncated;
    clean_out = utf8_clean(cap->out.data != NULL ? cap->out.data : "", cap->out.len);
    clean_err = utf8_clean(cap->err.data != NULL ? cap->err.data : "", cap->err.len);
    if (clean_out == NULL || clean_err == NULL) {
        err = WEFT_ENOMEM;
    } else {
        if (is_timed_out) {
            out->is_error = true;
            snprintf(out->error_type, sizeof(out->error_type), "%s", "timeout");
        } else if (out->exit_code != 0) {
            out->is_error = true;
            snprintf(out->error_type, sizeof(out->error_type), "%s", "exit_status");
        }
        err = outcome_json(out, json_pack("{s:i, s:s, s:s, s:b, s:b}", "exit_code", out->exit_code,
                                          "stdout", clean_out, "stderr", clean_err, "truncated",
                                          cap->is_truncated, "timed_out", is_timed_out));
    }
    weft__free(clean_out);
    weft__free(clean_err);
    return err;
}

weft_err
weft__tool_command(const struct tool_def *def,
                   const char *workspace,
                   const json_t *args,
                   struct tool_outcome *out)
{
    char *argv[MAX_ARGS + 1];
    int dir_fd = -1;
    int out_pipe[2] = {-1, -1};
    int err_pipe[2] = {-1, -1};
    pid_t pid = -1;
    int status = 0;
    int rc = 0;
    struct capture cap;
    uint32_t timeout = def->timeout_ms != 0 ? def->timeout_ms : DEFAULT_TIMEOUT_MS;
    uint64_t deadline = weft__monotonic_ns() + (uint64_t)timeout * 1000000u;
    bool is_timed_out = false;
    bool is_reaped = false;
    weft_err err = WEFT_OK;

    memset(&cap, 0, sizeof(cap));
    cap.max = def->max_output != 0 ? def->max_output : DEFAULT_MAX_OUTPUT;
    weft__buf_init(&cap.out, 0);
    weft__buf_init(&cap.err, 0);
    if (!build_argv(def, args, argv, out, &err)) {
        return err;
    }
    rc = weft__tool_open_dir(workspace, def->cwd, &dir_fd);
    if (rc != 0) {
        return rc == EPERM ? error_outcome(out, "path_escape", "cwd is outside the workspace")
                           : error_outcome(out, "io", "cwd is not a directory in the workspace");
    }
    if (make_pipe(out_pipe) != 0 || make_pipe(err_pipe) != 0) {
        err = error_outcome(out, "spawn_failed", "cannot create pipes");
        goto out;
    }
    rc = spawn(def, argv, dir_fd, out_pipe[1], err_pipe[1], &pid);
    close(out_pipe[1]);
    close(err_pipe[1]);
    out_pipe[1] = err_pipe[1] = -1;
    if (rc != 0) {
        char msg[300];
        snprintf(msg, sizeof(msg), "cannot run %.200s: %s", argv[0],
                 rc == ENOENT ? "no such program" : strerror(rc));
        err = error_outcome(out, "spawn_failed", msg);
        goto out;
    }
    WEFT_LOG(WEFT_LOG_DEBUG, "tool command: spawned %s (pid %ld)", argv[0], (long)pid);
    collect_output(pid, out_pipe[0], err_pipe[0], &cap, &deadline, &is_timed_out);
    is_reaped = reap(pid, deadline, &is_timed_out, &status);
    err = command_outcome(out, &cap, is_reaped, status, is_timed_out);
out:
    for (int i = 0; i < 2; i++) {
        if (out_pipe[i] >= 0) {
            close(out_pipe[i]);
        }
        if (err_pipe[i] >= 0) {
            close(err_pipe[i]);
        }
    }
    if (dir_fd >= 0) {
        close(dir_fd);
    }
    weft__buf_cleanup(&cap.out);
    weft__buf_cleanup(&cap.err);
    return err;
}
