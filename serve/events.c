/* serve/events.c - the runs of the state store as Server-Sent Events (events.h).
 *
 * Each stream reads the newest runs (WEFT__EVENTS_RUNS) from the state store once a poll
 * interval and sends one "run" event per run that appeared or changed status since its last
 * read: event: run, data: {"run_id", "status", "workflow"}. Reads happen only while a client is
 * connected, at most WEFT__EVENTS_MAX_CLIENTS of them (the route's admission), each on its own
 * connection thread, so there is no thread, timer or shared cache to stop when nobody watches;
 * the cost is one small read per client per second. The stream's first read is its baseline
 * (nothing is sent for the runs already there: the client reads the runs list for those)
 * taken before the first bytes go out, so a run that starts after the client saw the stream
 * open is always reported.
 *
 * A stream blocks its connection's thread between writes (libmicrohttpd's thread per
 * connection allows it), on a condition variable that weft__serve_events_stop() signals, so
 * `weft serve` stops at once whatever the streams are doing. A client that left is seen when
 * a write fails: at the latest at the next heartbeat.
 */
#include "events.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/time.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <weft/weft.h>

#define OUT_MAX (1u << 20) /* bytes a stream holds unsent; more events wait for the next read */

struct weft__serve_events {
    const char *state_path;
    uint64_t poll_ns;
    uint64_t heartbeat_ns;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool is_stopping;
};

/* A run as a stream last saw it. */
struct seen {
    char *run_id;
    char *status;
};

struct stream {
    struct weft__serve_events *ev;
    struct weft__buf out; /* to send; out.data[sent ..] is left */
    size_t sent;
    struct seen *seen;
    size_t seen_count;
    bool has_baseline;
    bool is_failing; /* the last read of the state store failed (said once per streak) */
    uint64_t last_write_ns;
};

weft_err
weft__serve_events_new(const char *state_path,
                       uint64_t poll_ms,
                       uint64_t heartbeat_ms,
                       struct weft__serve_events **out)
{
    struct weft__serve_events *ev = weft__calloc(1, sizeof(*ev));

    *out = NULL;
    if (ev == NULL) {
        return WEFT_ENOMEM;
    }
    ev->state_path = state_path;
    ev->poll_ns = (poll_ms > 0 ? poll_ms : WEFT__EVENTS_POLL_MS) * 1000000u;
    ev->heartbeat_ns = (heartbeat_ms > 0 ? heartbeat_ms : WEFT__EVENTS_HEARTBEAT_MS) * 1000000u;
    pthread_mutex_init(&ev->lock, NULL);
    weft__cond_init_monotonic(&ev->wake);
    *out = ev;
    return WEFT_OK;
}

void
weft__serve_events_stop(struct weft__serve_events *ev)
{
    if (ev != NULL) {
        pthread_mutex_lock(&ev->lock);
        ev->is_stopping = true;
        pthread_cond_broadcast(&ev->wake);
        pthread_mutex_unlock(&ev->lock);
    }
}

void
weft__serve_events_free(struct weft__serve_events *ev)
{
    if (ev != NULL) {
        pthread_cond_destroy(&ev->wake);
        pthread_mutex_destroy(&ev->lock);
        weft__free(ev);
    }
}

static void
seen_free(struct seen *seen, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        weft__free(seen[i].run_id);
        weft__free(seen[i].status);
    }
    weft__free(seen);
}

static const struct seen *
seen_find(const struct stream *st, const char *run_id)
{
    for (size_t i = 0; i < st->seen_count; i++) {
        if (strcmp(st->seen[i].run_id, run_id) == 0) {
            return &st->seen[i];
        }
    }
    return NULL;
}

/* One "run" event for @p r onto the stream's output (dropped when the output is full). */
static void
put_event(struct stream *st, const struct weft_run_info *r)
{
    json_t *data = json_pack("{s:s, s:s?, s:s?}", "run_id", r->run_id, "status", r->status,
                             "workflow", r->workflow);
    char *text = data != NULL ? json_dumps(data, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;

    if (text != NULL) {
        (void)weft__buf_printf(&st->out, "event: run\ndata: %s\n\n", text);
    }
    free(text);
    json_decref(data);
}

/* Read the runs and queue an event for each one new or changed since the last read (none on
 * the first: the baseline). A failed read changes nothing (the next one compares with the
 * last good one) but is said: one "store_error" event when reads start failing, so a page
 * does not read silence as "nothing happens". */
static void
poll_runs(struct stream *st)
{
    struct weft_run_info *runs = NULL;
    size_t count = 0;
    struct seen *next = NULL;
    size_t n = 0;
    weft_err err = weft_runs_list(st->ev->state_path, WEFT__EVENTS_RUNS, &runs, &count);

    if (err != WEFT_OK && err != WEFT_ENOTFOUND) {
        if (!st->is_failing) {
            (void)weft__buf_printf(
                &st->out,
                "event: store_error\ndata: {\"error\":\"the state store cannot be "
                "read (%s): run events are paused until it can\"}\n\n",
                weft_strerror(err));
        }
        st->is_failing = true;
        return;
    }
    st->is_failing = false;
    next = count > 0 ? weft__calloc(count, sizeof(*next)) : NULL;
    if (count > 0 && next == NULL) {
        weft_run_infos_free(runs, count);
        return;
    }
    for (size_t i = count; i-- > 0;) { /* oldest first: events in the order runs started */
        const struct weft_run_info *r = &runs[i];
        const struct seen *was = r->run_id != NULL ? seen_find(st, r->run_id) : NULL;
        const char *status = r->status != NULL ? r->status : "";
        if (r->run_id == NULL) {
            continue;
        }
        if (st->has_baseline && (was == NULL || strcmp(was->status, status) != 0)) {
            put_event(st, r);
        }
        next[n].run_id = weft__strdup(r->run_id);
        next[n].status = weft__strdup(status);
        if (next[n].run_id == NULL || next[n].status == NULL) {
            weft__free(next[n].run_id);
            weft__free(next[n].status);
            continue; /* forgotten: reported again as new at worst */
        }
        n++;
    }
    weft_run_infos_free(runs, count);
    seen_free(st->seen, st->seen_count);
    st->seen = next;
    st->seen_count = n;
    st->has_baseline = true;
}

/* Wait one poll interval (or until the server stops). @return false when it stops. */
static bool
wait_poll(struct stream *st)
{
    struct weft__serve_events *ev = st->ev;
    uint64_t deadline = weft__monotonic_ns() + ev->poll_ns;
    bool is_stopping = false;

    pthread_mutex_lock(&ev->lock);
    while (!ev->is_stopping && weft__monotonic_ns() < deadline) {
        weft__cond_timedwait_ns(&ev->wake, &ev->lock, deadline);
    }
    is_stopping = ev->is_stopping;
    pthread_mutex_unlock(&ev->lock);
    return !is_stopping;
}

static long
stream_read(void *data, char *buf, size_t max)
{
    struct stream *st = data;
    size_t n = 0;

    while (st->sent == st->out.len) {
        weft__buf_reset(&st->out);
        st->sent = 0;
        if (!st->has_baseline) {
            poll_runs(st); /* before the first bytes: see the file's comment */
            (void)weft__buf_append_str(&st->out, "retry: 3000\n: connected\n\n");
        } else if (!wait_poll(st)) {
            return WEFT__HTTP_STREAM_END;
        } else {
            poll_runs(st);
        }
        if (st->out.len == 0 && weft__monotonic_ns() - st->last_write_ns >= st->ev->heartbeat_ns) {
            (void)weft__buf_append_str(&st->out, ": heartbeat\n\n");
        }
    }
    n = st->out.len - st->sent < max ? st->out.len - st->sent : max;
    memcpy(buf, st->out.data + st->sent, n);
    st->sent += n;
    st->last_write_ns = weft__monotonic_ns();
    return (long)n;
}

static void
stream_free(void *data)
{
    struct stream *st = data;

    weft__buf_cleanup(&st->out);
    seen_free(st->seen, st->seen_count);
    weft__free(st);
}

void
weft__serve_events_reply(struct weft__serve_events *ev, struct weft__http_reply *reply)
{
    struct stream *st = weft__calloc(1, sizeof(*st));
    char *headers = weft__strdup("Cache-Control: no-store\nX-Accel-Buffering: no");

    if (st == NULL || headers == NULL) {
        weft__free(st);
        weft__free(headers);
        reply->status = 503;
        reply->content_type = "text/plain; charset=utf-8";
        reply->body = (char *)"out of memory\n";
        reply->len = strlen(reply->body);
        return;
    }
    st->ev = ev;
    weft__buf_init(&st->out, OUT_MAX);
    st->last_write_ns = weft__monotonic_ns();
    reply->status = 200;
    reply->content_type = "text/event-stream; charset=utf-8";
    reply->headers = headers;
    reply->stream_read = stream_read;
    reply->stream_free = stream_free;
    reply->stream_data = st;
}
