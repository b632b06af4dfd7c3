/* exporters/spool.c - the on-disk spool of an HTTP exporter (see spool.h).
 *
 * One file per request, named by a 20-digit sequence number ("00000000000000000042.req"), so
 * a directory listing sorted by name is the order of spooling, across restarts too. A file is
 * a 32-byte header and the request's bytes as they go on the wire:
 *
 *   0  "WEFTSPL\x01"   magic and format version
 *   8  u32 flags       WEFT__SPOOL_JSON, WEFT__SPOOL_GZIP
 *   12 u32 spans       spans in the request (what a drop of the file loses, for the counters)
 *   16 u64 body_len
 *   24 u32 body_crc    CRC-32 (zlib) of the body
 *   28 u32 header_crc  CRC-32 of bytes 0..27
 *
 * all little-endian. A file is written under a temporary name, fsync'd, renamed, and the
 * directory fsync'd: after a crash or kill -9 a file either exists whole or not at all. The
 * checks still run on every read (size = 32 + body_len, both CRCs), because a disk, a full
 * file system or a person can damage a file after the fact: a file that fails them is deleted
 * and counted, never sent. Leftover temporary files are a write a crash cut short: deleted and
 * counted the same way.
 *
 * Invariants: the entries array holds every .req file of the slot in sequence order, and the
 * byte, file and span gauges are their sums. Only the thread that owns the spool changes them.
 *
 * Locking: flock() on <slot>/lock, held for the life of the spool; the kernel releases it when
 * the process dies, however it dies, so a lock never outlives its holder. Two live processes
 * with the same spool therefore never send the same file: the second takes the next slot.
 */
#include "spool.h"

#include "base/env.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define HEADER_BYTES  32u
#define NAME_DIGITS   20
#define MIN_MAX_BYTES 4096u

static const unsigned char MAGIC[8] = {'W', 'E', 'F', 'T', 'S', 'P', 'L', 1};

struct entry {
    uint64_t seq;
    uint64_t bytes; /* the file's size */
    uint32_t spans;
};

struct weft__spool {
    char *dir;   /* the slot directory */
    int dir_fd;  /* O_DIRECTORY, for openat/renameat/unlinkat and the directory fsync */
    int lock_fd; /* holds the flock */
    uint64_t max_bytes;
    size_t max_files;
    uint64_t next_seq;
    struct entry *entries; /* entries[head .. head + count) in sequence order */
    size_t head;
    size_t count;
    size_t cap;
    atomic_uint_fast64_t requests_spooled;
    atomic_uint_fast64_t spans_spooled;
    atomic_uint_fast64_t requests_drained;
    atomic_uint_fast64_t spans_drained;
    atomic_uint_fast64_t spans_dropped_cap;
    atomic_uint_fast64_t requests_dropped_cap;
    atomic_uint_fast64_t spans_rejected;
    atomic_uint_fast64_t files_corrupt;
    atomic_uint_fast64_t spans_corrupt;
    atomic_uint_fast64_t spans_lost;
    atomic_uint_fast64_t bytes;
    atomic_uint_fast64_t files;
    atomic_uint_fast64_t spans;
};

/* ------------------------------------------------------------------------------------------ */
/* Configuration                                                                               */

bool
weft__spool_resolve(
    int mode, const char *dir, uint64_t max_bytes, char *buf, size_t buf_len, uint64_t *out_max)
{
    bool on = mode == 2 || (mode == 0 && weft__env_bool("WEFT_EXPORT_SPOOL", false));
    const char *home = NULL;
    int n = 0;

    if (!on) {
        return false;
    }
    if (dir == NULL) {
        dir = weft__env("WEFT_EXPORT_SPOOL_DIR");
    }
    if (dir != NULL && dir[0] != '\0') {
        n = snprintf(buf, buf_len, "%s", dir);
    } else {
        home = weft__env("WEFT_HOME");
        n = snprintf(buf, buf_len, "%s/spool", home != NULL && home[0] != '\0' ? home : ".weft");
    }
    if (n < 0 || (size_t)n >= buf_len) {
        WEFT_LOG(WEFT_LOG_WARN, "export spool: the directory path is too long; no spool");
        return false;
    }
    *out_max = max_bytes != 0
                   ? max_bytes
                   : weft__env_u64("WEFT_EXPORT_SPOOL_MAX_BYTES", WEFT__SPOOL_DEFAULT_MAX_BYTES,
                                   MIN_MAX_BYTES, UINT64_C(1) << 50);
    if (*out_max < MIN_MAX_BYTES) {
        *out_max = MIN_MAX_BYTES;
    }
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* The file format                                                                             */

static void
put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static void
put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (unsigned char)(v >> (8 * i));
    }
}

static uint32_t
get_u32(const unsigned char *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

static uint64_t
get_u64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* zlib's crc32 takes a uInt length: feed large bodies in pieces. */
static uint32_t
crc_of(const void *data, size_t len)
{
    const unsigned char *p = data;
    uLong crc = crc32(0L, Z_NULL, 0);

    while (len > 0) {
        uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;

        crc = crc32(crc, p, n);
        p += n;
        len -= n;
    }
    return (uint32_t)crc;
}

static void
make_header(unsigned char *h, uint32_t flags, uint32_t spans, const void *body, size_t len)
{
    memcpy(h, MAGIC, sizeof(MAGIC));
    put_u32(h + 8, flags);
    put_u32(h + 12, spans);
    put_u64(h + 16, len);
    put_u32(h + 24, crc_of(body, len));
    put_u32(h + 28, crc_of(h, 28));
}

/* The header's own checks: magic and CRC. */
static bool
header_ok(const unsigned char *h)
{
    return memcmp(h, MAGIC, sizeof(MAGIC)) == 0 && get_u32(h + 28) == crc_of(h, 28);
}

static void
seq_name(char *out, size_t len, uint64_t seq, const char *ext)
{
    snprintf(out, len, "%0*" PRIu64 ".%s", NAME_DIGITS, seq, ext);
}

/* A sequence number out of "<20 digits>.<ext>", or false for any other name. */
static bool
parse_name(const char *name, const char *ext, uint64_t *seq)
{
    uint64_t v = 0;

    for (int i = 0; i < NAME_DIGITS; i++) {
        if (name[i] < '0' || name[i] > '9') {
            return false;
        }
        v = v * 10 + (uint64_t)(name[i] - '0');
    }
    if (name[NAME_DIGITS] != '.' || strcmp(name + NAME_DIGITS + 1, ext) != 0) {
        return false;
    }
    *seq = v;
    return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Entries                                                                                     */

static struct entry *
oldest(struct weft__spool *s)
{
    return s->count == 0 ? NULL : &s->entries[s->head];
}

static weft_err
append_entry(struct weft__spool *s, uint64_t seq, uint64_t bytes, uint32_t spans)
{
    if (s->head + s->count == s->cap) {
        if (s->head > 0) {
            memmove(s->entries, s->entries + s->head, s->count * sizeof(*s->entries));
            s->head = 0;
        } else {
            size_t cap = s->cap == 0 ? 64 : s->cap * 2;
            struct entry *grown = weft__realloc(s->entries, cap * sizeof(*grown));

            if (grown == NULL) {
                return WEFT_ENOMEM;
            }
            s->entries = grown;
            s->cap = cap;
        }
    }
    s->entries[s->head + s->count] = (struct entry){.seq = seq, .bytes = bytes, .spans = spans};
    s->count++;
    atomic_fetch_add(&s->bytes, bytes);
    atomic_fetch_add(&s->files, 1);
    atomic_fetch_add(&s->spans, spans);
    return WEFT_OK;
}

/* Delete the oldest file and forget it. */
static void
remove_oldest(struct weft__spool *s)
{
    struct entry *e = oldest(s);
    char name[NAME_DIGITS + 8];

    if (e == NULL) {
        return;
    }
    seq_name(name, sizeof(name), e->seq, "req");
    if (unlinkat(s->dir_fd, name, 0) != 0 && errno != ENOENT) {
        WEFT_LOG(WEFT_LOG_WARN, "export spool %s: cannot delete %s: %s", s->dir, name,
                 strerror(errno));
    }
    atomic_fetch_sub(&s->bytes, e->bytes);
    atomic_fetch_sub(&s->files, 1);
    atomic_fetch_sub(&s->spans, e->spans);
    s->head++;
    s->count--;
    if (s->count == 0) {
        s->head = 0;
    }
}

static int
cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a;
    const struct entry *y = b;

    return x->seq < y->seq ? -1 : x->seq > y->seq ? 1 : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Opening: lock a slot, read it, take over the slots of dead processes                        */

static void
count_corrupt(struct weft__spool *s, uint32_t spans)
{
    atomic_fetch_add(&s->files_corrupt, 1);
    atomic_fetch_add(&s->spans_corrupt, spans);
}

/* The .req files of the directory @p fd with a sound header and size, sorted; temporary
 * files and unsound files are deleted and counted on @p s. */
static weft_err
scan_dir(struct weft__spool *s, int fd, struct entry **out, size_t *out_count)
{
    int dup_fd = dup(fd);
    DIR *d = dup_fd < 0 ? NULL : fdopendir(dup_fd);
    struct dirent *de = NULL;
    struct entry *list = NULL;
    size_t count = 0;
    size_t cap = 0;
    weft_err err = WEFT_OK;

    *out = NULL;
    *out_count = 0;
    if (d == NULL) {
        if (dup_fd >= 0) {
            close(dup_fd);
        }
        return WEFT_EIO;
    }
    rewinddir(d);
    while ((de = readdir(d)) != NULL) {
        unsigned char h[HEADER_BYTES];
        struct stat st;
        uint64_t seq = 0;
        uint32_t spans = 0;
        bool is_sound = false;
        int file = -1;

        if (parse_name(de->d_name, "tmp", &seq)) {
            /* A write a crash cut short: never renamed, so never part of the spool. */
            (void)unlinkat(fd, de->d_name, 0);
            count_corrupt(s, 0);
            continue;
        }
        if (!parse_name(de->d_name, "req", &seq)) {
            continue;
        }
        file = openat(fd, de->d_name, O_RDONLY | O_CLOEXEC);
        if (file >= 0 && fstat(file, &st) == 0 &&
            pread(file, h, sizeof(h), 0) == (ssize_t)sizeof(h) && header_ok(h)) {
            spans = get_u32(h + 12);
            is_sound = (uint64_t)st.st_size == HEADER_BYTES + get_u64(h + 16);
        }
        if (file >= 0) {
            close(file);
        }
        if (!is_sound) {
            (void)unlinkat(fd, de->d_name, 0);
            count_corrupt(s, spans);
            continue;
        }
        if (count == cap) {
            size_t ncap = cap == 0 ? 64 : cap * 2;
            struct entry *grown = weft__realloc(list, ncap * sizeof(*grown));

            if (grown == NULL) {
                err = WEFT_ENOMEM;
                break;
            }
            list = grown;
            cap = ncap;
        }
        list[count++] = (struct entry){.seq = seq, .bytes = (uint64_t)st.st_size, .spans = spans};
    }
    closedir(d);
    if (err != WEFT_OK) {
        weft__free(list);
        return err;
    }
    if (count > 1) {
        qsort(list, count, sizeof(*list), cmp_entry);
    }
    *out = list;
    *out_count = count;
    return WEFT_OK;
}

/* Open <exdir>/<slot> (created when missing) and try its lock. @return the lock descriptor
 * (locked), -1 when another process holds it, -2 on an error (errno set). *dir_fd is the
 * directory's descriptor when locked. */
static int
try_slot(const char *exdir, int slot, bool create, int *dir_fd)
{
    char path[4096];
    int fd = -1;
    int lock = -1;

    snprintf(path, sizeof(path), "%s/%d", exdir, slot);
    if (create && mkdir(path, 0700) != 0 && errno != EEXIST) {
        return -2;
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return errno == ENOENT && !create ? -1 : -2;
    }
    lock = openat(fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock < 0) {
        close(fd);
        return -2;
    }
    if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
        int saved = errno;

        close(lock);
        close(fd);
        errno = saved;
        return saved == EWOULDBLOCK ? -1 : -2;
    }
    *dir_fd = fd;
    return lock;
}

/* Move the files of an unheld slot @p other (its lock held by us now) behind ours, in order. */
static void
adopt_slot(struct weft__spool *s, int other_fd, const char *label)
{
    struct entry *list = NULL;
    size_t count = 0;
    size_t moved = 0;

    if (scan_dir(s, other_fd, &list, &count) != WEFT_OK) {
        return;
    }
    for (size_t i = 0; i < count; i++) {
        char from[NAME_DIGITS + 8];
        char to[NAME_DIGITS + 8];

        seq_name(from, sizeof(from), list[i].seq, "req");
        seq_name(to, sizeof(to), s->next_seq, "req");
        if (renameat(other_fd, from, s->dir_fd, to) != 0) {
            WEFT_LOG(WEFT_LOG_WARN, "export spool: cannot move %s/%s into %s: %s", label, from,
                     s->dir, strerror(errno));
            continue;
        }
        if (append_entry(s, s->next_seq, list[i].bytes, list[i].spans) != WEFT_OK) {
            /* Out of memory: put it back for a later process rather than forget it. */
            (void)renameat(s->dir_fd, to, other_fd, from);
            break;
        }
        s->next_seq++;
        moved++;
    }
    weft__free(list);
    if (moved > 0) {
        (void)fsync(s->dir_fd);
        WEFT_LOG(WEFT_LOG_INFO, "export spool %s: took over %zu requests a stopped process left",
                 s->dir, moved);
    }
}

/* FNV-1a, 64 bits: names the directory of an endpoint. Not a security boundary. */
static uint64_t
hash_url(const char *url)
{
    uint64_t h = UINT64_C(14695981039346656037);

    for (const unsigned char *p = (const unsigned char *)url; *p != '\0'; p++) {
        h ^= *p;
        h *= UINT64_C(1099511628211);
    }
    return h;
}

weft_err
weft__spool_open(const struct weft__spool_config *cfg, struct weft__spool **out)
{
    struct weft__spool *s = NULL;
    char exdir[4096];
    char probe[4200];
    struct entry *list = NULL;
    size_t count = 0;
    int slot = -1;
    int n = 0;
    weft_err err = WEFT_OK;

    if (out == NULL || cfg == NULL || cfg->root == NULL || cfg->kind == NULL || cfg->url == NULL) {
        return WEFT_EINVAL;
    }
    *out = NULL;
    n = snprintf(exdir, sizeof(exdir), "%s/%s-%016" PRIx64, cfg->root, cfg->kind,
                 hash_url(cfg->url));
    if (n < 0 || (size_t)n >= sizeof(exdir)) {
        return WEFT_EINVAL;
    }
    snprintf(probe, sizeof(probe), "%s/0", exdir);
    err = weft__mkdir_parents(probe, 0700);
    if (err == WEFT_EIO) {
        WEFT_LOG(WEFT_LOG_WARN, "export spool: cannot create %s: %s", exdir, strerror(errno));
    }
    if (err != WEFT_OK) {
        return err;
    }
    s = weft__calloc(1, sizeof(*s));
    if (s == NULL) {
        return WEFT_ENOMEM;
    }
    s->dir_fd = -1;
    s->lock_fd = -1;
    s->max_bytes = cfg->max_bytes != 0 ? cfg->max_bytes : WEFT__SPOOL_DEFAULT_MAX_BYTES;
    s->max_files = cfg->max_files != 0 ? cfg->max_files : WEFT__SPOOL_DEFAULT_MAX_FILES;
    for (int i = 0; i < WEFT__SPOOL_SLOTS && s->lock_fd < 0; i++) {
        int lock = try_slot(exdir, i, true, &s->dir_fd);

        if (lock == -2) {
            WEFT_LOG(WEFT_LOG_WARN, "export spool: cannot use %s/%d: %s", exdir, i,
                     strerror(errno));
            err = WEFT_EIO;
            goto fail;
        }
        if (lock >= 0) {
            s->lock_fd = lock;
            slot = i;
        }
    }
    if (s->lock_fd < 0) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "export spool: all %d slots of %s are held by running processes; this one "
                 "runs without a spool",
                 WEFT__SPOOL_SLOTS, exdir);
        err = WEFT_ESTATE;
        goto fail;
    }
    snprintf(probe, sizeof(probe), "%s/%d", exdir, slot);
    s->dir = weft__strdup(probe);
    if (s->dir == NULL) {
        err = WEFT_ENOMEM;
        goto fail;
    }
    err = scan_dir(s, s->dir_fd, &list, &count);
    if (err != WEFT_OK) {
        goto fail;
    }
    for (size_t i = 0; i < count && err == WEFT_OK; i++) {
        err = append_entry(s, list[i].seq, list[i].bytes, list[i].spans);
        s->next_seq = list[i].seq + 1;
    }
    weft__free(list);
    if (err != WEFT_OK) {
        goto fail;
    }
    /* The files of slots whose process is gone: ours to send now. */
    for (int i = 0; i < WEFT__SPOOL_SLOTS; i++) {
        int other_fd = -1;
        int lock = i == slot ? -1 : try_slot(exdir, i, false, &other_fd);

        if (lock >= 0) {
            snprintf(probe, sizeof(probe), "%s/%d", exdir, i);
            adopt_slot(s, other_fd, probe);
            close(lock);
            close(other_fd);
        }
    }
    if (atomic_load(&s->files_corrupt) > 0) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "export spool %s: deleted %llu damaged or unfinished files (%llu spans) "
                 "instead of sending them",
                 s->dir, (unsigned long long)atomic_load(&s->files_corrupt),
                 (unsigned long long)atomic_load(&s->spans_corrupt));
    }
    if (s->count > 0) {
        WEFT_LOG(WEFT_LOG_INFO, "export spool %s: %zu requests (%llu spans) wait to be sent",
                 s->dir, s->count, (unsigned long long)atomic_load(&s->spans));
    }
    *out = s;
    return WEFT_OK;
fail:
    weft__spool_close(s);
    return err;
}

void
weft__spool_close(struct weft__spool *s)
{
    if (s == NULL) {
        return;
    }
    if (s->lock_fd >= 0) {
        close(s->lock_fd); /* releases the flock */
    }
    if (s->dir_fd >= 0) {
        close(s->dir_fd);
    }
    weft__free(s->entries);
    weft__free(s->dir);
    weft__free(s);
}

const char *
weft__spool_dir(const struct weft__spool *s)
{
    return s == NULL ? "" : s->dir;
}

/* ------------------------------------------------------------------------------------------ */
/* Writing and reading                                                                         */

weft_err
weft__spool_put(struct weft__spool *s, const void *body, size_t len, uint32_t flags, uint32_t spans)
{
    unsigned char h[HEADER_BYTES];
    char tmp[NAME_DIGITS + 8];
    char name[NAME_DIGITS + 8];
    uint64_t total = HEADER_BYTES + (uint64_t)len;
    int fd = -1;
    int saved = 0;
    weft_err err = WEFT_OK;

    if (s == NULL || (body == NULL && len > 0)) {
        return WEFT_EINVAL;
    }
    if (total > s->max_bytes) {
        atomic_fetch_add(&s->requests_dropped_cap, 1);
        atomic_fetch_add(&s->spans_dropped_cap, spans);
        return WEFT_ELIMIT;
    }
    /* Room first: the oldest requests go, counted, so the newest data survives an outage
     * longer than the cap holds (the Collector's persistent queue drops the newest instead;
     * the recent past is what an operator looks at after an outage). */
    while (s->count > 0 &&
           (atomic_load(&s->bytes) + total > s->max_bytes || s->count + 1 > s->max_files)) {
        atomic_fetch_add(&s->requests_dropped_cap, 1);
        atomic_fetch_add(&s->spans_dropped_cap, oldest(s)->spans);
        remove_oldest(s);
    }
    make_header(h, flags, spans, body, len);
    seq_name(tmp, sizeof(tmp), s->next_seq, "tmp");
    seq_name(name, sizeof(name), s->next_seq, "req");
    fd = openat(s->dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || weft__write_all(fd, (const char *)h, sizeof(h)) != WEFT_OK ||
        weft__write_all(fd, body, len) != WEFT_OK || fsync(fd) != 0) {
        err = WEFT_EIO;
    }
    saved = errno;
    if (fd >= 0 && close(fd) != 0 && err == WEFT_OK) {
        err = WEFT_EIO;
        saved = errno;
    }
    if (err == WEFT_OK && renameat(s->dir_fd, tmp, s->dir_fd, name) != 0) {
        err = WEFT_EIO;
        saved = errno;
    }
    if (err != WEFT_OK) {
        (void)unlinkat(s->dir_fd, tmp, 0);
        errno = saved;
        return err;
    }
    /* The rename is durable once the directory is. */
    (void)fsync(s->dir_fd);
    err = append_entry(s, s->next_seq, total, spans);
    if (err != WEFT_OK) {
        (void)unlinkat(s->dir_fd, name, 0);
        return err;
    }
    s->next_seq++;
    atomic_fetch_add(&s->requests_spooled, 1);
    atomic_fetch_add(&s->spans_spooled, spans);
    return WEFT_OK;
}

bool
weft__spool_is_empty(const struct weft__spool *s)
{
    return s == NULL || s->count == 0;
}

/* Read and check the oldest file. @return WEFT_OK, WEFT_EPARSE (unsound: the caller deletes
 * it), WEFT_ENOMEM. */
static weft_err
load_oldest(struct weft__spool *s,
            struct weft__buf *body,
            uint32_t *flags,
            uint32_t *spans,
            uint32_t *header_spans)
{
    struct entry *e = oldest(s);
    char name[NAME_DIGITS + 8];
    unsigned char h[HEADER_BYTES];
    struct stat st;
    uint64_t len = 0;
    int fd = -1;
    weft_err err = WEFT_EPARSE;

    seq_name(name, sizeof(name), e->seq, "req");
    *header_spans = e->spans;
    fd = openat(s->dir_fd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || pread(fd, h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
        !header_ok(h)) {
        goto out;
    }
    len = get_u64(h + 16);
    *header_spans = get_u32(h + 12);
    if ((uint64_t)st.st_size != HEADER_BYTES + len || len > SIZE_MAX / 2) {
        goto out;
    }
    weft__buf_reset(body);
    if (weft__buf_reserve(body, (size_t)len) != WEFT_OK) {
        err = WEFT_ENOMEM;
        goto out;
    }
    for (size_t got = 0; got < len;) {
        ssize_t r = pread(fd, body->data + got, (size_t)len - got, (off_t)(HEADER_BYTES + got));

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            goto out;
        }
        got += (size_t)r;
    }
    body->len = (size_t)len;
    if (crc_of(body->data, body->len) != get_u32(h + 24)) {
        weft__buf_reset(body);
        goto out;
    }
    *flags = get_u32(h + 8);
    *spans = get_u32(h + 12);
    err = WEFT_OK;
out:
    if (fd >= 0) {
        close(fd);
    }
    return err;
}

weft_err
weft__spool_peek(struct weft__spool *s, struct weft__buf *body, uint32_t *flags, uint32_t *spans)
{
    if (s == NULL || body == NULL || flags == NULL || spans == NULL) {
        return WEFT_EINVAL;
    }
    while (s->count > 0) {
        uint32_t header_spans = 0;
        weft_err err = load_oldest(s, body, flags, spans, &header_spans);

        if (err != WEFT_EPARSE) {
            return err;
        }
        WEFT_LOG(WEFT_LOG_WARN,
                 "export spool %s: a damaged file (%u spans) was deleted instead of sent", s->dir,
                 header_spans);
        count_corrupt(s, header_spans);
        remove_oldest(s);
    }
    return WEFT_ENOTFOUND;
}

void
weft__spool_pop(struct weft__spool *s)
{
    struct entry *e = s == NULL ? NULL : oldest(s);

    if (e == NULL) {
        return;
    }
    atomic_fetch_add(&s->requests_drained, 1);
    atomic_fetch_add(&s->spans_drained, e->spans);
    remove_oldest(s);
}

void
weft__spool_reject(struct weft__spool *s)
{
    struct entry *e = s == NULL ? NULL : oldest(s);

    if (e == NULL) {
        return;
    }
    atomic_fetch_add(&s->spans_rejected, e->spans);
    remove_oldest(s);
}

void
weft__spool_count_lost(struct weft__spool *s, uint64_t spans)
{
    if (s != NULL) {
        atomic_fetch_add(&s->spans_lost, spans);
    }
}

void
weft__spool_stats(const struct weft__spool *s, struct weft_spool_stats *out)
{
    struct weft__spool *x = (struct weft__spool *)(uintptr_t)s;

    if (out == NULL) {
        return;
    }
    memset(out, 0, sizeof(*out));
    if (x == NULL) {
        return;
    }
    out->is_enabled = true;
    out->requests_spooled = atomic_load(&x->requests_spooled);
    out->spans_spooled = atomic_load(&x->spans_spooled);
    out->requests_drained = atomic_load(&x->requests_drained);
    out->spans_drained = atomic_load(&x->spans_drained);
    out->requests_dropped = atomic_load(&x->requests_dropped_cap);
    out->spans_dropped = atomic_load(&x->spans_dropped_cap);
    out->spans_rejected = atomic_load(&x->spans_rejected);
    out->files_corrupt = atomic_load(&x->files_corrupt);
    out->spans_corrupt = atomic_load(&x->spans_corrupt);
    out->spans_lost = atomic_load(&x->spans_lost);
    out->bytes = atomic_load(&x->bytes);
    out->files = atomic_load(&x->files);
    out->spans = atomic_load(&x->spans);
}
