#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *tu_shared_dir(void)
{
    const char *s = getenv("TXC_SHARED_DIR");
    return s && *s ? s : "../shared";
}

const char *tu_source_dir(void)
{
    const char *s = getenv("TXC_SOURCE_DIR");
    return s && *s ? s : ".";
}

const char *tu_path(const char *fmt, ...)
{
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b, sizeof bufs[0], fmt, ap);
    va_end(ap);
    return b;
}

char *tu_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

char *tu_mkdtemp(void)
{
    static char bufs[8][256];
    static int next;
    char *b = bufs[next++ % 8];
    const char *tmp = getenv("TMPDIR");
    snprintf(b, sizeof bufs[0], "%s/txc-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    return mkdtemp(b);
}

int tu_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    fclose(f);
    return w == len ? 0 : -1;
}

void tu_rm_rf(const char *dir)
{
    char cmd[512];
    if (!dir || strlen(dir) < 10 || strstr(dir, "txc-test-") == NULL)
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}
