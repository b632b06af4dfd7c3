/* tests/support/pg_server.h - a real PostgreSQL server for one test.
 *
 * weft_test_pg_start() runs initdb into a fresh directory under $TMPDIR (default /tmp) and
 * starts the server with pg_ctl on 127.0.0.1 only, on a free port, with its Unix socket in that
 * directory and trust authentication for the superuser "postgres". PostgreSQL refuses to run as
 * root: as root the binaries run as the unprivileged "postgres" user (runuser -u postgres), as
 * anyone else they run as that user (so as root, $TMPDIR must be one the postgres user can
 * enter, as /tmp is). The binaries come from $WEFT_TEST_PG_BINDIR, default
 * /usr/lib/postgresql/15/bin (Debian's postgresql-15, installed by `scripts/deps.sh test`).
 *
 * Layout of the directory: data/ (the cluster), sock/ (the socket), initdb.log, postgres.log
 * (the server's log) and ctl.log (pg_ctl's output). When the server cannot start, the data is
 * removed but the logs stay, and the error names the log and quotes its end.
 *
 * The server runs with fsync=off (throwaway data); pass "fsync=on" in @p settings for
 * durable writes (a benchmark). A guard process stops the server and removes the directory
 * if the test dies without calling weft_test_pg_stop().
 *
 * Not thread-safe: start and stop from the test's main thread; the URL may be used anywhere. */
#ifndef WEFT_TESTS_SUPPORT_PG_SERVER_H
#define WEFT_TESTS_SUPPORT_PG_SERVER_H

#include <stddef.h>

struct weft_test_pg;

/* Start a server, waiting (at most 30 s) until a libpq connection succeeds. @p settings is
 * NULL or a NULL-terminated list of "name=value" lines added to postgresql.conf after the
 * defaults (a later line wins). @return the server, or NULL with the reason in @p err (it
 * names the log file and quotes its last lines). */
struct weft_test_pg *weft_test_pg_start(const char *const *settings, char *err, size_t err_len);

/* "postgresql://postgres@127.0.0.1:<port>/postgres". Valid until weft_test_pg_stop(). */
const char *weft_test_pg_url(const struct weft_test_pg *pg);

unsigned weft_test_pg_port(const struct weft_test_pg *pg);

/* The throwaway directory (see the layout above). */
const char *weft_test_pg_dir(const struct weft_test_pg *pg);

/* The server's log file. */
const char *weft_test_pg_log(const struct weft_test_pg *pg);

/* CREATE DATABASE @p name (lowercase letters, digits, '_') and write its URL into @p url.
 * @return 0, or -1 with the reason in @p url. */
int weft_test_pg_createdb(struct weft_test_pg *pg, const char *name, char *url, size_t url_len);

/* An outage: stop the server (pg_ctl stop -m fast, which ends every connection) and keep its
 * data, port and directory for weft_test_pg_restart(). @return 0, or -1 when pg_ctl failed
 * (the server was then killed). */
int weft_test_pg_halt(struct weft_test_pg *pg);

/* The end of an outage: start the halted server again on the same data and port, waiting (at
 * most 30 s) until a libpq connection succeeds. @return 0, or -1 with the reason in @p err. */
int weft_test_pg_restart(struct weft_test_pg *pg, char *err, size_t err_len);

/* Stop the server (pg_ctl stop -m fast; kill it if that fails), remove the directory and
 * free @p pg. NULL is a no-op. @return 0 when the server stopped cleanly and the directory is
 * gone, -1 otherwise (everything is still released). */
int weft_test_pg_stop(struct weft_test_pg *pg);

#endif
