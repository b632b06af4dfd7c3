/* runtime/tools/http_get.c - the http_get tool: GET a URL whose host is on the tool's
 * allowlist.
 *
 * The host is taken from the URL as libcurl parses it (curl_url), and the same parsed handle
 * is what the transfer uses (CURLOPT_CURLU), so the host judged is the host curl connects to:
 * userinfo tricks ("http://allowed@evil/") and odd spellings (numeric IPv4 forms, which curl
 * normalises) cannot make the two disagree. URLs with credentials are refused outright.
 * Redirects are not followed: a 3xx comes back to the model with its "location", and that URL
 * meets the allowlist again when the model asks for it. Only http and https are accepted,
 * both when judging the URL and as the transfer's protocol whitelist.
 *
 * Invariant: nothing is sent to a host that is not on the list. The body is capped at
 * max_output: the transfer stops there and the outcome says "truncated".
 */
#include "tools.h"

#include "runtime/common/http.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TIMEOUT_MS 30000u
#define DEFAULT_MAX_OUTPUT (64u << 10)

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

/* Exact, case-insensitive match. curl gives IPv6 literals in brackets ("[::1]"); an entry
 * may be written with or without them. */
static bool
is_allowed(const struct tool_def *def, const char *host)
{
    size_t len = strlen(host);
    bool is_bracketed = len >= 2 && host[0] == '[' && host[len - 1] == ']';

    for (size_t i = 0; i < def->allow_host_count; i++) {
        const char *allowed = def->allow_hosts[i];
        if (allowed == NULL) {
            continue;
        }
        if (strcasecmp(allowed, host) == 0) {
            return true;
        }
        if (is_bracketed && strlen(allowed) == len - 2 &&
            strncasecmp(allowed, host + 1, len - 2) == 0) {
            return true;
        }
    }
    return false;
}

/* The body as a JSON string. A body cut by the cap may end inside a multi-byte character:
 * drop that partial character rather than the whole text. NULL for a body that is not UTF-8
 * text (or ENOMEM). */
static json_t *
body_text(const struct body *b)
{
    const char *data = b->buf.data != NULL ? b->buf.data : "";
    size_t len = b->buf.len;

    if (b->is_truncated) {
        len = weft__utf8_complete(data, len);
    }
    return json_stringn(data, len);
}

/* May the tool fetch @p url (parsed into @p u)? Only absolute http and https URLs without
 * credentials, to a host on the tool's allow_hosts list. @return true if so; otherwise false,
 * with the refusal in @p out and refuse()'s result in *err. */
static bool
check_url(
    const struct tool_def *def, CURLU *u, const char *url, struct tool_outcome *out, weft_err *err)
{
    char *scheme = NULL;
    char *host = NULL;
    char *user = NULL;
    bool is_ok = false;

    /* Parse any scheme, so that "ftp://" or "file://" is refused as not allowed rather than
     * reported as a malformed URL. */
    if (url == NULL || curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
        *err = refuse(out, "invalid_arguments", "url: not an absolute URL");
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        *err = refuse(out, "not_allowed", "only http and https URLs are allowed");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || host == NULL) {
        *err = refuse(out, "invalid_arguments", "url: no host");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK && user != NULL) {
        *err = refuse(out, "not_allowed", "URLs with credentials are not allowed");
        goto out;
    }
    if (!is_allowed(def, host)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "host '%.200s' is not on the tool's allow_hosts list", host);
        *err = refuse(out, "not_allowed", msg);
        goto out;
    }
    is_ok = true;
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    return is_ok;
}

/* GET the URL in @p u with @p curl into @p body: http and https only, no redirect followed,
 * the tool's timeout. */
static CURLcode
perform_get(CURL *curl, const struct tool_def *def, CURLU *u, struct body *body)
{
    curl_easy_setopt(curl, CURLOPT_CURLU, u);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                     (long)(def->timeout_ms != 0 ? def->timeout_ms : DEFAULT_TIMEOUT_MS));
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "weft-http_get");
    return curl_easy_perform(curl);
}

/* The outcome of a GET that got an answer with HTTP @p status: {"status", "body", "truncated"},
 * plus "location" for a redirect; a status outside 2xx is an error ("http_status"). */
static weft_err
answer_outcome(CURL *curl, long status, const struct body *body, struct tool_outcome *out)
{
    json_t *text = NULL;
    json_t *result = NULL;
    char *location = NULL;

    out->exit_code = (int)status;
    out->is_truncated = body->is_truncated;
    text = body_text(body);
    if (text == NULL) {
        text = json_string("(binary body not shown)");
    }
    if (status < 200 || status > 299) {
        out->is_error = true;
        snprintf(out->error_type, sizeof(out->error_type), "%s", "http_status");
    }
    result = json_pack("{s:i, s:o, s:b}", "status", (int)status, "body", text, "truncated",
                       body->is_truncated);
    /* A redirect is not followed (the target host may not be allowed); the model sees where
     * it points and may ask for it, which checks the allowlist again. */
    if (result != NULL && status >= 300 && status <= 399 &&
        curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location != NULL) {
        json_t *loc = json_string(location);
        if (loc == NULL || json_object_set_new(result, "location", loc) != 0) {
            json_decref(result);
            result = NULL;
        }
    }
    return finish(out, result);
}

weft_err
weft__tool_http_get(const struct tool_def *def, const json_t *args, struct tool_outcome *out)
{
    const char *url = json_string_value(json_object_get(args, "url"));
    CURLU *u = NULL;
    CURL *curl = NULL;
    struct body body;
    long status = 0;
    CURLcode rc = CURLE_OK;
    weft_err err = WEFT_OK;

    if (!weft__rt_curl_ready()) {
        return WEFT_EIO;
    }
    memset(&body, 0, sizeof(body));
    weft__buf_init(&body.buf, 0);
    body.max = def->max_output != 0 ? def->max_output : DEFAULT_MAX_OUTPUT;
    u = curl_url();
    if (u == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    if (!check_url(def, u, url, out, &err)) {
        goto out;
    }
    curl = curl_easy_init();
    if (curl == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    rc = perform_get(curl, def, u, &body);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && body.is_truncated)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "GET failed: %s", curl_easy_strerror(rc));
        err = refuse(out, rc == CURLE_OPERATION_TIMEDOUT ? "timeout" : "connection", msg);
        goto out;
    }
    err = answer_outcome(curl, status, &body, out);
out:
    curl_easy_cleanup(curl);
    curl_url_cleanup(u);
    weft__buf_cleanup(&body.buf);
    return err;
}
