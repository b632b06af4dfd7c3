/* base/fs.h - file-system helpers.
 *
 * Internal to weft (names carry the weft__ prefix); base/ depends on libc and
 * include/weft/common.h only.
 */
#ifndef WEFT_BASE_FS_H
#define WEFT_BASE_FS_H

#include <weft/common.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Create every missing ancestor directory of @p path with @p mode (not @p path itself).
 * @return WEFT_OK, WEFT_EINVAL (NULL or empty), WEFT_EIO (errno says why), WEFT_ENOMEM. */
weft_err weft__mkdir_parents(const char *path, unsigned mode);

/* Write all @p len bytes of @p data to blocking descriptor @p fd, again after EINTR and short
 * writes. @return WEFT_OK, WEFT_EIO (errno says why). */
weft_err weft__write_all(int fd, const char *data, size_t len);

#endif /* WEFT_BASE_FS_H */
