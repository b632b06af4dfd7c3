/* exporters/ingest.c - OTLP/HTTP trace ingest (ingest.h): one POST /v1/traces request from
 * headers and body to an HTTP status and an OTLP response.
 *
 * The path of a request: method and Content-Type checked (405, 415); gzip inflated into a
 * buffer capped at max_body, so a gzip bomb stops at the cap (413); the body decoded into a
 * batch whose decoded form is capped too (WEFT__INGEST_DECODED_FACTOR times max_body: an empty
 * protobuf span is 2 bytes on the wire and a few hundred in memory); the accepted spans handed
 * to the store exporter's export_batch, the very code path the tracing pipeline uses, in one
 * call and so one transaction. The store exporter is single-threaded (export.h), so the write
 * holds a mutex; decoding does not. Nothing is queued: a request is answered once its spans are
 * committed, so memory is bounded by the requests admitted at once (WEFT__INGEST_MAX_ACTIVE,
 * enforced by the server) times the caps, and the decoded cap counts decoded bytes (the
 * decoders' arena and jansson trees), not wire bytes.
 *
 * Span limits: as the OTel SDK's (128 attributes, events and links per span, 128 attributes
 * per event and link, or OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and the like at start), applied as
 * spans are decoded, the excess dropped and counted in each span's dropped_*_count and in
 * weft_ingest_limited_total. A NUL byte in a span or event name becomes U+FFFD (counted).
 *
 * Counting: atomics, read by weft__ingest_observe() at each scrape. Logging: one WARN per kind
 * of refusal for the life of the process, then DEBUG, so a misconfigured client cannot flood
 * the log but the first occurrence of each problem is seen.
 */
#include "ingest.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/time.h"
#include "exporters/gzip.h"
#include "exporters/otlp_decode.h"
#include "store/decisions.h"
#include "store/store.h"
#include "tracing/exporter.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <weft/weft.h>

#define TICK_MS 200 /* how often the ticker looks for traces whose wait is over */

/* google.rpc.Code values carried in the Status of an error response. */
#define RPC_INVALID_ARGUMENT   3
#define RPC_RESOURCE_EXHAUSTED 8
#define RPC_UNIMPLEMENTED      12
#define RPC_UNAVAILABLE        14

typedef enum reason {
    REASON_METHOD,
    REASON_CONTENT_TYPE,
    REASON_ENCODING,
    REASON_TOO_LARGE,
    REASON_GZIP,
    REASON_MALFORMED,
    REASON_REJECTED_SPANS,
    REASON_STORE,
    REASON_COUNT
} reason;

struct weft__ingest {
    struct weft_exporter *store;             /* the store exporter, or the run buffer wrapping it */
    struct weft_exporter *writer;            /* the store exporter itself (borrowed when wrapped) */
    struct weft_tail *tail;                  /* tail sampling at ingest; NULL: off */
    struct weft_sampling_policy *policy;     /* the tail's policy, owned here */
    struct weft__store_decisions *decisions; /* shared with other serve processes */
    struct weft_tail_coordinator coordinator;
    pthread_t ticker; /* decides traces whose wait is over (with tail) */
    pthread_mutex_t tick_lock;
    pthread_cond_t tick_wake;
    bool is_stopping; /* guarded by tick_lock */
    pthread_mutex_t store_lock;
    size_t max_body;
    struct weft__otlp_limits limits;    /* from the environment, at new */
    atomic_uint_fast64_t limited;       /* attributes, events, links dropped by the limits */
    atomic_uint_fast64_t names_escaped; /* names whose NUL bytes became U+FFFD */
    atomic_uint_fast64_t spans_accepted;
    atomic_uint_fast64_t spans_rejected;
    atomic_uint_fast64_t spans_refused; /* in requests answered 503: the store failed */
    atomic_uint_fast64_t in_flight;     /* requests being handled now */
    atomic_uint_fast64_t store_writes;  /* batches written (or tried) */
    atomic_uint_fast64_t store_write_ns;
    atomic_uint_fast64_t requests[6]; /* by status_slot() */
    atomic_bool logged[REASON_COUNT];
};

static const unsigned statuses[6] = {200, 400, 405, 413, 415, 503};

static size_t
status_slot(unsigned status)
{
    for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
        if (statuses[i] == status) {
            return i;
        }
    }
    return 5; /* not reached: every answer is one of the above */
}

/* Is the store at @p db_path (NULL: the default) a PostgreSQL one? */
static bool
is_pg_store(const char *db_path)
{
    char location[4096];

    if (db_path == NULL) {
        return weft_store_default_path(location, sizeof(location)) == WEFT_OK &&
               weft__store_is_pg_url(location);
    }
    return weft__store_is_pg_url(db_path);
}

/* Tail sampling: decide the traces whose wait is over, every TICK_MS, under the store's lock
 * (the run buffer is the store exporter's: one thread at a time). */
static void *
tick_thread(void *arg)
{
    struct weft__ingest *ing = arg;

    pthread_mutex_lock(&ing->tick_lock);
    while (!ing->is_stopping) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += TICK_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        (void)pthread_cond_timedwait(&ing->tick_wake, &ing->tick_lock, &ts);
        if (ing->is_stopping) {
            break;
        }
        pthread_mutex_unlock(&ing->tick_lock);
        pthread_mutex_lock(&ing->store_lock);
        weft_tail_tick(ing->store);
        pthread_mutex_unlock(&ing->store_lock);
        pthread_mutex_lock(&ing->tick_lock);
    }
    pthread_mutex_unlock(&ing->tick_lock);
    return NULL;
}

/* The coordinator of the run buffer: the store's decisions table (store/decisions.c). Called
 * under the store lock, like the buffer itself. */
static bool
claim_decision(void *user_data,
               const char *trace_hex,
               bool keep,
               const char *rule,
               bool *standing_keep,
               char *standing_rule,
               size_t rule_len)
{
    struct weft__ingest *ing = user_data;

    return weft__store_decisions_claim(ing->decisions, trace_hex, keep, rule, standing_keep,
                                       standing_rule, rule_len) == WEFT_OK;
}

struct lookup_ctx {
    void (*found)(void *ctx, size_t index, bool keep, const char *rule);
    void *ctx;
};

static void
on_decision(void *user, size_t index, bool keep, const char *rule)
{
    struct lookup_ctx *l = user;

    l->found(l->ctx, index, keep, rule);
}

static void
lookup_decisions(void *user_data,
                 const char *const *trace_hex,
                 size_t count,
                 void (*found)(void *ctx, size_t index, bool keep, const char *rule),
                 void *ctx)
{
    struct weft__ingest *ing = user_data;
    struct lookup_ctx l = {found, ctx};

    (void)weft__store_decisions_lookup(ing->decisions, trace_hex, count, on_decision, &l);
}

/* Put the store exporter behind a deciding run buffer and start its ticker. */
static weft_err
start_sampling(struct weft__ingest *ing, const struct weft__ingest_options *opts)
{
    struct weft_tail_options to = {.decision_wait_ms = opts->sampling_wait_ms};
    char why[256] = "";
    weft_err err = weft_sampling_policy_parse(opts->sampling, &ing->policy, why, sizeof(why));

    if (err == WEFT_EPARSE) {
        WEFT_LOG(WEFT_LOG_ERROR, "ingest: %s", why);
        return WEFT_EINVAL;
    }
    if (err != WEFT_OK || ing->policy == NULL) {
        return err; /* "off": nothing to do */
    }
    to.policy = ing->policy;
    {
        char location[4096];

        if (opts->db_path != NULL) {
            snprintf(location, sizeof(location), "%s", opts->db_path);
        } else if (weft_store_default_path(location, sizeof(location)) != WEFT_OK) {
            return WEFT_EIO;
        }
        err = weft__store_decisions_open(location, &ing->decisions);
        if (err != WEFT_OK) {
            return err;
        }
    }
    ing->coordinator.claim = claim_decision;
    ing->coordinator.lookup = lookup_decisions;
    ing->coordinator.user_data = ing;
    to.coordinator = &ing->coordinator;
    err = weft_tail_new(&to, &ing->tail);
    if (err != WEFT_OK) {
        return err;
    }
    ing->writer = ing->store;
    err = weft_tail_wrap(ing->tail, ing->store, &ing->store);
    if (err != WEFT_OK) {
        ing->store = NULL; /* taken (and freed) by the wrap */
        ing->writer = NULL;
        return err;
    }
    if (pthread_mutex_init(&ing->tick_lock, NULL) != 0 ||
        pthread_cond_init(&ing->tick_wake, NULL) != 0 ||
        pthread_create(&ing->ticker, NULL, tick_thread, ing) != 0) {
        return WEFT_ENOMEM;
    }
    return WEFT_OK;
}

weft_err
weft__ingest_new(const struct weft__ingest_options *opts, struct weft__ingest **out)
{
    struct weft__ingest *ing = NULL;
    weft_err err = WEFT_OK;

    if (opts == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    ing = weft__calloc(1, sizeof(*ing));
    if (ing == NULL) {
        return WEFT_ENOMEM;
    }
    ing->max_body = opts->max_body != 0 ? opts->max_body : WEFT__INGEST_DEFAULT_MAX_BODY;
    weft__otlp_limits_from_env(&ing->limits);
    /* Before the server's threads run: jansson's hooks are set once, while no one uses it. */
    weft__otlp_decode_global_init();
    err = weft_store_exporter_new(opts->db_path, &ing->store);
    if (err != WEFT_OK) {
        weft__free(ing);
        return err;
    }
    /* Requests wait on the store's lock: its commits should not also copy the WAL (SQLite;
     * PostgreSQL checkpoints on its own). */
    if (!is_pg_store(opts->db_path)) {
        err = weft__store_checkpoint_in_background(ing->store, WEFT__STORE_CHECKPOINT_PAGES,
                                                   WEFT__STORE_WAL_BACKSTOP);
    }
    if (err == WEFT_OK && pthread_mutex_init(&ing->store_lock, NULL) != 0) {
        err = WEFT_ENOMEM;
    }
    ing->writer = ing->store;
    if (err == WEFT_OK && opts->sampling != NULL) {
        err = start_sampling(ing, opts);
    }
    if (err != WEFT_OK) {
        weft_exporter_free(ing->store);
        weft_tail_unref(ing->tail);
        weft__store_decisions_close(ing->decisions);
        weft_sampling_policy_free(ing->policy);
        weft__free(ing);
        return err;
    }
    *out = ing;
    return WEFT_OK;
}

void
weft__ingest_free(struct weft__ingest *ing)
{
    if (ing == NULL) {
        return;
    }
    if (ing->tail != NULL) {
        pthread_mutex_lock(&ing->tick_lock);
        ing->is_stopping = true;
        pthread_cond_signal(&ing->tick_wake);
        pthread_mutex_unlock(&ing->tick_lock);
        pthread_join(ing->ticker, NULL);
        pthread_cond_destroy(&ing->tick_wake);
        pthread_mutex_destroy(&ing->tick_lock);
    }
    /* The run buffer's shutdown decides what it still holds and writes what is kept. */
    weft_exporter_free(ing->store);
    weft_tail_unref(ing->tail);
    weft__store_decisions_close(ing->decisions);
    weft_sampling_policy_free(ing->policy);
    pthread_mutex_destroy(&ing->store_lock);
    weft__free(ing);
}

size_t
weft__ingest_max_body(const struct weft__ingest *ing)
{
    return ing != NULL ? ing->max_body : 0;
}

/* WARN the first time @p why happens, DEBUG afterwards. */
static void
log_reason(struct weft__ingest *ing, reason why, const char *detail)
{
    static const char *const what[REASON_COUNT] = {
        "a request with a method other than POST (405)",
        "a request with an unsupported Content-Type (415)",
        "a request with an unsupported Content-Encoding (415)",
        "a request over the body cap (413)",
        "a request whose gzip body cannot be inflated (400)",
        "a malformed request (400)",
        "spans rejected for their ids (partial success)",
        "a request the span store could not write (503)",
    };
    bool was_logged = atomic_exchange(&ing->logged[why], true);

    WEFT_LOG(was_logged ? WEFT_LOG_DEBUG : WEFT_LOG_WARN, "ingest: %s: %s%s", what[why], detail,
             was_logged ? "" : " (further ones are logged at DEBUG and counted on /metrics)");
}

/* ------------------------------------------------------------------------------------------ */
/* Responses                                                                                   */

typedef enum encoding {
    ENC_NONE, /* unsupported */
    ENC_PROTO,
    ENC_JSON
} encoding;

/* The media type without parameters, case-insensitively. */
static encoding
parse_content_type(const char *ct)
{
    size_t len = 0;

    if (ct == NULL) {
        return ENC_NONE;
    }
    while (*ct == ' ') {
        ct++;
    }
    len = strcspn(ct, "; ");
    if ((len == 22 && strncasecmp(ct, "application/x-protobuf", len) == 0) ||
        (len == 20 && strncasecmp(ct, "application/protobuf", len) == 0)) {
        return ENC_PROTO;
    }
    if (len == 16 && strncasecmp(ct, "application/json", len) == 0) {
        return ENC_JSON;
    }
    return ENC_NONE;
}

static const char *
content_type_of(encoding enc)
{
    return enc == ENC_PROTO ? "application/x-protobuf" : "application/json";
}

static size_t
put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* A protobuf message of one varint field @p vfield and one string field @p sfield (either
 * omitted when zero or empty): both ExportTracePartialSuccess (1, 2) and google.rpc.Status
 * (1, 2) have this shape. */
static weft_err
proto_pair(uint64_t value, const char *text, struct weft__buf *out)
{
    uint8_t head[24];
    size_t n = 0;
    size_t text_len = text != NULL ? strlen(text) : 0;
    weft_err err = WEFT_OK;

    if (value != 0) {
        head[n++] = 0x08; /* field 1, varint */
        n += put_varint(head + n, value);
    }
    if (text_len > 0) {
        head[n++] = 0x12; /* field 2, length-delimited */
        n += put_varint(head + n, text_len);
    }
    err = weft__buf_append(out, head, n);
    if (err == WEFT_OK && text_len > 0) {
        err = weft__buf_append(out, text, text_len);
    }
    return err;
}

static void
set_reply(struct weft__http_reply *reply, unsigned status, encoding enc, struct weft__buf *body)
{
    reply->status = status;
    reply->content_type = content_type_of(enc);
    reply->body = body->data;
    reply->len = body->len;
    reply->free_body = body->data != NULL;
    body->data = NULL; /* the reply owns it now */
    weft__buf_cleanup(body);
}

/* A google.rpc.Status {code, message} in @p enc. */
static void
reply_status(struct weft__http_reply *reply,
             unsigned http_status,
             encoding enc,
             int rpc_code,
             const char *message)
{
    struct weft__buf body;

    weft__buf_init(&body, 0);
    if (enc == ENC_PROTO) {
        (void)proto_pair((uint64_t)rpc_code, message, &body);
    } else {
        json_t *j = json_pack("{s:i, s:s}", "code", rpc_code, "message", message);
        char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

        if (text != NULL) {
            (void)weft__buf_append_str(&body, text);
        }
        free(text);
        json_decref(j);
    }
    set_reply(reply, http_status, enc, &body);
}

/* An ExportTraceServiceResponse, with partial_success when spans were rejected. */
static void
reply_success(struct weft__http_reply *reply, encoding enc, uint64_t rejected, const char *message)
{
    struct weft__buf body;
    struct weft__buf inner;

    weft__buf_init(&body, 0);
    weft__buf_init(&inner, 0);
    if (enc == ENC_PROTO && rejected > 0) {
        uint8_t head[12];
        size_t n = 0;

        (void)proto_pair(rejected, message, &inner);
        head[n++] = 0x0a; /* partial_success, field 1, length-delimited */
        n += put_varint(head + n, inner.len);
        if (weft__buf_append(&body, head, n) == WEFT_OK) {
            (void)weft__buf_append(&body, inner.data, inner.len);
        }
    } else if (enc == ENC_JSON) {
        char count[24];
        json_t *j = NULL;
        char *text = NULL;

        snprintf(count, sizeof(count), "%llu", (unsigned long long)rejected);
        j = rejected > 0 ? json_pack("{s:{s:s, s:s}}", "partialSuccess", "rejectedSpans", count,
                                     "errorMessage", message)
                         : json_object();
        text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
        (void)weft__buf_append_str(&body, text != NULL ? text : "{}");
        free(text);
        json_decref(j);
    }
    weft__buf_cleanup(&inner);
    set_reply(reply, 200, enc, &body);
}

/* ------------------------------------------------------------------------------------------ */
/* Handling                                                                                    */

static void
count_request(struct weft__ingest *ing, const struct weft__http_reply *reply)
{
    atomic_fetch_add(&ing->requests[status_slot(reply->status)], 1);
}

/* Refuse @p req before decoding: the method, the media type, the encoding, the size. */
static bool
refuse_early(struct weft__ingest *ing,
             const struct weft__ingest_request *req,
             encoding enc,
             struct weft__http_reply *reply)
{
    const char *ce = req->content_encoding;
    char detail[160];

    if (req->method == NULL || strcmp(req->method, "POST") != 0) {
        snprintf(detail, sizeof(detail), "%.32s %s", req->method != NULL ? req->method : "?",
                 WEFT__INGEST_PATH);
        log_reason(ing, REASON_METHOD, detail);
        reply_status(reply, 405, enc, RPC_UNIMPLEMENTED, "only POST is allowed on /v1/traces");
        reply->allow = "POST";
        return true;
    }
    if (enc == ENC_NONE) {
        snprintf(detail, sizeof(detail), "'%.64s'",
                 req->content_type != NULL ? req->content_type : "(none)");
        log_reason(ing, REASON_CONTENT_TYPE, detail);
        reply_status(reply, 415, ENC_JSON, RPC_INVALID_ARGUMENT,
                     "Content-Type must be application/x-protobuf or application/json");
        return true;
    }
    if (ce != NULL && ce[0] != '\0' && strcasecmp(ce, "gzip") != 0 &&
        strcasecmp(ce, "identity") != 0) {
        snprintf(detail, sizeof(detail), "'%.64s'", ce);
        log_reason(ing, REASON_ENCODING, detail);
        reply_status(reply, 415, enc, RPC_INVALID_ARGUMENT,
                     "Content-Encoding must be gzip or identity");
        return true;
    }
    if (req->is_too_large) {
        snprintf(detail, sizeof(detail), "over %zu bytes", ing->max_body);
        log_reason(ing, REASON_TOO_LARGE, detail);
        reply_status(reply, 413, enc, RPC_RESOURCE_EXHAUSTED,
                     "the request body exceeds the server's limit (--max-body)");
        return true;
    }
    return false;
}

/* Inflate a gzip body into @p plain (capped). @return true, or false with @p reply set. */
static bool
inflate_body(struct weft__ingest *ing,
             const struct weft__ingest_request *req,
             encoding enc,
             struct weft__buf *plain,
             struct weft__http_reply *reply)
{
    weft_err err = weft__gzip_decompress(req->body, req->len, plain);
    char detail[96];

    if (err == WEFT_OK) {
        return true;
    }
    if (err == WEFT_ELIMIT) {
        snprintf(detail, sizeof(detail), "inflates past %zu bytes", ing->max_body);
        log_reason(ing, REASON_TOO_LARGE, detail);
        reply_status(reply, 413, enc, RPC_RESOURCE_EXHAUSTED,
                     "the decompressed request body exceeds the server's limit (--max-body)");
    } else {
        log_reason(ing, REASON_GZIP, weft_strerror(err));
        reply_status(reply, err == WEFT_ENOMEM ? 503 : 400, enc,
                     err == WEFT_ENOMEM ? RPC_UNAVAILABLE : RPC_INVALID_ARGUMENT,
                     "the body is not a valid gzip stream");
    }
    return false;
}

/* Write the accepted spans in one export call, hence one transaction. Their JSON columns are
 * built before the lock, so requests served at once build theirs in parallel and the lock
 * covers only SQLite's work; texts that do not fit @p cap are built under the lock, one span
 * at a time, as export_batch builds them. */
static weft_err
store_batch(struct weft__ingest *ing, const struct weft__otlp_batch *batch, size_t cap)
{
    struct weft__store_texts texts;
    bool is_built = false;
    uint64_t t0 = 0;
    weft_err err = WEFT_OK;

    if (batch->count == 0) {
        return WEFT_OK;
    }
    if (ing->tail != NULL) {
        /* Through the run buffer: it holds the spans and writes the kept ones later. */
        struct weft_export_result res = {0};

        pthread_mutex_lock(&ing->store_lock);
        t0 = weft__monotonic_ns();
        err = ing->store->ops->export_batch(ing->store->self, batch->spans, batch->count,
                                            weft__monotonic_ns() + 30000000000ull, &res);
        atomic_fetch_add(&ing->store_write_ns, weft__monotonic_ns() - t0);
        atomic_fetch_add(&ing->store_writes, 1);
        pthread_mutex_unlock(&ing->store_lock);
        return err;
    }
    is_built = weft__store_texts_build(&texts, batch->spans, batch->count, cap) == WEFT_OK;
    pthread_mutex_lock(&ing->store_lock);
    t0 = weft__monotonic_ns();
    err =
        weft__store_export_texts(ing->store, batch->spans, batch->count, is_built ? &texts : NULL);
    atomic_fetch_add(&ing->store_write_ns, weft__monotonic_ns() - t0);
    atomic_fetch_add(&ing->store_writes, 1);
    pthread_mutex_unlock(&ing->store_lock);
    weft__store_texts_cleanup(&texts);
    return err;
}

/* Decode and store @p data in @p enc; fills @p reply. */
static void
ingest_body(struct weft__ingest *ing,
            encoding enc,
            const void *data,
            size_t len,
            struct weft__http_reply *reply)
{
    struct weft__otlp_batch batch;
    size_t cap = ing->max_body > SIZE_MAX / WEFT__INGEST_DECODED_FACTOR
                     ? SIZE_MAX
                     : ing->max_body * WEFT__INGEST_DECODED_FACTOR;
    char why[192] = "";
    weft_err err = WEFT_OK;

    weft__otlp_batch_init(&batch, cap);
    batch.limits = ing->limits;
    err = enc == ENC_PROTO ? weft__otlp_decode_proto(data, len, &batch, why, sizeof(why))
                           : weft__otlp_decode_json(data, len, &batch, why, sizeof(why));
    if (err == WEFT_OK) {
        err = store_batch(ing, &batch, cap);
        if (err != WEFT_OK) {
            char *retry = weft__malloc(32);
            atomic_fetch_add(&ing->spans_refused, batch.count);
            log_reason(ing, REASON_STORE, weft_strerror(err));
            reply_status(reply, 503, enc, RPC_UNAVAILABLE, "the span store cannot be written");
            /* OTLP senders retry a 503 after Retry-After: the store (PostgreSQL restarting,
             * SQLite locked) gets that long to come back, and nothing is lost. */
            if (retry != NULL) {
                snprintf(retry, 32, "Retry-After: %d", WEFT__HTTP_RETRY_AFTER_S);
                reply->headers = retry;
            }
        } else {
            atomic_fetch_add(&ing->spans_accepted, batch.count);
            atomic_fetch_add(&ing->spans_rejected, batch.rejected);
            atomic_fetch_add(&ing->limited, batch.dropped_by_limits);
            atomic_fetch_add(&ing->names_escaped, batch.names_escaped);
            if (batch.rejected > 0) {
                log_reason(ing, REASON_REJECTED_SPANS, batch.reject_reason);
            }
            reply_success(reply, enc, batch.rejected, batch.reject_reason);
        }
    } else if (err == WEFT_ELIMIT) {
        log_reason(ing, REASON_TOO_LARGE, why);
        reply_status(reply, 413, enc, RPC_RESOURCE_EXHAUSTED, why);
    } else if (err == WEFT_ENOMEM) {
        log_reason(ing, REASON_STORE, "out of memory decoding a request");
        reply_status(reply, 503, enc, RPC_UNAVAILABLE, "out of memory");
    } else {
        log_reason(ing, REASON_MALFORMED, why);
        reply_status(reply, 400, enc, RPC_INVALID_ARGUMENT, why);
    }
    weft__otlp_batch_cleanup(&batch);
}

void
weft__ingest_handle(struct weft__ingest *ing,
                    const struct weft__ingest_request *req,
                    struct weft__http_reply *reply)
{
    encoding enc = parse_content_type(req->content_type);
    const char *ce = req->content_encoding;
    struct weft__buf plain;

    memset(reply, 0, sizeof(*reply));
    weft__buf_init(&plain, ing->max_body);
    if (refuse_early(ing, req, enc, reply)) {
        count_request(ing, reply);
        return;
    }
    if (ce != NULL && strcasecmp(ce, "gzip") == 0) {
        if (inflate_body(ing, req, enc, &plain, reply)) {
            ingest_body(ing, enc, plain.data, plain.len, reply);
        }
    } else {
        ingest_body(ing, enc, req->body, req->len, reply);
    }
    weft__buf_cleanup(&plain);
    count_request(ing, reply);
}

static void
route_handler(void *user_data,
              const struct weft__http_request *hreq,
              struct weft__http_reply *reply)
{
    struct weft__ingest_request req = {
        hreq->method,
        weft__http_header(hreq, "Content-Type"),
        weft__http_header(hreq, "Content-Encoding"),
        hreq->body,
        hreq->body_len,
        hreq->is_too_large,
    };

    struct weft__ingest *ing = user_data;

    atomic_fetch_add(&ing->in_flight, 1);
    weft__ingest_handle(ing, &req, reply);
    atomic_fetch_sub(&ing->in_flight, 1);
}

struct weft__http_route
weft__ingest_route(struct weft__ingest *ing)
{
    struct weft__http_route route = {WEFT__INGEST_PATH,
                                     weft__ingest_max_body(ing),
                                     route_handler,
                                     ing,
                                     false,
                                     WEFT__INGEST_MAX_ACTIVE,
                                     false};

    return route;
}

/* ------------------------------------------------------------------------------------------ */
/* Counters                                                                                    */

void
weft__ingest_stats(const struct weft__ingest *ing, struct weft__ingest_stats *out)
{
    struct weft__ingest *m = (struct weft__ingest *)ing; /* atomics load through non-const */

    memset(out, 0, sizeof(*out));
    if (ing == NULL) {
        return;
    }
    out->spans_accepted = atomic_load(&m->spans_accepted);
    out->spans_rejected = atomic_load(&m->spans_rejected);
    out->spans_refused = atomic_load(&m->spans_refused);
    out->in_flight = atomic_load(&m->in_flight);
    out->store_writes = atomic_load(&m->store_writes);
    out->store_write_ns = atomic_load(&m->store_write_ns);
    out->requests_200 = atomic_load(&m->requests[0]);
    out->requests_400 = atomic_load(&m->requests[1]);
    out->requests_405 = atomic_load(&m->requests[2]);
    out->requests_413 = atomic_load(&m->requests[3]);
    out->requests_415 = atomic_load(&m->requests[4]);
    out->requests_503 = atomic_load(&m->requests[5]);
    out->limited = atomic_load(&m->limited);
    out->names_escaped = atomic_load(&m->names_escaped);
    weft__store_checkpointer_stats(weft__store_checkpointer(m->writer), &out->checkpoints,
                                   &out->inline_checkpoints);
}

/* Tail sampling at ingest on /metrics: decisions by rule, what is held, spilled, decided
 * early and lost. */
static weft_err
observe_sampling(const struct weft__ingest *ing, struct weft_meter *meter)
{
    struct weft_tail_stats ts;
    struct weft_tail_rule_count rules[40];
    size_t n = weft_tail_rule_counts(ing->tail, rules, 40);
    struct weft_instrument *kept = NULL;
    struct weft_instrument *dropped = NULL;
    struct weft_instrument *held = NULL;
    struct weft_instrument *spans_held = NULL;
    struct weft_instrument *spilled = NULL;
    struct weft_instrument *early = NULL;
    struct weft_instrument *failed = NULL;
    weft_err err = WEFT_OK;

    weft_tail_get_stats(ing->tail, &ts);
    err =
        weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.traces.kept", "{trace}",
                              "Traces tail sampling at ingest kept, by rule", NULL, 0, &kept);
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.traces.dropped",
                                    "{trace}", "Traces tail sampling at ingest dropped, by rule",
                                    NULL, 0, &dropped);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.ingest.traces.held",
                                    "{trace}", "Traces waiting for their sampling decision", NULL,
                                    0, &held);
    }
    if (err == WEFT_OK) {
        err =
            weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.ingest.spans.held", "{span}",
                                  "Spans waiting for their trace's decision", NULL, 0, &spans_held);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(
            meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.spans.spilled", "{span}",
            "Spans the run buffer wrote to its spill file (memory bound)", NULL, 0, &spilled);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.traces.early",
                                    "{trace}",
                                    "Traces decided before their wait ended: the bound on held"
                                    " traces or spill was reached",
                                    NULL, 0, &early);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.spans.lost",
                                    "{span}",
                                    "Kept spans the span store did not take after their"
                                    " decision (its request had been answered 200)",
                                    NULL, 0, &failed);
    }
    if (err != WEFT_OK) {
        return err;
    }
    for (size_t i = 0; i < n && i < 40; i++) {
        struct weft_attr a = weft_attr_str("rule", rules[i].rule);

        (void)weft_counter_add(kept, (double)rules[i].kept, &a, 1);
        (void)weft_counter_add(dropped, (double)rules[i].dropped, &a, 1);
    }
    (void)weft_gauge_set(held, (double)ts.traces_held, NULL, 0);
    (void)weft_gauge_set(spans_held, (double)ts.spans_held, NULL, 0);
    (void)weft_counter_add(spilled, (double)ts.spans_spilled, NULL, 0);
    (void)weft_counter_add(early, (double)ts.traces_early, NULL, 0);
    (void)weft_counter_add(failed, (double)ts.spans_failed, NULL, 0);
    return WEFT_OK;
}

weft_err
weft__ingest_observe(const struct weft__ingest *ing, struct weft_meter *meter)
{
    struct weft__ingest_stats st;
    struct weft_instrument *spans = NULL;
    struct weft_instrument *requests = NULL;
    struct weft_instrument *checkpoints = NULL;
    struct weft_instrument *limited = NULL;
    struct weft_instrument *escaped = NULL;
    struct weft_instrument *in_flight = NULL;
    struct weft_instrument *in_flight_limit = NULL;
    struct weft_instrument *writes = NULL;
    struct weft_instrument *write_time = NULL;
    uint64_t counts[6];
    struct weft_attr attr;
    char status[8];
    weft_err err = WEFT_OK;

    if (ing == NULL || meter == NULL) {
        return WEFT_EINVAL;
    }
    weft__ingest_stats(ing, &st);
    err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.spans", "{span}",
                                "Spans received on /v1/traces, by outcome", NULL, 0, &spans);
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.requests",
                                    "{request}", "Requests to /v1/traces, by HTTP status", NULL, 0,
                                    &requests);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.store_checkpoints",
                                    "{checkpoint}",
                                    "Checkpoints of the span store's WAL: on their own thread"
                                    " (background) or in a request past the WAL's backstop"
                                    " (inline)",
                                    NULL, 0, &checkpoints);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.limited", "{item}",
                                    "Attributes, events and links of stored spans dropped by the"
                                    " span limits (OTEL_SPAN_*_COUNT_LIMIT, 128 each by default);"
                                    " each span's dropped_*_count says how many of its own",
                                    NULL, 0, &limited);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.names_escaped",
                                    "{name}",
                                    "Span and event names stored with their NUL bytes replaced"
                                    " by U+FFFD",
                                    NULL, 0, &escaped);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(
            meter, WEFT_INSTRUMENT_GAUGE, "weft.ingest.in_flight", "{request}",
            "Requests to /v1/traces being handled now (the ingest queue)", NULL, 0, &in_flight);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_GAUGE, "weft.ingest.in_flight_limit",
                                    "{request}",
                                    "Requests to /v1/traces handled at once; one more is answered"
                                    " 503 with Retry-After",
                                    NULL, 0, &in_flight_limit);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(
            meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.store_writes", "{batch}",
            "Batches written into the span store (one a request)", NULL, 0, &writes);
    }
    if (err == WEFT_OK) {
        err = weft_meter_instrument(meter, WEFT_INSTRUMENT_COUNTER, "weft.ingest.store_write_time",
                                    "s",
                                    "Time spent writing batches into the span store (with "
                                    "weft.ingest.store_writes: the mean write latency)",
                                    NULL, 0, &write_time);
    }
    if (err != WEFT_OK) {
        return err;
    }
    (void)weft_gauge_set(in_flight, (double)st.in_flight, NULL, 0);
    (void)weft_gauge_set(in_flight_limit, (double)WEFT__INGEST_MAX_ACTIVE, NULL, 0);
    (void)weft_counter_add(writes, (double)st.store_writes, NULL, 0);
    (void)weft_counter_add(write_time, (double)st.store_write_ns / 1e9, NULL, 0);
    attr = weft_attr_str("outcome", "refused");
    (void)weft_counter_add(spans, (double)st.spans_refused, &attr, 1);
    (void)weft_counter_add(limited, (double)st.limited, NULL, 0);
    (void)weft_counter_add(escaped, (double)st.names_escaped, NULL, 0);
    attr = weft_attr_str("mode", "background");
    (void)weft_counter_add(checkpoints, (double)st.checkpoints, &attr, 1);
    attr = weft_attr_str("mode", "inline");
    (void)weft_counter_add(checkpoints, (double)st.inline_checkpoints, &attr, 1);
    attr = weft_attr_str("outcome", "accepted");
    (void)weft_counter_add(spans, (double)st.spans_accepted, &attr, 1);
    attr = weft_attr_str("outcome", "rejected");
    (void)weft_counter_add(spans, (double)st.spans_rejected, &attr, 1);
    counts[0] = st.requests_200;
    counts[1] = st.requests_400;
    counts[2] = st.requests_405;
    counts[3] = st.requests_413;
    counts[4] = st.requests_415;
    counts[5] = st.requests_503;
    for (size_t i = 0; i < 6; i++) {
        snprintf(status, sizeof(status), "%u", statuses[i]);
        attr = weft_attr_str("status", status);
        (void)weft_counter_add(requests, (double)counts[i], &attr, 1);
    }
    return ing->tail != NULL ? observe_sampling(ing, meter) : WEFT_OK;
}
