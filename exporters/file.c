/* exporters/file.c - the file exporter: appends one OTLP JSON ExportTraceServiceRequest per
 * line (the collector's file format), so `jq`, the collector's otlpjsonfile receiver and any
 * OTLP JSON reader can replay it.
 *
 * Each batch is encoded into one buffer and handed to write(2) on an O_APPEND descriptor:
 * nothing sits in a user-space buffer between batches (a crash loses at most the batch being
 * written), and one write per line keeps lines whole when several processes append to the
 * same file. There is no fsync: a trace file is not worth a disk flush per batch.
 *
 * Invariants: the file is created 0600 (spans can carry prompts) inside directories created
 * 0700. A batch too large for one request (64 MiB, the OTLP limit) is split in halves until
 * each part fits. A write failure is logged once per run of failures, with the path.
 * Shutdown only raises a flag (it may race with an export that overran its deadline); the
 * descriptor is closed in destroy.
 */
#include "base/buf.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "otlp_encode.h"
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES (64u << 20) /* REFERENCE.md: keep a request under 64 MiB */

struct file_exporter {
    char *path;
    int fd;
    struct weft__buf line;
    atomic_bool is_shut_down;
    bool has_failed; /* the last write failed: do not log again until one succeeds */
};

static void
log_failure(struct file_exporter *fx, const char *what, int err)
{
    if (!fx->has_failed) {
        WEFT_LOG(WEFT_LOG_ERROR, "file exporter %s: %s: %s", fx->path, what, strerror(err));
    }
    fx->has_failed = true;
}

static weft_err
write_all(struct file_exporter *fx, const char *data, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = write(fx->fd, data + done, len - done);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            int saved = n < 0 ? errno : EIO;

            /* Finish a torn line so that the lines after it still parse. */
            if (done > 0 && write(fx->fd, "\n", 1) < 0) {
                saved = errno;
            }
            log_failure(fx, "cannot write", saved);
            return WEFT_EIO;
        }
        done += (size_t)n;
    }
    return WEFT_OK;
}

static weft_err
export_part(struct file_exporter *fx, const struct weft_span_data *const *spans, size_t count)
{
    weft_err err = WEFT_OK;

    weft__buf_reset(&fx->line);
    err = weft__otlp_encode_json(spans, count, &fx->line);
    if (err == WEFT_OK) {
        err = weft__buf_append_byte(&fx->line, '\n');
    }
    if (err == WEFT_ELIMIT && count > 1) {
        size_t half = count / 2;

        err = export_part(fx, spans, half);
        if (err == WEFT_OK) {
            err = export_part(fx, spans + half, count - half);
        }
        return err;
    }
    if (err != WEFT_OK) {
        if (err == WEFT_ELIMIT) {
            WEFT_LOG(WEFT_LOG_WARN, "file exporter %s: a span over %u bytes was dropped", fx->path,
                     LINE_MAX_BYTES);
        }
        return err;
    }
    return write_all(fx, fx->line.data, fx->line.len);
}

static weft_err
file_export(void *self,
            const struct weft_span_data *const *spans,
            size_t count,
            uint64_t deadline_ns,
            struct weft_export_result *result)
{
    struct file_exporter *fx = self;
    weft_err err = WEFT_OK;

    (void)deadline_ns; /* a local write; nothing to cut short */
    (void)result;
    if (atomic_load(&fx->is_shut_down)) {
        return WEFT_ESTATE;
    }
    if (count == 0) {
        return WEFT_OK; /* no empty envelopes (REFERENCE.md) */
    }
    if (spans == NULL) {
        return WEFT_EINVAL;
    }
    err = export_part(fx, spans, count);
    if (err == WEFT_OK) {
        fx->has_failed = false;
    }
    /* Keep a huge batch's buffer from pinning its memory until the next one. */
    if (fx->line.cap > (1u << 20)) {
        weft__buf_cleanup(&fx->line);
    }
    return err;
}

static weft_err
file_force_flush(void *self, uint64_t deadline_ns)
{
    (void)self;
    (void)deadline_ns;
    return WEFT_OK; /* every batch reached the kernel before export returned */
}

static weft_err
file_shutdown(void *self, uint64_t deadline_ns)
{
    struct file_exporter *fx = self;

    (void)deadline_ns;
    atomic_store(&fx->is_shut_down, true);
    return WEFT_OK;
}

static void
file_destroy(void *self)
{
    struct file_exporter *fx = self;

    if (fx == NULL) {
        return;
    }
    if (fx->fd >= 0) {
        close(fx->fd);
    }
    weft__buf_cleanup(&fx->line);
    weft__free(fx->path);
    weft__free(fx);
}

static const struct weft_exporter_ops file_ops = {
    .name = "file",
    .export_batch = file_export,
    .force_flush = file_force_flush,
    .shutdown = file_shutdown,
    .destroy = file_destroy,
};

weft_err
weft_file_exporter_new(const char *path, struct weft_exporter **out)
{
    struct file_exporter *fx = NULL;
    weft_err err = WEFT_OK;

    if (out != NULL) {
        *out = NULL;
    }
    if (path == NULL || path[0] == '\0' || out == NULL) {
        return WEFT_EINVAL;
    }
    fx = weft__calloc(1, sizeof(*fx));
    if (fx == NULL) {
        return WEFT_ENOMEM;
    }
    fx->fd = -1;
    atomic_init(&fx->is_shut_down, false);
    weft__buf_init(&fx->line, LINE_MAX_BYTES);
    fx->path = weft__strdup(path);
    if (fx->path == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    err = weft__mkdir_parents(path, 0700);
    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_ERROR, "file exporter %s: cannot create its directory: %s", path,
                 strerror(errno));
    }
    if (err != WEFT_OK) {
        goto fail;
    }
    fx->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fx->fd < 0) {
        WEFT_LOG(WEFT_LOG_ERROR, "file exporter %s: cannot open: %s", path, strerror(errno));
        err = WEFT_EIO;
        goto fail;
    }
    return weft_exporter_new(&file_ops, fx, out);
fail:
    file_destroy(fx);
    return err;
}
