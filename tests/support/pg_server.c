/* tests/support/pg_server.c - see pg_server.h.
 *
 * The server's settings go into data/postgresql.conf rather than on pg_ctl's command line:
 * pg_ctl hands its -o options to /bin/sh, and the file takes any value without quoting. A
 * retry after "address in use" appends a new port line, which wins over the earlier one. */
#include "pg_server.h"

#include "server_proc.h"

#include <errno.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define START_TIMEOUT_MS  30000
#define INITDB_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS   30000
#define START_ATTEMPTS    3
#define PATH_LEN          512

struct weft_test_pg {
    char *dir;
    char data[PATH_LEN];
    char sock[PATH_LEN];
    char log[PATH_LEN];
    char ctl_log[PATH_LEN];
    char bindir[PATH_LEN];
    char runuser[64]; /* empty when the binaries run as this process's user */
    char url[128];
    unsigned port;
    pid_t postmaster;
    int guard; /* -1 when not armed */
};

static void
set_err(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL || len == 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

/* Error text ending with the log's path and its last lines. */
static void
set_log_err(char *err, size_t len, const char *what, const char *log)
{
    char *tail = weft_test_log_tail(log, 1500);

    set_err(err, len, "PostgreSQL test server: %s; see %s, which ends:\n%s", what, log,
            tail != NULL ? tail : "");
    free(tail);
}

/* Run @p tool of the bin directory (through runuser when we are root) with its output
 * appended to @p log. Inherited PG* variables could point it elsewhere: they are dropped.
 * @return its exit status, -1 on timeout. */
static int
run_tool(const struct weft_test_pg *pg,
         const char *tool,
         const char *const *args,
         const char *log,
         long timeout_ms)
{
    static const char *const env[] = {"PG*", "LC_ALL=C", NULL};
    const char *argv[32];
    char path[PATH_LEN + 32];
    size_t n = 0;

    snprintf(path, sizeof(path), "%s/%s", pg->bindir, tool);
    if (pg->runuser[0] != '\0') {
        argv[n++] = pg->runuser;
        argv[n++] = "-u";
        argv[n++] = "postgres";
        argv[n++] = "--";
    }
    argv[n++] = path;

    for (size_t i = 0; args[i] != NULL && n < 31; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return weft_test_run(argv, env, pg->dir, log, timeout_ms);
}

static int
append_conf(const struct weft_test_pg *pg, const char *text)
{
    char path[PATH_LEN + 32];
    FILE *fp = NULL;
    int rc = 0;

    snprintf(path, sizeof(path), "%s/postgresql.conf", pg->data);
    fp = fopen(path, "a");
    if (fp == NULL) {
        return -1;
    }
    if (fputs(text, fp) < 0) {
        rc = -1;
    }
    if (fclose(fp) != 0) {
        rc = -1;
    }
    return rc;
}

static pid_t
read_postmaster_pid(const struct weft_test_pg *pg)
{
    char path[PATH_LEN + 32];
    FILE *fp = NULL;
    long pid = 0;

    snprintf(path, sizeof(path), "%s/postmaster.pid", pg->data);
    fp = fopen(path, "r");
    if (fp == NULL) {
        return -1;
    }
    if (fscanf(fp, "%ld", &pid) != 1) {
        pid = -1;
    }
    fclose(fp);
    return (pid_t)pid;
}

/* Arm the guard: if the test dies, stop the server at once, kill it, remove the directory. */
static int
arm_guard(struct weft_test_pg *pg)
{
    char ctl[PATH_LEN + 16];
    char q_ctl[PATH_LEN + 32];
    char q_data[PATH_LEN + 3];
    char q_dir[PATH_LEN + 3];
    char script[4 * PATH_LEN];

    snprintf(ctl, sizeof(ctl), "%s/pg_ctl", pg->bindir);
    if (weft_test_shell_quote(ctl, q_ctl, sizeof(q_ctl)) == NULL ||
        weft_test_shell_quote(pg->data, q_data, sizeof(q_data)) == NULL ||
        weft_test_shell_quote(pg->dir, q_dir, sizeof(q_dir)) == NULL) {
        return -1;
    }
    snprintf(script, sizeof(script),
             "%s%s%s stop -D %s -m immediate -w -t 10 >/dev/null 2>&1; kill -9 %ld 2>/dev/null; "
             "rm -rf %s",
             pg->runuser, pg->runuser[0] != '\0' ? " -u postgres -- " : "", q_ctl, q_data,
             (long)pg->postmaster, q_dir);
    pg->guard = weft_test_guard_arm(script);
    return pg->guard >= 0 ? 0 : -1;
}

/* Stop a server that may be running: pg_ctl stop, then SIGKILL if that failed.
 * @return 0 when pg_ctl stopped it (or nothing ran), -1 otherwise. */
static int
stop_server(struct weft_test_pg *pg, const char *mode)
{
    const char *const args[] = {"stop", "-D", pg->data, "-m", mode, "-w", "-t", "30", NULL};
    pid_t pid = pg->postmaster > 0 ? pg->postmaster : read_postmaster_pid(pg);

    if (pid <= 0) {
        return 0;
    }
    if (run_tool(pg, "pg_ctl", args, pg->ctl_log, STOP_TIMEOUT_MS + 5000) == 0) {
        return 0;
    }
    /* The postmaster is pg_ctl's orphan, not our child: kill it; its backends follow. */
    kill(pid, SIGKILL);
    return -1;
}

/* After a failed start: stop what runs, drop the data (tens of megabytes) but keep the logs
 * the error names, and release @p pg. */
static void
discard_failed(struct weft_test_pg *pg)
{
    stop_server(pg, "immediate");
    weft_test_rm_rf(pg->data);
    weft_test_rm_rf(pg->sock);
    weft_test_guard_disarm(pg->guard);
    free(pg->dir);
    free(pg);
}

/* Wait until a libpq connection works or the deadline passes. */
static bool
wait_connect(const struct weft_test_pg *pg, long deadline)
{
    for (;;) {
        PGconn *conn = PQconnectdb(pg->url);
        bool is_ok = PQstatus(conn) == CONNECTION_OK;

        PQfinish(conn);
        if (is_ok) {
            return true;
        }
        if (weft_test_now_ms() >= deadline) {
            return false;
        }
        weft_test_sleep_ms(50);
    }
}

static int
init_cluster(struct weft_test_pg *pg, const char *const *settings, char *err, size_t err_len)
{
    char initdb_log[PATH_LEN + 16];
    const char *const args[] = {
        "-D",   pg->data,      "-U",        "postgres",          "-A", "trust", "-E",
        "UTF8", "--no-locale", "--no-sync", "--no-instructions", NULL};
    char conf[2 * PATH_LEN];
    int status = 0;

    snprintf(initdb_log, sizeof(initdb_log), "%s/initdb.log", pg->dir);
    status = run_tool(pg, "initdb", args, initdb_log, INITDB_TIMEOUT_MS);
    if (status != 0) {
        char what[64];

        snprintf(what, sizeof(what), "initdb %s %d", status < 0 ? "timed out," : "exited", status);
        set_log_err(err, err_len, what, initdb_log);
        return -1;
    }
    /* Loopback TCP only, the socket in our directory (never /var/run/postgresql). */
    snprintf(conf, sizeof(conf),
             "\n# weft test server\nlisten_addresses = '127.0.0.1'\n"
             "unix_socket_directories = '%s'\nfsync = off\nlogging_collector = off\n",
             pg->sock);
    if (append_conf(pg, conf) != 0) {
        set_err(err, err_len, "PostgreSQL test server: cannot write %s/postgresql.conf: %s",
                pg->data, strerror(errno));
        return -1;
    }
    for (size_t i = 0; settings != NULL && settings[i] != NULL; i++) {
        if (append_conf(pg, settings[i]) != 0 || append_conf(pg, "\n") != 0) {
            set_err(err, err_len, "PostgreSQL test server: cannot write postgresql.conf");
            return -1;
        }
    }
    return 0;
}

/* Choose a port, start with pg_ctl, and retry on a port someone else took meanwhile. */
static int
start_server(struct weft_test_pg *pg, char *err, size_t err_len)
{
    long deadline = 0;
    const char *const args[] = {"start", "-D", pg->data, "-l", pg->log, "-w", "-t", "30", NULL};

    for (int attempt = 1;; attempt++) {
        char line[64];
        int status = 0;

        pg->port = weft_test_free_port();
        snprintf(line, sizeof(line), "port = %u\n", pg->port);
        if (pg->port == 0 || append_conf(pg, line) != 0) {
            set_err(err, err_len, "PostgreSQL test server: no free port on 127.0.0.1");
            return -1;
        }
        snprintf(pg->url, sizeof(pg->url), "postgresql://postgres@127.0.0.1:%u/postgres", pg->port);
        unlink(pg->log); /* the log then tells about this attempt only */
        deadline = weft_test_now_ms() + START_TIMEOUT_MS;
        status = run_tool(pg, "pg_ctl", args, pg->ctl_log, START_TIMEOUT_MS + 10000);
        if (status == 0) {
            break;
        }
        /* A server that cannot bind exits by itself; try the next port. */
        if (attempt < START_ATTEMPTS && weft_test_file_contains(pg->log, "could not bind")) {
            continue;
        }
        set_log_err(err, err_len,
                    status < 0 ? "pg_ctl start timed out"
                               : "pg_ctl start failed (its output: ctl.log)",
                    pg->log);
        return -1;
    }
    pg->postmaster = read_postmaster_pid(pg);
    if (arm_guard(pg) != 0) {
        set_err(err, err_len, "PostgreSQL test server: cannot start the guard process");
        return -1;
    }
    if (!wait_connect(pg, deadline)) {
        set_log_err(err, err_len, "no libpq connection within 30 s", pg->log);
        return -1;
    }
    return 0;
}

/* The runuser program when this process is root ("" otherwise), and hand the directory to the
 * user the server will run as. */
static int
choose_user(struct weft_test_pg *pg, char *err, size_t err_len)
{
    static const char *const candidates[] = {"/usr/sbin/runuser", "/sbin/runuser",
                                             "/usr/bin/runuser"};
    struct passwd *pw = NULL;

    pg->runuser[0] = '\0';
    if (geteuid() != 0) {
        return 0;
    }
    pw = getpwnam("postgres");
    if (pw == NULL) {
        set_err(err, err_len,
                "PostgreSQL test server: running as root and there is no 'postgres' user to run "
                "the server as (scripts/deps.sh test installs postgresql-15, which creates it)");
        return -1;
    }
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (access(candidates[i], X_OK) == 0) {
            snprintf(pg->runuser, sizeof(pg->runuser), "%s", candidates[i]);
            break;
        }
    }
    if (pg->runuser[0] == '\0') {
        set_err(err, err_len, "PostgreSQL test server: runuser not found (util-linux)");
        return -1;
    }
    /* The server's user owns the directory; initdb makes data/ inside it. */
    if (chown(pg->dir, pw->pw_uid, pw->pw_gid) != 0 ||
        chown(pg->sock, pw->pw_uid, pw->pw_gid) != 0) {
        set_err(err, err_len, "PostgreSQL test server: chown %s to postgres: %s", pg->dir,
                strerror(errno));
        return -1;
    }
    return 0;
}

struct weft_test_pg *
weft_test_pg_start(const char *const *settings, char *err, size_t err_len)
{
    const char *bindir = getenv("WEFT_TEST_PG_BINDIR");
    struct weft_test_pg *pg = calloc(1, sizeof(*pg));
    char initdb[PATH_LEN + 16];

    set_err(err, err_len, "");
    if (pg == NULL) {
        set_err(err, err_len, "PostgreSQL test server: out of memory");
        return NULL;
    }
    pg->guard = -1;
    pg->postmaster = -1;
    snprintf(pg->bindir, sizeof(pg->bindir), "%s",
             bindir != NULL && bindir[0] != '\0' ? bindir : "/usr/lib/postgresql/15/bin");
    snprintf(initdb, sizeof(initdb), "%s/initdb", pg->bindir);
    if (access(initdb, X_OK) != 0) {
        set_err(err, err_len,
                "PostgreSQL test server: %s not found (scripts/deps.sh test installs "
                "postgresql-15; WEFT_TEST_PG_BINDIR chooses another directory)",
                initdb);
        free(pg);
        return NULL;
    }
    pg->dir = weft_test_mkdtemp("weft-pg-");
    if (pg->dir == NULL) {
        set_err(err, err_len, "PostgreSQL test server: cannot create a directory in $TMPDIR");
        free(pg);
        return NULL;
    }
    snprintf(pg->data, sizeof(pg->data), "%s/data", pg->dir);
    snprintf(pg->sock, sizeof(pg->sock), "%s/sock", pg->dir);
    snprintf(pg->log, sizeof(pg->log), "%s/postgres.log", pg->dir);
    snprintf(pg->ctl_log, sizeof(pg->ctl_log), "%s/ctl.log", pg->dir);
    if (mkdir(pg->sock, 0700) != 0 || choose_user(pg, err, err_len) != 0) {
        if (err != NULL && err_len > 0 && err[0] == '\0') {
            set_err(err, err_len, "PostgreSQL test server: mkdir %s: %s", pg->sock,
                    strerror(errno));
        }
        weft_test_rm_rf(pg->dir);
        free(pg->dir);
        free(pg);
        return NULL;
    }
    if (init_cluster(pg, settings, err, err_len) != 0 || start_server(pg, err, err_len) != 0) {
        discard_failed(pg);
        return NULL;
    }
    return pg;
}

const char *
weft_test_pg_url(const struct weft_test_pg *pg)
{
    return pg->url;
}

unsigned
weft_test_pg_port(const struct weft_test_pg *pg)
{
    return pg->port;
}

const char *
weft_test_pg_dir(const struct weft_test_pg *pg)
{
    return pg->dir;
}

const char *
weft_test_pg_log(const struct weft_test_pg *pg)
{
    return pg->log;
}

int
weft_test_pg_createdb(struct weft_test_pg *pg, const char *name, char *url, size_t url_len)
{
    char sql[128];
    PGconn *conn = NULL;
    PGresult *res = NULL;
    int rc = 0;

    if (name == NULL || name[0] == '\0' || strlen(name) > 63 ||
        strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_") != strlen(name)) {
        set_err(url, url_len, "bad database name");
        return -1;
    }
    conn = PQconnectdb(pg->url);
    if (PQstatus(conn) != CONNECTION_OK) {
        set_err(url, url_len, "connect %s: %s", pg->url, PQerrorMessage(conn));
        PQfinish(conn);
        return -1;
    }
    snprintf(sql, sizeof(sql), "CREATE DATABASE %s", name);
    res = PQexec(conn, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        set_err(url, url_len, "%s: %s", sql, PQerrorMessage(conn));
        rc = -1;
    } else {
        set_err(url, url_len, "postgresql://postgres@127.0.0.1:%u/%s", pg->port, name);
    }
    PQclear(res);
    PQfinish(conn);
    return rc;
}

int
weft_test_pg_halt(struct weft_test_pg *pg)
{
    int rc = stop_server(pg, "fast");

    pg->postmaster = -1; /* stopped: the guard's pid is stale until the restart re-arms it */
    return rc;
}

int
weft_test_pg_restart(struct weft_test_pg *pg, char *err, size_t err_len)
{
    const char *const args[] = {"start", "-D", pg->data, "-l", pg->log, "-w", "-t", "30", NULL};
    long deadline = weft_test_now_ms() + START_TIMEOUT_MS;

    set_err(err, err_len, "");
    /* The same port (postgresql.conf keeps it): clients reconnect to the URL they had. */
    if (run_tool(pg, "pg_ctl", args, pg->ctl_log, START_TIMEOUT_MS + 10000) != 0) {
        set_log_err(err, err_len, "pg_ctl start (restart) failed", pg->log);
        return -1;
    }
    pg->postmaster = read_postmaster_pid(pg);
    weft_test_guard_disarm(pg->guard);
    pg->guard = -1;
    if (arm_guard(pg) != 0) {
        set_err(err, err_len, "PostgreSQL test server: cannot start the guard process");
        return -1;
    }
    if (!wait_connect(pg, deadline)) {
        set_log_err(err, err_len, "no libpq connection within 30 s of the restart", pg->log);
        return -1;
    }
    return 0;
}

int
weft_test_pg_stop(struct weft_test_pg *pg)
{
    int rc = 0;

    if (pg == NULL) {
        return 0;
    }
    rc = stop_server(pg, "fast");
    if (weft_test_rm_rf(pg->dir) != 0) {
        rc = -1;
    }
    weft_test_guard_disarm(pg->guard);
    free(pg->dir);
    free(pg);
    return rc;
}
