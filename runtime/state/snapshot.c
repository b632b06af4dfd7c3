/* runtime/state/snapshot.c - what a run keeps of its workflow's files, so that `weft replay`,
 * `weft fork` and `weft resume` work after the file moved or changed (docs/replay.md, "What a
 * run keeps").
 *
 * At its start a run stores, with its state, one JSON text: every file the workflow was loaded
 * from (the workflow file, its scripted models' scripts, its team and sub-workflow files,
 * recursively, and its MCP servers file) by absolute path, with each file's bytes and hash
 * ("fnv1a64:", as durable.c hashes the workflow file, so that the snapshot's workflow hash is
 * the one resume compares), and a hash over all of them. A reader checks the files on disk
 * against it and, when they moved or changed, writes them under a directory of its choice,
 * each at DIR + its absolute path, so that the workflow's relative references resolve to the
 * snapshot's files. The other entries of the workflow's own directory (an MCP server's
 * node_modules, a sandbox, a workspace) are linked there when that directory still exists:
 * they are not the workflow's to keep, but loading and running it needs them where they were.
 *
 * Bounds: SNAPSHOT_MAX_BYTES of file text per run (4 MiB) and SNAPSHOT_MAX_FILES files; a
 * workflow over either keeps no snapshot (the run says so in a warning and carries on).
 * Secrets: the files are stored as they are (environment references such as ${KEY} unexpanded,
 * API keys by variable name): a file with what looks like a credential in it (the built-in
 * redaction rules) makes the run keep no snapshot rather than keep the credential.
 */
#define _GNU_SOURCE /* realpath */
#include "runtime/state/snapshot.h"
#include "runtime/common/json_write.h"
#include "runtime/state/state.h"
#include "runtime/workflow/workflow.h"

#include "base/fs.h"
#include "base/log.h"
#include "base/mem.h"
#include "tracing/redact.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SNAPSHOT_MAX_BYTES (4u * 1024u * 1024u)
#define SNAPSHOT_MAX_FILES 256u
#define SNAPSHOT_VERSION   1

struct builder {
    const char *root; /* the snapshot directory the workflow was loaded from, or NULL */
    json_t *files;    /* [{"path", "hash", "text"}] */
    size_t bytes;
    uint64_t hash; /* over every file's path and bytes, in order */
    weft_err err;  /* the first failure; WEFT_OK while all is well */
    char *why;     /* what it was (a buffer of why_len) */
    size_t why_len;
};

static uint64_t
fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i++) {
        h = (h ^ p[i]) * 1099511628211ull;
    }
    return h;
}

#define FNV_OFFSET 14695981039346656037ull

static void
format_hash(uint64_t h, char out[WEFT_RUN_SNAPSHOT_HASH_LEN])
{
    snprintf(out, WEFT_RUN_SNAPSHOT_HASH_LEN, "fnv1a64:%016llx", (unsigned long long)h);
}

/* The whole of the file @p path, at most @p max bytes. @return WEFT_OK, WEFT_EIO (cannot be
 * read), WEFT_ELIMIT (larger than max), WEFT_ENOMEM. Ownership: caller owns *out. */
static weft_err
read_file(const char *path, size_t max, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0;
    size_t n = 0;
    weft_err err = WEFT_OK;

    *out = NULL;
    *len = 0;
    if (f == NULL) {
        return WEFT_EIO;
    }
    for (;;) {
        size_t got = 0;
        if (n + 1 >= cap) {
            size_t want = cap == 0 ? 8192 : cap * 2;
            char *grown = NULL;
            if (cap > max + 1) {
                err = WEFT_ELIMIT;
                break;
            }
            grown = weft__realloc(buf, want);
            if (grown == NULL) {
                err = WEFT_ENOMEM;
                break;
            }
            buf = grown;
            cap = want;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            err = ferror(f) ? WEFT_EIO : WEFT_OK;
            break;
        }
    }
    fclose(f);
    if (err == WEFT_OK && n > max) {
        err = WEFT_ELIMIT;
    }
    if (err != WEFT_OK) {
        weft__free(buf);
        return err;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return WEFT_OK;
}

/* Keep the first failure: @p before, @p path and @p after make its reason. */
static void
fail(struct builder *b, weft_err err, const char *before, const char *path, const char *after)
{
    if (b->err == WEFT_OK) {
        b->err = err;
        snprintf(b->why, b->why_len, "%s%s%s", before, path, after);
    }
}

const char *
weft__rt_snapshot_unroot(const char *root, const char *path)
{
    size_t n = root != NULL ? strlen(root) : 0;

    if (n > 0 && path != NULL && strncmp(path, root, n) == 0 && path[n] == '/') {
        return path + n;
    }
    return path;
}

/* Add the file @p path (resolved: a file reached twice is kept once). */
static void
add_file(struct builder *b, const char *path)
{
    char abs[PATH_MAX];
    const char *name = NULL; /* as the run names it */
    char hash[WEFT_RUN_SNAPSHOT_HASH_LEN];
    char *text = NULL;
    char *redacted = NULL;
    size_t len = 0;
    size_t i = 0;
    json_t *f = NULL;
    weft_err err = WEFT_OK;

    if (b->err != WEFT_OK || path == NULL) {
        return;
    }
    if (realpath(path, abs) == NULL) {
        fail(b, WEFT_EIO, "cannot resolve ", path, "");
        return;
    }
    name = weft__rt_snapshot_unroot(b->root, abs);
    json_array_foreach(b->files, i, f)
    {
        if (strcmp(json_string_value(json_object_get(f, "path")), name) == 0) {
            return;
        }
    }
    if (json_array_size(b->files) >= SNAPSHOT_MAX_FILES) {
        fail(b, WEFT_ELIMIT, "the workflow references more than 256 files", "", "");
        return;
    }
    err = read_file(abs, SNAPSHOT_MAX_BYTES - b->bytes, &text, &len);
    if (err == WEFT_ELIMIT) {
        fail(b, err, "its files exceed the snapshot's 4 MiB at ", abs, "");
        return;
    }
    if (err != WEFT_OK) {
        fail(b, err, "cannot read ", abs, "");
        return;
    }
    redacted = weft__redact_text(text);
    if (redacted == NULL) {
        fail(b, WEFT_ENOMEM, "out of memory at ", abs, "");
    } else if (strcmp(redacted, text) != 0 || strlen(text) != len) {
        /* A credential in a workflow file is the user's to move to an environment variable;
         * the state database must not become a second copy of it. (A NUL byte: not text.) */
        fail(b, WEFT_EINVAL, "", abs,
             " holds what looks like a credential (or is not text): keep keys in "
             "environment variables");
    } else {
        format_hash(fnv1a(FNV_OFFSET, text, len), hash);
        f = json_pack("{s:s, s:s, s:s%}", "path", name, "hash", hash, "text", text, len);
        if (f == NULL) {
            fail(b, WEFT_EINVAL, "", abs, " is not UTF-8 text");
        } else if (json_array_append_new(b->files, f) != 0) {
            fail(b, WEFT_ENOMEM, "out of memory at ", abs, "");
        } else {
            b->bytes += len;
            b->hash = fnv1a(b->hash, name, strlen(name) + 1);
            b->hash = fnv1a(b->hash, text, len);
        }
    }
    weft__free(redacted);
    weft__free(text);
}

static void add_workflow(struct builder *b, const struct weft_workflow *wf, unsigned depth);

static void
add_flow(struct builder *b, const struct wf_flow *flow, unsigned depth)
{
    for (size_t i = 0; flow != NULL && i < flow->count && depth < 8; i++) {
        if (flow->nodes[i].subwf != NULL) {
            add_workflow(b, flow->nodes[i].subwf, depth + 1);
        }
        if (flow->nodes[i].sub != NULL) {
            add_flow(b, flow->nodes[i].sub, depth + 1);
        }
    }
}

static void
add_workflow(struct builder *b, const struct weft_workflow *wf, unsigned depth)
{
    const char *servers = NULL;

    if (depth > 8) { /* the loader allows 3 levels of files */
        return;
    }
    add_file(b, wf->path);
    for (size_t i = 0; i < wf->model_count; i++) {
        if (wf->models[i].provider == WF_PROVIDER_SCRIPTED) {
            add_file(b, wf->models[i].script);
        }
    }
    servers = json_string_value(json_object_get(wf->doc, "mcp_servers_file"));
    if (servers != NULL && servers[0] != '\0') {
        char path[PATH_MAX];
        int n = servers[0] == '/' ? snprintf(path, sizeof(path), "%s", servers)
                                  : snprintf(path, sizeof(path), "%s/%s", wf->dir, servers);
        if (n > 0 && (size_t)n < sizeof(path)) {
            add_file(b, path);
        }
    }
    for (size_t i = 0; i < wf->agent_count; i++) {
        if (wf->agents[i].team != NULL) {
            add_workflow(b, wf->agents[i].team, depth + 1);
        }
    }
    add_flow(b, wf->flow, depth);
}

/* Read @p wf's files into @p b (its files array and running hash). @return b->err. */
static weft_err
gather(
    struct builder *b, const struct weft_workflow *wf, const char *root, char *why, size_t why_len)
{
    why[0] = '\0';
    memset(b, 0, sizeof(*b));
    b->files = json_array();
    b->root = root;
    b->hash = FNV_OFFSET;
    b->why = why;
    b->why_len = why_len;
    if (b->files == NULL) {
        return WEFT_ENOMEM;
    }
    add_workflow(b, wf, 0);
    if (b->err != WEFT_OK) {
        json_decref(b->files);
        b->files = NULL;
    }
    return b->err;
}

weft_err
weft__rt_snapshot_build(
    const struct weft_workflow *wf, const char *root, char **out, char *why, size_t why_len)
{
    struct builder b;
    char hash[WEFT_RUN_SNAPSHOT_HASH_LEN];
    json_t *doc = NULL;
    weft_err err = gather(&b, wf, root, why, why_len);

    *out = NULL;
    if (err != WEFT_OK) {
        return err;
    }
    format_hash(b.hash, hash);
    doc = json_pack("{s:i, s:s, s:I, s:o}", "version", SNAPSHOT_VERSION, "hash", hash, "bytes",
                    (json_int_t)b.bytes, "files", b.files);
    *out = doc != NULL ? weft__json_compact(doc) : NULL; /* json_dumps()'s text, faster */
    json_decref(doc);
    return *out != NULL ? WEFT_OK : WEFT_ENOMEM;
}

weft_err
weft__rt_snapshot_hash(const struct weft_workflow *wf,
                       char out[WEFT_RUN_SNAPSHOT_HASH_LEN],
                       char *why,
                       size_t why_len)
{
    struct builder b;
    weft_err err = gather(&b, wf, NULL, why, why_len);

    out[0] = '\0';
    if (err == WEFT_OK) {
        format_hash(b.hash, out);
        json_decref(b.files);
    }
    return err;
}

void
weft__rt_snapshot_save(struct rt_state *st,
                       const char *run_id,
                       const struct weft_workflow *wf,
                       const char *root)
{
    char why[PATH_MAX + 128];
    char *text = NULL;
    weft_err err = weft__rt_snapshot_build(wf, root, &text, why, sizeof(why));

    if (err == WEFT_OK) {
        err = weft__state_run_snapshot_set(st, run_id, text);
        if (err != WEFT_OK) {
            snprintf(why, sizeof(why), "the state database did not take it");
        }
    }
    if (err != WEFT_OK) {
        WEFT_LOG(WEFT_LOG_WARN,
                 "run %s keeps no snapshot of its workflow (%s): replay, fork and resume will "
                 "need the workflow's files where they are now",
                 run_id, why[0] != '\0' ? why : weft_strerror(err));
    }
    weft__free(text);
}

/* ------------------------------------------------------------------------------------------ */
/* Reading it back                                                                             */

/* Does the file @p path hold exactly the bytes hashed @p hash? */
static bool
is_same_file(const char *path, const char *hash)
{
    char now[WEFT_RUN_SNAPSHOT_HASH_LEN];
    char *text = NULL;
    size_t len = 0;

    if (read_file(path, SNAPSHOT_MAX_BYTES, &text, &len) != WEFT_OK) {
        return false;
    }
    format_hash(fnv1a(FNV_OFFSET, text, len), now);
    weft__free(text);
    return strcmp(now, hash) == 0;
}

/* Write @p len bytes of @p text to @p path (0600: the state's copy may hold prompts). */
static weft_err
write_file(const char *path, const char *text, size_t len)
{
    int fd = -1;

    if (weft__mkdir_parents(path, 0700) != WEFT_OK) {
        return WEFT_EIO;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        return WEFT_EIO;
    }
    if (weft__write_all(fd, text, len) != WEFT_OK) {
        close(fd);
        return WEFT_EIO;
    }
    return close(fd) == 0 ? WEFT_OK : WEFT_EIO;
}

/* Link every entry of the workflow's original directory @p orig_dir that the snapshot did not
 * write into @p mirror_dir, so that relative paths the workflow does not own (an MCP server's
 * cwd and modules, a workspace) lead where they did. Best effort: a missing directory links
 * nothing. */
static void
link_siblings(const char *orig_dir, const char *mirror_dir)
{
    DIR *d = opendir(orig_dir);
    struct dirent *e = NULL;
    char from[PATH_MAX];
    char to[PATH_MAX];
    struct stat sb;

    if (d == NULL) {
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (snprintf(to, sizeof(to), "%s/%s", mirror_dir, e->d_name) >= (int)sizeof(to) ||
            snprintf(from, sizeof(from), "%s/%s", orig_dir, e->d_name) >= (int)sizeof(from) ||
            lstat(to, &sb) == 0) {
            continue; /* the snapshot's own file wins */
        }
        (void)symlink(from, to);
    }
    closedir(d);
}

weft_err
weft_run_snapshot_load(const char *state_path,
                       const char *run_id,
                       const char *dir,
                       struct weft_run_snapshot *out,
                       char **workflow_out)
{
    struct rt_state *st = NULL;
    char *text = NULL;
    json_t *doc = NULL;
    json_t *files = NULL;
    json_t *f = NULL;
    json_error_t jerr;
    char *workflow = NULL;
    size_t i = 0;
    weft_err err = WEFT_OK;

    if (workflow_out != NULL) {
        *workflow_out = NULL;
    }
    if (run_id == NULL || out == NULL || (dir != NULL && workflow_out == NULL)) {
        return WEFT_EINVAL;
    }
    memset(out, 0, sizeof(*out));
    err = weft__state_open_existing(state_path, &st);
    if (err == WEFT_OK) {
        err = weft__state_run_snapshot_get(st, run_id, &text);
        weft__state_close(st);
    }
    if (err != WEFT_OK) {
        return err;
    }
    doc = json_loads(text, 0, &jerr);
    weft__free(text);
    files = json_object_get(doc, "files");
    if (!json_is_array(files) || json_array_size(files) == 0 ||
        !json_is_string(json_object_get(doc, "hash"))) {
        json_decref(doc);
        return WEFT_EIO; /* not what this file wrote */
    }
    snprintf(out->hash, sizeof(out->hash), "%s", json_string_value(json_object_get(doc, "hash")));
    out->file_count = json_array_size(files);
    out->is_current = true;
    json_array_foreach(files, i, f)
    {
        const char *path = json_string_value(json_object_get(f, "path"));
        const char *hash = json_string_value(json_object_get(f, "hash"));
        const char *body = json_string_value(json_object_get(f, "text"));
        size_t len = json_string_length(json_object_get(f, "text"));
        bool is_same = false;

        if (path == NULL || hash == NULL || body == NULL || path[0] != '/') {
            err = WEFT_EIO;
            break;
        }
        out->bytes += len;
        is_same = is_same_file(path, hash);
        out->is_current = out->is_current && is_same;
        if (i == 0) { /* the workflow file comes first */
            out->is_workflow_present = access(path, R_OK) == 0;
            out->is_workflow_changed = out->is_workflow_present && !is_same;
        }
        if (dir != NULL) {
            char target[PATH_MAX];
            if (snprintf(target, sizeof(target), "%s%s", dir, path) >= (int)sizeof(target)) {
                err = WEFT_EINVAL;
                break;
            }
            err = write_file(target, body, len);
            if (err != WEFT_OK) {
                break;
            }
            if (i == 0) {
                workflow = weft__strdup(target);
                if (workflow == NULL) {
                    err = WEFT_ENOMEM;
                    break;
                }
            }
        }
    }
    if (err == WEFT_OK && dir != NULL) {
        /* The workflow's directory as it was: its own files from the snapshot, the rest
         * linked from where it still is. */
        const char *orig = json_string_value(json_object_get(json_array_get(files, 0), "path"));
        char orig_dir[PATH_MAX];
        char mirror_dir[PATH_MAX];
        char *slash = NULL;

        snprintf(orig_dir, sizeof(orig_dir), "%s", orig);
        slash = strrchr(orig_dir, '/');
        if (slash != NULL) {
            *(slash == orig_dir ? slash + 1 : slash) = '\0';
            snprintf(mirror_dir, sizeof(mirror_dir), "%s", workflow);
            slash = strrchr(mirror_dir, '/');
            if (slash != NULL) {
                *slash = '\0';
                link_siblings(orig_dir, mirror_dir);
            }
        }
    }
    json_decref(doc);
    if (err != WEFT_OK) {
        weft__free(workflow);
        return err;
    }
    if (workflow_out != NULL) {
        *workflow_out = workflow;
    } else {
        weft__free(workflow);
    }
    return WEFT_OK;
}

/* The snapshot's workflow file (its first) when the run kept one; else the hash durable.c
 * stored when the run claimed its row. */
weft_err
weft_run_workflow_load(const char *state_path,
                       const char *run_id,
                       char hash_out[WEFT_RUN_SNAPSHOT_HASH_LEN],
                       char **text_out)
{
    struct rt_state *st = NULL;
    char *text = NULL;
    json_t *doc = NULL;
    const json_t *first = NULL;
    const char *hash = NULL;
    const char *body = NULL;
    char *copy = NULL;
    weft_err err = WEFT_OK;

    if (text_out != NULL) {
        *text_out = NULL;
    }
    if (run_id == NULL || hash_out == NULL || text_out == NULL) {
        return WEFT_EINVAL;
    }
    hash_out[0] = '\0';
    err = weft__state_open_existing(state_path, &st);
    if (err != WEFT_OK) {
        return err;
    }
    err = weft__state_run_snapshot_get(st, run_id, &text);
    if (err == WEFT_ENOTFOUND) {
        err = weft__state_run_hash_get(st, run_id, hash_out, WEFT_RUN_SNAPSHOT_HASH_LEN);
        weft__state_close(st);
        return err;
    }
    weft__state_close(st);
    if (err != WEFT_OK) {
        return err;
    }
    doc = json_loads(text, 0, NULL);
    weft__free(text);
    first = json_array_get(json_object_get(doc, "files"), 0);
    hash = json_string_value(json_object_get(first, "hash"));
    body = json_string_value(json_object_get(first, "text"));
    if (hash == NULL || body == NULL) {
        json_decref(doc);
        return WEFT_EIO; /* not what this file wrote */
    }
    copy = weft__malloc(json_string_length(json_object_get(first, "text")) + 1);
    if (copy == NULL) {
        json_decref(doc);
        return WEFT_ENOMEM;
    }
    memcpy(copy, body, json_string_length(json_object_get(first, "text")) + 1);
    snprintf(hash_out, WEFT_RUN_SNAPSHOT_HASH_LEN, "%s", hash);
    json_decref(doc);
    *text_out = copy;
    return WEFT_OK;
}

void
weft_run_snapshot_text_free(char *text)
{
    weft__free(text);
}
