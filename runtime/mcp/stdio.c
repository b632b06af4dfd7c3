/* runtime/mcp/stdio.c - the stdio transport: an MCP server as a child process, newline-delimited
 * JSON-RPC on its stdin and stdout, its stderr read line by line for weft's log.
 *
 * The child is spawned with posix_spawnp (weft is multi-threaded; glibc's posix_spawn does the
 * set-up in the child safely) in a process group of its own, so stop reaches whatever it
 * started, with every descriptor but its three pipes closed. Its environment is weft's plus the
 * configured variables (those win); the values are secrets and never logged.
 *
 * One reader thread per child polls stdout, stderr and a wake pipe: complete stdout lines go to
 * the sink as messages, stderr lines to the sink's log hook, and end of stdout (the child
 * exited or closed it) or a line over WEFT__MCP_MAX_MESSAGE ends the connection: the sink hears
 * it once, with the exit status when the child is already gone. Writes go through a mutex (one
 * message is one write sequence, never interleaved), with SIGPIPE blocked on the writing thread
 * and stdin non-blocking, so a dead child is EPIPE, not a signal, and a child that stopped
 * reading is a timeout, not a hang.
 *
 * Invariant: the child is reaped exactly once, by the reader (when stdout ends) or by stop;
 * `reaped` under `lock` says which.
 */
#define _GNU_SOURCE /* pipe2 */

#include "runtime/mcp/transport.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/spawn.h"
#include "base/time.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct weft__mcp_stdio {
    struct weft__mcp_sink sink;
    pid_t pid;
    int in_fd;   /* the child's stdin (ours to write), -1 once closed */
    int out_fd;  /* the child's stdout */
    int err_fd;  /* the child's stderr */
    int wake[2]; /* stop writes here to end the reader */
    pthread_t reader;
    bool has_reader;
    pthread_mutex_t write_lock;
    pthread_mutex_t lock; /* reaped, status */
    bool reaped;
    int status;
};

/* weft's environment with @p cfg's variables added (a configured name replaces weft's).
 * @return a NULL-terminated array whose strings are borrowed (environ's and cfg's); free the
 * array only. */
static char **
child_environ(const struct weft__mcp_server_config *cfg)
{
    size_t n = 0;
    size_t k = 0;
    char **env = NULL;

    while (environ != NULL && environ[n] != NULL) {
        n++;
    }
    env = weft__calloc(n + cfg->env_count + 1, sizeof(*env));
    if (env == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t name_len = eq != NULL ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool is_overridden = false;
        for (size_t j = 0; j < cfg->env_count; j++) {
            if (strncmp(cfg->env[j], environ[i], name_len) == 0 && cfg->env[j][name_len] == '=') {
                is_overridden = true;
                break;
            }
        }
        if (!is_overridden) {
            env[k++] = environ[i];
        }
    }
    for (size_t j = 0; j < cfg->env_count; j++) {
        env[k++] = cfg->env[j];
    }
    env[k] = NULL;
    return env;
}

static int
spawn_child(
    const struct weft__mcp_server_config *cfg, int in_fd, int out_fd, int err_fd, pid_t *pid)
{
    char **env = child_environ(cfg);
    struct weft__spawn s = {cfg->argv, env, in_fd, out_fd, err_fd, cfg->cwd, -1};
    int rc = env != NULL ? weft__spawn(&s, pid) : ENOMEM;

    weft__free(env);
    return rc;
}

static void
describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status)) {
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
    } else if (WIFSIGNALED(status)) {
        snprintf(buf, len, "was killed by signal %d", WTERMSIG(status));
    } else {
        snprintf(buf, len, "exited");
    }
}

/* Reap the child if it is gone within @p wait_ms. @return true when reaped (now or before). */
static bool
try_reap(struct weft__mcp_stdio *s, unsigned wait_ms, int *status)
{
    uint64_t deadline = weft__monotonic_ns() + (uint64_t)wait_ms * 1000000u;
    bool is_reaped = false;

    for (;;) {
        pthread_mutex_lock(&s->lock);
        if (!s->reaped) {
            int st = 0;
            pid_t r = waitpid(s->pid, &st, WNOHANG);
            if (r == s->pid || (r < 0 && errno == ECHILD)) {
                s->reaped = true;
                s->status = r == s->pid ? st : 0;
            }
        }
        is_reaped = s->reaped;
        *status = s->status;
        pthread_mutex_unlock(&s->lock);
        if (is_reaped || weft__monotonic_ns() >= deadline) {
            return is_reaped;
        }
        weft__sleep_ms(5);
    }
}

/* Hand every complete line in @p buf to @p fn and keep the rest. */
static void
drain_lines(struct weft__buf *buf, bool is_stderr, struct weft__mcp_stdio *s)
{
    size_t start = 0;

    for (;;) {
        char *nl = memchr(buf->data + start, '\n', buf->len - start);
        size_t len = 0;
        if (nl == NULL) {
            break;
        }
        len = (size_t)(nl - (buf->data + start));
        if (len > 0 && buf->data[start + len - 1] == '\r') {
            len--;
        }
        if (is_stderr) {
            s->sink.on_stderr(s->sink.ctx, buf->data + start,
                              len > WEFT__MCP_MAX_STDERR_LINE ? WEFT__MCP_MAX_STDERR_LINE : len);
        } else if (len > 0) {
            s->sink.on_message(s->sink.ctx, buf->data + start, len);
        }
        start = (size_t)(nl - buf->data) + 1;
    }
    if (start > 0) {
        memmove(buf->data, buf->data + start, buf->len - start);
        weft__buf_truncate(buf, buf->len - start);
    }
}

static void *
reader_main(void *arg)
{
    struct weft__mcp_stdio *s = arg;
    struct weft__buf out;
    struct weft__buf err;
    bool is_out_open = true;
    bool is_err_open = true;
    bool is_closed_told = false;
    char chunk[65536];

    weft__buf_init(&out, WEFT__MCP_MAX_MESSAGE + 1);
    weft__buf_init(&err, 2 * WEFT__MCP_MAX_STDERR_LINE);
    while (is_out_open || is_err_open) {
        struct pollfd p[3] = {{.fd = is_out_open ? s->out_fd : -1, .events = POLLIN},
                              {.fd = is_err_open ? s->err_fd : -1, .events = POLLIN},
                              {.fd = s->wake[0], .events = POLLIN}};
        int n = poll(p, 3, -1);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (p[2].revents != 0) {
            break;
        }
        if (p[0].revents != 0) {
            ssize_t r = read(s->out_fd, chunk, sizeof(chunk));
            if (r > 0) {
                if (weft__buf_append(&out, chunk, (size_t)r) != WEFT_OK) {
                    /* A line over the cap: the framing is broken; nothing after it can be
                     * trusted, so the connection ends here. */
                    char why[96];
                    snprintf(why, sizeof(why), "sent a line over %u bytes",
                             (unsigned)WEFT__MCP_MAX_MESSAGE);
                    s->sink.on_closed(s->sink.ctx, why, "oversized");
                    is_closed_told = true;
                    is_out_open = false;
                    weft__buf_reset(&out);
                    kill(-s->pid, SIGKILL);
                } else {
                    drain_lines(&out, false, s);
                }
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                is_out_open = false;
            }
        }
        if (p[1].revents != 0) {
            ssize_t r = read(s->err_fd, chunk, sizeof(chunk));
            if (r > 0) {
                size_t off = 0;
                while (off < (size_t)r) {
                    size_t room = err.max - err.len;
                    size_t take = (size_t)r - off < room ? (size_t)r - off : room;
                    (void)weft__buf_append(&err, chunk + off, take);
                    off += take;
                    drain_lines(&err, true, s);
                    if (err.len == err.max) {
                        /* A line longer than the buffer: log its head, drop the rest. */
                        s->sink.on_stderr(s->sink.ctx, err.data, WEFT__MCP_MAX_STDERR_LINE);
                        weft__buf_reset(&err);
                    }
                }
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                is_err_open = false;
            }
        }
        if (!is_out_open && !is_closed_told) {
            char why[96] = "closed its stdout";
            int status = 0;
            if (try_reap(s, 500, &status)) {
                describe_status(status, why, sizeof(why));
            }
            s->sink.on_closed(s->sink.ctx, why, "server_down");
            is_closed_told = true;
        }
    }
    if (err.len > 0) {
        s->sink.on_stderr(s->sink.ctx, err.data,
                          err.len > WEFT__MCP_MAX_STDERR_LINE ? WEFT__MCP_MAX_STDERR_LINE
                                                              : err.len);
    }
    if (!is_closed_told) {
        s->sink.on_closed(s->sink.ctx, "was stopped", "server_down");
    }
    weft__buf_cleanup(&out);
    weft__buf_cleanup(&err);
    return NULL;
}

static void
close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

weft_err
weft__mcp_stdio_start(const struct weft__mcp_server_config *cfg,
                      const struct weft__mcp_sink *sink,
                      struct weft__mcp_stdio **out,
                      char *err,
                      size_t err_len)
{
    struct weft__mcp_stdio *s = NULL;
    int in_pipe[2] = {-1, -1};
    int out_pipe[2] = {-1, -1};
    int err_pipe[2] = {-1, -1};
    int rc = 0;

    *out = NULL;
    s = weft__calloc(1, sizeof(*s));
    if (s == NULL) {
        return WEFT_ENOMEM;
    }
    s->sink = *sink;
    s->in_fd = s->out_fd = s->err_fd = -1;
    s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->write_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    /* O_CLOEXEC: a child another thread spawns at the same time must not inherit our ends. */
    if (pipe2(in_pipe, O_CLOEXEC) != 0 || pipe2(out_pipe, O_CLOEXEC) != 0 ||
        pipe2(err_pipe, O_CLOEXEC) != 0 || pipe2(s->wake, O_CLOEXEC) != 0) {
        snprintf(err, err_len, "pipe: %s", strerror(errno));
        goto fail;
    }
    rc = spawn_child(cfg, in_pipe[0], out_pipe[1], err_pipe[1], &s->pid);
    if (rc != 0) {
        snprintf(err, err_len, "could not start %s: %s", cfg->argv[0], strerror(rc));
        goto fail;
    }
    close_fd(&in_pipe[0]);
    close_fd(&out_pipe[1]);
    close_fd(&err_pipe[1]);
    s->in_fd = in_pipe[1];
    s->out_fd = out_pipe[0];
    s->err_fd = err_pipe[0];
    in_pipe[1] = out_pipe[0] = err_pipe[0] = -1;
    (void)fcntl(s->in_fd, F_SETFL, fcntl(s->in_fd, F_GETFL) | O_NONBLOCK);
    rc = pthread_create(&s->reader, NULL, reader_main, s);
    if (rc != 0) {
        snprintf(err, err_len, "could not start the reader thread: %s", strerror(rc));
        kill(-s->pid, SIGKILL);
        (void)waitpid(s->pid, NULL, 0);
        goto fail;
    }
    s->has_reader = true;
    *out = s;
    return WEFT_OK;
fail:
    for (int i = 0; i < 2; i++) {
        close_fd(&in_pipe[i]);
        close_fd(&out_pipe[i]);
        close_fd(&err_pipe[i]);
    }
    close_fd(&s->in_fd);
    close_fd(&s->out_fd);
    close_fd(&s->err_fd);
    close_fd(&s->wake[0]);
    close_fd(&s->wake[1]);
    pthread_mutex_destroy(&s->write_lock);
    pthread_mutex_destroy(&s->lock);
    weft__free(s);
    return WEFT_EIO;
}

/* Write all of @p data to the non-blocking @p fd by @p deadline. */
static weft_err
write_all(int fd, const char *data, size_t len, uint64_t deadline)
{
    size_t done = 0;

    while (done < len) {
        ssize_t w = write(fd, data + done, len - done);
        if (w > 0) {
            done += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && errno == EAGAIN) {
            uint64_t now = weft__monotonic_ns();
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int wait_ms = 0;
            if (now >= deadline) {
                return WEFT_ETIMEDOUT;
            }
            wait_ms = (int)((deadline - now) / 1000000u) + 1;
            (void)poll(&p, 1, wait_ms);
            continue;
        }
        return WEFT_EIO;
    }
    return WEFT_OK;
}

weft_err
weft__mcp_stdio_send(struct weft__mcp_stdio *s,
                     const char *msg,
                     size_t len,
                     uint64_t deadline_mono_ns)
{
    sigset_t pipe_set;
    sigset_t old_set;
    sigset_t pending;
    bool was_pending = false;
    weft_err err = WEFT_OK;

    /* A child that died leaves a pipe with no reader: the write is EPIPE, and the SIGPIPE it
     * raises is kept blocked on this thread and consumed here, so weft never dies of it. */
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    sigpending(&pending);
    was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_mutex_lock(&s->write_lock);
    if (s->in_fd < 0) {
        err = WEFT_EIO;
    } else {
        err = write_all(s->in_fd, msg, len, deadline_mono_ns);
        if (err == WEFT_OK) {
            err = write_all(s->in_fd, "\n", 1, deadline_mono_ns);
        }
    }
    pthread_mutex_unlock(&s->write_lock);
    if (!was_pending) {
        struct timespec zero = {0, 0};
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) == 1) {
            (void)sigtimedwait(&pipe_set, NULL, &zero);
        }
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    return err;
}

pid_t
weft__mcp_stdio_pid(const struct weft__mcp_stdio *s)
{
    return s != NULL ? s->pid : -1;
}

void
weft__mcp_stdio_stop(struct weft__mcp_stdio *s, unsigned grace_ms)
{
    int status = 0;

    if (s == NULL) {
        return;
    }
    /* The MCP lifecycle's stdio shutdown: close stdin, wait, SIGTERM, wait, SIGKILL. */
    pthread_mutex_lock(&s->write_lock);
    close_fd(&s->in_fd);
    pthread_mutex_unlock(&s->write_lock);
    if (!try_reap(s, grace_ms, &status)) {
        kill(-s->pid, SIGTERM);
        if (!try_reap(s, grace_ms, &status)) {
            kill(-s->pid, SIGKILL);
            (void)try_reap(s, 5000, &status);
        }
    }
    /* Whatever the child left behind in its group goes too: it would hold our pipes open. */
    kill(-s->pid, SIGKILL);
    if (s->has_reader) {
        ssize_t w = write(s->wake[1], "x", 1);
        (void)w;
        pthread_join(s->reader, NULL);
    }
    close_fd(&s->out_fd);
    close_fd(&s->err_fd);
    close_fd(&s->wake[0]);
    close_fd(&s->wake[1]);
    pthread_mutex_destroy(&s->write_lock);
    pthread_mutex_destroy(&s->lock);
    weft__free(s);
}
