/* runtime/tools/http_get.c - the http_get tool: GET a URL whose host is on the tool's
 * allowlist.
 *
 * The host is taken from the URL as libcurl parses it (curl_url), so userinfo tricks
 * ("http://allowed@evil/") and odd spellings are judged on the host curl would connect to.
 * Redirects are not followed: a 3xx comes back to the model, which may ask for the new URL,
 * and that URL meets the allowlist again. Only http and https are accepted.
 */
#include "tools.h"

#include "../../tracing/util.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TIMEOUT_MS 30000u
#define DEFAULT_MAX_OUTPUT (64u << 10)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct body {
    struct weft__buf buf;
    size_t max;
    bool is_truncated;
};

static size_t
on_body(char *data, size_t size, size_t n, void *userdata)
{
    struct body *b = userdata;
    size_t len = size * n;
    size_t room = b->buf.len < b->max ? b->max - b->buf.len : 0;

    if (len > room) {
        b->is_truncated = true;
        if (room > 0) {
            (void)weft__buf_append(&b->buf, data, room);
        }
        return 0; /* stop the transfer: what is kept is all the model gets */
    }
    return weft__buf_append(&b->buf, data, len) == WEFT_OK ? len : 0;
}

static weft_err
finish(struct tool_outcome *out, json_t *j)
{
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    out->output = text != NULL ? weft__strdup(text) : NULL;
    free(text);
    return out->output != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
refuse(struct tool_outcome *out, const char *type, const char *message)
{
    out->is_error = true;
    snprintf(out->error_type, sizeof(out->error_type), "%s", type);
    return finish(out, json_pack("{s:s, s:s}", "error", message, "type", type));
}

static bool
is_allowed(const struct tool_def *def, const char *host)
{
    for (size_t i = 0; i < def->allow_host_count; i++) {
        if (strcasecmp(def->allow_hosts[i], host) == 0) {
            return true;
        }
    }
    return false;
}

weft_err
weft__tool_http_get(const struct tool_def *def, const json_t *args, struct tool_outcome *out)
{
    const char *url = json_string_value(json_object_get(args, "url"));
    CURLU *u = NULL;
    CURL *curl = NULL;
    char *scheme = NULL;
    char *host = NULL;
    char *user = NULL;
    struct body body;
    long status = 0;
    CURLcode rc = CURLE_OK;
    json_t *text = NULL;
    weft_err err = WEFT_OK;

    pthread_once(&curl_once, curl_init_once);
    memset(&body, 0, sizeof(body));
    weft__buf_init(&body.buf, 0);
    body.max = def->max_output != 0 ? def->max_output : DEFAULT_MAX_OUTPUT;
    u = curl_url();
    if (url == NULL || u == NULL || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        err = refuse(out, "invalid_arguments", "url: not an absolute URL");
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        err = refuse(out, "not_allowed", "only http and https URLs are allowed");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK && user != NULL) {
        err = refuse(out, "not_allowed", "URLs with credentials are not allowed");
        goto out;
    }
    if (!is_allowed(def, host)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "host '%.200s' is not on the tool's allow_hosts list", host);
        err = refuse(out, "not_allowed", msg);
        goto out;
    }
    curl = curl_easy_init();
    if (curl == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    curl_easy_setopt(curl, CURLOPT_CURLU, u);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     (long)(def->timeout_ms != 0 ? def->timeout_ms : DEFAULT_TIMEOUT_MS));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "weft-http_get");
    rc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && body.is_truncated)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "GET failed: %s", curl_easy_strerror(rc));
        err = refuse(out, rc == CURLE_OPERATION_TIMEDOUT ? "timeout" : "connection", msg);
        goto out;
    }
    out->exit_code = (int)status;
    out->is_truncated = body.is_truncated;
    text = json_stringn(body.buf.data != NULL ? body.buf.data : "", body.buf.len);
    if (text == NULL) {
        text = json_string("(binary body not shown)");
    }
    if (status < 200 || status > 299) {
        out->is_error = true;
        snprintf(out->error_type, sizeof(out->error_type), "%s", "http_status");
    }
    err = finish(out, json_pack("{s:i, s:o, s:b}", "status", (int)status, "body", text, "truncated",
                                body.is_truncated));
out:
    curl_easy_cleanup(curl);
    curl_url_cleanup(u);
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    weft__buf_cleanup(&body.buf);
    return err;
}
