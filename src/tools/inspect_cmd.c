/*
 * `txc inspect FILE.gguf|DIR`: what a weights file holds, as gguf-dump (the
 * `gguf` package's script) prints it: the metadata (index, type, element
 * count, key = value; arrays shown by their first elements) and the tensors
 * (index, element count, ggml-order dimensions, type, name), with each
 * tensor's bytes and the totals. A folder: its config.json's model_type and
 * the safetensors tensors (torch-order shape, dtype, bytes).
 */
#include "tools/inspect_cmd.h"
#include "tools/cli.h"
#include "txc/gguf.h"
#include "txc/hf_config.h"
#include "txc/safetensors.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *f)
{
    fprintf(f, "usage: txc inspect FILE.gguf|DIR [--all]\n"
               "\n"
               "The metadata and tensors of a GGUF file (as gguf-dump): each key with its type and\n"
               "value, each tensor with its element count, dimensions (ggml order), type and bytes.\n"
               "DIR: a Hugging Face folder's config model_type and safetensors tensors.\n"
               "  --all   print every element of the metadata's arrays (default: the first 8)\n");
}

/* A string for a terminal: printable bytes as they are, the rest escaped, at most `max` bytes. */
static void put_str(const txc_gguf_str *s, uint64_t max)
{
    putchar('\'');
    uint64_t n = s->len < max ? s->len : max;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s->data[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\'' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('\'');
    if (n < s->len)
        printf("...(%" PRIu64 " bytes)", s->len);
}

static void put_value(const txc_gguf_value *v, uint64_t max_items)
{
    switch (v->type) {
    case TXC_GGUF_UINT8: case TXC_GGUF_UINT16: case TXC_GGUF_UINT32: case TXC_GGUF_UINT64:
        printf("%" PRIu64, v->v.u);
        break;
    case TXC_GGUF_INT8: case TXC_GGUF_INT16: case TXC_GGUF_INT32: case TXC_GGUF_INT64:
        printf("%" PRId64, v->v.i);
        break;
    case TXC_GGUF_FLOAT32: case TXC_GGUF_FLOAT64: printf("%.9g", v->v.f); break;
    case TXC_GGUF_BOOL: fputs(v->v.b ? "True" : "False", stdout); break;
    case TXC_GGUF_STRING: put_str(&v->v.str, 200); break;
    case TXC_GGUF_ARRAY: {
        putchar('[');
        uint64_t n = v->v.arr.n < max_items ? v->v.arr.n : max_items;
        for (uint64_t i = 0; i < n; i++) {
            if (i)
                fputs(", ", stdout);
            txc_gguf_type et = v->v.arr.type;
            if (et == TXC_GGUF_STRING || et == TXC_GGUF_ARRAY)
                put_value(&v->v.arr.items[i], max_items);
            else if (et == TXC_GGUF_FLOAT32 || et == TXC_GGUF_FLOAT64)
                printf("%.9g", txc_gguf_array_f64(v, i));
            else if (et == TXC_GGUF_BOOL)
                fputs(txc_gguf_array_i64(v, i) ? "True" : "False", stdout);
            else if (et == TXC_GGUF_UINT64)
                printf("%" PRIu64, (uint64_t)txc_gguf_array_i64(v, i));
            else
                printf("%" PRId64, txc_gguf_array_i64(v, i));
        }
        if (n < v->v.arr.n)
            printf(", ...");
        putchar(']');
        break;
    }
    default: break;
    }
}

static const char *upper_type(txc_gguf_type t)
{
    static const char *const names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                        "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
    return (unsigned)t < TXC_GGUF_TYPE_COUNT ? names[t] : "?";
}

static int inspect_gguf(const char *path, bool all)
{
    txc_gguf *g;
    if (txc_gguf_open(path, &g) != TXC_OK)
        return txc_cli_fail(path);
    printf("* %s: GGUF version %" PRIu32 ", %zu bytes, alignment %" PRIu32 ", data at byte %zu\n", path,
           txc_gguf_version(g), txc_gguf_file_size(g), txc_gguf_alignment(g), txc_gguf_data_offset(g));
    int64_t nkv = txc_gguf_kv_count(g), nt = txc_gguf_tensor_count(g);
    printf("* Dumping %" PRId64 " key/value pair(s)\n", nkv);
    for (int64_t i = 0; i < nkv; i++) {
        const txc_gguf_kv *kv = txc_gguf_kv_at(g, i);
        const txc_gguf_value *v = &kv->value;
        char type[24];
        if (v->type == TXC_GGUF_ARRAY)
            snprintf(type, sizeof type, "[%s]", upper_type(v->v.arr.type));
        else
            snprintf(type, sizeof type, "%s", upper_type(v->type));
        printf("%7" PRId64 ": %-10s | %8" PRIu64 " | %s = ", i + 1, type,
               v->type == TXC_GGUF_ARRAY ? v->v.arr.n : (uint64_t)1, kv->key);
        put_value(v, all ? UINT64_MAX : 8);
        putchar('\n');
    }
    printf("* Dumping %" PRId64 " tensor(s)\n", nt);
    uint64_t total_bytes = 0, total_numel = 0;
    for (int64_t i = 0; i < nt; i++) {
        const txc_gguf_tensor *t = txc_gguf_tensor_at(g, i);
        printf("%7" PRId64 ": %10" PRId64 " | %6" PRId64 ", %6" PRId64 ", %6" PRId64 ", %6" PRId64 " | %-7s | %10zu B | %s\n",
               i + 1, t->numel, t->ne[0], t->ne[1], t->ne[2], t->ne[3], txc_ggml_type_name(t->ggml_type), t->nbytes,
               t->name);
        total_bytes += t->nbytes;
        total_numel += (uint64_t)t->numel;
    }
    printf("* %" PRId64 " tensor(s), %" PRIu64 " elements, %" PRIu64 " bytes (%.2f bits per element)\n", nt, total_numel,
           total_bytes, total_numel ? 8.0 * (double)total_bytes / (double)total_numel : 0.0);
    txc_gguf_close(g);
    return 0;
}

static int inspect_dir(const char *dir)
{
    txc_hf_config c;
    txc_safetensors *st;
    if (txc_hf_config_load(dir, &c) != TXC_OK || txc_safetensors_open(dir, &st) != TXC_OK)
        return txc_cli_fail(dir);
    printf("* %s: model_type %s, %d shard(s)\n", dir, c.model_type, txc_safetensors_shard_count(st));
    int n = txc_safetensors_count(st);
    printf("* Dumping %d tensor(s)\n", n);
    uint64_t total = 0, numel_all = 0;
    for (int i = 0; i < n; i++) {
        const txc_st_tensor *t = txc_safetensors_at(st, i);
        int64_t numel = 1;
        char shape[96] = "";
        size_t k = 0;
        for (int d = 0; d < t->ndim; d++) {
            numel *= t->shape[d];
            k += (size_t)snprintf(shape + k, sizeof shape - k, "%s%" PRId64, d ? ", " : "", t->shape[d]);
            if (k >= sizeof shape)
                break;
        }
        printf("%7d: %10" PRId64 " | (%s) | %-8s | %10zu B | %s\n", i + 1, numel, shape, txc_dtype_name(t->dtype),
               t->nbytes, t->name);
        total += t->nbytes;
        numel_all += (uint64_t)numel;
    }
    printf("* %d tensor(s), %" PRIu64 " elements, %" PRIu64 " bytes\n", n, numel_all, total);
    txc_safetensors_close(st);
    return 0;
}

int txc_cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--all") == 0) {
            all = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "txc: inspect: unknown option '%s' (see txc inspect --help)\n", argv[i]);
            return EXIT_ERROR;
        } else if (path) {
            fprintf(stderr, "txc: inspect takes one FILE.gguf or DIR (got '%s' and '%s')\n", path, argv[i]);
            return EXIT_ERROR;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "txc: inspect needs a FILE.gguf or a model DIR (see txc inspect --help)\n");
        return EXIT_ERROR;
    }
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "txc: %s does not exist\n", path);
        return EXIT_ERROR;
    }
    int rc = S_ISDIR(sb.st_mode) ? inspect_dir(path) : inspect_gguf(path, all);
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "txc: writing the output failed\n");
        return EXIT_ERROR;
    }
    return rc;
}
