/* safetensors reader (mmap, zero copy); see include/txc/safetensors.h. */
#include "txc/safetensors.h"
#include "formats/files.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct txc_safetensors {
    int n_shards;
    char **paths;            /* [n_shards], owned */
    txc_storage **storages;  /* [n_shards], one reference each */
    int n, cap;
    txc_st_tensor *tensors;  /* names owned (strdup) */
    int n_meta;
    char **meta_keys, **meta_vals;
    txc_storage **extra;     /* storages of rewritten tensors (txc_safetensors_add_owned), one ref each */
    int n_extra;
};

/* Largest integer a JSON number (a double in cJSON) holds exactly. */
#define JSON_MAX_EXACT 9007199254740992.0

/* The dtype names of the safetensors crate (Dtype enum) that txc does not
 * load: valid files, but unsupported here. */
static const char *const KNOWN_UNSUPPORTED[] = {
    "F64", "I8", "U8", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2",
    "F8_E8M0", "F4", "F6_E2M3", "F6_E3M2", "C64", "E4M3", "E5M2",
};

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    else
        txc_error(TXC_ERR_NOMEM, "out of memory (safetensors)");
    return p;
}


static bool is_regular_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

static bool json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v))
        return false;
    double d = v->valuedouble;
    if (!isfinite(d) || d < 0 || d != floor(d) || d > JSON_MAX_EXACT)
        return false;
    *out = (uint64_t)d;
    return true;
}


static void format_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, cap - k, "[");
    for (int i = 0; i < ndim && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
}

static txc_status push_tensor(txc_safetensors *st, const txc_st_tensor *t)
{
    if (st->n == st->cap) {
        int cap = st->cap ? st->cap * 2 : 64;
        txc_st_tensor *p = realloc(st->tensors, (size_t)cap * sizeof *p);
        if (!p)
            return txc_error(TXC_ERR_NOMEM, "out of memory (safetensors table)");
        st->tensors = p;
        st->cap = cap;
    }
    st->tensors[st->n++] = *t;
    return TXC_OK;
}

static txc_status parse_metadata(txc_safetensors *st, const char *path, const cJSON *meta, bool keep)
{
    if (cJSON_IsNull(meta))
        return TXC_OK;
    if (!cJSON_IsObject(meta))
        return txc_error(TXC_ERR_FORMAT, "%s: \"__metadata__\" is %s, expected an object of strings",
                         path, txc_hf_json_kind(meta));
    int n = cJSON_GetArraySize(meta);
    for (const cJSON *kv = meta->child; kv; kv = kv->next)
        if (!cJSON_IsString(kv))
            return txc_error(TXC_ERR_FORMAT, "%s: \"__metadata__\" entry '%s' is %s, expected a string",
                             path, kv->string, txc_hf_json_kind(kv));
    if (!keep || n == 0)
        return TXC_OK;
    if (st->meta_keys)
        return txc_error(TXC_ERR_FORMAT, "%s: \"__metadata__\" appears twice in the header", path);
    st->meta_keys = calloc((size_t)n, sizeof(char *));
    st->meta_vals = calloc((size_t)n, sizeof(char *));
    if (!st->meta_keys || !st->meta_vals)
        return txc_error(TXC_ERR_NOMEM, "out of memory (safetensors metadata)");
    for (const cJSON *kv = meta->child; kv; kv = kv->next) {
        char *k = xstrdup(kv->string), *v = xstrdup(kv->valuestring);
        if (!k || !v) {
            free(k);
            free(v);
            return TXC_ERR_NOMEM;
        }
        st->meta_keys[st->n_meta] = k;
        st->meta_vals[st->n_meta] = v;
        st->n_meta++;
    }
    return TXC_OK;
}

/* One header entry -> a tensor (name not yet copied). */
static txc_status parse_entry(const char *path, const cJSON *e, const uint8_t *base,
                              uint64_t data_start, uint64_t data_size, txc_st_tensor *t)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' is %s, expected an object", path, name,
                         txc_hf_json_kind(e));

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt))
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' field \"dtype\" is %s, expected a string",
                         path, name, txc_hf_json_kind(dt));
    if (!txc_dtype_from_safetensors(dt->valuestring, &t->dtype)) {
        for (size_t i = 0; i < sizeof KNOWN_UNSUPPORTED / sizeof *KNOWN_UNSUPPORTED; i++)
            if (strcmp(dt->valuestring, KNOWN_UNSUPPORTED[i]) == 0)
                return txc_error(TXC_ERR_UNSUPPORTED,
                                 "%s: tensor '%s' has dtype %s, which txc does not support "
                                 "(F32, F16, BF16, I32, I64, BOOL)",
                                 path, name, dt->valuestring);
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' has unknown dtype \"%s\"", path, name,
                         dt->valuestring);
    }

    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(sh))
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' field \"shape\" is %s, expected an array",
                         path, name, txc_hf_json_kind(sh));
    int ndim = cJSON_GetArraySize(sh);
    if (ndim > TXC_MAX_DIMS)
        return txc_error(TXC_ERR_UNSUPPORTED, "%s: tensor '%s' has %d dims (at most %d supported)",
                         path, name, ndim, TXC_MAX_DIMS);
    t->ndim = ndim;
    int i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        uint64_t v;
        if (!json_uint(d, &v))
            return txc_error(TXC_ERR_FORMAT,
                             "%s: tensor '%s' shape[%d] is not a non-negative integer", path, name, i);
        t->shape[i] = (int64_t)v;
    }
    for (; i < TXC_MAX_DIMS; i++)
        t->shape[i] = 0;
    int64_t numel = txc_shape_numel(ndim, t->shape);
    if (numel < 0)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' shape overflows", path, name);

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &begin) ||
        !json_uint(off->child->next, &end))
        return txc_error(TXC_ERR_FORMAT,
                         "%s: tensor '%s' field \"data_offsets\" is not [begin, end] "
                         "(two non-negative integers)",
                         path, name);
    if (begin > end)
        return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' data_offsets [%" PRIu64 ", %" PRIu64
                         ") has begin > end", path, name, begin, end);
    if (end > data_size)
        return txc_error(TXC_ERR_FORMAT,
                         "%s: tensor '%s' data [%" PRIu64 ", %" PRIu64
                         ") extends past the end of the data section (%" PRIu64 " bytes)",
                         path, name, begin, end, data_size);
    size_t dsize = txc_dtype_size(t->dtype);
    uint64_t have = end - begin;
    if ((uint64_t)numel > have / dsize || (uint64_t)numel * dsize != have) {
        char sbuf[256];
        format_shape(sbuf, sizeof sbuf, ndim, t->shape);
        return txc_error(TXC_ERR_FORMAT,
                         "%s: tensor '%s' data [%" PRIu64 ", %" PRIu64 ") holds %" PRIu64
                         " bytes but shape %s of %s needs %s%" PRIu64 " bytes",
                         path, name, begin, end, have, sbuf, dt->valuestring,
                         (uint64_t)numel > UINT64_MAX / dsize ? "more than " : "",
                         (uint64_t)numel > UINT64_MAX / dsize ? UINT64_MAX : (uint64_t)numel * dsize);
    }
    uint64_t abs_off = data_start + begin;
    /* The format does not require alignment (writers that do not pad the
     * header to 8 bytes exist): such a tensor is marked, and its users copy
     * it instead of using it in place. */
    t->aligned = have == 0 || abs_off % dsize == 0;
    t->byte_offset = (size_t)abs_off;
    t->nbytes = (size_t)have;
    t->data = base + abs_off;
    return TXC_OK;
}

static int cmp_by_offset(const void *a, const void *b)
{
    const txc_st_tensor *x = *(const txc_st_tensor *const *)a, *y = *(const txc_st_tensor *const *)b;
    if (x->byte_offset != y->byte_offset)
        return x->byte_offset < y->byte_offset ? -1 : 1;
    if (x->nbytes != y->nbytes)
        return x->nbytes < y->nbytes ? -1 : 1;
    return 0;
}

/* Tensors [first, st->n) come from one file: no two may share a byte. */
static txc_status check_overlap(const txc_safetensors *st, const char *path, int first, uint64_t data_start)
{
    int n = st->n - first;
    if (n < 2)
        return TXC_OK;
    const txc_st_tensor **v = malloc((size_t)n * sizeof *v);
    if (!v)
        return txc_error(TXC_ERR_NOMEM, "out of memory (safetensors)");
    int m = 0;
    for (int i = first; i < st->n; i++)
        if (st->tensors[i].nbytes > 0)
            v[m++] = &st->tensors[i];
    qsort(v, (size_t)m, sizeof *v, cmp_by_offset);
    txc_status s = TXC_OK;
    for (int i = 1; i < m; i++) {
        const txc_st_tensor *a = v[i - 1], *b = v[i];
        if (a->byte_offset + a->nbytes > b->byte_offset) {
            s = txc_error(TXC_ERR_FORMAT,
                          "%s: tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64 ", %" PRIu64
                          ") overlap",
                          path, a->name, (uint64_t)(a->byte_offset - data_start),
                          (uint64_t)(a->byte_offset + a->nbytes - data_start), b->name,
                          (uint64_t)(b->byte_offset - data_start),
                          (uint64_t)(b->byte_offset + b->nbytes - data_start));
            break;
        }
    }
    free(v);
    return s;
}

/* Map `path` as shard number `shard` (st->storages[shard], st->paths[shard]
 * already allocated slots) and append its tensors. */
static txc_status parse_file(txc_safetensors *st, int shard)
{
    const char *path = st->paths[shard];
    txc_storage *s = txc_storage_mmap_file(path);
    if (!s)
        return txc_last_status() == TXC_ERR_NOMEM ? TXC_ERR_NOMEM : TXC_ERR_IO;
    st->storages[shard] = s;
    const uint8_t *base = txc_storage_data(s);
    uint64_t size = txc_storage_size(s);
    if (size < 8)
        return txc_error(TXC_ERR_FORMAT,
                         "%s: file is %" PRIu64 " bytes, shorter than the 8-byte header length",
                         path, size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | base[i];
    if (hlen > TXC_SAFETENSORS_MAX_HEADER)
        return txc_error(TXC_ERR_FORMAT,
                         "%s: header length %" PRIu64 " is above the limit of %u bytes", path, hlen,
                         TXC_SAFETENSORS_MAX_HEADER);
    if (hlen > size - 8)
        return txc_error(TXC_ERR_FORMAT,
                         "%s: header length %" PRIu64
                         " extends past the end of the file (%" PRIu64 " bytes): truncated?",
                         path, hlen, size);
    const char *hdr = (const char *)base + 8;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
    if (!root) {
        size_t at = end && end >= hdr ? (size_t)(end - hdr) : 0;
        return txc_error(TXC_ERR_FORMAT, "%s: header is not valid JSON (at header byte %zu of %" PRIu64 ")",
                         path, at, hlen);
    }
    txc_status rc = TXC_OK;
    for (const char *p = end; p < hdr + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            rc = txc_error(TXC_ERR_FORMAT, "%s: header has bytes after the JSON object (at header byte %zu)",
                           path, (size_t)(p - hdr));
            goto done;
        }
    }
    if (!cJSON_IsObject(root)) {
        rc = txc_error(TXC_ERR_FORMAT, "%s: header is %s, expected a JSON object", path, txc_hf_json_kind(root));
        goto done;
    }
    uint64_t data_start = 8 + hlen, data_size = size - data_start;
    int first = st->n;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            rc = parse_metadata(st, path, e, shard == 0);
            if (rc)
                goto done;
            continue;
        }
        txc_st_tensor t;
        memset(&t, 0, sizeof t);
        rc = parse_entry(path, e, base, data_start, data_size, &t);
        if (rc)
            goto done;
        t.storage = s;
        t.shard = shard;
        char *name = xstrdup(e->string);
        if (!name) {
            rc = TXC_ERR_NOMEM;
            goto done;
        }
        t.name = name;
        rc = push_tensor(st, &t);
        if (rc) {
            free(name);
            goto done;
        }
    }
    rc = check_overlap(st, path, first, data_start);
done:
    cJSON_Delete(root);
    return rc;
}

static int cmp_by_name(const void *a, const void *b)
{
    const txc_st_tensor *x = a, *y = b;
    return strcmp(x->name, y->name);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sort by name; a name twice (in one file or across shards) is an error. */
static txc_status sort_and_check(txc_safetensors *st)
{
    if (st->n > 1)
        qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, cmp_by_name);
    for (int i = 1; i < st->n; i++) {
        const txc_st_tensor *a = &st->tensors[i - 1], *b = &st->tensors[i];
        if (strcmp(a->name, b->name) == 0) {
            if (a->shard == b->shard)
                return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' appears twice in the header",
                                 st->paths[a->shard], a->name);
            return txc_error(TXC_ERR_FORMAT, "tensor '%s' appears in two shards: %s and %s", a->name,
                             st->paths[a->shard < b->shard ? a->shard : b->shard],
                             st->paths[a->shard < b->shard ? b->shard : a->shard]);
        }
    }
    return TXC_OK;
}

static txc_status alloc_shards(txc_safetensors *st, int n)
{
    st->paths = calloc((size_t)n, sizeof *st->paths);
    st->storages = calloc((size_t)n, sizeof *st->storages);
    if (!st->paths || !st->storages)
        return txc_error(TXC_ERR_NOMEM, "out of memory (safetensors)");
    st->n_shards = n;
    return TXC_OK;
}

static txc_status open_single(txc_safetensors *st, const char *path)
{
    txc_status rc = alloc_shards(st, 1);
    if (rc)
        return rc;
    if (!(st->paths[0] = xstrdup(path)))
        return TXC_ERR_NOMEM;
    if ((rc = parse_file(st, 0)))
        return rc;
    return sort_and_check(st);
}


/* A shard name must stay in the index's directory. */
static bool shard_name_ok(const char *s)
{
    if (!*s || s[0] == '/')
        return false;
    for (const char *p = s; *p;) {
        const char *q = strchr(p, '/');
        size_t len = q ? (size_t)(q - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return false;
        if (!q)
            break;
        p = q + 1;
    }
    return true;
}

static txc_status open_index(txc_safetensors *st, const char *index_path)
{
    size_t len = 0;
    char *text = NULL;
    txc_status rs = txc_hf_read_file(index_path, TXC_SAFETENSORS_MAX_HEADER, &text, &len, NULL);
    if (rs != TXC_OK)
        return rs;
    txc_status rc = TXC_OK;
    char **files = NULL;
    char *dir = NULL;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        rc = txc_error(TXC_ERR_FORMAT, "%s: not valid JSON (at byte %zu)", index_path,
                       end && end >= text ? (size_t)(end - text) : (size_t)0);
        goto done;
    }
    if (!cJSON_IsObject(root)) {
        rc = txc_error(TXC_ERR_FORMAT, "%s: is %s, expected a JSON object", index_path, txc_hf_json_kind(root));
        goto done;
    }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        rc = txc_error(TXC_ERR_FORMAT, "%s: \"weight_map\" is %s, expected an object", index_path,
                       txc_hf_json_kind(wm));
        goto done;
    }
    int n = cJSON_GetArraySize(wm);
    if (n == 0) {
        rc = txc_error(TXC_ERR_FORMAT, "%s: \"weight_map\" is empty", index_path);
        goto done;
    }
    files = malloc((size_t)n * sizeof *files);
    if (!files) {
        rc = txc_error(TXC_ERR_NOMEM, "out of memory (safetensors index)");
        goto done;
    }
    int i = 0;
    for (const cJSON *e = wm->child; e; e = e->next) {
        if (!cJSON_IsString(e)) {
            rc = txc_error(TXC_ERR_FORMAT, "%s: weight_map entry '%s' is %s, expected a file name",
                           index_path, e->string, txc_hf_json_kind(e));
            goto done;
        }
        if (!shard_name_ok(e->valuestring)) {
            rc = txc_error(TXC_ERR_FORMAT,
                           "%s: weight_map entry '%s' names shard \"%s\" outside the index's directory",
                           index_path, e->string, e->valuestring);
            goto done;
        }
        files[i++] = e->valuestring;
    }
    qsort(files, (size_t)n, sizeof *files, cmp_str);
    int nu = 0;
    for (i = 0; i < n; i++)
        if (nu == 0 || strcmp(files[nu - 1], files[i]) != 0)
            files[nu++] = files[i];
    if ((rc = alloc_shards(st, nu)))
        goto done;

    const char *slash = strrchr(index_path, '/');
    if (slash) {
        size_t dl = (size_t)(slash - index_path) + 1;
        dir = malloc(dl + 1);
        if (!dir) {
            rc = txc_error(TXC_ERR_NOMEM, "out of memory (safetensors index)");
            goto done;
        }
        memcpy(dir, index_path, dl);
        dir[dl] = '\0';
    }
    for (i = 0; i < nu; i++) {
        st->paths[i] = txc_hf_path_join(dir ? dir : "", files[i]);
        if (!st->paths[i]) {
            rc = TXC_ERR_NOMEM;
            goto done;
        }
    }
    for (i = 0; i < nu; i++) {
        struct stat sb;
        int err = stat(st->paths[i], &sb) != 0 ? errno : 0;
        if (err || !S_ISREG(sb.st_mode)) {
            const char *tname = "";
            for (const cJSON *e = wm->child; e; e = e->next)
                if (strcmp(e->valuestring, files[i]) == 0) {
                    tname = e->string;
                    break;
                }
            rc = txc_error(TXC_ERR_IO, "%s: shard %s (holding tensor '%s') cannot be opened: %s",
                           index_path, st->paths[i], tname,
                           err ? strerror(err) : "not a regular file");
            goto done;
        }
        if ((rc = parse_file(st, i)))
            goto done;
    }
    if ((rc = sort_and_check(st)))
        goto done;
    for (const cJSON *e = wm->child; e; e = e->next) {
        const txc_st_tensor *t = txc_safetensors_find(st, e->string);
        const char *want = e->valuestring;
        if (!t)
            rc = txc_error(TXC_ERR_FORMAT,
                           "%s: weight_map puts tensor '%s' in %s, but no shard holds it",
                           index_path, e->string, want);
        else if (strcmp(files[t->shard], want) != 0)
            rc = txc_error(TXC_ERR_FORMAT,
                           "%s: weight_map puts tensor '%s' in %s, but it is in %s", index_path,
                           e->string, want, st->paths[t->shard]);
        if (rc)
            goto done;
    }
done:
    cJSON_Delete(root);
    free(files);
    free(dir);
    free(text);
    return rc;
}

txc_status txc_safetensors_open(const char *path, txc_safetensors **out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_safetensors_open: out is NULL");
    *out = NULL;
    if (!path || !*path)
        return txc_error(TXC_ERR_INVALID, "txc_safetensors_open: path is NULL or empty");
    struct stat sb;
    if (stat(path, &sb) != 0)
        return txc_error(TXC_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    txc_safetensors *st = calloc(1, sizeof *st);
    if (!st)
        return txc_error(TXC_ERR_NOMEM, "out of memory (safetensors)");
    txc_status rc;
    if (S_ISDIR(sb.st_mode)) {
        char *single = txc_hf_path_join(path, "model.safetensors");
        char *index = txc_hf_path_join(path, "model.safetensors.index.json");
        if (!single || !index)
            rc = TXC_ERR_NOMEM;
        else if (is_regular_file(single))
            rc = open_single(st, single);
        else if (is_regular_file(index))
            rc = open_index(st, index);
        else
            rc = txc_error(TXC_ERR_IO, "no model.safetensors or model.safetensors.index.json in %s", path);
        free(single);
        free(index);
    } else {
        size_t n = strlen(path);
        if (n >= 5 && strcmp(path + n - 5, ".json") == 0)
            rc = open_index(st, path);
        else
            rc = open_single(st, path);
    }
    if (rc) {
        txc_safetensors_close(st);
        return rc;
    }
    *out = st;
    return TXC_OK;
}

void txc_safetensors_close(txc_safetensors *st)
{
    if (!st)
        return;
    for (int i = 0; i < st->n; i++)
        free((char *)st->tensors[i].name);
    free(st->tensors);
    for (int i = 0; i < st->n_shards; i++) {
        txc_storage_release(st->storages[i]);
        free(st->paths[i]);
    }
    free(st->storages);
    free(st->paths);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_vals[i]);
    }
    free(st->meta_keys);
    free(st->meta_vals);
    for (int i = 0; i < st->n_extra; i++)
        txc_storage_release(st->extra[i]);
    free(st->extra);
    free(st);
}

int txc_safetensors_count(const txc_safetensors *st) { return st ? st->n : 0; }

const txc_st_tensor *txc_safetensors_at(const txc_safetensors *st, int i)
{
    if (!st || i < 0 || i >= st->n)
        return NULL;
    return &st->tensors[i];
}

const txc_st_tensor *txc_safetensors_find(const txc_safetensors *st, const char *name)
{
    if (!st || !name)
        return NULL;
    int lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(st->tensors[mid].name, name);
        if (c == 0)
            return &st->tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return NULL;
}

const char *txc_safetensors_metadata(const txc_safetensors *st, const char *key)
{
    if (!st || !key)
        return NULL;
    for (int i = 0; i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0)
            return st->meta_vals[i];
    return NULL;
}

int txc_safetensors_shard_count(const txc_safetensors *st) { return st ? st->n_shards : 0; }

const char *txc_safetensors_shard_path(const txc_safetensors *st, int i)
{
    if (!st || i < 0 || i >= st->n_shards)
        return NULL;
    return st->paths[i];
}

/* ---- a table built in memory (the tensors of another format) ---------------- */

txc_status txc_safetensors_new_table(const char *path, txc_storage *file, txc_safetensors **out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_safetensors_new_table: out is NULL");
    *out = NULL;
    if (!path || !file)
        return txc_error(TXC_ERR_INVALID, "txc_safetensors_new_table: path or file is NULL");
    txc_safetensors *st = calloc(1, sizeof *st);
    txc_status rc = st ? alloc_shards(st, 1) : txc_error(TXC_ERR_NOMEM, "out of memory (safetensors)");
    if (rc == TXC_OK && !(st->paths[0] = xstrdup(path)))
        rc = TXC_ERR_NOMEM;
    if (rc) {
        txc_safetensors_close(st);
        return rc;
    }
    st->storages[0] = txc_storage_retain(file);
    *out = st;
    return TXC_OK;
}

txc_status txc_safetensors_add(txc_safetensors *st, const txc_st_tensor *t)
{
    if (!st || !t || !t->name || !t->storage)
        return txc_error(TXC_ERR_INVALID, "txc_safetensors_add: NULL table, tensor, name or storage");
    txc_st_tensor c = *t;
    c.shard = t->storage == st->storages[0] ? 0 : -1;
    if (!(c.name = xstrdup(t->name)))
        return TXC_ERR_NOMEM;
    txc_status rc = push_tensor(st, &c);
    if (rc)
        free((char *)c.name);
    return rc;
}

txc_status txc_safetensors_add_owned(txc_safetensors *st, const txc_st_tensor *t, txc_storage *storage)
{
    if (!st || !storage)
        return txc_error(TXC_ERR_INVALID, "txc_safetensors_add_owned: NULL table or storage");
    txc_storage **e = realloc(st->extra, ((size_t)st->n_extra + 1) * sizeof *e);
    if (!e)
        return txc_error(TXC_ERR_NOMEM, "out of memory (safetensors table)");
    st->extra = e;
    st->extra[st->n_extra++] = txc_storage_retain(storage);
    return txc_safetensors_add(st, t);
}

txc_status txc_safetensors_finish(txc_safetensors *st)
{
    if (!st)
        return txc_error(TXC_ERR_INVALID, "txc_safetensors_finish: st is NULL");
    if (st->n > 1)
        qsort(st->tensors, (size_t)st->n, sizeof *st->tensors, cmp_by_name);
    for (int i = 1; i < st->n; i++)
        if (strcmp(st->tensors[i - 1].name, st->tensors[i].name) == 0)
            return txc_error(TXC_ERR_FORMAT, "%s: tensor '%s' appears twice", st->paths[0], st->tensors[i].name);
    return TXC_OK;
}
