/* cli/serve_cmd.c - `weft serve`: the trace explorer (web UI and /api/v1, serve/), an
 * OTLP/HTTP trace receiver (POST /v1/traces into the span store, exporters/ingest.h; on unless
 * --no-ingest) and a long-running metrics endpoint over the state store, on one port.
 *
 * Each scrape of /metrics builds a fresh meter from the state database (every family listed,
 * at zero before the first run; each run's persisted metrics summed per name and labels, see
 * weft_runtime_metrics_from_store()), adds what the broker says about the queues when a broker
 * URL is given (runtime/dist/broker_probe.h), and renders it; /healthz answers while the
 * process lives. The
 * server binds to loopback unless told otherwise. SIGINT and SIGTERM stop it cleanly: they are
 * blocked in every thread and taken with sigwait(), so no handler runs inside libmicrohttpd.
 */
#include "base/env.h"
#include "cli.h"
#include "exporters/ingest.h"
#include "runtime/dist/broker_probe.h"
#include "serve/http.h"
#include "store/store.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <weft/weft.h>

#define DEFAULT_ADDR "127.0.0.1:9464"

void
cli_serve_usage(FILE *out)
{
    fputs("usage: weft serve [--addr HOST:PORT] [--state PATH] [--store PATH] [--token-file PATH]\n"
          "                  [--token T] [--allow-host NAME]... [--max-body BYTES] [--no-ingest]\n"
          "                  [--retention AGE] [--max-store-size SIZE]\n"
          "                  [--sampling RULES] [--sampling-wait DURATION]\n"
          "                  [--broker URL] [--queue-prefix P]\n"
          "\n"
          "Serve the trace explorer at / (runs, plans, span waterfalls, why a run failed,\n"
          "compare two runs, collaboration metrics; docs/explorer.md) and its JSON API at\n"
          "/api/v1/, Prometheus /metrics aggregated across the runs in the state database\n"
          "(every metric a run records, with its span counts per exporter), and /healthz,\n"
          "until interrupted (SIGINT or SIGTERM). Binds to loopback. The explorer shows prompts\n"
          "and outputs: on another address it is off unless a token is given (a browser then\n"
          "opens /?token=T once, a script sends Authorization: Bearer T); /metrics and\n"
          "/healthz stay open for scrapers. On loopback, the explorer, its API and ingest\n"
          "answer only to the Host names localhost, 127.x.y.z and [::1] (and --allow-host\n"
          "names), else 421, so that no web page can read them through DNS rebinding;\n"
          "refusals are counted as weft_serve_access_denied_total{reason} (docs/serve.md).\n"
          "\n"
          "OTLP/HTTP trace ingest (on unless --no-ingest; like the explorer, it needs the token\n"
          "beyond loopback): POST /v1/traces takes an ExportTraceServiceRequest\n"
          "(application/x-protobuf or application/json, gzip or not) from any OpenTelemetry\n"
          "SDK or collector and writes its spans into the span store, where the explorer and\n"
          "`weft trace show` find them; counted on /metrics as weft_ingest_spans_total{outcome}\n"
          "and weft_ingest_requests_total{status} (docs/serve.md).\n"
          "\n"
          "With a broker (distributed runs), each scrape also asks RabbitMQ for\n"
          "weft_broker_queue_depth{queue=dispatch|results|dead_letter}, weft_workers_live\n"
          "(consumers of the dispatch queue) and weft_broker_up (1 when it answered, 0 when\n"
          "not); a scrape waits at most 2 s for the broker.\n"
          "\n"
          "options:\n"
          "      --addr HOST:PORT  listen address (default " DEFAULT_ADDR
          "; IPv4; port 0 picks one)\n"
          "      --state PATH      state: a SQLite file or a postgresql:// URL (default\n"
          "                        $WEFT_STATE_URL, else $WEFT_HOME/state.db)\n"
          "      --store PATH|URL  span store the explorer reads and ingest writes: a SQLite\n"
          "                        file or postgresql://... (default WEFT_TRACE_STORE_URL, a\n"
          "                        PostgreSQL WEFT_STATE_URL, $WEFT_HOME/weft.db, else\n"
          "                        ./.weft/weft.db; --db too)\n"
          "      --retention AGE   delete traces that ended longer ago than AGE (14d, 12h,\n"
          "                        30m) at start and hourly; WEFT_RETENTION too\n"
          "      --max-store-size SIZE  SQLite: delete the oldest traces past SIZE (2GiB,\n"
          "                        512M); WEFT_MAX_STORE_SIZE too\n"
          "      --max-body BYTES  cap on an ingest body, compressed and decompressed (default\n"
          "                        16M; suffixes K, M, G); larger bodies get 413\n"
          "      --no-ingest       no /v1/traces route\n",
          out);
    fputs("      --sampling RULES  tail sampling at ingest: spans wait per trace; a decision a\n"
          "                        weft run put on its root is followed, other traces are kept\n"
          "                        when a rule matches (\"failed,stuck,5%\"; WEFT_SAMPLING too;\n"
          "                        docs/sampling.md)\n"
          "      --sampling-wait D how long after a trace's root late spans are waited for\n"
          "                        (default 5s; WEFT_SAMPLING_WAIT too)\n"
          "      --token-file PATH require the token in PATH (one line; mode 0600 or 0400,\n"
          "                        else refused) for the explorer, its API and ingest\n"
          "      --token T         the same with T itself, which `ps` shows to every local\n"
          "                        user: prefer --token-file or $WEFT_SERVE_TOKEN (used when\n"
          "                        neither is given). A token is letters, digits and -._~\n"
          "                        only, at least 16\n"
          "      --allow-host NAME on loopback, also answer to Host NAME (any port; a name\n"
          "                        you gave 127.0.0.1 in /etc/hosts, a proxy's); repeatable\n"
          "      --broker URL      amqp://user:pass@host:5672/vhost ($WEFT_BROKER_URL; none:\n"
          "                        no broker series)\n"
          "      --queue-prefix P  prefix of the exchange and queue names ($WEFT_QUEUE_PREFIX)\n"
          "\n"
          "exit status: 0 stopped by a signal, 1 cannot listen or open the span store,\n"
          "2 bad usage\n",
          out);
}

/* What a scrape reads: the state store, and the broker when there is one. */
struct source {
    const char *state_path;
    struct weft__broker_probe *probe;        /* NULL: no broker */
    struct weft__ingest *ingest;             /* NULL: --no-ingest */
    struct weft__store_retention *retention; /* NULL: no --retention nor --max-store-size */
    struct weft_store_pool *pool;            /* the API's span store handles */
    /* The server's refusal counters; set once it has started (a scrape may come first). */
    _Atomic(const struct weft__serve *) serve;
};

/* The API's span store pool: weft.store.read_handles{event=opened|reused|discarded}
 * (Prometheus weft_store_read_handles_total) and the idle ones. */
static weft_err
observe_pool(struct weft_store_pool *pool, struct weft_meter *meter)
{
    struct weft_store_pool_stats st;
    struct weft_instrument *events = NULL;
    struct weft_instrument *idle = NULL;
    struct weft_attr attr;
    weft_err err = WEFT_OK;

    if (pool == NULL) {
        return WEFT_OK;
    }
    weft_store_pool_stats(pool, &st);
    err =
        weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.store.read_handles", "{handle}",
                              "Span store handles of the explorer API: opened (a PostgreSQL"
                              " connection each), reused from the pool, discarded (lost)",
                              NULL, 0, &events);
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.store.read_handles_idle",
                                    "{handle}", "Span store handles kept open while idle", NULL, 0,
                                    &idle);
    }
    if (err != WEFT_OK) {
        return err;
    }
    attr = weft_attr_str("event", "opened");
    (void)weft_counter_add(events, (double)st.opened, &attr, 1);
    attr = weft_attr_str("event", "reused");
    (void)weft_counter_add(events, (double)st.reused, &attr, 1);
    attr = weft_attr_str("event", "discarded");
    (void)weft_counter_add(events, (double)st.discarded, &attr, 1);
    (void)weft_gauge_set(idle, (double)st.idle, NULL, 0);
    return WEFT_OK;
}

static weft_err
render_store(void *user_data, char **out, size_t *len)
{
    const struct source *src = user_data;
    struct weft_meter *meter = NULL;
    weft_err err = weft_meter_new(NULL, &meter);

    if (err == WEFT_OK) {
        err = weft_runtime_metrics_from_store(meter, src->state_path);
    }
    if (err == WEFT_OK && src->probe != NULL) {
        (void)weft__broker_probe_observe(src->probe, meter); /* down: weft_broker_up 0 */
    }
    if (err == WEFT_OK && src->ingest != NULL) {
        err = weft__ingest_observe(src->ingest, meter);
    }
    if (err == WEFT_OK) {
        err = weft__store_retention_observe(src->retention, meter);
    }
    if (err == WEFT_OK) {
        err = observe_pool(src->pool, meter);
    }
    if (err == WEFT_OK) {
        err = weft__serve_observe(atomic_load(&src->serve), meter);
    }
    if (err == WEFT_OK) {
        err = weft_prometheus_render(meter, out, len);
    } else {
        fprintf(stderr, "weft serve: cannot read the state database: %s\n", weft_strerror(err));
    }
    weft_meter_free(meter);
    return err;
}

/* Open the span store for ingest (unless --no-ingest). @return CLI_EXIT_OK or an exit code. */
static int
open_ingest(const char *db,
            const char *max_body_text,
            const char *sampling,
            const char *sampling_wait,
            bool is_off,
            struct weft__ingest **out)
{
    struct weft__ingest_options io = {db, 0, NULL, 0};
    struct weft_sampling_policy *policy = NULL;
    uint64_t max_body = 0;
    uint64_t wait_ns = 0;
    char why[256] = "";
    weft_err err = WEFT_OK;

    *out = NULL;
    sampling = sampling != NULL ? sampling : getenv("WEFT_SAMPLING");
    sampling_wait = sampling_wait != NULL ? sampling_wait : getenv("WEFT_SAMPLING_WAIT");
    if (sampling != NULL &&
        weft_sampling_policy_parse(sampling, &policy, why, sizeof(why)) == WEFT_EPARSE) {
        fprintf(stderr, "weft serve: --sampling: %s\n", why);
        return CLI_EXIT_USAGE;
    }
    weft_sampling_policy_free(policy); /* checked here; the ingest parses its own copy */
    if (sampling_wait != NULL && sampling_wait[0] != '\0' &&
        (!cli_parse_duration(sampling_wait, &wait_ns) || wait_ns / 1000000u == 0 ||
         wait_ns / 1000000u > 3600000u)) {
        fprintf(stderr,
                "weft serve: --sampling-wait %s: expected a duration from 1s to 1h "
                "(5s, 2m)\n",
                sampling_wait);
        return CLI_EXIT_USAGE;
    }
    io.sampling = sampling;
    io.sampling_wait_ms = (uint32_t)(wait_ns / 1000000u);
    if (max_body_text != NULL &&
        (!cli_parse_bytes(max_body_text, &max_body) || max_body > (SIZE_MAX / 64))) {
        fprintf(stderr, "weft serve: --max-body %s: expected a positive size such as 16M\n",
                max_body_text);
        return CLI_EXIT_USAGE;
    }
    io.max_body = (size_t)max_body;
    if (is_off) {
        return CLI_EXIT_OK;
    }
    err = weft__ingest_new(&io, out);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft serve: cannot open the span store for ingest: %s\n",
                weft_strerror(err));
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

/* Retention's hook: the runs follow their traces out (unless pinned or running), with their
 * workspaces (docs/retention.md). */
static weft_err
runs_follow(void *data, uint64_t cutoff_ns, char *error, size_t error_len)
{
    const char *state = data;
    struct weft_runs_gc_report r;
    weft_err err = weft_runs_gc(state, cutoff_ns, false, &r);

    if (err == WEFT_ENOTFOUND) {
        return WEFT_OK; /* no state database yet */
    }
    if (err != WEFT_OK) {
        snprintf(error, error_len, "runs older than the retention: %s", weft_strerror(err));
    } else if (r.runs_deleted > 0) {
        fprintf(stderr, "weft serve: retention: %zu run(s) deleted with their workspaces\n",
                r.runs_deleted);
    }
    return err;
}

/* --retention and --max-store-size (or WEFT_RETENTION, WEFT_MAX_STORE_SIZE; the pass interval
 * WEFT_RETENTION_INTERVAL, default 1h) into @p cfg. @return CLI_EXIT_OK or CLI_EXIT_USAGE
 * (printed). */
static int
retention_config(const char *age, const char *size, struct weft__store_retention_config *cfg)
{
    const char *interval = getenv("WEFT_RETENTION_INTERVAL");
    uint64_t ns = 0;

    memset(cfg, 0, sizeof(*cfg));
    age = age != NULL ? age : getenv("WEFT_RETENTION");
    size = size != NULL ? size : getenv("WEFT_MAX_STORE_SIZE");
    if (age != NULL && age[0] != '\0' && !cli_parse_duration(age, &cfg->max_age_ns)) {
        fprintf(stderr, "weft serve: retention '%s': expected a duration such as 14d, 12h, 30m\n",
                age);
        return CLI_EXIT_USAGE;
    }
    if (size != NULL && size[0] != '\0' && !cli_parse_bytes(size, &cfg->max_bytes)) {
        fprintf(stderr, "weft serve: max store size '%s': expected a size such as 2GiB or 512M\n",
                size);
        return CLI_EXIT_USAGE;
    }
    if (interval != NULL && interval[0] != '\0') {
        if (!cli_parse_duration(interval, &ns)) {
            fprintf(stderr, "weft serve: WEFT_RETENTION_INTERVAL '%s': expected a duration\n",
                    interval);
            return CLI_EXIT_USAGE;
        }
        cfg->interval_ms = ns / 1000000u;
    }
    return CLI_EXIT_OK;
}

/* The host part of HOST:PORT (a static copy). */
static const char *
host_of(const char *addr)
{
    static char host[64];
    const char *colon = strrchr(addr, ':');
    size_t len = colon != NULL ? (size_t)(colon - addr) : strlen(addr);

    snprintf(host, sizeof(host), "%.*s", (int)(len < sizeof(host) ? len : sizeof(host) - 1), addr);
    return host[0] != '\0' ? host : "127.0.0.1";
}

/* A token must be one a cookie carries as it is. @p from says where it came from. */
static int
check_access(const char *token, const char *from)
{
    if (token != NULL && token[0] != '\0' &&
        (strlen(token) < 16 || strspn(token, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                             "0123456789-._~") != strlen(token))) {
        fprintf(stderr, "weft serve: %s: expected a token of at least 16 letters, digits or -._~\n",
                from);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The token from --token, --token-file or $WEFT_SERVE_TOKEN (in that order; the first two
 * exclude each other) into *token (NULL: none), *owned the copy to free when it was read from
 * a file. @return CLI_EXIT_OK or an exit code (printed). */
static int
find_token(const char *given, const char *file, const char **token, char **owned)
{
    const char *from = "--token";
    int rc = CLI_EXIT_OK;

    *token = given;
    *owned = NULL;
    if (given != NULL && file != NULL) {
        fprintf(stderr, "weft serve: --token and --token-file exclude each other\n");
        return CLI_EXIT_USAGE;
    }
    if (file != NULL) {
        rc = cli_read_token_file("serve", file, owned);
        if (rc != CLI_EXIT_OK) {
            return rc;
        }
        *token = *owned;
        from = "--token-file";
    } else if (given == NULL) {
        *token = getenv("WEFT_SERVE_TOKEN");
        from = "WEFT_SERVE_TOKEN";
    } else {
        fprintf(stderr, "weft serve: note: --token shows in `ps` to every user of this machine; "
                        "--token-file PATH or WEFT_SERVE_TOKEN keep it out of sight\n");
    }
    rc = check_access(*token, from);
    if (rc != CLI_EXIT_OK) {
        cli_token_free(*owned);
        *owned = NULL;
    }
    return rc;
}

/* What --addr leaves exposed or unguarded, on stderr. */
static void
note_exposure(const char *addr, bool is_explorer_off, size_t allow_host_count)
{
    if (is_explorer_off) {
        fprintf(stderr,
                "weft serve: --addr %s is not loopback and no token was given: the "
                "explorer is off (/metrics and /healthz are served)\n",
                addr);
    }
    if (allow_host_count > 0 && strncmp(host_of(addr), "127.", 4) != 0) {
        fprintf(stderr,
                "weft serve: note: --allow-host matters on loopback only; on --addr %s "
                "the token guards the explorer and ingest\n",
                addr);
    }
}

/* This weft binary's path (POST /api/v1/runs/ID/fork runs `weft fork` with it), or NULL when
 * it cannot be read (the route then answers 403 as without a token). */
static const char *
self_exe(char *out, size_t len)
{
    ssize_t n = readlink("/proc/self/exe", out, len - 1);

    if (n <= 0 || (size_t)n >= len - 1) {
        return NULL;
    }
    out[n] = '\0';
    return out;
}

int
cli_serve(int argc, char **argv)
{
    const char *addr = DEFAULT_ADDR;
    const char *state = NULL;
    const char *broker = NULL;
    const char *prefix = NULL;
    const char *store = NULL;
    const char *db = NULL;
    const char *token = NULL;
    const char *token_file = NULL;
    char *file_token = NULL; /* read from --token-file */
    const char *allow_hosts[CLI_MAX_ALLOW_HOSTS];
    size_t allow_host_count = 0;
    const char *max_body = NULL;
    const char *sampling = NULL;
    const char *sampling_wait = NULL;
    const char *retention = NULL;
    const char *max_store = NULL;
    struct weft__store_retention_config rc_cfg;
    bool is_ingest_off = false;
    uint64_t pool_size = 0;
    const struct cli_option options[] = {
        {"addr", 0, true, false, &addr, NULL},
        {"state", 0, true, false, &state, NULL},
        {"broker", 0, true, false, &broker, NULL},
        {"queue-prefix", 0, true, false, &prefix, NULL},
        {"store", 0, true, false, &store, NULL},
        {"db", 0, true, false, &db, NULL},
        {"token", 0, true, false, &token, NULL},
        {"token-file", 0, true, false, &token_file, NULL},
        {"max-body", 0, true, false, &max_body, NULL},
        {"sampling", 0, true, false, &sampling, NULL},
        {"sampling-wait", 0, true, false, &sampling_wait, NULL},
        {"retention", 0, true, false, &retention, NULL},
        {"max-store-size", 0, true, false, &max_store, NULL},
        {"no-ingest", 0, false, false, NULL, &is_ingest_off},
    };
    struct source src = {NULL, NULL, NULL, NULL, NULL, NULL};
    struct weft__serve *server = NULL;
    struct weft__serve_config sc;
    char exe[4096];
    sigset_t stop;
    size_t npos = 0;
    int sig = 0;
    weft_err err = WEFT_OK;
    int rc = cli_take_allow_hosts("serve", &argc, argv, allow_hosts, &allow_host_count);

    if (rc == CLI_EXIT_OK) {
        rc = cli_parse("serve", argc, argv, options, sizeof(options) / sizeof(options[0]), NULL, 0,
                       &npos);
    }
    if (rc == CLI_EXIT_OK) {
        rc = retention_config(retention, max_store, &rc_cfg);
    }
    if (rc == CLI_EXIT_OK) {
        rc = find_token(token, token_file, &token, &file_token);
    }
    if (rc != CLI_EXIT_OK) {
        return rc;
    }
    if (broker == NULL) {
        broker = getenv("WEFT_BROKER_URL");
    }
    if (broker != NULL && broker[0] != '\0') {
        struct weft__broker_probe_config pc = {broker, prefix, 0};
        char why[512] = "";
        err = weft__broker_probe_new(&pc, &src.probe, why, sizeof(why));
        if (err != WEFT_OK) {
            fprintf(stderr, "weft serve: %s\n", why[0] != '\0' ? why : weft_strerror(err));
            cli_token_free(file_token);
            return err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
        }
    }
    store = store != NULL ? store : db;
    rc = open_ingest(store, max_body, sampling, sampling_wait, is_ingest_off, &src.ingest);
    if (rc != CLI_EXIT_OK) {
        weft__broker_probe_free(src.probe);
        cli_token_free(file_token);
        return rc;
    }
    /* WEFT_STORE_POOL_SIZE: idle span store handles the API keeps (0: it opens the store for
     * each request, as before the pool). */
    pool_size = weft__env_u64("WEFT_STORE_POOL_SIZE", WEFT_STORE_POOL_DEFAULT_IDLE, 0, 64);
    if (pool_size > 0 && weft_store_pool_new(store, (size_t)pool_size, &src.pool) != WEFT_OK) {
        fprintf(stderr, "weft serve: out of memory\n");
        weft__broker_probe_free(src.probe);
        weft__ingest_free(src.ingest);
        cli_token_free(file_token);
        return CLI_EXIT_FAIL;
    }
    src.state_path = state;
    cli_recover("serve", state); /* runs killed earlier read as interrupted, not running */
    rc_cfg.hook = runs_follow;
    rc_cfg.hook_data = (void *)(uintptr_t)state; /* NULL: the default state */
    if (weft__store_retention_start(store, &rc_cfg, &src.retention) != WEFT_OK) {
        fprintf(stderr, "weft serve: cannot start retention\n");
        weft_store_pool_free(src.pool);
        weft__broker_probe_free(src.probe);
        weft__ingest_free(src.ingest);
        cli_token_free(file_token);
        return CLI_EXIT_FAIL;
    }
    /* Block the stop signals before libmicrohttpd starts its thread, which inherits the mask. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    memset(&sc, 0, sizeof(sc));
    sc.addr = addr;
    sc.token = token != NULL && token[0] != '\0' ? token : NULL;
    sc.is_explorer_off = sc.token == NULL && strncmp(host_of(addr), "127.", 4) != 0;
    note_exposure(addr, sc.is_explorer_off, allow_host_count);
    sc.allow_hosts = allow_hosts;
    sc.allow_host_count = allow_host_count;
    sc.api.state_path = state;
    sc.api.store_path = store;
    sc.api.store_pool = src.pool;
    sc.metrics = render_store;
    sc.metrics_data = &src;
    sc.ingest = src.ingest;
    sc.fork_exe = self_exe(exe, sizeof(exe));
    err = weft__serve_start(&sc, &server);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft serve: --addr %s: %s\n", addr,
                err == WEFT_EINVAL ? "expected HOST:PORT with an IPv4 host"
                                   : "cannot listen there (in use or not permitted?)");
        weft__store_retention_stop(src.retention);
        weft_store_pool_free(src.pool);
        weft__broker_probe_free(src.probe);
        weft__ingest_free(src.ingest);
        cli_token_free(file_token);
        return err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    atomic_store(&src.serve, server);
    if (src.probe != NULL) {
        fprintf(stderr, "weft serve: asking broker %s about its queues at each scrape\n",
                weft__broker_probe_url_safe(src.probe));
    }
    fprintf(stderr,
            "weft serve: listening on port %u; the explorer is at http://%s:%u/ (its API at "
            "/api/v1/; /metrics, /healthz); Ctrl-C stops\n",
            weft__serve_port(server),
            strncmp(addr, "0.0.0.0", 7) == 0 || addr[0] == ':' ? "127.0.0.1" : host_of(addr),
            weft__serve_port(server));
    sigwait(&stop, &sig);
    fprintf(stderr, "weft serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    weft__serve_stop(server); /* no request runs after this: the probe and the pool can go */
    weft__store_retention_stop(src.retention);
    weft_store_pool_free(src.pool);
    weft__broker_probe_free(src.probe);
    weft__ingest_free(src.ingest);
    cli_token_free(file_token);
    return CLI_EXIT_OK;
}
