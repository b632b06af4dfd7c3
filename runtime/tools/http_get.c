/* runtime/tools/http_get.c - the http_get tool: GET a URL whose host is on the tool's
 * allowlist.
 *
 * The host is taken from the URL as libcurl parses it (weft__http_url_parse), and the URL
 * libcurl normalised there is what the transfer uses, so the host judged is the host curl
 * connects to: userinfo tricks ("http://allowed@evil/") and odd spellings (numeric IPv4 forms,
 * which curl normalises) cannot make the two disagree. URLs with credentials are refused outright.
 * Redirects are not followed: a 3xx comes back to the model with its "location", and that URL
 * meets the allowlist again when the model asks for it. Only http and https are accepted,
 * both when judging the URL and as the transfer's protocol whitelist.
 *
 * Invariant: nothing is sent to a host that is not on the list. The body is capped at
 * max_output: the transfer stops there and the outcome says "truncated".
 */
#include "tools.h"

#include "net/http_client.h"

#include "base/buf.h"
#include "base/mem.h"
#include "base/utf8.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define DEFAULT_TIMEOUT_MS 30000u
#define DEFAULT_MAX_OUTPUT (64u << 10)

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
body_text(const struct weft__http_response *r)
{
    const char *data = r->body.data != NULL ? r->body.data : "";
    size_t len = r->body.len;

    if (r->is_truncated) {
        len = weft__utf8_complete(data, len);
    }
    return json_stringn(data, len);
}

/* May the tool fetch @p url (parsed into @p u)? Only absolute http and https URLs without
 * credentials, to a host on the tool's allow_hosts list. @return true if so; otherwise false,
 * with the refusal in @p out and refuse()'s result in *err. */
static bool
check_url(const struct tool_def *def,
          struct weft__http_url *u,
          const char *url,
          struct tool_outcome *out,
          weft_err *err)
{
    weft_err parsed = WEFT_EINVAL;

    /* Parse any scheme, so that "ftp://" or "file://" is refused as not allowed rather than
     * reported as a malformed URL. */
    if (url != NULL) {
        parsed = weft__http_url_parse(url, true, u);
    }
    if (parsed == WEFT_ENOMEM) {
        *err = WEFT_ENOMEM;
        return false;
    }
    if (parsed != WEFT_OK || u->scheme == NULL) {
        *err = refuse(out, "invalid_arguments", "url: not an absolute URL");
        return false;
    }
    if (strcasecmp(u->scheme, "http") != 0 && strcasecmp(u->scheme, "https") != 0) {
        *err = refuse(out, "not_allowed", "only http and https URLs are allowed");
        return false;
    }
    if (u->host == NULL || u->url == NULL) {
        *err = refuse(out, "invalid_arguments", "url: no host");
        return false;
    }
    if (u->user != NULL) {
        *err = refuse(out, "not_allowed", "URLs with credentials are not allowed");
        return false;
    }
    if (!is_allowed(def, u->host)) {
        char msg[300];
        snprintf(msg, sizeof(msg), "host '%.200s' is not on the tool's allow_hosts list", u->host);
        *err = refuse(out, "not_allowed", msg);
        return false;
    }
    return true;
}

/* The outcome of a GET that got an answer: {"status", "body", "truncated"}, plus "location"
 * for a redirect; a status outside 2xx is an error ("http_status"). */
static weft_err
answer_outcome(const struct weft__http_response *r, struct tool_outcome *out)
{
    long status = r->status;
    json_t *text = NULL;
    json_t *result = NULL;

    out->exit_code = (int)status;
    out->is_truncated = r->is_truncated;
    text = body_text(r);
    if (text == NULL) {
        text = json_string("(binary body not shown)");
    }
    if (status < 200 || status > 299) {
        out->is_error = true;
        snprintf(out->error_type, sizeof(out->error_type), "%s", "http_status");
    }
    result = json_pack("{s:i, s:o, s:b}", "status", (int)status, "body", text, "truncated",
                       r->is_truncated);
    /* A redirect is not followed (the target host may not be allowed); the model sees where
     * it points and may ask for it, which checks the allowlist again. */
    if (result != NULL && status >= 300 && status <= 399 && r->redirect_url != NULL) {
        json_t *loc = json_string(r->redirect_url);
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
    struct weft__http_url u;
    struct weft__http_client_request req;
    struct weft__http_response resp;
    weft_err err = WEFT_OK;

    if (!weft__http_global_init()) {
        return WEFT_EIO;
    }
    memset(&u, 0, sizeof(u));
    weft__http_response_init(&resp);
    if (!check_url(def, &u, url, out, &err)) {
        goto out;
    }
    /* The transfer uses the URL as parsed and normalised above, so the host judged is the
     * host libcurl connects to. http and https only, no redirect followed. */
    memset(&req, 0, sizeof(req));
    req.url = u.url;
    req.timeout_ms = def->timeout_ms != 0 ? def->timeout_ms : DEFAULT_TIMEOUT_MS;
    req.max_response_bytes = def->max_output != 0 ? def->max_output : DEFAULT_MAX_OUTPUT;
    req.is_truncate_ok = true;
    req.user_agent = "weft-http_get";
    err = weft__http_perform(&req, NULL, &resp);
    if (err == WEFT_ENOMEM && resp.failure == WEFT__HTTP_FAIL_NONE) {
        goto out;
    }
    if (err != WEFT_OK) {
        char msg[300];
        snprintf(msg, sizeof(msg), "GET failed: %s", resp.error);
        err = refuse(out, err == WEFT_ETIMEDOUT ? "timeout" : "connection", msg);
        goto out;
    }
    err = answer_outcome(&resp, out);
out:
    weft__http_url_cleanup(&u);
    weft__http_response_cleanup(&resp);
    return err;
}
