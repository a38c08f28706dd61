/* A model folder's small files: config.json, generation_config.json,
 * tokenizer.json, model.safetensors.index.json. See formats/files.h. */
#include "formats/files.h"

#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *txc_hf_path_join(const char *dir, const char *name)
{
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) {
        txc_error(TXC_ERR_NOMEM, "out of memory");
        return NULL;
    }
    memcpy(p, dir, a);
    size_t k = a;
    if (a > 0 && dir[a - 1] != '/')
        p[k++] = '/';
    memcpy(p + k, name, b + 1);
    return p;
}

txc_status txc_hf_read_file(const char *path, size_t max_bytes, char **text, size_t *len, bool *missing)
{
    *text = NULL;
    *len = 0;
    if (missing)
        *missing = false;
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
     * writer forever; the type is checked before anything is read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        if (missing && errno == ENOENT) {
            *missing = true;
            return TXC_OK;
        }
        return txc_error(TXC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return txc_error(TXC_ERR_IO, "cannot read %s: not a regular file", path);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        return txc_error(TXC_ERR_IO, "cannot open %s: %s", path, strerror(err));
    }
    if ((uint64_t)sb.st_size > (uint64_t)max_bytes) {
        fclose(f);
        return txc_error(TXC_ERR_FORMAT, "%s: %lld bytes, larger than the %zu this file may have", path,
                         (long long)sb.st_size, max_bytes);
    }
    size_t n = (size_t)sb.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return txc_error(TXC_ERR_NOMEM, "out of memory reading %s", path);
    }
    size_t r = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || r != n) {
        free(buf);
        return txc_error(TXC_ERR_IO, "cannot read %s", path);
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return TXC_OK;
}

const char *txc_hf_json_kind(const cJSON *v)
{
    if (!v)
        return "missing";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "invalid";
}

#if defined(__SANITIZE_ADDRESS__)
#define TXC_SANITIZER_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TXC_SANITIZER_MALLOC 1
#endif
#endif

void txc_hf_trim_heap(void)
{
#if defined(__GLIBC__) && !defined(TXC_SANITIZER_MALLOC)
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    malloc_trim(0);
    pthread_mutex_unlock(&lock);
#endif
}
