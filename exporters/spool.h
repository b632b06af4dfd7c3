/* exporters/spool.h - the on-disk spool of an HTTP exporter: encoded requests its retries gave
 * up on, kept in files until the endpoint answers again, then sent oldest first (the
 * Collector's file-backed persistent queue, for one exporter).
 *
 * Layout: <root>/<kind>-<hash of the URL>/<slot>/, one file per request named by a sequence
 * number, so that two exporters never share a directory and order survives restarts. A
 * process works in the first slot whose lock file it can flock(); at open it also takes over
 * the files of every other slot nobody holds (a process that died), so the next process with
 * the same spool sends what a crashed one left.
 *
 * Threads: put, peek, pop, drop and close run on one thread at a time (the exporter's export
 * thread). stats may be called from any thread (counters are atomic).
 */
#ifndef WEFT_EXPORTERS_SPOOL_H
#define WEFT_EXPORTERS_SPOOL_H

#include "base/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <weft/export.h>

struct weft__spool;

/* Flags of a spooled request: how its bytes go on the wire. */
#define WEFT__SPOOL_JSON 0x1u /* Content-Type: application/json (else x-protobuf) */
#define WEFT__SPOOL_GZIP 0x2u /* Content-Encoding: gzip */

/* Slots per exporter directory: concurrent processes with the same spool get one each. */
#define WEFT__SPOOL_SLOTS 16

#define WEFT__SPOOL_DEFAULT_MAX_BYTES (256ull << 20)
#define WEFT__SPOOL_DEFAULT_MAX_FILES 65536u

struct weft__spool_config {
    const char *root; /* the spool root, e.g. $WEFT_HOME/spool; created when missing */
    const char *kind; /* "otlp", "langfuse": first part of the directory name */
    const char *url;  /* the endpoint; its hash is the second part */
    uint64_t max_bytes;
    size_t max_files;
};

/* Resolve whether a spool is wanted and where: @p mode 0 reads WEFT_EXPORT_SPOOL (default
 * off), 1 off, 2 on; @p dir NULL reads WEFT_EXPORT_SPOOL_DIR, else $WEFT_HOME/spool, else
 * ./.weft/spool; @p max_bytes 0 reads WEFT_EXPORT_SPOOL_MAX_BYTES (default 256 MiB).
 * @return true when a spool is wanted; *root (written into @p buf) and *out_max set. */
bool weft__spool_resolve(
    int mode, const char *dir, uint64_t max_bytes, char *buf, size_t buf_len, uint64_t *out_max);

/* Open (and lock) the spool of one exporter. Leftover temporary files and files that fail
 * their header check are deleted and counted as corrupt.
 * @return WEFT_OK, WEFT_EINVAL, WEFT_EIO (a directory cannot be created or read: logged),
 * WEFT_ESTATE (every slot is held by a live process), WEFT_ENOMEM. */
weft_err weft__spool_open(const struct weft__spool_config *cfg, struct weft__spool **out);

/* Unlock and free; the files stay. NULL is a no-op. */
void weft__spool_close(struct weft__spool *s);

/* The slot directory in use. */
const char *weft__spool_dir(const struct weft__spool *s);

/* Write one request (temp file, fsync, rename, fsync of the directory). Oldest files are
 * deleted first, their spans counted as dropped, until it fits the caps.
 * @return WEFT_OK, WEFT_ELIMIT (larger than the whole cap: not written, counted as dropped),
 * WEFT_EIO (not written; errno says why), WEFT_ENOMEM. */
weft_err weft__spool_put(
    struct weft__spool *s, const void *body, size_t len, uint32_t flags, uint32_t spans);

/* True when no request waits. */
bool weft__spool_is_empty(const struct weft__spool *s);

/* Load the oldest request into @p body (reset first). A file that fails its checks (a torn
 * or damaged write) is deleted, counted as corrupt, and the next one is tried.
 * @return WEFT_OK, WEFT_ENOTFOUND (empty), WEFT_ENOMEM. */
weft_err
weft__spool_peek(struct weft__spool *s, struct weft__buf *body, uint32_t *flags, uint32_t *spans);

/* Delete the oldest request after the endpoint accepted it (counted as drained). */
void weft__spool_pop(struct weft__spool *s);

/* Delete the oldest request after a final refusal (counted as rejected). */
void weft__spool_reject(struct weft__spool *s);

/* Count @p spans that could not be spooled (a failed write). */
void weft__spool_count_lost(struct weft__spool *s, uint64_t spans);

/* Read the counters (thread-safe). NULL-safe: zeros. */
void weft__spool_stats(const struct weft__spool *s, struct weft_spool_stats *out);

#endif /* WEFT_EXPORTERS_SPOOL_H */
