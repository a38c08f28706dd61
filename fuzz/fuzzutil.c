/* fuzz/fuzzutil.c — helpers shared by the libFuzzer targets. */
#define _GNU_SOURCE /* memfd_create */
#include "fuzzutil.h"
#include "txc/safetensors.h"
#include "txc/tokenizer.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void fz_die(const char *what)
{
    perror(what);
    abort();
}

int fz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len, int max)
{
    const size_t m = sizeof FZ_SEP - 1;
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; n < max - 1 && i + m <= size; i++)
        if (memcmp(data + i, FZ_SEP, m) == 0) {
            part[n] = data + start;
            len[n++] = i - start;
            start = i + m;
            i += m - 1;
        }
    part[n] = data + start;
    len[n++] = size - start;
    return n;
}

static void write_all(int fd, const void *data, size_t size, const char *what)
{
    const char *p = data;
    while (size) {
        ssize_t w = write(fd, p, size);
        if (w <= 0)
            fz_die(what);
        p += w;
        size -= (size_t)w;
    }
}

int fz_memfd(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("txc-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        fz_die("memfd_create");
    write_all(fd, data, size, "memfd write");
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

static char tmpdir[4096];

static void remove_tmpdir(void)
{
    fz_clear_dir(tmpdir);
    rmdir(tmpdir);
}

const char *fz_tmpdir(void)
{
    if (!tmpdir[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(tmpdir, sizeof tmpdir, "%s/txc-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmpdir))
            fz_die("mkdtemp");
        atexit(remove_tmpdir);
    }
    return tmpdir;
}

void fz_write(const char *dir, const char *name, const void *data, size_t size)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fz_write_file(path, data, size);
}

void fz_write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        fz_die(path);
    if (size && fwrite(data, 1, size, f) != size)
        fz_die(path);
    if (fclose(f) != 0)
        fz_die(path);
}

void fz_clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char path[8192];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    closedir(d);
}

const char *fz_shared_dir(void)
{
    const char *s = getenv("TXC_SHARED_DIR");
    if (s && *s)
        return s;
    return TXC_FUZZ_SOURCE_DIR "/../shared";
}

/* Every byte of every tensor (a read past the mapping faults), plus the
 * checks the header promises. */
void fz_check_safetensors(const txc_safetensors *st)
{
    volatile uint8_t sink = 0;
    for (int i = 0; i < txc_safetensors_count(st); i++) {
        const txc_st_tensor *t = txc_safetensors_at(st, i);
        if (!t || !t->name || t->ndim < 0 || t->ndim > TXC_MAX_DIMS)
            abort();
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0)
                abort();
            numel *= t->shape[d];
        }
        if ((size_t)numel * txc_dtype_size(t->dtype) != t->nbytes)
            abort();
        if (txc_safetensors_find(st, t->name) != t)
            abort();
        const uint8_t *p = t->data;
        for (size_t b = 0; b < t->nbytes; b++)
            sink ^= p[b];
    }
    (void)sink;
    (void)txc_safetensors_metadata(st, "format");
}

char *fz_check_decode(const txc_tokenizer *t, const int32_t *ids, size_t n, int skip_special, size_t *len)
{
    char *text = NULL;
    *len = 0;
    txc_status st = txc_tokenizer_decode(t, ids, n, skip_special, &text, len);
    if (st != TXC_OK) {
        if (text)
            abort();
        return NULL;
    }
    if (!text || text[*len] != '\0')
        abort();
    txc_detok_stream *s = txc_detok_stream_new(t, skip_special);
    if (!s)
        abort(); /* out of memory: the fuzzer's rss limit is far below a failed malloc here */
    size_t at = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *piece;
        size_t pl;
        if ((i < n ? txc_detok_stream_put(s, ids[i], &piece, &pl) : txc_detok_stream_flush(s, &piece, &pl)) != TXC_OK)
            abort();
        if (pl > *len - at || memcmp(piece, text + at, pl) != 0)
            abort();
        at += pl;
    }
    if (at != *len)
        abort();
    txc_detok_stream_free(s);
    return text;
}
