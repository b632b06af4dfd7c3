/* base/uuid.c - random (version 4) UUIDs (uuid.h). */
#include "base/uuid.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static void
fill_random(unsigned char *bytes, size_t len)
{
    static _Thread_local uint64_t fallback;
    ssize_t got = getrandom(bytes, len, 0);
    struct timespec ts;

    if (got == (ssize_t)len) {
        return;
    }
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, bytes, len);
        close(fd);
        if (n == (ssize_t)len) {
            return;
        }
    }
    /* No randomness at all: time, pid and a per-thread counter, mixed (splitmix64). */
    clock_gettime(CLOCK_REALTIME, &ts);
    for (size_t i = 0; i < len; i += 8) {
        uint64_t z = (fallback += 0x9e3779b97f4a7c15ull) ^ (uint64_t)ts.tv_nsec ^
                     ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_sec;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        memcpy(bytes + i, &z, len - i < 8 ? len - i : 8);
    }
}

void
weft__uuid_v4(char out[WEFT_UUID_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[16];
    size_t o = 0;

    fill_random(b, sizeof(b));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80); /* variant 10 */
    for (size_t i = 0; i < sizeof(b); i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            out[o++] = '-';
        }
        out[o++] = hex[b[i] >> 4];
        out[o++] = hex[b[i] & 15];
    }
    out[o] = '\0';
}

bool
weft__uuid_is_valid(const char *s)
{
    if (s == NULL || strlen(s) != WEFT_UUID_LEN) {
        return false;
    }
    for (size_t i = 0; i < WEFT_UUID_LEN; i++) {
        bool is_hyphen = i == 8 || i == 13 || i == 18 || i == 23;
        char c = s[i];
        bool is_hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
        if (is_hyphen ? c != '-' : !is_hex) {
            return false;
        }
    }
    return true;
}
