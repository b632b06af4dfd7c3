/* tests/support/serve_proc.h - drive the built `weft` binary from tests: run a command with a
 * WEFT_HOME, start `weft serve` on 127.0.0.1 port 0 and learn its port, scrape it over HTTP,
 * and read sample values out of the Prometheus text. */
#ifndef WEFT_TESTS_SUPPORT_SERVE_PROC_H
#define WEFT_TESTS_SUPPORT_SERVE_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* Run @p bin with @p args (NULL-terminated, without argv[0]) and WEFT_HOME=@p home; stdout to
 * @p out_path (NULL: /dev/null), stderr to /dev/null. @return the exit status, -1 if killed. */
int
serve_proc_run(const char *bin, const char *home, const char *out_path, const char *const *args);

/* Start `bin serve --addr 127.0.0.1:0` on @p home; waits (at most 10 s) for its "listening on
 * port N" line. @return the pid; *port the port (the test fails when it never listens). */
pid_t serve_proc_start(const char *bin, const char *home, unsigned *port);

/* Start `weft serve` as @p argv says (argv[0] the binary; weft_test_spawn()'s @p env, @p cwd
 * and @p log_path, in a process group of its own) and wait at most 15 s for its "listening on
 * port N" line in @p log_path. @return the pid (stop it with weft_test_kill_group()); *port the
 * port. Fails the test with the server's log when it exits or never listens. */
pid_t serve_proc_spawn(const char *const *argv,
                       const char *const *env,
                       const char *cwd,
                       const char *log_path,
                       unsigned *port);

/* A `weft serve` test's home: a fresh directory that is its WEFT_HOME and holds its log, and
 * the server started on it (pid 0 when none runs). */
struct serve_proc_home {
    char *dir;
    char home_env[600]; /* "WEFT_HOME=dir" */
    char log[600];      /* dir/serve.log */
    pid_t pid;
    unsigned port;
};

/* Make @p h's directory (weft_test_mkdtemp(@p prefix)); fails the test when it cannot. */
void serve_proc_home_init(struct serve_proc_home *h, const char *prefix);

/* Start `@p bin serve --addr @p addr EXTRA...` on @p h as serve_proc_spawn() does (cwd the
 * home), with WEFT_HOME the home, WEFT_SERVE_TOKEN and WEFT_STATE_URL unset and @p env_extra
 * (each NULL-terminated, may be NULL; at most 11 arguments and 4 variables). Sets h->pid and
 * h->port. */
void serve_proc_home_start(struct serve_proc_home *h,
                           const char *bin,
                           const char *addr,
                           const char *const *extra,
                           const char *const *env_extra);

/* SIGTERM the server and assert it exited 0 within 20 s; h->pid 0 after. */
void serve_proc_home_stop(struct serve_proc_home *h);

/* Kill a server still running (its process group), remove the directory, free it. */
void serve_proc_home_cleanup(struct serve_proc_home *h);

/* SIGTERM, wait, and assert it exited 0. */
void serve_proc_stop(pid_t pid);

/* GET http://127.0.0.1:port/path within @p timeout_ms. @return the body (free() it), or NULL
 * when the request failed or timed out; *status the HTTP status (0 on failure). */
char *serve_proc_get(unsigned port, const char *path, long timeout_ms, long *status);

/* A request's answer as serve_proc_request() keeps it: status, headers and body, each cut to
 * its buffer (NUL-terminated). Large: keep it static or on the heap. */
struct serve_proc_answer {
    long status;
    char headers[8192];
    size_t headers_len;
    char body[1 << 18]; /* /metrics fits */
    size_t len;
};

/* @p body NULL: GET http://127.0.0.1:port/path, else POST it, with header lines @p header and
 * @p header2 (each may be NULL), within 15 s; redirects are not followed. Fails the test when
 * no answer came. */
void serve_proc_request(unsigned port,
                        const char *path,
                        const char *header,
                        const char *header2,
                        const char *body,
                        struct serve_proc_answer *a);

/* Sum of the samples named exactly @p name whose label set contains every one of the
 * NULL-terminated @p labels (each like `kind="flow"`; NULL: all). *count (may be NULL) the
 * number of samples matched. */
double serve_proc_sum(const char *text, const char *name, const char *const *labels, size_t *count);

#endif
