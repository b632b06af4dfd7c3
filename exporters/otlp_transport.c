/* exporters/otlp_transport.c - the OTLP/HTTP transport over net/http_client (see otlp_transport.h).
 *
 * Configuration follows the OTel specification: options given through the API win, then the
 * signal-specific OTEL_EXPORTER_OTLP_<SIGNAL>_* variables, then OTEL_EXPORTER_OTLP_*, then the
 * defaults. One HTTP client (net/http_client) per transport keeps its connection alive.
 *
 * Retries follow REFERENCE.md: only 429, 502, 503, 504 and transport failures are retried,
 * with exponential backoff and full jitter, honouring Retry-After (delta-seconds or HTTP-date),
 * and never past the deadline or the retry budget. Any other status is final. A 2xx carrying
 * partial_success reports its rejected count and is not retried.
 *
 * A 2xx answer must be what OTLP/HTTP says a receiver answers: an empty body, or an
 * Export*ServiceResponse in the encoding its Content-Type names (protobuf when it names none).
 * Anything else (an HTML page from a proxy or a web server at the wrong port, bytes that do not
 * decode) means the data did not reach an OTLP receiver, so the export fails (not retried):
 * treating it as delivered would hide a misconfigured endpoint for good.
 *
 * Every failure leaves a one-line description in last_error: what happened (connection
 * refused, no answer within the timeout, HTTP status and a short excerpt of the body) and where
 * (scheme://host:port/path of the URL; never user info, query or headers).
 */
#include "otlp_transport.h"

#include "gzip.h"
#include "otlp_encode.h"
#include "spool.h"

#include "base/buf.h"
#include "base/env.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/str.h"
#include "base/time.h"
#include "net/http_client.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define MAX_RESPONSE_BYTES         (4u << 20) /* REFERENCE.md: a larger answer is an error */
#define DEFAULT_TIMEOUT_MS         10000u
#define DEFAULT_INITIAL_BACKOFF_MS 1000u
#define DEFAULT_MAX_BACKOFF_MS     5000u

struct weft__otlp_transport {
    char *url;
    const char *log_name; /* static string from the config */
    const char *signal;   /* static string from the config; NULL: no environment */
    bool is_json;
    bool gzip;
    bool parse_partial_success;
    uint32_t timeout_ms;
    uint32_t max_retry_ms;
    uint32_t initial_backoff_ms;
    uint32_t max_backoff_ms;
    struct weft__http_client *http;
    struct weft__http_client_request req;     /* URL, TLS, auth: set once; headers per send */
    struct weft__http_headers headers;        /* the common lines: Expect, OTLP and extra headers */
    struct weft__http_headers variant[2][2];  /* [json][gzip]: Content-Type (+ Encoding) + common */
    const struct weft__http_headers *current; /* the variant of the request being sent */
    char *ca_file;                            /* TLS files, copied from the options */
    char *client_cert;
    char *client_key;
    char *basic_user; /* Basic auth (Langfuse); wiped when freed */
    char *basic_password;
    char user_agent[96];
    struct weft__spool *spool;         /* NULL: none (the export thread only, but for stats) */
    struct weft__buf spool_body;       /* a spooled request being resent */
    bool is_spooling;                  /* requests go to the spool (for the log lines) */
    struct weft__buf gz;               /* compressed request */
    struct weft__http_response answer; /* the last answer, its body capped */
    char where[256];                   /* the URL as scheme://host:port/path, for messages */
    char last_error[320];              /* the last failure, under lock */
    bool is_failing;                   /* the last attempt failed (the send thread only) */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_bool is_shut_down;
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t retries;
    atomic_uint_fast64_t bytes_sent;
    atomic_uint_fast64_t items_rejected;
    atomic_long last_status;
};

/* The signal-specific variable, else the general one. @p out_name names the one used. NULL
 * when the transport does not read the environment. */
static const char *
env_pair(const struct weft__otlp_transport *x, const char *suffix, const char **out_name)
{
    static _Thread_local char names[2][80];
    const char *v = NULL;

    if (x->signal == NULL) {
        return NULL;
    }
    snprintf(names[0], sizeof(names[0]), "OTEL_EXPORTER_OTLP_%s_%s", x->signal, suffix);
    snprintf(names[1], sizeof(names[1]), "OTEL_EXPORTER_OTLP_%s", suffix);
    for (int i = 0; i < 2; i++) {
        v = weft__env(names[i]);
        if (v != NULL) {
            if (out_name != NULL) {
                *out_name = names[i];
            }
            return v;
        }
    }
    return NULL;
}

static bool
is_http_url(const char *url)
{
    return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

/* Resolve the request URL: the signal endpoint as given, else base + path. */
static weft_err
resolve_url(struct weft__otlp_transport *x,
            const struct weft__otlp_transport_config *cfg,
            const struct weft_otlp_options *o)
{
    const char *name = "signal endpoint option";
    const char *url = cfg->signal_endpoint;
    struct weft__buf b;

    if (url == NULL && o->endpoint == NULL) {
        url = env_pair(x, "ENDPOINT", &name);
        if (url != NULL && strcmp(name, "OTEL_EXPORTER_OTLP_ENDPOINT") == 0) {
            url = NULL; /* the general variable is a base, handled below */
        }
    }
    if (url != NULL) {
        if (!is_http_url(url)) {
            WEFT_LOG(WEFT_LOG_ERROR, "%s=%s: expected an http:// or https:// URL", name, url);
            return WEFT_EINVAL;
        }
        x->url = weft__strdup(url);
        return x->url == NULL ? WEFT_ENOMEM : WEFT_OK;
    }
    name = "endpoint option";
    url = o->endpoint;
    if (url == NULL && x->signal != NULL) {
        name = "OTEL_EXPORTER_OTLP_ENDPOINT";
        url = weft__env(name);
    }
    if (url == NULL) {
        url = "http://localhost:4318";
    }
    if (!is_http_url(url)) {
        WEFT_LOG(WEFT_LOG_ERROR, "%s=%s: expected an http:// or https:// URL", name, url);
        return WEFT_EINVAL;
    }
    weft__buf_init(&b, 0);
    if (weft__buf_append_str(&b, url) != WEFT_OK ||
        (b.data[b.len - 1] != '/' && weft__buf_append_byte(&b, '/') != WEFT_OK) ||
        weft__buf_append_str(&b, cfg->path) != WEFT_OK) {
        weft__buf_cleanup(&b);
        return WEFT_ENOMEM;
    }
    x->url = b.data;
    return WEFT_OK;
}

/* An HTTP field name: one or more tchar (RFC 9110, 5.6.2). */
static bool
is_token(const char *s, size_t len)
{
    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", c) != NULL) ||
            c == '\0') {
            return false;
        }
    }
    return true;
}

/* A decoded header value: no control character but tab (a CR or LF would start another
 * header; weft__percent_decode() refuses %00). */
static bool
is_field_value(const char *s)
{
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;

        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return false;
        }
    }
    return true;
}

/* Add "k=v,k2=v2" (values percent-decoded) as request headers. Malformed members (a name that
 * is not an HTTP token, a value with a bad escape or a control character) are warned about
 * (by variable name only) and skipped. */
weft_err
weft__otlp_headers_add(struct curl_slist **headers, const char *list, const char *source)
{
    const char *p = list;

    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end == NULL ? strlen(p) : (size_t)(end - p);
        const char *member = p;
        const char *eq = NULL;

        weft__trim(&member, &len);
        if (len > 0) {
            eq = memchr(member, '=', len);
            if (eq == NULL || eq == member) {
                WEFT_LOG(WEFT_LOG_WARN, "%s: expected key=value pairs; skipped a malformed one",
                         source);
            } else {
                const char *k = member;
                size_t klen = (size_t)(eq - member);
                const char *v = eq + 1;
                size_t vlen = len - klen - 1;
                char *value = NULL;
                struct weft__buf line;
                struct weft__http_headers grown;
                weft_err added = WEFT_OK;

                weft__trim(&k, &klen);
                weft__trim(&v, &vlen);
                value = weft__percent_decode(v, vlen);
                if (value == NULL || !is_token(k, klen) || !is_field_value(value)) {
                    weft__free(value);
                    WEFT_LOG(WEFT_LOG_WARN,
                             "%s: a header has a name that is not a token, a bad percent "
                             "escape or a control character in its value; skipped it",
                             source);
                } else {
                    weft__buf_init(&line, 0);
                    weft__buf_append(&line, k, klen);
                    weft__buf_append_str(&line, ": ");
                    weft__buf_append_str(&line, value);
                    weft__wipe(value, strlen(value));
                    weft__free(value);
                    if (line.data == NULL) {
                        return WEFT_ENOMEM;
                    }
                    grown.list = *headers;
                    added = weft__http_headers_add(&grown, line.data);
                    weft__wipe(line.data, line.len);
                    weft__buf_cleanup(&line);
                    if (added != WEFT_OK) {
                        return WEFT_ENOMEM;
                    }
                    *headers = grown.list;
                }
            }
        }
        p = end == NULL ? NULL : end + 1;
    }
    return WEFT_OK;
}

/* The client's should_abort hook: shutdown cuts a request waiting on a slow server, so
 * shutdown's bound holds (weft__otlp_transport_shutdown() wakes the client). */
static bool
is_shut_down(void *user_data, uint32_t *poll_ms)
{
    const struct weft__otlp_transport *x = user_data;

    (void)poll_ms;
    return atomic_load(&x->is_shut_down);
}

static uint32_t
env_u32(const struct weft__otlp_transport *x, const char *suffix, uint32_t def)
{
    const char *name = NULL;

    if (env_pair(x, suffix, &name) == NULL) {
        return def;
    }
    return (uint32_t)weft__env_u64(name, def, 0, UINT32_MAX);
}

/* The request headers: the common lines (Expect, OTEL_EXPORTER_OTLP_*HEADERS, the headers
 * option, the exporter's extra lines), and one list per encoding on top of them. */
static weft_err
build_header_lists(struct weft__otlp_transport *x,
                   const struct weft__otlp_transport_config *cfg,
                   const struct weft_otlp_options *o)
{
    const char *name = NULL;
    const char *v = NULL;
    weft_err err = WEFT_OK;

    /* "Expect: 100-continue" costs a round trip per large request; collectors don't need it. */
    err = weft__http_headers_add(&x->headers, "Expect:");
    if (err != WEFT_OK) {
        return err;
    }
    if ((v = env_pair(x, "HEADERS", &name)) != NULL) {
        err = weft__otlp_headers_add(&x->headers.list, v, name);
        if (err != WEFT_OK) {
            return err;
        }
    }
    if (o->headers != NULL) {
        err = weft__otlp_headers_add(&x->headers.list, o->headers, "headers option");
        if (err != WEFT_OK) {
            return err;
        }
    }
    for (size_t i = 0; i < cfg->extra_header_count; i++) {
        err = weft__http_headers_add(&x->headers, cfg->extra_headers[i]);
        if (err != WEFT_OK) {
            return err;
        }
    }

    /* One list per encoding a request may have: a spooled request is resent with the
     * encoding it was written in, even when the configuration changed since. */
    for (int json = 0; json < 2; json++) {
        for (int gz = 0; gz < 2; gz++) {
            struct weft__http_headers *list = &x->variant[json][gz];

            err = weft__http_headers_add(list, json ? "Content-Type: application/json"
                                                    : "Content-Type: application/x-protobuf");
            if (err == WEFT_OK && gz) {
                err = weft__http_headers_add(list, "Content-Encoding: gzip");
            }
            if (err == WEFT_OK) {
                err = weft__http_headers_append_all(list, &x->headers);
            }
            if (err != WEFT_OK) {
                return err;
            }
        }
    }
    return WEFT_OK;
}

static weft_err
configure(struct weft__otlp_transport *x,
          const struct weft__otlp_transport_config *cfg,
          const struct weft_otlp_options *o)
{
    const char *name = NULL;
    const char *v = NULL;
    const char *ca = o->ca_file;
    const char *cert = o->client_cert;
    const char *key = o->client_key;
    weft_err err = WEFT_OK;

    err = resolve_url(x, cfg, o);
    if (err != WEFT_OK) {
        return err;
    }
    {
        char fallback[64];

        /* Never user info, query or fragment: they may carry credentials. */
        snprintf(fallback, sizeof(fallback), "the %s endpoint", x->log_name);
        weft__http_url_describe(x->url, fallback, x->where, sizeof(x->where));
    }
    if (o->protocol_set) {
        x->is_json = o->protocol == WEFT_OTLP_HTTP_JSON;
    } else if ((v = env_pair(x, "PROTOCOL", &name)) != NULL) {
        if (strcmp(v, "http/json") == 0) {
            x->is_json = true;
        } else if (strcmp(v, "http/protobuf") != 0) {
            WEFT_LOG(WEFT_LOG_WARN,
                     "%s=%s: expected http/protobuf or http/json (grpc is not supported); using "
                     "http/protobuf",
                     name, v);
        }
    }
    if (o->compression != 0) {
        x->gzip = o->compression == 2;
    } else if ((v = env_pair(x, "COMPRESSION", &name)) != NULL) {
        if (strcmp(v, "gzip") == 0) {
            x->gzip = true;
        } else if (strcmp(v, "none") != 0) {
            WEFT_LOG(WEFT_LOG_WARN, "%s=%s: expected gzip or none; using none", name, v);
        }
    }
    x->timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : env_u32(x, "TIMEOUT", DEFAULT_TIMEOUT_MS);
    x->max_retry_ms = o->max_retry_ms;
    x->initial_backoff_ms =
        o->initial_backoff_ms != 0 ? o->initial_backoff_ms : DEFAULT_INITIAL_BACKOFF_MS;
    x->max_backoff_ms = o->max_backoff_ms != 0 ? o->max_backoff_ms : DEFAULT_MAX_BACKOFF_MS;
    if (x->max_backoff_ms < x->initial_backoff_ms) {
        x->max_backoff_ms = x->initial_backoff_ms;
    }
    if (ca == NULL) {
        ca = env_pair(x, "CERTIFICATE", NULL);
    }
    if (cert == NULL) {
        cert = env_pair(x, "CLIENT_CERTIFICATE", NULL);
    }
    if (key == NULL) {
        key = env_pair(x, "CLIENT_KEY", NULL);
    }

    err = build_header_lists(x, cfg, o);
    if (err != WEFT_OK) {
        return err;
    }
    x->current = &x->variant[x->is_json][x->gzip];
    err = weft__http_client_new(&x->http);
    if (err != WEFT_OK) {
        return err;
    }
    snprintf(x->user_agent, sizeof(x->user_agent), "%s",
             o->user_agent != NULL ? o->user_agent : "weft/" WEFT_VERSION_STRING " (OTLP)");
    x->ca_file = ca != NULL ? weft__strdup(ca) : NULL;
    x->client_cert = cert != NULL ? weft__strdup(cert) : NULL;
    x->client_key = key != NULL ? weft__strdup(key) : NULL;
    if (cfg->basic_user != NULL) {
        x->basic_user = weft__strdup(cfg->basic_user);
        x->basic_password = weft__strdup(cfg->basic_password != NULL ? cfg->basic_password : "");
    }
    if ((ca != NULL && x->ca_file == NULL) || (cert != NULL && x->client_cert == NULL) ||
        (key != NULL && x->client_key == NULL) ||
        (cfg->basic_user != NULL && (x->basic_user == NULL || x->basic_password == NULL))) {
        return WEFT_ENOMEM;
    }
    x->req.url = x->url;
    x->req.has_body = true;
    x->req.user_agent = x->user_agent;
    x->req.max_response_bytes = MAX_RESPONSE_BYTES;
    x->req.is_keepalive = true;
    x->req.is_insecure = o->insecure_skip_verify;
    x->req.ca_file = x->ca_file;
    x->req.client_cert = x->client_cert;
    x->req.client_key = x->client_key;
    x->req.basic_user = x->basic_user;
    x->req.basic_password = x->basic_password;
    x->req.should_abort = is_shut_down;
    x->req.user_data = x;
    return WEFT_OK;
}

/* Sleep @p ms unless shutdown comes first. @return false when shut down. */
static bool
pause_ms(void *user_data, uint64_t ms)
{
    struct weft__otlp_transport *x = user_data;
    struct timespec ts;
    uint64_t deadline = weft__monotonic_ns() + ms * 1000000u;
    bool alive = true;

    ts.tv_sec = (time_t)(deadline / 1000000000u);
    ts.tv_nsec = (long)(deadline % 1000000000u);
    pthread_mutex_lock(&x->lock);
    while ((alive = !atomic_load(&x->is_shut_down)) && weft__monotonic_ns() < deadline) {
        pthread_cond_timedwait(&x->wake, &x->lock, &ts);
    }
    pthread_mutex_unlock(&x->lock);
    return alive;
}

/* The first @p max bytes of the answer, control characters and non-ASCII replaced by '.'. */
static void
body_excerpt(const struct weft__otlp_transport *x, char *out, size_t max)
{
    size_t n = x->answer.body.len < max - 1 ? x->answer.body.len : max - 1;

    for (size_t i = 0; i < n; i++) {
        char c = x->answer.body.data[i];
        out[i] = (c >= 0x20 && c < 0x7f) ? c : '.';
    }
    out[n] = '\0';
}

static void set_error(struct weft__otlp_transport *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Record the last failure (read from other threads through weft__otlp_transport_last_error). */
static void
set_error(struct weft__otlp_transport *x, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&x->lock);
    va_start(ap, fmt);
    vsnprintf(x->last_error, sizeof(x->last_error), fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&x->lock);
}

/* Describe a failed attempt the way a user reads it: what happened and where. */
static void
set_transport_error(struct weft__otlp_transport *x)
{
    const struct weft__http_response *r = &x->answer;

    switch (r->failure) {
    case WEFT__HTTP_FAIL_CONNECT:
        if (r->os_errno == ECONNREFUSED || r->os_errno == 0) {
            set_error(x, "connection refused by %s", x->where);
        } else {
            set_error(x, "cannot connect to %s: %s", x->where, strerror((int)r->os_errno));
        }
        break;
    case WEFT__HTTP_FAIL_TIMEOUT:
        set_error(x, "no answer from %s within %llu ms", x->where,
                  (unsigned long long)r->timeout_ms);
        break;
    case WEFT__HTTP_FAIL_RESOLVE:
        set_error(x, "cannot resolve the host of %s", x->where);
        break;
    case WEFT__HTTP_FAIL_NOTHING:
        set_error(x, "%s closed the connection without an answer", x->where);
        break;
    case WEFT__HTTP_FAIL_TOO_LARGE:
        set_error(x, "the answer from %s is over %u bytes", x->where, MAX_RESPONSE_BYTES);
        break;
    default:
        set_error(x, "%s: %s", x->where, r->error);
        break;
    }
}

/* Record what the last attempt brought: a failure, or an HTTP status with the body's head. */
static void
set_attempt_error(struct weft__otlp_transport *x)
{
    if (x->answer.failure != WEFT__HTTP_FAIL_NONE) {
        set_transport_error(x);
    } else {
        char excerpt[121];

        body_excerpt(x, excerpt, sizeof(excerpt));
        set_error(x, "HTTP %ld from %s: %s", x->answer.status, x->where, excerpt);
    }
}

/* Check a 2xx answer: an empty body or an OTLP response in the encoding its Content-Type
 * names. @return WEFT_OK (with *rejected), or WEFT_EPARSE (last_error says why). */
static weft_err
check_answer(struct weft__otlp_transport *x, long status, uint64_t *rejected)
{
    char message[256];
    char excerpt[81];
    const char *ct = x->answer.content_type;
    bool json = false;

    *rejected = 0;
    if (x->answer.body.len == 0) {
        return WEFT_OK;
    }
    if (ct[0] == '\0') {
        json = x->is_json;
    } else if (strstr(ct, "json") != NULL) {
        json = true;
    } else if (strstr(ct, "protobuf") == NULL) {
        body_excerpt(x, excerpt, sizeof(excerpt));
        set_error(x, "HTTP %ld from %s is not an OTLP response (Content-Type %s): %s", status,
                  x->where, ct, excerpt);
        return WEFT_EPARSE;
    }
    if (weft__otlp_parse_response(x->answer.body.data, x->answer.body.len, json, rejected, message,
                                  sizeof(message)) != WEFT_OK) {
        body_excerpt(x, excerpt, sizeof(excerpt));
        set_error(x, "HTTP %ld from %s is not an OTLP %s response: %s", status, x->where,
                  json ? "JSON" : "protobuf", excerpt);
        *rejected = 0;
        return WEFT_EPARSE;
    }
    if (*rejected > 0) {
        set_error(x, "%s rejected %llu items: %s", x->where, (unsigned long long)*rejected,
                  message);
        WEFT_LOG(WEFT_LOG_WARN, "%s receiver %s rejected %llu items: %s", x->log_name, x->where,
                 (unsigned long long)*rejected, message);
    }
    return WEFT_OK;
}

/* A failed attempt that will be retried: say so once per outage, so that a collector that is
 * down shows at its first failure, not when the batch's time limit ends the retries. */
static void
note_retrying(struct weft__otlp_transport *x)
{
    char text[sizeof(x->last_error)];

    if (x->is_failing) {
        return;
    }
    x->is_failing = true;
    weft__otlp_transport_last_error(x, text, sizeof(text));
    WEFT_LOG(WEFT_LOG_WARN, "%s export failed: %s; retrying", x->log_name, text);
}

/* The retry policy's hook, before the wait for the next attempt: count the attempt, keep its
 * failure in last_error and say so once per outage. */
static void
on_retry(void *user_data, const struct weft__http_response *r, uint64_t wait_ms)
{
    struct weft__otlp_transport *x = user_data;

    atomic_fetch_add(&x->requests, 1);
    atomic_fetch_add(&x->bytes_sent, x->req.body_len);
    atomic_fetch_add(&x->retries, 1);
    atomic_store(&x->last_status, r->failure == WEFT__HTTP_FAIL_NONE ? r->status : 0);
    set_attempt_error(x);
    note_retrying(x);
    WEFT_LOG(WEFT_LOG_DEBUG, "%s export to %s: retrying in %llu ms", x->log_name, x->where,
             (unsigned long long)wait_ms);
}

/* The outcome of an answer the retries ended on. */
static weft_err
final_answer(struct weft__otlp_transport *x, uint64_t *rejected_out)
{
    const struct weft__http_response *r = &x->answer;
    char text[sizeof(x->last_error)];
    uint64_t rejected = 0;

    if (r->status >= 200 && r->status < 300) {
        if (x->parse_partial_success && check_answer(x, r->status, &rejected) != WEFT_OK) {
            x->is_failing = true;
            weft__otlp_transport_last_error(x, text, sizeof(text));
            WEFT_LOG(WEFT_LOG_ERROR, "%s export failed (not retried): %s", x->log_name, text);
            return WEFT_EPARSE;
        }
        *rejected_out += rejected;
        atomic_fetch_add(&x->items_rejected, rejected);
        x->is_failing = false;
        /* Delivered: no failure stands (weft.exporter.failing reads this; the processor
         * keeps its own copy of the error that failed a batch). */
        pthread_mutex_lock(&x->lock);
        x->last_error[0] = '\0';
        pthread_mutex_unlock(&x->lock);
        return WEFT_OK;
    }
    if (!r->is_retryable) {
        x->is_failing = true;
        weft__otlp_transport_last_error(x, text, sizeof(text));
        WEFT_LOG(WEFT_LOG_ERROR, "%s export failed (not retried): %s", x->log_name, text);
        return WEFT_EHTTP;
    }
    return WEFT_ETIMEDOUT;
}

/* Send the prepared body through the client's retry loop: 429, 502, 503, 504 and transport
 * failures are retried with full jitter or the server's Retry-After, within the deadline and
 * the retry budget; @p max_attempts 0 means no other bound. */
static weft_err
send_request(struct weft__otlp_transport *x,
             const char *data,
             size_t len,
             uint64_t deadline,
             unsigned max_attempts,
             uint64_t *rejected_out)
{
    struct weft__http_retry retry;
    uint64_t started = weft__monotonic_ns();
    const struct weft__http_response *r = &x->answer;
    char text[sizeof(x->last_error)];
    weft_err err = WEFT_OK;

    if (atomic_load(&x->is_shut_down)) {
        set_error(x, "not sent to %s: the exporter was shut down", x->where);
        return WEFT_ESTATE;
    }
    if (deadline != 0 && started >= deadline) {
        set_error(x, "no time left to send to %s", x->where);
        return WEFT_ETIMEDOUT;
    }
    x->req.headers = x->current;
    x->req.body = data;
    x->req.body_len = len;
    x->req.timeout_ms = x->timeout_ms;
    memset(&retry, 0, sizeof(retry));
    retry.max_attempts = max_attempts != 0 ? max_attempts : UINT32_MAX;
    retry.initial_backoff_ms = x->initial_backoff_ms;
    retry.max_backoff_ms = x->max_backoff_ms;
    retry.deadline_ns = deadline;
    retry.budget_ms = x->max_retry_ms;
    retry.sleep_ms = pause_ms;
    retry.on_retry = on_retry;
    retry.user_data = x;
    err = weft__http_client_perform(x->http, &x->req, &retry, &x->answer);
    if (r->attempts > 0) {
        atomic_fetch_add(&x->requests, 1);
        atomic_fetch_add(&x->bytes_sent, len);
        atomic_store(&x->last_status, r->failure == WEFT__HTTP_FAIL_NONE ? r->status : 0);
    }
    if (r->stop == WEFT__HTTP_STOP_CANCELLED) {
        return WEFT_ESTATE; /* shut down between attempts; last_error says why it retried */
    }
    if (r->failure == WEFT__HTTP_FAIL_ABORTED) {
        /* Shut down while the request was in flight: keep the reason of an earlier failed
         * attempt of this export, which is why it was still going at shutdown. */
        if (r->attempts == 1) {
            set_error(x, "no answer from %s within %llu ms (stopped at shutdown)", x->where,
                      (unsigned long long)((weft__monotonic_ns() - started) / 1000000u));
        }
        return WEFT_ESTATE;
    }
    set_attempt_error(x);
    if (r->failure == WEFT__HTTP_FAIL_TOO_LARGE) {
        x->is_failing = true;
        WEFT_LOG(WEFT_LOG_ERROR, "%s export to %s: the answer is over %u bytes", x->log_name,
                 x->where, MAX_RESPONSE_BYTES);
        return WEFT_EIO;
    }
    if (err != WEFT_OK && !r->is_retryable) {
        x->is_failing = true;
        WEFT_LOG(WEFT_LOG_ERROR, "%s export to %s failed: %s (not retried)", x->log_name, x->where,
                 r->error);
        return err == WEFT_ENOMEM ? WEFT_ENOMEM : WEFT_EIO;
    }
    if (err == WEFT_OK && (r->stop == WEFT__HTTP_STOP_FINAL)) {
        return final_answer(x, rejected_out);
    }
    x->is_failing = true;
    if (r->stop == WEFT__HTTP_STOP_DEADLINE) {
        note_retrying(x); /* said before it gives up, as on any retryable failure */
        weft__otlp_transport_last_error(x, text, sizeof(text));
        WEFT_LOG(WEFT_LOG_WARN, "%s export: giving up after %u attempts: %s", x->log_name,
                 r->attempts, text);
    }
    return WEFT_ETIMEDOUT; /* retries exhausted, or a probe of the endpoint: one attempt */
}

weft_err
weft__otlp_transport_send(struct weft__otlp_transport *t,
                          const char *data,
                          size_t len,
                          uint64_t deadline,
                          uint64_t *rejected)
{
    uint64_t ignored = 0;
    weft_err err = WEFT_OK;

    if (t == NULL || (data == NULL && len > 0)) {
        return WEFT_EINVAL;
    }
    if (rejected == NULL) {
        rejected = &ignored;
    }
    *rejected = 0;
    if (atomic_load(&t->is_shut_down)) {
        set_error(t, "not sent to %s: the exporter was shut down", t->where);
        return WEFT_ESTATE;
    }
    t->current = &t->variant[t->is_json][t->gzip];
    if (!t->gzip) {
        return send_request(t, data == NULL ? "" : data, len, deadline, 0, rejected);
    }
    weft__buf_reset(&t->gz);
    /* Level 1: about 3x faster than the default level for a few percent more bytes; the
     * export thread, not the network, is the bottleneck on small machines. */
    err = weft__gzip_compress(data, len, 1, &t->gz);
    if (err != WEFT_OK) {
        return err;
    }
    return send_request(t, t->gz.data, t->gz.len, deadline, 0, rejected);
}

/* ------------------------------------------------------------------------------------------ */
/* The spool (spool.h): requests whose retries gave up, sent again when the endpoint answers    */

#define DRAIN_PER_EXPORT 8  /* spooled requests sent before a new batch, at most */
#define DRAIN_PER_IDLE   16 /* per idle call; the processor calls again at once while more wait */

/* Open the spool when the options or WEFT_EXPORT_SPOOL ask for one. A spool that cannot be
 * opened (no permission, every slot held) is logged by spool.c and the exporter runs without:
 * failed batches are then dropped and counted as before. */
static void
open_spool(struct weft__otlp_transport *x, const char *kind, const struct weft_otlp_options *o)
{
    char root[4096];
    struct weft__spool_config sc;

    memset(&sc, 0, sizeof(sc));
    if (!weft__spool_resolve(o->spool, o->spool_dir, o->spool_max_bytes, root, sizeof(root),
                             &sc.max_bytes)) {
        return;
    }
    sc.root = root;
    sc.kind = kind;
    sc.url = x->url;
    if (weft__spool_open(&sc, &x->spool) == WEFT_OK) {
        WEFT_LOG(WEFT_LOG_DEBUG, "%s export spool: %s", x->log_name, weft__spool_dir(x->spool));
    }
}

static uint32_t
wire_flags(const struct weft__otlp_transport *x)
{
    return (x->is_json ? WEFT__SPOOL_JSON : 0u) | (x->gzip ? WEFT__SPOOL_GZIP : 0u);
}

/* Errors after which a request is worth keeping: the endpoint did not take it but may later
 * (retries gave up, a transport failure, shut down mid-retry). A final HTTP status or an
 * answer that is not OTLP would be the same next time. */
static bool
is_spoolable(weft_err err)
{
    return err == WEFT_ETIMEDOUT || err == WEFT_EIO || err == WEFT_ESTATE;
}

/* Send spooled requests, oldest first, one attempt each, until the spool is empty, @p max were
 * sent, the deadline passes or the endpoint still fails. A request refused for good is
 * dropped and counted. @return WEFT_OK when the spool is empty, else the reason it is not
 * (WEFT_ELIMIT: @p max reached with the endpoint answering). */
static weft_err
drain_spool(struct weft__otlp_transport *x, uint64_t deadline, size_t max)
{
    size_t sent = 0;

    while (!weft__spool_is_empty(x->spool)) {
        uint32_t flags = 0;
        uint32_t spans = 0;
        uint64_t rejected = 0;
        weft_err err = WEFT_OK;

        if (sent == max) {
            return WEFT_ELIMIT;
        }
        if (atomic_load(&x->is_shut_down)) {
            return WEFT_ESTATE;
        }
        if (deadline != 0 && weft__monotonic_ns() >= deadline) {
            return WEFT_ETIMEDOUT;
        }
        err = weft__spool_peek(x->spool, &x->spool_body, &flags, &spans);
        if (err == WEFT_ENOTFOUND) {
            break; /* the rest was damaged: deleted and counted */
        }
        if (err != WEFT_OK) {
            return err;
        }
        x->current = &x->variant[(flags & WEFT__SPOOL_JSON) != 0][(flags & WEFT__SPOOL_GZIP) != 0];
        err = send_request(x, x->spool_body.data, x->spool_body.len, deadline, 1, &rejected);
        if (err == WEFT_OK) {
            atomic_fetch_add(&x->items_rejected, rejected);
            weft__spool_pop(x->spool);
            sent++;
            continue;
        }
        if (is_spoolable(err) || err == WEFT_ENOMEM) {
            return err; /* still down: the file waits */
        }
        {
            char text[sizeof(x->last_error)];

            weft__otlp_transport_last_error(x, text, sizeof(text));
            WEFT_LOG(WEFT_LOG_ERROR,
                     "%s: a spooled request (%u spans) was refused for good: %s; "
                     "dropped",
                     x->log_name, spans, text);
        }
        weft__spool_reject(x->spool);
        sent++;
    }
    if (x->is_spooling) {
        x->is_spooling = false;
        WEFT_LOG(WEFT_LOG_INFO, "%s: the spool %s is sent; exporting directly again", x->log_name,
                 weft__spool_dir(x->spool));
    }
    return WEFT_OK;
}

/* Write the request the transport holds (data, or t->gz when compressed) to the spool. */
static weft_err
spool_request(struct weft__otlp_transport *x,
              const char *wire,
              size_t wire_len,
              uint32_t spans,
              weft_err cause)
{
    weft_err err = weft__spool_put(x->spool, wire, wire_len, wire_flags(x), spans);

    if (err != WEFT_OK) {
        if (err != WEFT_ELIMIT) {
            weft__spool_count_lost(x->spool, spans);
        }
        WEFT_LOG(WEFT_LOG_ERROR, "%s: %u spans could not be spooled in %s: %s; dropped",
                 x->log_name, spans, weft__spool_dir(x->spool),
                 err == WEFT_ELIMIT ? "larger than the spool's cap" : strerror(errno));
        return cause;
    }
    if (!x->is_spooling) {
        x->is_spooling = true;
        WEFT_LOG(WEFT_LOG_WARN,
                 "%s: %s does not take requests (%s); keeping them in the spool %s "
                 "until it does",
                 x->log_name, x->where, weft_strerror(cause), weft__spool_dir(x->spool));
    }
    return WEFT_OK;
}

weft_err
weft__otlp_transport_export(struct weft__otlp_transport *t,
                            const char *data,
                            size_t len,
                            uint32_t spans,
                            uint64_t deadline,
                            uint64_t *rejected,
                            uint64_t *spooled)
{
    uint64_t ignored = 0;
    weft_err err = WEFT_OK;

    if (t == NULL || spooled == NULL || (data == NULL && len > 0)) {
        return WEFT_EINVAL;
    }
    *spooled = 0;
    if (rejected == NULL) {
        rejected = &ignored;
    }
    *rejected = 0;
    if (t->spool == NULL) {
        return weft__otlp_transport_send(t, data, len, deadline, rejected);
    }
    if (data == NULL) {
        data = "";
    }
    if (t->gzip) {
        weft__buf_reset(&t->gz);
        err = weft__gzip_compress(data, len, 1, &t->gz);
        if (err != WEFT_OK) {
            return err;
        }
        data = t->gz.data;
        len = t->gz.len;
    }
    /* Older requests first: while any wait, a new one joins the queue behind them. */
    if (!weft__spool_is_empty(t->spool)) {
        err = drain_spool(t, deadline, DRAIN_PER_EXPORT);
    }
    if (err == WEFT_OK) {
        if (atomic_load(&t->is_shut_down)) {
            set_error(t, "not sent to %s: the exporter was shut down", t->where);
            err = WEFT_ESTATE;
        } else {
            t->current = &t->variant[t->is_json][t->gzip];
            err = send_request(t, data, len, deadline, 0, rejected);
        }
        if (!is_spoolable(err)) {
            return err;
        }
    } else if (err == WEFT_ELIMIT || err == WEFT_ENOMEM) {
        err = WEFT_ETIMEDOUT; /* not sent because older requests still wait */
    }
    if (spool_request(t, data, len, spans, err) != WEFT_OK) {
        return err;
    }
    *spooled = spans;
    return WEFT_OK;
}

bool
weft__otlp_transport_idle(struct weft__otlp_transport *t, uint64_t deadline)
{
    if (t == NULL || weft__spool_is_empty(t->spool)) {
        return false;
    }
    /* More to do only while the endpoint answers; a failure waits for the next call. */
    return drain_spool(t, deadline, DRAIN_PER_IDLE) == WEFT_ELIMIT;
}

void
weft__otlp_transport_flush_spool(struct weft__otlp_transport *t, uint64_t deadline)
{
    if (t != NULL && !weft__spool_is_empty(t->spool)) {
        (void)drain_spool(t, deadline, SIZE_MAX);
    }
}

void
weft__otlp_transport_spool_stats(const struct weft__otlp_transport *t, struct weft_spool_stats *out)
{
    weft__spool_stats(t == NULL ? NULL : t->spool, out);
}

void
weft__otlp_transport_shutdown(struct weft__otlp_transport *t)
{
    if (t == NULL) {
        return;
    }
    pthread_mutex_lock(&t->lock);
    atomic_store(&t->is_shut_down, true);
    pthread_cond_broadcast(&t->wake);
    pthread_mutex_unlock(&t->lock);
    weft__http_client_wakeup(t->http); /* cut a request in flight at once */
}

void
weft__otlp_transport_free(struct weft__otlp_transport *t)
{
    if (t == NULL) {
        return;
    }
    weft__http_client_free(t->http);
    weft__http_headers_cleanup(&t->headers);
    for (int json = 0; json < 2; json++) {
        for (int gz = 0; gz < 2; gz++) {
            weft__http_headers_cleanup(&t->variant[json][gz]);
        }
    }
    weft__http_response_cleanup(&t->answer);
    weft__free(t->ca_file);
    weft__free(t->client_cert);
    weft__free(t->client_key);
    if (t->basic_password != NULL) {
        weft__wipe(t->basic_password, strlen(t->basic_password));
    }
    weft__free(t->basic_user);
    weft__free(t->basic_password);
    weft__spool_close(t->spool);
    weft__buf_cleanup(&t->spool_body);
    weft__buf_cleanup(&t->gz);
    pthread_cond_destroy(&t->wake);
    pthread_mutex_destroy(&t->lock);
    weft__free(t->url);
    weft__free(t);
}

weft_err
weft__otlp_transport_new(const struct weft__otlp_transport_config *cfg,
                         const struct weft_otlp_options *o,
                         struct weft__otlp_transport **out)
{
    static const struct weft_otlp_options defaults;
    struct weft__otlp_transport *t = NULL;
    pthread_condattr_t attr;
    weft_err err = WEFT_OK;

    if (out == NULL || cfg == NULL || cfg->path == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    if (!weft__http_global_init()) {
        return WEFT_EIO;
    }
    t = weft__calloc(1, sizeof(*t));
    if (t == NULL) {
        return WEFT_ENOMEM;
    }
    t->signal = cfg->signal;
    t->log_name = cfg->log_name != NULL ? cfg->log_name : "OTLP";
    t->parse_partial_success = cfg->parse_partial_success;
    pthread_mutex_init(&t->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&t->wake, &attr);
    pthread_condattr_destroy(&attr);
    weft__buf_init(&t->gz, 0);
    weft__http_response_init(&t->answer);
    weft__buf_init(&t->spool_body, 0);
    err = configure(t, cfg, o != NULL ? o : &defaults);
    if (err != WEFT_OK) {
        weft__otlp_transport_free(t);
        return err;
    }
    if (cfg->spool_kind != NULL) {
        open_spool(t, cfg->spool_kind, o != NULL ? o : &defaults);
    }
    *out = t;
    return WEFT_OK;
}

bool
weft__otlp_transport_is_json(const struct weft__otlp_transport *t)
{
    return t != NULL && t->is_json;
}

const char *
weft__otlp_transport_url(const struct weft__otlp_transport *t)
{
    return t == NULL ? "" : t->url;
}

size_t
weft__otlp_transport_last_error(const struct weft__otlp_transport *t, char *buf, size_t len)
{
    size_t n = 0;

    if (buf == NULL || len == 0) {
        return 0;
    }
    buf[0] = '\0';
    if (t == NULL) {
        return 0;
    }
    pthread_mutex_lock((pthread_mutex_t *)&t->lock);
    n = strlen(t->last_error);
    snprintf(buf, len, "%s", t->last_error);
    pthread_mutex_unlock((pthread_mutex_t *)&t->lock);
    return n;
}

void
weft__otlp_transport_stats(const struct weft__otlp_transport *t, struct weft_otlp_stats *out)
{
    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (t == NULL) {
        return;
    }
    out->requests = atomic_load(&t->requests);
    out->retries = atomic_load(&t->retries);
    out->bytes_sent = atomic_load(&t->bytes_sent);
    out->spans_rejected = atomic_load(&t->items_rejected);
    out->last_http_status = atomic_load(&t->last_status);
}
