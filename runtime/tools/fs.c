/* runtime/tools/fs.c - read_file and write_file, confined to the run's workspace, and the
 * directory walk the command tools reuse for their cwd.
 *
 * Confinement is enforced by the kernel, not by string checks: the workspace is opened once
 * and every path is walked component by component with openat(2) and O_NOFOLLOW, so no
 * component can be a symlink (one planted inside the workspace pointing outside would
 * otherwise be followed). ".." components and absolute paths are refused outright. A write
 * goes to a temporary file in the target directory and is renamed over the name: rename(2)
 * replaces a symlink instead of following it, and readers never see half a file.
 *
 * Invariants: every descriptor we open is relative to one we already hold, and none of them
 * was reached through a symlink; outcomes are JSON text, errors {"error", "type"}.
 *
 * Why not realpath() and a prefix check: that resolves the path once and opens it a second
 * time, and a symlink swapped in between (TOCTOU) would be followed on the second lookup.
 * With the walk, a concurrent process that swaps a directory for a symlink between two of
 * our openat calls cannot redirect us, because each step is relative to the descriptor
 * already held and refuses to follow links. Consequences, by design: a symlink is refused even
 * when it points back inside the workspace; hard links cannot be told apart from files (they
 * can only be created by someone who could already read the target).
 */
#define _GNU_SOURCE /* O_DIRECTORY, O_NOFOLLOW, O_CLOEXEC on older headers */

#include "tools.h"

#include "base/fs.h"
#include "base/mem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_MAX_BYTES (1u << 20)
#define MAX_PATH_BYTES    4096

static weft_err fail(struct tool_outcome *out, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Fill @p out as an error outcome {"error", "type"}. */
static weft_err
fail(struct tool_outcome *out, const char *type, const char *fmt, ...)
{
    char message[512];
    json_t *j = NULL;
    char *text = NULL;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    j = json_pack("{s:s, s:s}", "error", message, "type", type);
    text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    out->is_error = true;
    snprintf(out->error_type, sizeof(out->error_type), "%s", type);
    out->output = text != NULL ? weft__strdup(text) : NULL;
    free(text);
    return out->output != NULL ? WEFT_OK : WEFT_ENOMEM;
}

static weft_err
succeed(struct tool_outcome *out, json_t *j)
{
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

    json_decref(j);
    out->is_error = false;
    out->error_type[0] = '\0';
    out->output = text != NULL ? weft__strdup(text) : NULL;
    free(text);
    return out->output != NULL ? WEFT_OK : WEFT_ENOMEM;
}

/* One step of the walk: open directory @p comp under @p dir_fd without following a symlink,
 * creating it first when @p is_create. @return the new descriptor, or -errno: -EPERM for a
 * symlink (wherever it points: resolving it would be a second, racy check), -ENOTDIR for a
 * file used as a directory. */
static int
step(int dir_fd, const char *comp, bool is_create)
{
    struct stat st;
    int fd = -1;
    int e = 0;

    if (is_create && mkdirat(dir_fd, comp, 0755) != 0 && errno != EEXIST) {
        return -errno;
    }
    fd = openat(dir_fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
        return fd;
    }
    e = errno;
    if (e != ELOOP && e != ENOTDIR) {
        return -e;
    }
    /* Both errors mean "not a plain directory": tell a symlink from a regular file. */
    if (fstatat(dir_fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISLNK(st.st_mode)) {
        return -ENOTDIR;
    }
    return -EPERM;
}

/* Split @p path into its components (in @p buf, MAX_PATH_BYTES long) and open the directory
 * holding the last one, creating missing directories when @p is_create. On success *dir_fd is
 * open and *name points at the last component, which may be "" or "." (the path names a
 * directory). @return 0, or an errno-style code: EPERM for an escape attempt. */
static int
open_parent(const char *workspace,
            const char *path,
            bool is_create,
            char *buf,
            int *dir_fd,
            const char **name)
{
    size_t len = strlen(path);
    char *comp = NULL;
    int fd = -1;

    if (len >= MAX_PATH_BYTES || path[0] == '/') {
        return EPERM;
    }
    /* Any ".." component is refused before anything is opened, existing or not: even one that
     * would stay inside ("a/../b") is more likely a probe than a need. */
    for (const char *p = path; p != NULL; p = strchr(p, '/') != NULL ? strchr(p, '/') + 1 : NULL) {
        if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || p[2] == '\0')) {
            return EPERM;
        }
    }
    memcpy(buf, path, len + 1);
    fd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return errno;
    }
    comp = buf;
    for (;;) {
        char *slash = strchr(comp, '/');
        int sub = -1;

        if (slash == NULL) {
            break;
        }
        *slash = '\0';
        /* "a//b" and "./a" have empty and "." components: they stay where they are. */
        if (comp[0] != '\0' && strcmp(comp, ".") != 0) {
            sub = step(fd, comp, is_create);
            close(fd);
            if (sub < 0) {
                return -sub;
            }
            fd = sub;
        }
        comp = slash + 1;
    }
    *dir_fd = fd;
    *name = comp;
    return 0;
}

int
weft__tool_open_dir(const char *workspace, const char *path, int *out_fd)
{
    char buf[MAX_PATH_BYTES];
    const char *name = NULL;
    int dir = -1;
    int fd = -1;
    int e = 0;

    *out_fd = -1;
    e = open_parent(workspace, path != NULL ? path : "", false, buf, &dir, &name);
    if (e != 0) {
        return e;
    }
    if (name[0] == '\0' || strcmp(name, ".") == 0) {
        *out_fd = dir;
        return 0;
    }
    fd = step(dir, name, false);
    close(dir);
    if (fd < 0) {
        return -fd;
    }
    *out_fd = fd;
    return 0;
}

static weft_err
fail_errno(struct tool_outcome *out, int e, const char *path)
{
    if (e == EPERM) {
        return fail(out, "path_escape",
                    "%.300s: outside the workspace (absolute, '..' or a symlink)", path);
    }
    if (e == ENOENT) {
        return fail(out, "not_found", "%.300s: no such file", path);
    }
    if (e == EISDIR) {
        return fail(out, "io", "%.300s: is a directory", path);
    }
    if (e == ENOTDIR) {
        return fail(out, "io", "%.300s: a component of the path is not a directory", path);
    }
    return fail(out, "io", "%.300s: cannot access", path);
}

static weft_err
read_file(const struct tool_def *def,
          const char *workspace,
          const char *path,
          struct tool_outcome *out)
{
    size_t max = def->max_bytes != 0 ? def->max_bytes : DEFAULT_MAX_BYTES;
    char buf[MAX_PATH_BYTES];
    const char *name = NULL;
    int dir = -1;
    int fd = -1;
    int e = open_parent(workspace, path, false, buf, &dir, &name);
    struct stat st;
    char *data = NULL;
    size_t got = 0;
    json_t *content = NULL;
    weft_err err = WEFT_OK;

    if (e != 0) {
        return fail_errno(out, e, path);
    }
    if (name[0] == '\0' || strcmp(name, ".") == 0) {
        close(dir);
        return fail_errno(out, EISDIR, path);
    }
    /* O_NONBLOCK: a FIFO planted in the workspace must not hang the run; it is refused below
     * as not a regular file. */
    fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    e = fd < 0 ? (errno == ELOOP ? EPERM : errno) : 0;
    close(dir);
    if (fd < 0) {
        return fail_errno(out, e, path);
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(out, "io", "%.300s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        close(fd);
        return fail(out, "too_large", "%.300s: larger than the tool's max_bytes", path);
    }
    data = weft__malloc((size_t)st.st_size + 1);
    if (data == NULL) {
        close(fd);
        return WEFT_ENOMEM;
    }
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, data + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    content = json_stringn(data, got);
    weft__free(data);
    if (content == NULL) {
        return fail(out, "binary", "%.300s: not UTF-8 text", path);
    }
    err = succeed(out, json_pack("{s:s, s:o, s:I}", "path", path, "content", content, "bytes",
                                 (json_int_t)got));
    return err;
}

static weft_err
write_file(const struct tool_def *def,
           const char *workspace,
           const char *path,
           const char *content,
           size_t content_len,
           struct tool_outcome *out)
{
    size_t max = def->max_bytes != 0 ? def->max_bytes : DEFAULT_MAX_BYTES;
    char buf[MAX_PATH_BYTES];
    char tmp[64];
    const char *name = NULL;
    int dir = -1;
    int fd = -1;
    int e = 0;
    struct stat st;

    if (content_len > max) {
        return fail(out, "too_large", "%.300s: content larger than the tool's max_bytes", path);
    }
    e = open_parent(workspace, path, true, buf, &dir, &name);
    if (e != 0) {
        return fail_errno(out, e, path);
    }
    if (name[0] == '\0' || strcmp(name, ".") == 0) {
        close(dir);
        return fail_errno(out, EISDIR, path);
    }
    /* An existing directory (or anything but a file or symlink) is not replaced. */
    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
        close(dir);
        return fail(out, "io", "%.300s: is a directory", path);
    }
    for (unsigned i = 0; fd < 0 && i < 100; i++) {
        snprintf(tmp, sizeof(tmp), ".weft-write-%ld-%u.tmp", (long)getpid(), i);
        fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) {
            break;
        }
    }
    if (fd < 0) {
        close(dir);
        return fail(out, "io", "%.300s: cannot create a temporary file", path);
    }
    if (weft__write_all(fd, content, content_len) != WEFT_OK || close(fd) != 0) {
        unlinkat(dir, tmp, 0);
        close(dir);
        return fail(out, "io", "%.300s: write failed", path);
    }
    if (renameat(dir, tmp, dir, name) != 0) {
        unlinkat(dir, tmp, 0);
        close(dir);
        return fail(out, "io", "%.300s: cannot replace the file", path);
    }
    close(dir);
    return succeed(out, json_pack("{s:s, s:I}", "path", path, "bytes", (json_int_t)content_len));
}

/* Entry point for weft__tool_run(): validated @p args hold "path" (and "content"). */
weft_err
weft__tool_fs(const struct tool_def *def,
              const char *workspace,
              const json_t *args,
              struct tool_outcome *out)
{
    const char *path = json_string_value(json_object_get(args, "path"));
    const json_t *content = json_object_get(args, "content");

    if (path == NULL) {
        return fail(out, "invalid_arguments", "%s", "path: expected a string");
    }
    if (def->type == TOOL_READ_FILE) {
        return read_file(def, workspace, path, out);
    }
    if (!json_is_string(content)) {
        return fail(out, "invalid_arguments", "%s", "content: expected a string");
    }
    return write_file(def, workspace, path, json_string_value(content), json_string_length(content),
                      out);
}
