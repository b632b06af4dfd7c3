/* tests/support/amqp_server.c - see amqp_server.h.
 *
 * rabbitmq-server is a shell script that starts the Erlang VM in the background and waits for
 * it; it runs as the leader of its own process group, so the group holds the VM too. The VM's
 * helpers (erl_child_setup, inet_gethost) make their own groups but exit when the VM does.
 *
 * The broker would start epmd, Erlang's port mapper, as a daemon on port 4369 of every
 * interface and leave it running after the broker stops. Instead each broker gets its own
 * epmd, a child of the test on a free loopback port, stopped with the broker. */
#include "amqp_server.h"

#include "server_proc.h"

#include <amqp.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define START_TIMEOUT_MS 60000
#define STOP_TIMEOUT_MS  30000
#define CTL_TIMEOUT_MS   30000
#define EPMD_TIMEOUT_MS  5000
#define START_ATTEMPTS   3
#define PATH_LEN         512
#define ENV_MAX          24

struct weft_test_amqp {
    char *dir;
    char bindir[PATH_LEN];
    char log[PATH_LEN + 128];
    char out_log[PATH_LEN + 16];
    char ctl_log[PATH_LEN + 16];
    char node[96];
    char url[128];
    unsigned port;
    unsigned dist_port;
    unsigned epmd_port;
    pid_t epmd;   /* our epmd, -1 when not running */
    pid_t server; /* the rabbitmq-server script, leader of its process group; -1 when stopped */
    int guard;    /* -1 when not armed */
    /* The environment of the server and of rabbitmqctl: changes for weft_test_spawn(). */
    char env_text[ENV_MAX][PATH_LEN + 64];
    const char *env[ENV_MAX + 1];
};

static unsigned node_counter;

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

/* Error text naming the node's log (or the server's output before there is a log) and
 * quoting its last lines. */
static void
set_log_err(const struct weft_test_amqp *amqp, char *err, size_t len, const char *what)
{
    struct stat st;
    const char *log = stat(amqp->log, &st) == 0 && st.st_size > 0 ? amqp->log : amqp->out_log;
    char *tail = weft_test_log_tail(log, 1500);

    set_err(err, len, "RabbitMQ test broker: %s; see %s (output: %s), which ends:\n%s", what, log,
            amqp->out_log, tail != NULL ? tail : "");
    free(tail);
}

static int
write_file(const char *dir, const char *name, const char *text, mode_t mode)
{
    char path[PATH_LEN + 64];
    FILE *fp = NULL;
    int rc = 0;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fp = fopen(path, "w");
    if (fp == NULL) {
        return -1;
    }
    if (fputs(text, fp) < 0) {
        rc = -1;
    }
    if (fclose(fp) != 0) {
        rc = -1;
    }
    if (rc == 0 && chmod(path, mode) != 0) {
        rc = -1;
    }
    return rc;
}

/* The files that make the node independent of /etc/rabbitmq and of $HOME. */
static int
write_layout(struct weft_test_amqp *amqp)
{
    static const char *const dirs[] = {"home", "mnesia", "log", "conf.d"};
    char cookie[24];
    char path[PATH_LEN + 16];
    FILE *rnd = NULL;
    unsigned char bytes[20];

    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", amqp->dir, dirs[i]);
        if (mkdir(path, 0700) != 0) {
            return -1;
        }
    }
    /* The Erlang cookie: the server and rabbitmqctl read it from $HOME. */
    rnd = fopen("/dev/urandom", "rb");
    if (rnd == NULL || fread(bytes, 1, sizeof(bytes), rnd) != sizeof(bytes)) {
        if (rnd != NULL) {
            fclose(rnd);
        }
        return -1;
    }
    fclose(rnd);
    for (size_t i = 0; i < sizeof(bytes); i++) {
        cookie[i] = (char)('A' + bytes[i] % 26);
    }
    cookie[sizeof(bytes)] = '\0';
    snprintf(path, sizeof(path), "%s/home", amqp->dir);
    /* Disk alarm at 10 MB free rather than 50 MB: a test machine with a fullish disk should
     * not see publishers blocked for no reason a test could explain. */
    if (write_file(path, ".erlang.cookie", cookie, 0400) != 0 ||
        write_file(amqp->dir, "enabled_plugins", "[].\n", 0600) != 0 ||
        write_file(amqp->dir, "rabbitmq-env.conf", "", 0600) != 0 ||
        write_file(amqp->dir, "rabbitmq.conf",
                   "# weft test broker: ports and addresses come from the environment\n"
                   "loopback_users.guest = true\n"
                   "disk_free_limit.absolute = 10MB\n"
                   "log.file.level = info\n",
                   0600) != 0) {
        return -1;
    }
    return 0;
}

static void
add_env(struct weft_test_amqp *amqp, size_t *n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(amqp->env_text[*n], sizeof(amqp->env_text[*n]), fmt, ap);
    va_end(ap);
    amqp->env[*n] = amqp->env_text[*n];
    (*n)++;
}

/* The environment for the ports chosen: every RABBITMQ_ and ERL_ variable of the test's
 * environment is replaced. */
static void
build_env(struct weft_test_amqp *amqp)
{
    const char *d = amqp->dir;
    size_t n = 0;

    add_env(amqp, &n, "RABBITMQ_*");
    add_env(amqp, &n, "ERL_*");
    add_env(amqp, &n, "HOME=%s/home", d);
    add_env(amqp, &n, "LC_ALL=C.UTF-8");
    add_env(amqp, &n, "RABBITMQ_NODENAME=%s", amqp->node);
    add_env(amqp, &n, "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1");
    add_env(amqp, &n, "RABBITMQ_NODE_PORT=%u", amqp->port);
    add_env(amqp, &n, "RABBITMQ_DIST_PORT=%u", amqp->dist_port);
    add_env(amqp, &n, "ERL_EPMD_PORT=%u", amqp->epmd_port);
    add_env(amqp, &n, "ERL_EPMD_ADDRESS=127.0.0.1");
    /* Distribution listens on every interface unless told otherwise; so would the CLI. */
    add_env(amqp, &n,
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface "
            "{127,0,0,1}");
    add_env(amqp, &n, "RABBITMQ_CTL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}");
    add_env(amqp, &n, "RABBITMQ_MNESIA_BASE=%s/mnesia", d);
    add_env(amqp, &n, "RABBITMQ_LOG_BASE=%s/log", d);
    add_env(amqp, &n, "RABBITMQ_CONFIG_FILE=%s/rabbitmq.conf", d);
    add_env(amqp, &n, "RABBITMQ_CONFIG_FILES=%s/conf.d", d);
    add_env(amqp, &n, "RABBITMQ_ADVANCED_CONFIG_FILE=%s/advanced.config", d);
    add_env(amqp, &n, "RABBITMQ_CONF_ENV_FILE=%s/rabbitmq-env.conf", d);
    add_env(amqp, &n, "RABBITMQ_ENABLED_PLUGINS_FILE=%s/enabled_plugins", d);
    add_env(amqp, &n, "RABBITMQ_MOTD_FILE=%s/motd", d);
    amqp->env[n] = NULL;
}

/* Can guest log in over AMQP? Bounded by the socket and handshake timeouts. */
static bool
amqp_ping(unsigned port)
{
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = conn != NULL ? amqp_tcp_socket_new(conn) : NULL;
    struct timeval tv = {2, 0};
    bool is_ok = false;

    if (sock != NULL && amqp_socket_open_noblock(sock, "127.0.0.1", (int)port, &tv) == 0) {
        amqp_rpc_reply_t reply;

        amqp_set_handshake_timeout(conn, &tv);
        amqp_set_rpc_timeout(conn, &tv);
        reply = amqp_login(conn, "/", 0, 131072, 0, AMQP_SASL_METHOD_PLAIN, "guest", "guest");
        if (reply.reply_type == AMQP_RESPONSE_NORMAL) {
            is_ok = true;
            amqp_connection_close(conn, AMQP_REPLY_SUCCESS);
        }
    }
    if (conn != NULL) {
        amqp_destroy_connection(conn);
    }
    return is_ok;
}

/* Does a TCP connection to 127.0.0.1:port succeed (epmd listening)? */
static bool
tcp_ping(unsigned port)
{
    amqp_connection_state_t conn = amqp_new_connection();
    amqp_socket_t *sock = conn != NULL ? amqp_tcp_socket_new(conn) : NULL;
    struct timeval tv = {1, 0};
    bool is_ok = sock != NULL && amqp_socket_open_noblock(sock, "127.0.0.1", (int)port, &tv) == 0;

    if (conn != NULL) {
        amqp_destroy_connection(conn);
    }
    return is_ok;
}

static void
stop_epmd(struct weft_test_amqp *amqp)
{
    if (amqp->epmd > 0) {
        kill(amqp->epmd, SIGKILL);
        waitpid(amqp->epmd, NULL, 0);
        amqp->epmd = -1;
    }
}

/* Start our epmd. @return 0, 1 when its port was taken (choose others), -1 on failure. */
static int
start_epmd(struct weft_test_amqp *amqp, char *err, size_t err_len)
{
    static const char *const candidates[] = {"/usr/bin/epmd", "/usr/lib/erlang/bin/epmd"};
    const char *epmd = NULL;
    char port[16];
    char epmd_log[PATH_LEN + 16];
    long deadline = weft_test_now_ms() + EPMD_TIMEOUT_MS;

    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (access(candidates[i], X_OK) == 0) {
            epmd = candidates[i];
            break;
        }
    }
    if (epmd == NULL) {
        set_err(err, err_len, "RabbitMQ test broker: epmd not found (erlang-base)");
        return -1;
    }
    snprintf(port, sizeof(port), "%u", amqp->epmd_port);
    snprintf(epmd_log, sizeof(epmd_log), "%s/epmd.log", amqp->dir);
    {
        const char *const argv[] = {epmd, "-port", port, "-address", "127.0.0.1", NULL};

        amqp->epmd = weft_test_spawn(argv, amqp->env, amqp->dir, epmd_log, true);
    }
    if (amqp->epmd < 0) {
        set_err(err, err_len, "RabbitMQ test broker: cannot start %s", epmd);
        return -1;
    }
    while (!tcp_ping(amqp->epmd_port)) {
        if (weft_test_has_exited(amqp->epmd, NULL)) {
            amqp->epmd = -1;
            return 1; /* most likely the port was taken since we chose it */
        }
        if (weft_test_now_ms() >= deadline) {
            stop_epmd(amqp);
            set_err(err, err_len, "RabbitMQ test broker: epmd did not listen on port %u",
                    amqp->epmd_port);
            return -1;
        }
        weft_test_sleep_ms(20);
    }
    return 0;
}

/* Arm the guard for the current server and epmd. */
static int
arm_guard(struct weft_test_amqp *amqp)
{
    char q_dir[PATH_LEN + 3];
    char script[2 * PATH_LEN];

    weft_test_guard_disarm(amqp->guard);
    amqp->guard = -1;
    if (weft_test_shell_quote(amqp->dir, q_dir, sizeof(q_dir)) == NULL) {
        return -1;
    }
    /* Plain POSIX kill: dash's builtin takes no "--". */
    snprintf(script, sizeof(script),
             "kill -9 -%ld 2>/dev/null; kill -9 %ld 2>/dev/null; sleep 1; rm -rf %s",
             (long)amqp->server, (long)amqp->epmd, q_dir);
    amqp->guard = weft_test_guard_arm(script);
    return amqp->guard >= 0 ? 0 : -1;
}

/* Start the server with the environment built and wait until guest can log in.
 * @return 0, 1 when a port was taken (the caller may choose others), -1 on failure. */
static int
start_server(struct weft_test_amqp *amqp, char *err, size_t err_len)
{
    char server[PATH_LEN + 32];
    const char *argv[] = {server, NULL};
    long deadline = weft_test_now_ms() + START_TIMEOUT_MS;
    int status = 0;

    snprintf(server, sizeof(server), "%s/rabbitmq-server", amqp->bindir);
    amqp->server = weft_test_spawn(argv, amqp->env, amqp->dir, amqp->out_log, true);
    if (amqp->server < 0) {
        set_err(err, err_len, "RabbitMQ test broker: cannot start %s", server);
        return -1;
    }
    if (arm_guard(amqp) != 0) {
        weft_test_kill_group(amqp->server, 0);
        amqp->server = -1;
        set_err(err, err_len, "RabbitMQ test broker: cannot start the guard process");
        return -1;
    }
    while (!amqp_ping(amqp->port)) {
        if (weft_test_has_exited(amqp->server, &status)) {
            bool is_taken = weft_test_file_contains(amqp->out_log, "eaddrinuse") ||
                            weft_test_file_contains(amqp->log, "eaddrinuse");
            char what[96];

            kill(-amqp->server, SIGKILL);
            amqp->server = -1;
            snprintf(what, sizeof(what), "rabbitmq-server exited with status %d%s", status,
                     is_taken ? " (a port was taken)" : "");
            set_log_err(amqp, err, err_len, what);
            return is_taken ? 1 : -1;
        }
        if (weft_test_now_ms() >= deadline) {
            weft_test_kill_group(amqp->server, 5000);
            amqp->server = -1;
            set_log_err(amqp, err, err_len, "no AMQP login as guest within 60 s");
            return -1;
        }
        weft_test_sleep_ms(100);
    }
    return 0;
}

/* Stop the server: rabbitmqctl stop, then wait for the script to exit; kill the group when
 * that fails. @return 0 when it stopped by itself. */
static int
stop_server(struct weft_test_amqp *amqp)
{
    static const char *const stop[] = {"stop", NULL};
    int rc = 0;

    if (amqp->server <= 0) {
        return 0;
    }
    if (weft_test_amqp_ctl(amqp, stop, NULL) != 0) {
        rc = -1;
        kill(amqp->server, SIGTERM); /* the script stops the VM gracefully on SIGTERM too */
    }
    if (weft_test_wait(amqp->server, STOP_TIMEOUT_MS) < 0) {
        rc = -1;
        weft_test_kill_group(amqp->server, 1000);
    }
    kill(-amqp->server, SIGKILL); /* nothing of the group may outlive it */
    amqp->server = -1;
    return rc;
}

struct weft_test_amqp *
weft_test_amqp_start(char *err, size_t err_len)
{
    const char *bindir = getenv("WEFT_TEST_RABBITMQ_BINDIR");
    struct weft_test_amqp *amqp = calloc(1, sizeof(*amqp));
    char server[PATH_LEN + 32];
    int rc = 0;

    set_err(err, err_len, "");
    if (amqp == NULL) {
        set_err(err, err_len, "RabbitMQ test broker: out of memory");
        return NULL;
    }
    amqp->epmd = -1;
    amqp->server = -1;
    amqp->guard = -1;
    snprintf(amqp->bindir, sizeof(amqp->bindir), "%s",
             bindir != NULL && bindir[0] != '\0' ? bindir : "/usr/lib/rabbitmq/bin");
    snprintf(server, sizeof(server), "%s/rabbitmq-server", amqp->bindir);
    if (access(server, X_OK) != 0) {
        set_err(err, err_len,
                "RabbitMQ test broker: %s not found (scripts/deps.sh test installs "
                "rabbitmq-server; WEFT_TEST_RABBITMQ_BINDIR chooses another directory)",
                server);
        free(amqp);
        return NULL;
    }
    amqp->dir = weft_test_mkdtemp("weft-amqp-");
    if (amqp->dir == NULL) {
        set_err(err, err_len, "RabbitMQ test broker: cannot create a directory in $TMPDIR");
        free(amqp);
        return NULL;
    }
    if (write_layout(amqp) != 0) {
        set_err(err, err_len, "RabbitMQ test broker: cannot set up %s: %s", amqp->dir,
                strerror(errno));
        weft_test_rm_rf(amqp->dir);
        free(amqp->dir);
        free(amqp);
        return NULL;
    }
    snprintf(amqp->node, sizeof(amqp->node), "weft-test-%ld-%u@localhost", (long)getpid(),
             ++node_counter);
    snprintf(amqp->log, sizeof(amqp->log), "%s/log/%s.log", amqp->dir, amqp->node);
    snprintf(amqp->out_log, sizeof(amqp->out_log), "%s/server.out", amqp->dir);
    snprintf(amqp->ctl_log, sizeof(amqp->ctl_log), "%s/ctl.log", amqp->dir);
    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
        amqp->port = weft_test_free_port();
        amqp->dist_port = weft_test_free_port();
        amqp->epmd_port = weft_test_free_port();
        if (amqp->port == 0 || amqp->dist_port == 0 || amqp->epmd_port == 0 ||
            amqp->port == amqp->dist_port || amqp->port == amqp->epmd_port ||
            amqp->dist_port == amqp->epmd_port) {
            rc = 1;
            set_err(err, err_len, "RabbitMQ test broker: no three free ports on 127.0.0.1");
            continue;
        }
        snprintf(amqp->url, sizeof(amqp->url), "amqp://guest:guest@127.0.0.1:%u/", amqp->port);
        build_env(amqp);
        rc = start_epmd(amqp, err, err_len);
        if (rc == 0) {
            rc = start_server(amqp, err, err_len);
        }
        if (rc != 1) {
            break;
        }
        stop_epmd(amqp);
    }
    if (rc != 0) {
        /* Keep the logs the error names; drop the data. */
        char path[PATH_LEN + 16];

        stop_epmd(amqp);
        weft_test_guard_disarm(amqp->guard);
        snprintf(path, sizeof(path), "%s/mnesia", amqp->dir);
        weft_test_rm_rf(path);
        free(amqp->dir);
        free(amqp);
        return NULL;
    }
    return amqp;
}

const char *
weft_test_amqp_url(const struct weft_test_amqp *amqp)
{
    return amqp->url;
}

unsigned
weft_test_amqp_port(const struct weft_test_amqp *amqp)
{
    return amqp->port;
}

const char *
weft_test_amqp_node(const struct weft_test_amqp *amqp)
{
    return amqp->node;
}

const char *
weft_test_amqp_dir(const struct weft_test_amqp *amqp)
{
    return amqp->dir;
}

const char *
weft_test_amqp_log(const struct weft_test_amqp *amqp)
{
    return amqp->log;
}

int
weft_test_amqp_pause(struct weft_test_amqp *amqp, bool is_paused)
{
    if (amqp->server <= 0) {
        return -1;
    }
    return kill(-amqp->server, is_paused ? SIGSTOP : SIGCONT) == 0 ? 0 : -1;
}

int
weft_test_amqp_restart(struct weft_test_amqp *amqp, char *err, size_t err_len)
{
    set_err(err, err_len, "");
    if (stop_server(amqp) != 0) {
        set_log_err(amqp, err, err_len, "the broker did not stop by itself");
        return -1;
    }
    /* Same ports: a port taken meanwhile is a failure here, not a reason to move. */
    return start_server(amqp, err, err_len) == 0 ? 0 : -1;
}

int
weft_test_amqp_ctl(struct weft_test_amqp *amqp, const char *const *args, char **out)
{
    char ctl[PATH_LEN + 32];
    char out_path[PATH_LEN + 16];
    const char *argv[32];
    size_t n = 0;
    int status = 0;

    if (out != NULL) {
        *out = NULL;
    }
    snprintf(ctl, sizeof(ctl), "%s/rabbitmqctl", amqp->bindir);
    snprintf(out_path, sizeof(out_path), "%s/ctl.out", amqp->dir);
    argv[n++] = ctl;
    argv[n++] = "-n";
    argv[n++] = amqp->node;
    for (size_t i = 0; args[i] != NULL && n < 31; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    unlink(out_path);
    status = weft_test_run(argv, amqp->env, amqp->dir, out != NULL ? out_path : amqp->ctl_log,
                           CTL_TIMEOUT_MS);
    if (out != NULL) {
        *out = weft_test_log_tail(out_path, 1 << 20);
    }
    return status;
}

int
weft_test_amqp_stop(struct weft_test_amqp *amqp)
{
    int rc = 0;

    if (amqp == NULL) {
        return 0;
    }
    rc = stop_server(amqp);
    stop_epmd(amqp);
    if (weft_test_rm_rf(amqp->dir) != 0) {
        rc = -1;
    }
    weft_test_guard_disarm(amqp->guard);
    free(amqp->dir);
    free(amqp);
    return rc;
}
