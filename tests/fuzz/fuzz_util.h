/* tests/fuzz/fuzz_util.h - helpers shared by the libFuzzer harnesses (header-only: each
 * harness is one translation unit).
 *
 * Harnesses never touch the network and write only below one private temporary directory
 * ($TMPDIR or /tmp, "weft-fuzz-XXXXXX"), created on first use and removed at exit.
 */
#ifndef WEFT_TESTS_FUZZ_UTIL_H
#define WEFT_TESTS_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir[512] __attribute__((unused));
static char fuzz_file_path[600] __attribute__((unused));

static inline void
fuzz_remove_dir(void)
{
    if (fuzz_file_path[0] != '\0') {
        (void)unlink(fuzz_file_path);
    }
    if (fuzz_dir[0] != '\0') {
        (void)rmdir(fuzz_dir);
    }
}

/* Write @p data to "<private temp dir>/<name>" and return its path (static storage; one file
 * per harness, rewritten by every input). NULL when the file cannot be written. */
static inline const char *
fuzz_write_file(const char *name, const uint8_t *data, size_t size)
{
    FILE *f = NULL;

    if (fuzz_dir[0] == '\0') {
        const char *tmp = getenv("TMPDIR");

        snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/weft-fuzz-XXXXXX",
                 tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
        if (mkdtemp(fuzz_dir) == NULL) {
            fuzz_dir[0] = '\0';
            return NULL;
        }
        atexit(fuzz_remove_dir);
    }
    snprintf(fuzz_file_path, sizeof(fuzz_file_path), "%s/%s", fuzz_dir, name);
    f = fopen(fuzz_file_path, "wb");
    if (f == NULL) {
        return NULL;
    }
    if (size > 0 && fwrite(data, 1, size, f) != size) {
        fclose(f);
        return NULL;
    }
    fclose(f);
    return fuzz_file_path;
}

/* A NUL-terminated copy of @p data (malloc'd; NULL when out of memory). */
static inline char *
fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);

    if (s != NULL) {
        if (size > 0) {
            memcpy(s, data, size);
        }
        s[size] = '\0';
    }
    return s;
}

/* Split @p data at the first byte @p sep: *first gets what comes before (NUL-terminated copy,
 * malloc'd), and the rest (after @p sep, or nothing when there is none) goes in *rest /
 * *rest_size, borrowed from @p data. @return false when out of memory. */
static inline int
fuzz_split(const uint8_t *data,
           size_t size,
           uint8_t sep,
           char **first,
           const uint8_t **rest,
           size_t *rest_size)
{
    const uint8_t *p = size > 0 ? memchr(data, sep, size) : NULL;
    size_t n = p != NULL ? (size_t)(p - data) : size;

    *first = fuzz_cstr(data, n);
    *rest = p != NULL ? p + 1 : data + size;
    *rest_size = p != NULL ? size - n - 1 : 0;
    return *first != NULL;
}

/* Abort (a crash libFuzzer reports with the input) when @p cond is false: harnesses check
 * properties of what the parsers return, not only that they survive. */
#define FUZZ_CHECK(cond)                                                             \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                 \
        }                                                                            \
    } while (0)

#endif /* WEFT_TESTS_FUZZ_UTIL_H */
