/*
 * The compile cache's size cap: least-recently-used eviction of plan files
 * (see persist.h). A plan's modification time is its last use: written when
 * saved, touched when loaded (txc_persist_load). ccache and the pip cache
 * bound their folders the same way (a size cap, oldest use evicted first).
 */
#include "jit/persist.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct plan_file {
    int64_t used_ns; /* st_mtim */
    int64_t bytes;
    char *name;
} plan_file;

static int by_use(const void *a, const void *b)
{
    const plan_file *x = a, *y = b;
    if (x->used_ns != y->used_ns)
        return x->used_ns < y->used_ns ? -1 : 1;
    return strcmp(x->name, y->name); /* a fixed order for equal times */
}

static bool is_plan_name(const char *n)
{
    size_t l = strlen(n), s = sizeof ".txcplan" - 1;
    return l > s && !strcmp(n + l - s, ".txcplan") && n[0] != '.';
}

int txc_persist_trim(const char *dir, int64_t max_bytes, const char *keep, int64_t *bytes_left)
{
    if (bytes_left)
        *bytes_left = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return 0;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return 0;
    }
    const char *keep_name = keep ? strrchr(keep, '/') : NULL;
    keep_name = keep_name ? keep_name + 1 : keep;
    plan_file *v = NULL;
    size_t n = 0, cap = 0;
    int64_t total = 0;
    bool oom = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        if (!is_plan_name(e->d_name) || fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            size_t c = cap ? 2 * cap : 64;
            plan_file *w = realloc(v, c * sizeof *w);
            if (!w) {
                oom = true;
                break;
            }
            v = w;
            cap = c;
        }
        char *name = strdup(e->d_name);
        if (!name) {
            oom = true;
            break;
        }
        v[n++] = (plan_file){(int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, (int64_t)st.st_size,
                             name};
        total += (int64_t)st.st_size;
    }
    int removed = 0;
    if (!oom && total > max_bytes) {
        qsort(v, n, sizeof *v, by_use);
        for (size_t i = 0; i < n && total > max_bytes; i++) {
            if (keep_name && !strcmp(v[i].name, keep_name))
                continue; /* the plan just written stays, even alone over the cap */
            if (unlinkat(dfd, v[i].name, 0) == 0 || errno == ENOENT) { /* ENOENT: another process evicted it */
                total -= v[i].bytes;
                removed++;
            }
        }
    }
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    closedir(d); /* closes dfd */
    if (bytes_left)
        *bytes_left = total;
    return removed;
}
