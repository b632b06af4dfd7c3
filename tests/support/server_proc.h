/* tests/support/server_proc.h - process plumbing for tests that start real servers
 * (pg_server.h, amqp_server.h): free loopback ports, throwaway directories, spawning a program
 * with a given environment and log file, waiting with a deadline, and a guard that cleans up
 * after the test process if it dies before it stopped its servers.
 *
 * Children get stdin from /dev/null, stdout and stderr in a log file, and no other descriptor
 * of the test (above 2, up to 1023): a server must never hold ctest's output pipe open.
 * Not thread-safe: call from the test's main thread. */
#ifndef WEFT_TESTS_SUPPORT_SERVER_PROC_H
#define WEFT_TESTS_SUPPORT_SERVER_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A TCP port free on 127.0.0.1 right now (bound, read back, closed), 0 on failure. Another
 * process may take it before the server binds it: callers retry on "address in use". */
unsigned weft_test_free_port(void);

/* Create a fresh directory "$TMPDIR/<prefix>XXXXXX" (TMPDIR defaults to /tmp).
 * @return the path (free() it), or NULL. */
char *weft_test_mkdtemp(const char *prefix);

/* Remove @p path and everything below it (symbolic links are removed, never followed).
 * @return 0, or -1 when something could not be removed. A missing path is 0. */
int weft_test_rm_rf(const char *path);

/* Start @p argv[0] (an absolute path) with @p argv. @p env lists changes to this process's
 * environment, NULL-terminated: "NAME=value" sets NAME; "PREFIX*" drops every inherited
 * variable whose name starts with PREFIX. @p cwd (NULL: unchanged) is the working directory;
 * @p log_path (NULL: /dev/null) receives stdout and stderr, appended. With @p is_new_group the
 * child leads a new process group (its pid), so weft_test_kill_group() reaches what it forks.
 * @return the pid, or -1. */
pid_t weft_test_spawn(const char *const *argv,
                      const char *const *env,
                      const char *cwd,
                      const char *log_path,
                      bool is_new_group);

/* Wait at most @p timeout_ms for child @p pid. @return its exit status (128 + signal when a
 * signal ended it), or -1 when it is still running at the deadline (it is left running). */
int weft_test_wait(pid_t pid, long timeout_ms);

/* Has child @p pid exited (reaped here)? *status (may be NULL) as weft_test_wait() says. */
bool weft_test_has_exited(pid_t pid, int *status);

/* SIGTERM the process group @p pgid, wait up to @p grace_ms for its leader (a child of this
 * process) to exit, then SIGKILL the group and reap the leader. */
void weft_test_kill_group(pid_t pgid, long grace_ms);

/* Spawn (new process group), wait up to @p timeout_ms, and kill the group at the deadline.
 * @return the exit status, or -1 on spawn failure or timeout. */
int weft_test_run(const char *const *argv,
                  const char *const *env,
                  const char *cwd,
                  const char *log_path,
                  long timeout_ms);

/* The last @p max bytes of the file at @p path (starting at a line), or "(no log)" when it
 * cannot be read. @return a string to free(). */
char *weft_test_log_tail(const char *path, size_t max);

/* Does the file at @p path contain @p needle? */
bool weft_test_file_contains(const char *path, const char *needle);

/* Monotonic milliseconds. */
long weft_test_now_ms(void);

/* Sleep @p ms milliseconds. */
void weft_test_sleep_ms(long ms);

/* Live processes (zombies excluded) whose environment holds @p env_entry ("NAME=value"):
 * the pids of up to @p max of them into @p pids. Reads /proc; sees the processes this user
 * may inspect (root: all). @return how many there are, which may exceed @p max. */
size_t weft_test_find_procs(const char *env_entry, pid_t *pids, size_t max);

/* The TCP sockets in LISTEN state that processes @p pids hold, as "addr:port" (IPv4) or
 * "[addr]:port" (IPv6), separated by spaces, into @p buf. @return how many there are. */
size_t weft_test_listen_addrs(const pid_t *pids, size_t n, char *buf, size_t len);

/* The guard: a detached process (its own session, parent init, so neither a ctest timeout
 * nor a crash of the test takes it down) that waits on a pipe from this process. When the
 * pipe closes without a disarm - the test exited, crashed or was killed - it runs @p script
 * with /bin/sh (stop the server, kill what is left, remove the directory). Quote paths in
 * the script with weft_test_shell_quote().
 * @return the pipe's write end to pass to weft_test_guard_disarm(), or -1. */
int weft_test_guard_arm(const char *script);

/* Tell the guard of @p fd to exit without running its script. -1 is a no-op. */
void weft_test_guard_disarm(int fd);

/* @p s in single quotes for /bin/sh, into @p buf. @return buf, or NULL when it does not fit
 * or @p s holds a single quote. */
char *weft_test_shell_quote(const char *s, char *buf, size_t len);

#endif
