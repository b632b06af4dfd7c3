/* exporters/otlp_transport.c - the OTLP/HTTP transport over libcurl (see otlp_transport.h).
 *
 * Configuration follows the OTel specification: options given through the API win, then the
 * signal-specific OTEL_EXPORTER_OTLP_<SIGNAL>_* variables, then OTEL_EXPORTER_OTLP_*, then the
 * defaults. One curl easy handle per transport keeps its connection alive across requests.
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
#include "base/http.h"
#include "base/log.h"
#include "base/mem.h"
#include "base/str.h"
#include "base/time.h"
#include "tracing/ids.h"

#include <curl/curl.h>
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
    CURL *curl;
    struct curl_slist *headers;       /* the common lines: Expect, OTLP and extra headers */
    struct curl_slist *variant[2][2]; /* [json][gzip]: Content-Type (+ Encoding) + common */
    struct weft__spool *spool;        /* NULL: none (the export thread only, but for stats) */
    struct weft__buf spool_body;      /* a spooled request being resent */
    bool is_spooling;                 /* requests go to the spool (for the log lines) */
    struct weft__buf gz;              /* compressed request */
    struct weft__buf response;        /* answer body, capped */
    char retry_after[64];             /* the last Retry-After header value */
    char content_type[64];            /* of the last answer */
    char where[256];                  /* the URL as scheme://host:port/path, for messages */
    char last_error[320];             /* the last failure, under lock */
    bool is_failing;                  /* the last attempt failed (the send thread only) */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    atomic_bool is_shut_down;
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t retries;
    atomic_uint_fast64_t bytes_sent;
    atomic_uint_fast64_t items_rejected;
    atomic_long last_status;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ready;

static void
curl_init_once(void)
{
    curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

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
                struct curl_slist *grown = NULL;

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
                    weft__free(value);
                    if (line.data == NULL) {
                        return WEFT_ENOMEM;
                    }
                    grown = curl_slist_append(*headers, line.data);
                    weft__buf_cleanup(&line);
                    if (grown == NULL) {
                        return WEFT_ENOMEM;
                    }
                    *headers = grown;
                }
            }
        }
        p = end == NULL ? NULL : end + 1;
    }
    return WEFT_OK;
}

static size_t
on_body(char *data, size_t size, size_t n, void *userdata)
{
    struct weft__otlp_transport *x = userdata;

    /* A failed append (over 4 MiB) makes curl abort the transfer with CURLE_WRITE_ERROR. */
    if (weft__buf_append(&x->response, data, size * n) != WEFT_OK) {
        return 0;
    }
    return size * n;
}

/* Called by curl about once a second and on progress: abort the transfer once the exporter
 * is shut down, so shutdown's bound also cuts a request that is waiting on a slow server. */
static int
on_progress(
    void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    struct weft__otlp_transport *x = userdata;

    (void)dltotal;
    (void)dlnow;
    (void)ultotal;
    (void)ulnow;
    return atomic_load(&x->is_shut_down) ? 1 : 0;
}

static size_t
on_header(char *data, size_t size, size_t n, void *userdata)
{
    struct weft__otlp_transport *x = userdata;
    size_t len = size * n;

    if (!weft__http_header_value(data, len, "Retry-After", x->retry_after,
                                 sizeof(x->retry_after))) {
        (void)weft__http_header_value(data, len, "Content-Type", x->content_type,
                                      sizeof(x->content_type));
    }
    return len;
}

/* x->where: the URL without user info, query or fragment (they may carry credentials). */
static void
describe_url(struct weft__otlp_transport *x)
{
    CURLU *u = curl_url();
    char *scheme = NULL;
    char *host = NULL;
    char *port = NULL;
    char *path = NULL;

    snprintf(x->where, sizeof(x->where), "the %s endpoint", x->log_name);
    if (u != NULL && curl_url_set(u, CURLUPART_URL, x->url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK) {
        snprintf(x->where, sizeof(x->where), "%s://%s:%s%s", scheme, host, port, path);
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_url_cleanup(u);
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
    char ua[96];
    weft_err err = WEFT_OK;

    err = resolve_url(x, cfg, o);
    if (err != WEFT_OK) {
        return err;
    }
    describe_url(x);
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

    /* "Expect: 100-continue" costs a round trip per large request; collectors don't need it. */
    {
        struct curl_slist *h = curl_slist_append(x->headers, "Expect:");
        if (h == NULL) {
            return WEFT_ENOMEM;
        }
        x->headers = h;
    }
    if ((v = env_pair(x, "HEADERS", &name)) != NULL) {
        err = weft__otlp_headers_add(&x->headers, v, name);
        if (err != WEFT_OK) {
            return err;
        }
    }
    if (o->headers != NULL) {
        err = weft__otlp_headers_add(&x->headers, o->headers, "headers option");
        if (err != WEFT_OK) {
            return err;
        }
    }
    for (size_t i = 0; i < cfg->extra_header_count; i++) {
        struct curl_slist *h = curl_slist_append(x->headers, cfg->extra_headers[i]);
        if (h == NULL) {
            return WEFT_ENOMEM;
        }
        x->headers = h;
    }

    /* One list per encoding a request may have: a spooled request is resent with the
     * encoding it was written in, even when the configuration changed since. */
    for (int json = 0; json < 2; json++) {
        for (int gz = 0; gz < 2; gz++) {
            struct curl_slist *list =
                curl_slist_append(NULL, json ? "Content-Type: application/json"
                                             : "Content-Type: application/x-protobuf");

            if (list != NULL && gz) {
                struct curl_slist *h = curl_slist_append(list, "Content-Encoding: gzip");

                if (h == NULL) {
                    curl_slist_free_all(list);
                }
                list = h;
            }
            for (struct curl_slist *c = x->headers; list != NULL && c != NULL; c = c->next) {
                struct curl_slist *h = curl_slist_append(list, c->data);

                if (h == NULL) {
                    curl_slist_free_all(list);
                }
                list = h;
            }
            if (list == NULL) {
                return WEFT_ENOMEM;
            }
            x->variant[json][gz] = list;
        }
    }
    x->curl = curl_easy_init();
    if (x->curl == NULL) {
        return WEFT_ENOMEM;
    }
    snprintf(ua, sizeof(ua), "%s",
             o->user_agent != NULL ? o->user_agent : "weft/" WEFT_VERSION_STRING " (OTLP)");
    curl_easy_setopt(x->curl, CURLOPT_URL, x->url);
    curl_easy_setopt(x->curl, CURLOPT_POST, 1L);
    curl_easy_setopt(x->curl, CURLOPT_HTTPHEADER, x->variant[x->is_json][x->gzip]);
    curl_easy_setopt(x->curl, CURLOPT_USERAGENT, ua);
    curl_easy_setopt(x->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(x->curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(x->curl, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(x->curl, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(x->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(x->curl, CURLOPT_XFERINFODATA, x);
    curl_easy_setopt(x->curl, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(x->curl, CURLOPT_SSL_VERIFYPEER, o->insecure_skip_verify ? 0L : 1L);
    curl_easy_setopt(x->curl, CURLOPT_SSL_VERIFYHOST, o->insecure_skip_verify ? 0L : 2L);
    curl_easy_setopt(x->curl, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(x->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    if (cfg->basic_user != NULL) {
        curl_easy_setopt(x->curl, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(x->curl, CURLOPT_USERNAME, cfg->basic_user);
        curl_easy_setopt(x->curl, CURLOPT_PASSWORD,
                         cfg->basic_password != NULL ? cfg->basic_password : "");
    }
    if (ca != NULL) {
        curl_easy_setopt(x->curl, CURLOPT_CAINFO, ca);
    }
    if (cert != NULL) {
        curl_easy_setopt(x->curl, CURLOPT_SSLCERT, cert);
    }
    if (key != NULL) {
        curl_easy_setopt(x->curl, CURLOPT_SSLKEY, key);
    }
    return WEFT_OK;
}

static bool
retryable_status(long status)
{
    return status == 429 || status == 502 || status == 503 || status == 504;
}

static bool
retryable_curl(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
        return true;
    default:
        return false;
    }
}

/* Sleep @p ms unless shutdown comes first. @return false when shut down. */
static bool
pause_ms(struct weft__otlp_transport *x, uint64_t ms)
{
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
    size_t n = x->response.len < max - 1 ? x->response.len : max - 1;

    for (size_t i = 0; i < n; i++) {
        char c = x->response.data[i];
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

/* Describe a libcurl failure the way a user reads it: what happened and where. */
static void
set_curl_error(struct weft__otlp_transport *x, CURLcode rc, uint64_t timeout_ms)
{
    long os_errno = 0;

    switch (rc) {
    case CURLE_COULDNT_CONNECT:
        curl_easy_getinfo(x->curl, CURLINFO_OS_ERRNO, &os_errno);
        if (os_errno == ECONNREFUSED || os_errno == 0) {
            set_error(x, "connection refused by %s", x->where);
        } else {
            set_error(x, "cannot connect to %s: %s", x->where, strerror((int)os_errno));
        }
        break;
    case CURLE_OPERATION_TIMEDOUT:
        set_error(x, "no answer from %s within %llu ms", x->where, (unsigned long long)timeout_ms);
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
        set_error(x, "cannot resolve the host of %s", x->where);
        break;
    case CURLE_GOT_NOTHING:
        set_error(x, "%s closed the connection without an answer", x->where);
        break;
    case CURLE_WRITE_ERROR:
        set_error(x, "the answer from %s is over %u bytes", x->where, MAX_RESPONSE_BYTES);
        break;
    default:
        set_error(x, "%s: %s", x->where, curl_easy_strerror(rc));
        break;
    }
}

/* Check a 2xx answer: an empty body or an OTLP response in the encoding its Content-Type
 * names. @return WEFT_OK (with *rejected), or WEFT_EPARSE (last_error says why). */
static weft_err
check_answer(struct weft__otlp_transport *x, long status, uint64_t *rejected)
{
    char message[256];
    char excerpt[81];
    const char *ct = x->content_type;
    bool json = false;

    *rejected = 0;
    if (x->response.len == 0) {
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
    if (weft__otlp_parse_response(x->response.data, x->response.len, json, rejected, message,
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

/* Send the prepared body, retrying per the rules. */
static weft_err
send_request(struct weft__otlp_transport *x,
             const char *data,
             size_t len,
             uint64_t deadline,
             unsigned max_attempts,
             uint64_t *rejected_out)
{
    struct weft__rng *rng = weft__thread_rng();
    uint64_t started = weft__monotonic_ns();
    uint64_t backoff = x->initial_backoff_ms;

    for (unsigned attempt = 0;; attempt++) {
        uint64_t now = weft__monotonic_ns();
        uint64_t timeout = x->timeout_ms;
        uint64_t wait_ms = 0;
        long status = 0;
        CURLcode rc = CURLE_OK;

        if (atomic_load(&x->is_shut_down)) {
            if (attempt == 0) {
                set_error(x, "not sent to %s: the exporter was shut down", x->where);
            }
            return WEFT_ESTATE;
        }
        if (deadline != 0) {
            if (now >= deadline) {
                if (attempt == 0) {
                    set_error(x, "no time left to send to %s", x->where);
                }
                return WEFT_ETIMEDOUT;
            }
            if (timeout == 0 || (deadline - now) / 1000000u < timeout) {
                timeout = (deadline - now) / 1000000u + 1;
            }
        }
        weft__buf_reset(&x->response);
        x->retry_after[0] = '\0';
        x->content_type[0] = '\0';
        curl_easy_setopt(x->curl, CURLOPT_POSTFIELDS, data);
        curl_easy_setopt(x->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        curl_easy_setopt(x->curl, CURLOPT_TIMEOUT_MS, (long)timeout);
        atomic_fetch_add(&x->requests, 1);
        if (attempt > 0) {
            atomic_fetch_add(&x->retries, 1);
        }
        atomic_fetch_add(&x->bytes_sent, len);
        rc = curl_easy_perform(x->curl);
        if (rc == CURLE_OK) {
            curl_easy_getinfo(x->curl, CURLINFO_RESPONSE_CODE, &status);
        }
        atomic_store(&x->last_status, status);
        if (rc == CURLE_ABORTED_BY_CALLBACK) {
            /* Shut down while the request was in flight: keep the reason of an earlier failed
             * attempt of this export, which is why it was still going at shutdown. */
            if (attempt == 0) {
                set_error(x, "no answer from %s within %llu ms (stopped at shutdown)", x->where,
                          (unsigned long long)((weft__monotonic_ns() - now) / 1000000u));
            }
            return WEFT_ESTATE;
        }
        if (rc != CURLE_OK) {
            set_curl_error(x, rc, timeout);
        }
        if (rc == CURLE_WRITE_ERROR) {
            x->is_failing = true;
            WEFT_LOG(WEFT_LOG_ERROR, "%s export to %s: the answer is over %u bytes", x->log_name,
                     x->where, MAX_RESPONSE_BYTES);
            return WEFT_EIO;
        }
        if (rc == CURLE_OK && status >= 200 && status < 300) {
            uint64_t rejected = 0;

            if (x->parse_partial_success && check_answer(x, status, &rejected) != WEFT_OK) {
                char text[sizeof(x->last_error)];

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
        if (rc != CURLE_OK && !retryable_curl(rc)) {
            x->is_failing = true;
            WEFT_LOG(WEFT_LOG_ERROR, "%s export to %s failed: %s (not retried)", x->log_name,
                     x->where, curl_easy_strerror(rc));
            return WEFT_EIO;
        }
        if (rc == CURLE_OK) {
            char excerpt[121];

            body_excerpt(x, excerpt, sizeof(excerpt));
            set_error(x, "HTTP %ld from %s: %s", status, x->where, excerpt);
        }
        if (rc == CURLE_OK && !retryable_status(status)) {
            char text[sizeof(x->last_error)];

            x->is_failing = true;
            weft__otlp_transport_last_error(x, text, sizeof(text));
            WEFT_LOG(WEFT_LOG_ERROR, "%s export failed (not retried): %s", x->log_name, text);
            return WEFT_EHTTP;
        }
        if (max_attempts != 0 && attempt + 1 >= max_attempts) {
            x->is_failing = true;
            return WEFT_ETIMEDOUT; /* a probe of the endpoint: one attempt */
        }
        note_retrying(x);
        /* Retryable: full jitter over the current backoff, or the server's Retry-After. */
        wait_ms = backoff == 0 ? 0 : weft__rng_next(rng) % (backoff + 1);
        if (rc == CURLE_OK) {
            uint64_t ra = weft__http_retry_after_ms(x->retry_after);
            if (ra > 0) {
                wait_ms = ra;
            }
        }
        backoff = backoff * 2 > x->max_backoff_ms ? x->max_backoff_ms : backoff * 2;
        now = weft__monotonic_ns();
        if ((deadline != 0 && now + wait_ms * 1000000u >= deadline) ||
            (x->max_retry_ms != 0 &&
             now + wait_ms * 1000000u - started > (uint64_t)x->max_retry_ms * 1000000u)) {
            char text[sizeof(x->last_error)];

            weft__otlp_transport_last_error(x, text, sizeof(text));
            WEFT_LOG(WEFT_LOG_WARN, "%s export: giving up after %u attempts: %s", x->log_name,
                     attempt + 1, text);
            return WEFT_ETIMEDOUT;
        }
        WEFT_LOG(WEFT_LOG_DEBUG, "%s export to %s: retrying in %llu ms", x->log_name, x->where,
                 (unsigned long long)wait_ms);
        if (!pause_ms(x, wait_ms)) {
            return WEFT_ESTATE;
        }
    }
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
    curl_easy_setopt(t->curl, CURLOPT_HTTPHEADER, t->variant[t->is_json][t->gzip]);
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
        curl_easy_setopt(
            x->curl, CURLOPT_HTTPHEADER,
            x->variant[(flags & WEFT__SPOOL_JSON) != 0][(flags & WEFT__SPOOL_GZIP) != 0]);
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
            curl_easy_setopt(t->curl, CURLOPT_HTTPHEADER, t->variant[t->is_json][t->gzip]);
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
}

void
weft__otlp_transport_free(struct weft__otlp_transport *t)
{
    if (t == NULL) {
        return;
    }
    if (t->curl != NULL) {
        curl_easy_cleanup(t->curl);
    }
    curl_slist_free_all(t->headers);
    for (int json = 0; json < 2; json++) {
        for (int gz = 0; gz < 2; gz++) {
            curl_slist_free_all(t->variant[json][gz]);
        }
    }
    weft__spool_close(t->spool);
    weft__buf_cleanup(&t->spool_body);
    weft__buf_cleanup(&t->gz);
    weft__buf_cleanup(&t->response);
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
    pthread_once(&curl_once, curl_init_once);
    if (!curl_ready) {
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
    weft__buf_init(&t->response, MAX_RESPONSE_BYTES);
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
