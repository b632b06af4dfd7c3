/* cli/serve_cmd.c - `weft serve`: a long-running metrics endpoint over the state store.
 *
 * Each scrape of /metrics builds a fresh meter from the state database (every family listed,
 * at zero before the first run; each run's persisted metrics summed per name and labels, see
 * weft_runtime_metrics_from_store()), adds what the broker says about the queues when a broker
 * URL is given (runtime/dist/broker_probe.h), and renders it; /healthz answers while the
 * process lives. The
 * server binds to loopback unless told otherwise. SIGINT and SIGTERM stop it cleanly: they are
 * blocked in every thread and taken with sigwait(), so no handler runs inside libmicrohttpd.
 */
#include "cli.h"
#include "runtime/dist/broker_probe.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <weft/weft.h>

#define DEFAULT_ADDR "127.0.0.1:9464"

void
cli_serve_usage(FILE *out)
{
    fputs("usage: weft serve [--addr HOST:PORT] [--state PATH] [--broker URL]\n"
          "                  [--queue-prefix P]\n"
          "\n"
          "Serve Prometheus /metrics aggregated across the runs in the state database (every\n"
          "metric a run records, with its span counts per exporter), and /healthz, until\n"
          "interrupted (SIGINT or SIGTERM). Bind to loopback unless a scraper must reach it\n"
          "from elsewhere (a pod IP, another container).\n"
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
          "      --broker URL      amqp://user:pass@host:5672/vhost ($WEFT_BROKER_URL; none:\n"
          "                        no broker series)\n"
          "      --queue-prefix P  prefix of the exchange and queue names ($WEFT_QUEUE_PREFIX)\n"
          "\n"
          "exit status: 0 stopped by a signal, 1 cannot listen, 2 bad usage\n",
          out);
}

/* What a scrape reads: the state store, and the broker when there is one. */
struct source {
    const char *state_path;
    struct weft__broker_probe *probe; /* NULL: no broker */
};

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
    if (err == WEFT_OK) {
        err = weft_prometheus_render(meter, out, len);
    } else {
        fprintf(stderr, "weft serve: cannot read the state database: %s\n", weft_strerror(err));
    }
    weft_meter_free(meter);
    return err;
}

int
cli_serve(int argc, char **argv)
{
    const char *addr = DEFAULT_ADDR;
    const char *state = NULL;
    const char *broker = NULL;
    const char *prefix = NULL;
    const struct cli_option options[] = {
        {"addr", 0, true, false, &addr, NULL},
        {"state", 0, true, false, &state, NULL},
        {"broker", 0, true, false, &broker, NULL},
        {"queue-prefix", 0, true, false, &prefix, NULL},
    };
    struct source src = {NULL, NULL};
    struct weft_metrics_server *server = NULL;
    sigset_t stop;
    size_t npos = 0;
    int sig = 0;
    weft_err err = WEFT_OK;
    int rc = cli_parse("serve", argc, argv, options, sizeof(options) / sizeof(options[0]), NULL, 0,
                       &npos);

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
            return err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
        }
    }
    src.state_path = state;
    cli_recover("serve", state); /* runs killed earlier read as interrupted, not running */
    /* Block the stop signals before libmicrohttpd starts its thread, which inherits the mask. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    err = weft_metrics_server_start_source(render_store, &src, addr, &server);
    if (err != WEFT_OK) {
        fprintf(stderr, "weft serve: --addr %s: %s\n", addr,
                err == WEFT_EINVAL ? "expected HOST:PORT with an IPv4 host"
                                   : "cannot listen there (in use or not permitted?)");
        weft__broker_probe_free(src.probe);
        return err == WEFT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    if (src.probe != NULL) {
        fprintf(stderr, "weft serve: asking broker %s about its queues at each scrape\n",
                weft__broker_probe_url_safe(src.probe));
    }
    fprintf(stderr, "weft serve: listening on port %u (/metrics, /healthz); Ctrl-C stops\n",
            weft_metrics_server_port(server));
    sigwait(&stop, &sig);
    fprintf(stderr, "weft serve: stopping (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    weft_metrics_server_stop(server); /* no scrape runs after this: the probe can go */
    weft__broker_probe_free(src.probe);
    return CLI_EXIT_OK;
}
