/* runtime/dist/broker_probe.c - `weft serve` asks the broker about its queues at each scrape
 * (broker_probe.h).
 *
 * One observer connection (broker.h: no topology, no heartbeats) under one mutex. A question
 * has a deadline, the probe's budget from when it starts; the broker cuts every wait to what
 * is left. A kept connection may have died since the last scrape (a broker restart, an idle
 * connection cut by a load balancer) without anyone noticing: when a question on it fails, the
 * probe connects once more within the same deadline before it reports the broker down, so a
 * restart between two scrapes does not read as an outage.
 */
#include "runtime/dist/broker_probe.h"

#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "runtime/dist/broker.h"
#include "runtime/observe/dist_telemetry.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define SHARE_NS 1000000000ull /* scrapes closer than this share one answer */

struct weft__broker_probe {
    pthread_mutex_t lock;
    struct weft__broker *broker;
    unsigned budget_ms;
    uint64_t asked_ns; /* monotonic end of the last question; 0: never asked */
    struct weft__dist_queues last;
    bool is_down_logged; /* the broker stopped answering and a warning said so */
};

weft_err
weft__broker_probe_new(const struct weft__broker_probe_config *cfg,
                       struct weft__broker_probe **out,
                       char *err,
                       size_t err_len)
{
    struct weft__broker_config bc;
    struct weft__broker_probe *p = NULL;
    weft_err e = WEFT_OK;

    if (out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (cfg == NULL || err == NULL || err_len == 0) {
        return WEFT_EINVAL;
    }
    p = weft__calloc(1, sizeof(*p));
    if (p == NULL) {
        return WEFT_ENOMEM;
    }
    memset(&bc, 0, sizeof(bc));
    bc.url = cfg->url;
    bc.prefix = cfg->prefix;
    bc.name = "weft serve";
    bc.is_observer = true;
    p->budget_ms = cfg->budget_ms != 0 ? cfg->budget_ms : WEFT__BROKER_PROBE_BUDGET_MS;
    bc.timeout_ms = p->budget_ms;
    e = weft__broker_new(&bc, &p->broker, err, err_len);
    if (e != WEFT_OK) {
        weft__free(p);
        return e;
    }
    pthread_mutex_init(&p->lock, NULL);
    *out = p;
    return WEFT_OK;
}

void
weft__broker_probe_free(struct weft__broker_probe *p)
{
    if (p == NULL) {
        return;
    }
    weft__broker_free(p->broker);
    pthread_mutex_destroy(&p->lock);
    weft__free(p);
}

const char *
weft__broker_probe_url_safe(const struct weft__broker_probe *p)
{
    return weft__broker_url_safe(p->broker);
}

/* One question, on the kept connection or a new one. @return true when the broker answered. */
static bool
ask(struct weft__broker_probe *p, struct weft__dist_queues *q, char *why, size_t why_len)
{
    why[0] = '\0';
    for (int tries = 0; tries < 2; tries++) {
        bool was_connected = weft__broker_is_connected(p->broker);
        weft_err err = WEFT_OK;

        if (!was_connected) {
            err = weft__broker_connect(p->broker, why, why_len);
        }
        if (err != WEFT_OK) {
            return false;
        }
        err = weft__dist_queues_ask(p->broker, q);
        if (err == WEFT_OK) {
            return true;
        }
        snprintf(why, why_len, "broker %s: no answer about its queues",
                 weft__broker_url_safe(p->broker));
        if (!was_connected) {
            return false; /* a fresh connection failed: no second try */
        }
    }
    return false;
}

weft_err
weft__broker_probe_observe(struct weft__broker_probe *p, struct weft_meter *meter)
{
    struct weft__dist_metrics m;
    struct weft__dist_queues q;
    uint64_t now = 0;

    if (p == NULL || meter == NULL) {
        return WEFT_EINVAL;
    }
    pthread_mutex_lock(&p->lock);
    now = weft__monotonic_ns();
    if (p->asked_ns != 0 && now - p->asked_ns < SHARE_NS) {
        q = p->last; /* a scrape that waited for this lock gets the answer just taken */
    } else {
        char why[512];
        weft__broker_set_deadline(p->broker, now + (uint64_t)p->budget_ms * 1000000u);
        if (!ask(p, &q, why, sizeof(why))) {
            memset(&q, 0, sizeof(q));
            if (!p->is_down_logged) {
                WEFT_LOG(WEFT_LOG_WARN, "%s; weft_broker_up is 0 until it answers", why);
                p->is_down_logged = true;
            }
        } else if (p->is_down_logged) {
            WEFT_LOG(WEFT_LOG_INFO, "broker %s: answering again", weft__broker_url_safe(p->broker));
            p->is_down_logged = false;
        }
        weft__broker_set_deadline(p->broker, 0);
        p->last = q;
        p->asked_ns = weft__monotonic_ns();
    }
    pthread_mutex_unlock(&p->lock);
    weft__dist_metrics_init(&m, meter, WEFT__DIST_BROKER);
    weft__dist_metrics_record_queues(&m, &q);
    weft__dist_metrics_cleanup(&m);
    return q.is_up ? WEFT_OK : WEFT_EIO;
}

weft_err
weft__dist_queues_ask(struct weft__broker *broker, struct weft__dist_queues *out)
{
    const struct weft__broker_names *names = weft__broker_names(broker);
    const char *queues[3] = {names->dispatch, names->results, names->dead};

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < 3; i++) {
        uint64_t messages = 0;
        uint64_t consumers = 0;
        weft_err err = weft__broker_queue_stats(broker, queues[i], &messages, &consumers);

        if (err == WEFT_ENOTFOUND) {
            continue; /* not declared yet: empty, nobody consumes it */
        }
        if (err != WEFT_OK) {
            memset(out, 0, sizeof(*out));
            return WEFT_EIO;
        }
        out->depth[i] = messages;
        if (i == 0) {
            out->consumers = consumers;
        }
    }
    out->is_up = true;
    return WEFT_OK;
}

void
weft__dist_metrics_queues(struct weft__dist_metrics *m, struct weft__broker *broker)
{
    struct weft__dist_queues q;

    if (m->depth == NULL) {
        return;
    }
    (void)weft__dist_queues_ask(broker, &q);
    weft__dist_metrics_record_queues(m, &q);
}
