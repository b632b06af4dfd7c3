/* tests/support/amqp_server.h - a real RabbitMQ broker for one test.
 *
 * weft_test_amqp_start() runs Debian's rabbitmq-server (from $WEFT_TEST_RABBITMQ_BINDIR,
 * default /usr/lib/rabbitmq/bin, as the current user; `scripts/deps.sh test` installs it) as a
 * node of its own, "weft-test-<pid>-<n>@localhost", self-contained in a fresh directory under
 * $TMPDIR (default /tmp):
 *
 *   home/       HOME, with the node's Erlang cookie
 *   mnesia/     RABBITMQ_MNESIA_BASE: the node's database and message stores
 *   log/        RABBITMQ_LOG_BASE: the node's log, <node>.log
 *   server.out  the server's stdout and stderr; ctl.log rabbitmqctl's output
 *   rabbitmq.conf, rabbitmq-env.conf, enabled_plugins (none): nothing is read from /etc/rabbitmq
 *
 * Every port is free when chosen and bound on 127.0.0.1 only: AMQP (RABBITMQ_NODE_PORT),
 * Erlang distribution (RABBITMQ_DIST_PORT), and a private epmd (ERL_EPMD_PORT, which also
 * answers on ::1) that the helper starts and stops, so no system epmd is started or used.
 * Only the default user guest/guest exists; RabbitMQ allows it from localhost only.
 *
 * A start takes several seconds (the Erlang VM boots, then the broker): start one broker per
 * test file (a cmocka group setup) and declare per-test queues, rather than one per test.
 * A guard process kills the broker and its epmd and removes the directory if the test dies
 * without calling weft_test_amqp_stop().
 *
 * Not thread-safe: start, restart and stop from the test's main thread; the URL and port may
 * be used anywhere. */
#ifndef WEFT_TESTS_SUPPORT_AMQP_SERVER_H
#define WEFT_TESTS_SUPPORT_AMQP_SERVER_H

#include <stdbool.h>
#include <stddef.h>

struct weft_test_amqp;

/* Start a broker and wait (at most 60 s) until an AMQP connection logs in as guest.
 * @return the broker, or NULL with the reason in @p err (it names the log file and quotes its
 * last lines). */
struct weft_test_amqp *weft_test_amqp_start(char *err, size_t err_len);

/* "amqp://guest:guest@127.0.0.1:<port>/". Valid until weft_test_amqp_stop(). */
const char *weft_test_amqp_url(const struct weft_test_amqp *amqp);

unsigned weft_test_amqp_port(const struct weft_test_amqp *amqp);

/* The node name, for rabbitmqctl -n. */
const char *weft_test_amqp_node(const struct weft_test_amqp *amqp);

/* The throwaway directory (see the layout above). */
const char *weft_test_amqp_dir(const struct weft_test_amqp *amqp);

/* The node's log file. */
const char *weft_test_amqp_log(const struct weft_test_amqp *amqp);

/* Stop the broker gracefully (rabbitmqctl stop) and start it again on the same ports and the
 * same data: durable queues and their persistent messages survive, connections do not.
 * Waits as weft_test_amqp_start() does. @return 0, or -1 with the reason in @p err. */
int weft_test_amqp_restart(struct weft_test_amqp *amqp, char *err, size_t err_len);

/* Freeze (@p is_paused: SIGSTOP) or thaw (SIGCONT) the broker's process group: a frozen
 * broker still accepts TCP connections (the kernel completes them) but answers nothing, as a
 * hung or overloaded broker does. Thaw it before weft_test_amqp_restart() or _stop().
 * @return 0, or -1 when the broker is not running. */
int weft_test_amqp_pause(struct weft_test_amqp *amqp, bool is_paused);

/* Run `rabbitmqctl -n <node> <args...>` (@p args NULL-terminated) against the broker, for
 * example {"list_queues", "-q", "name", "messages", NULL}. *out (may be NULL) receives its
 * output (free() it). @return its exit status, -1 when it could not run or timed out (30 s). */
int weft_test_amqp_ctl(struct weft_test_amqp *amqp, const char *const *args, char **out);

/* Stop the broker (rabbitmqctl stop; the process group is killed if it is still there after
 * 30 s) and its epmd, remove the directory and free @p amqp. NULL is a no-op. @return 0 when
 * the broker stopped by itself and the directory is gone, -1 otherwise (everything is still
 * released). */
int weft_test_amqp_stop(struct weft_test_amqp *amqp);

#endif
