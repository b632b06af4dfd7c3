/* base/fs.c - file-system helpers. */
#include "base/fs.h"
#include "base/mem.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

weft_err
weft__mkdir_parents(const char *path, unsigned mode)
{
    char *copy = NULL;
    char *slash = NULL;
    weft_err err = WEFT_OK;

    if (path == NULL || path[0] == '\0') {
        return WEFT_EINVAL; /* and copy + 1 below would be past the end */
    }
    copy = weft__strdup(path);
    if (copy == NULL) {
        return WEFT_ENOMEM;
    }
    /* Create each ancestor in turn; an existing directory is fine, anything else at a
     * component's place (a file, no permission) fails with errno set for the caller. */
    for (slash = strchr(copy + 1, '/'); slash != NULL; slash = strchr(slash + 1, '/')) {
        struct stat st;

        *slash = '\0';
        if (mkdir(copy, (mode_t)mode) != 0) {
            int saved = errno;

            if (saved != EEXIST || stat(copy, &st) != 0 || !S_ISDIR(st.st_mode)) {
                errno = saved == EEXIST ? ENOTDIR : saved;
                err = WEFT_EIO;
                goto out;
            }
        }
        *slash = '/';
    }
out:
    weft__free(copy);
    return err;
}

weft_err
weft__write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return WEFT_EIO;
        }
        data += n;
        len -= (size_t)n;
    }
    return WEFT_OK;
}
