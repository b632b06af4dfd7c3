/* runtime/llm/record.c - `weft run --record FILE`: every LLM exchange of a run, written in the
 * script format that the scripted provider replays.
 *
 * The file is rewritten whole after each exchange through a temporary file and rename(2), so
 * a reader (or a crash) never sees half a file. Runs make tens to hundreds of calls, so
 * rewriting is cheap next to the calls themselves. Requests are stored for the reader's
 * benefit (model and messages only: credentials live in HTTP headers, which are never kept).
 *
 * The file is written once when the recording starts (an empty script), so that a path that
 * cannot be written fails the run before its first step with one clear error, instead of one
 * error per exchange after the work is done. Recordings hold prompts and answers: the file is
 * created 0600, like the span store and the traces file.
 */
#include "llm.h"

#include "base/buf.h"
#include "base/log.h"
#include "base/mem.h"
#include "runtime/common/secrets.h"
#include "tracing/redact.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct llm_recording {
    char *path;
    json_t *script;
    bool is_failing; /* the last save failed and was logged: log the next failure not again */
};

static weft_err save(struct llm_recording *rec, char *error, size_t error_len);

weft_err
weft__llm_recording_new(const char *path, struct llm_recording **out, char *error, size_t error_len)
{
    struct llm_recording *rec = NULL;
    weft_err err = WEFT_OK;

    if (path == NULL || out == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    rec = weft__calloc(1, sizeof(*rec));
    if (rec == NULL) {
        return WEFT_ENOMEM;
    }
    rec->path = weft__strdup(path);
    rec->script = json_pack("{s:i, s:o}", "version", 1, "responses", json_object());
    if (rec->path == NULL || rec->script == NULL) {
        weft__llm_recording_free(rec);
        return WEFT_ENOMEM;
    }
    err = save(rec, error, error_len);
    if (err != WEFT_OK) {
        weft__llm_recording_free(rec);
        return err == WEFT_EIO ? WEFT_EINVAL : err;
    }
    *out = rec;
    return WEFT_OK;
}

json_t *
weft__llm_exchange_json(const struct llm_request *request,
                        const char *provider_name,
                        const struct llm_response *response,
                        const struct llm_error *error)
{
    json_t *r = json_object();
    json_t *req = json_pack("{s:s, s:O}", "model", request->model != NULL ? request->model : "",
                            "messages", request->messages);

    if (r == NULL || req == NULL) {
        json_decref(r);
        json_decref(req);
        return NULL;
    }
    json_object_set_new(r, "provider", json_string(provider_name != NULL ? provider_name : ""));
    if (response == NULL) {
        json_object_set_new(
            r, "error", json_pack("{s:s, s:s}", "type", error->type, "message", error->message));
    } else {
        json_t *calls = json_array();
        json_t *usage = json_object();
        if (response->content != NULL) {
            json_object_set_new(r, "content", json_string(response->content));
        }
        for (size_t i = 0; calls != NULL && i < response->tool_call_count; i++) {
            json_array_append_new(calls,
                                  json_pack("{s:s, s:s, s:s}", "id", response->tool_calls[i].id,
                                            "name", response->tool_calls[i].name, "arguments",
                                            response->tool_calls[i].arguments));
        }
        if (json_array_size(calls) > 0) {
            json_object_set(r, "tool_calls", calls);
        }
        json_decref(calls);
        if (response->input_tokens >= 0) {
            json_object_set_new(usage, "input_tokens", json_integer(response->input_tokens));
        }
        if (response->output_tokens >= 0) {
            json_object_set_new(usage, "output_tokens", json_integer(response->output_tokens));
        }
        json_object_set_new(r, "usage", usage);
        if (response->response_model != NULL) {
            json_object_set_new(r, "model", json_string(response->response_model));
        }
    }
    json_object_set_new(r, "request", req);
    return r;
}

/* Open @p path for writing, created (or reset to) mode 0600. */
static FILE *
open_private(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    FILE *f = NULL;

    if (fd < 0) {
        return NULL;
    }
    if (fchmod(fd, 0600) != 0 || (f = fdopen(fd, "w")) == NULL) {
        int saved = errno;
        close(fd);
        errno = saved;
        return NULL;
    }
    return f;
}

/* Write the script through "PATH.tmp" and rename(2). On failure @p error (may be NULL) names
 * the path and the system's reason. @return WEFT_OK, WEFT_EIO, WEFT_ENOMEM. */
static weft_err
save(struct llm_recording *rec, char *error, size_t error_len)
{
    struct weft__buf tmp;
    char *raw = NULL;
    char *text = NULL;
    FILE *f = NULL;
    int saved_errno = 0;
    weft_err err = WEFT_OK;

    weft__buf_init(&tmp, 0);
    if (weft__buf_printf(&tmp, "%s.tmp", rec->path) != WEFT_OK) {
        weft__buf_cleanup(&tmp);
        return WEFT_ENOMEM;
    }
    /* Message content is kept (that is the point of a recording); credentials are not. */
    raw = json_dumps(rec->script, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    text = raw != NULL ? weft__redact_text(raw) : NULL;
    /* Belt: answers and tool outputs were scrubbed at ingress; the input was not. */
    if (text != NULL && weft__rt_secrets_scrub_owned(&text) != WEFT_OK) {
        text = NULL;
    }
    if (text == NULL) {
        err = WEFT_ENOMEM;
        goto out;
    }
    errno = 0;
    f = open_private(tmp.data);
    if (f == NULL || fputs(text, f) < 0) {
        saved_errno = errno;
        err = WEFT_EIO;
    }
    if (f != NULL && fclose(f) != 0 && err == WEFT_OK) {
        saved_errno = errno;
        err = WEFT_EIO;
    }
    if (err == WEFT_OK && rename(tmp.data, rec->path) != 0) {
        saved_errno = errno;
        err = WEFT_EIO;
    }
    if (err != WEFT_OK) {
        if (f != NULL) {
            remove(tmp.data);
        }
        if (error != NULL && error_len > 0) {
            snprintf(error, error_len, "--record %s: cannot write: %s", rec->path,
                     strerror(saved_errno != 0 ? saved_errno : EIO));
        }
        if (error == NULL && !rec->is_failing) { /* with @p error, the caller reports it */
            WEFT_LOG(WEFT_LOG_ERROR, "--record %s: cannot write: %s", rec->path,
                     strerror(saved_errno != 0 ? saved_errno : EIO));
        }
        rec->is_failing = true;
    } else {
        rec->is_failing = false;
    }
out:
    free(raw);
    weft__free(text);
    weft__buf_cleanup(&tmp);
    return err;
}

weft_err
weft__llm_recording_add(struct llm_recording *rec,
                        const struct llm_request *request,
                        const char *provider_name,
                        const struct llm_response *response,
                        const struct llm_error *error)
{
    json_t *responses = NULL;
    json_t *agent = NULL;
    json_t *list = NULL;
    json_t *entry = NULL;
    const char *purpose = NULL;
    const char *who = NULL;

    if (rec == NULL || request == NULL || (response == NULL && error == NULL)) {
        return WEFT_EINVAL;
    }
    purpose = weft__llm_purpose_name(request->purpose);
    responses = json_object_get(rec->script, "responses");
    who = request->step_key != NULL ? request->step_key : request->agent;
    agent = json_object_get(responses, who);
    if (agent == NULL) {
        agent = json_object();
        if (agent == NULL || json_object_set_new(responses, who, agent) != 0) {
            return WEFT_ENOMEM;
        }
    }
    list = json_object_get(agent, purpose);
    if (list == NULL) {
        list = json_array();
        if (list == NULL || json_object_set_new(agent, purpose, list) != 0) {
            return WEFT_ENOMEM;
        }
    }
    entry = weft__llm_exchange_json(request, provider_name, response, error);
    if (entry == NULL || json_array_append_new(list, entry) != 0) {
        return WEFT_ENOMEM;
    }
    return save(rec, NULL, 0);
}

void
weft__llm_recording_free(struct llm_recording *rec)
{
    if (rec == NULL) {
        return;
    }
    weft__free(rec->path);
    json_decref(rec->script);
    weft__free(rec);
}
