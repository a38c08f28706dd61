/*
 * Random-weight models with the exact configs of real checkpoints; see
 * include/txc/synthetic.h.
 */
#define _GNU_SOURCE /* O_TMPFILE */
#include "txc/synthetic.h"
#include "txc/tensor.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifdef MAP_POPULATE
#define MAP_POPULATE_IF_ANY MAP_POPULATE /* map the reserved pages at once, not one fault per page */
#else
#define MAP_POPULATE_IF_ANY 0
#endif

/* ---- the configs (the checkpoints' config.json) ---------------------------- */

typedef struct synthetic_entry {
    txc_synthetic_info info;
    const char *config_json;
} synthetic_entry;

static const synthetic_entry entries[] = {
    {{"smollm2-135m", "HuggingFaceTB/SmolLM2-135M", 0.041666666666666664, NULL},
     "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
     " \"bos_token_id\": 0, \"eos_token_id\": 0, \"hidden_act\": \"silu\", \"hidden_size\": 576,"
     " \"initializer_range\": 0.041666666666666664, \"intermediate_size\": 1536, \"is_llama_config\": true,"
     " \"max_position_embeddings\": 8192, \"model_type\": \"llama\", \"num_attention_heads\": 9,"
     " \"num_hidden_layers\": 30, \"num_key_value_heads\": 3, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05,"
     " \"rope_interleaved\": false, \"rope_scaling\": null, \"rope_theta\": 100000, \"tie_word_embeddings\": true,"
     " \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.40.1\", \"use_cache\": true,"
     " \"vocab_size\": 49152}"},
    {{"qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B", 0.02, NULL},
     "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
     " \"eos_token_id\": 151643, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02,"
     " \"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 24,"
     " \"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24,"
     " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0,"
     " \"sliding_window\": 32768, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
     " \"transformers_version\": \"4.40.1\", \"use_cache\": true, \"use_sliding_window\": false,"
     " \"vocab_size\": 151936}"},
    {{"llama-3.2-1b", "meta-llama/Llama-3.2-1B", 0.02, NULL},
     "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
     " \"bos_token_id\": 128000, \"eos_token_id\": 128001, \"head_dim\": 64, \"hidden_act\": \"silu\","
     " \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 8192,"
     " \"max_position_embeddings\": 131072, \"mlp_bias\": false, \"model_type\": \"llama\","
     " \"num_attention_heads\": 32, \"num_hidden_layers\": 16, \"num_key_value_heads\": 8,"
     " \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0,"
     " \"high_freq_factor\": 4.0, \"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192,"
     " \"rope_type\": \"llama3\"}, \"rope_theta\": 500000.0,"
     " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.45.0.dev0\","
     " \"use_cache\": true, \"vocab_size\": 128256}"},
    {{"stories260k", "stories260K", 0.02, NULL},
     "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
     " \"bos_token_id\": 1, \"eos_token_id\": 2, \"head_dim\": 8, \"hidden_act\": \"silu\", \"hidden_size\": 64,"
     " \"initializer_range\": 0.02, \"intermediate_size\": 172, \"max_position_embeddings\": 512,"
     " \"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 8, \"num_hidden_layers\": 5,"
     " \"num_key_value_heads\": 4, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_scaling\": null,"
     " \"rope_theta\": 10000.0, \"tie_word_embeddings\": true, \"torch_dtype\": \"float32\","
     " \"transformers_version\": \"4.46.3\", \"use_cache\": true, \"vocab_size\": 512}"},
};
#define N_ENTRIES ((int)(sizeof entries / sizeof *entries))

static const char *const names[N_ENTRIES + 1] = {"smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b", "stories260k", NULL};

const char *const *txc_synthetic_names(void) { return names; }

static const synthetic_entry *find_entry(const char *name)
{
    for (int i = 0; name && i < N_ENTRIES; i++)
        if (strcasecmp(name, entries[i].info.name) == 0 || strcasecmp(name, entries[i].info.checkpoint) == 0)
            return &entries[i];
    return NULL;
}

const txc_synthetic_info *txc_synthetic_find(const char *name)
{
    const synthetic_entry *e = find_entry(name);
    return e ? &e->info : NULL;
}

const char *txc_synthetic_config_json(const char *name)
{
    const synthetic_entry *e = find_entry(name);
    return e ? e->config_json : NULL;
}

static txc_status unknown_name(const char *name)
{
    char known[256] = "";
    for (int i = 0; i < N_ENTRIES; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", names[i]);
    return txc_error(TXC_ERR_INVALID, "unknown synthetic model '%s' (known: %s)", name ? name : "(null)", known);
}

txc_status txc_synthetic_config(const char *name, txc_hf_config *out)
{
    const synthetic_entry *e = find_entry(name);
    if (!e)
        return unknown_name(name);
    char origin[96];
    snprintf(origin, sizeof origin, "synthetic %s config.json", e->info.name);
    return txc_hf_config_parse(e->config_json, strlen(e->config_json), origin, out);
}

/* ---- the tensors the loader expects ------------------------------------------ */

typedef struct syn_tensor {
    char name[96];
    int ndim;
    int64_t shape[2];
    bool ones;       /* a norm's weight */
    uint64_t offset; /* in the data section */
} syn_tensor;

static bool has_qkv_bias(const txc_hf_config *c)
{
    /* As the loader: qwen2 always has q/k/v biases. */
    return c->attention_bias || strcmp(c->model_type, "qwen2") == 0;
}

/* The tensors, in the loader's order; returns the count (the array is
 * malloc'd, NULL on out of memory). */
static syn_tensor *list_tensors(const txc_hf_config *c, int *n_out)
{
    int64_t H = c->hidden_size, V = c->vocab_size, I = c->intermediate_size;
    int64_t q = c->num_attention_heads * c->head_dim, kv = c->num_key_value_heads * c->head_dim;
    bool bias = has_qkv_bias(c);
    int cap = 3 + (int)c->num_hidden_layers * 12, n = 0;
    syn_tensor *t = calloc((size_t)cap, sizeof *t);
    if (!t)
        return NULL;
#define ADD(ones_, nd, d0, d1, ...)                                                                                   \
    do {                                                                                                              \
        snprintf(t[n].name, sizeof t[n].name, __VA_ARGS__);                                                           \
        t[n].ndim = (nd);                                                                                             \
        t[n].shape[0] = (d0);                                                                                         \
        t[n].shape[1] = (d1);                                                                                         \
        t[n].ones = (ones_);                                                                                          \
        n++;                                                                                                          \
    } while (0)
    ADD(false, 2, V, H, "model.embed_tokens.weight");
    for (long long l = 0; l < c->num_hidden_layers; l++) {
        ADD(true, 1, H, 0, "model.layers.%lld.input_layernorm.weight", l);
        ADD(false, 2, q, H, "model.layers.%lld.self_attn.q_proj.weight", l);
        ADD(false, 2, kv, H, "model.layers.%lld.self_attn.k_proj.weight", l);
        ADD(false, 2, kv, H, "model.layers.%lld.self_attn.v_proj.weight", l);
        ADD(false, 2, H, q, "model.layers.%lld.self_attn.o_proj.weight", l);
        if (bias) {
            ADD(false, 1, q, 0, "model.layers.%lld.self_attn.q_proj.bias", l);
            ADD(false, 1, kv, 0, "model.layers.%lld.self_attn.k_proj.bias", l);
            ADD(false, 1, kv, 0, "model.layers.%lld.self_attn.v_proj.bias", l);
        }
        ADD(true, 1, H, 0, "model.layers.%lld.post_attention_layernorm.weight", l);
        ADD(false, 2, I, H, "model.layers.%lld.mlp.gate_proj.weight", l);
        ADD(false, 2, I, H, "model.layers.%lld.mlp.up_proj.weight", l);
        ADD(false, 2, H, I, "model.layers.%lld.mlp.down_proj.weight", l);
    }
    ADD(true, 1, H, 0, "model.norm.weight");
    if (!c->tie_word_embeddings)
        ADD(false, 2, V, H, "lm_head.weight");
#undef ADD
    *n_out = n;
    return t;
}

static int64_t numel(const syn_tensor *t) { return t->ndim == 1 ? t->shape[0] : t->shape[0] * t->shape[1]; }

int64_t txc_synthetic_parameter_count(const txc_hf_config *c)
{
    int64_t H = c->hidden_size, V = c->vocab_size, I = c->intermediate_size;
    int64_t q = c->num_attention_heads * c->head_dim, kv = c->num_key_value_heads * c->head_dim;
    int64_t layer = 2 * H + q * H + 2 * kv * H + H * q + 3 * I * H + (has_qkv_bias(c) ? q + 2 * kv : 0);
    return V * H + c->num_hidden_layers * layer + H + (c->tie_word_embeddings ? 0 : V * H);
}

/* ---- the generator --------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z) /* splitmix64's finalizer */
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

void txc_synthetic_fill(uint64_t seed, const char *tensor_name, double std, uint64_t first, float *out, uint64_t n)
{
    const uint64_t golden = 0x9e3779b97f4a7c15ULL;
    uint64_t key = mix64(seed ^ fnv1a64(tensor_name));
    /* The sum of four uniforms on {0..65535} has mean 131070 and standard
     * deviation 65536/sqrt(3). */
    const float scale = (float)(std * 1.7320508075688772 / 65536.0);
    uint64_t ctr = key + (first + 1) * golden;
    for (uint64_t i = 0; i < n; i++, ctr += golden) {
        uint64_t x = mix64(ctr);
        int32_t s = (int32_t)((x & 0xffff) + ((x >> 16) & 0xffff) + ((x >> 32) & 0xffff) + (x >> 48)) - 131070;
        out[i] = (float)s * scale;
    }
}

/* Write elements [first, first + n) of tensor t as `dtype` at dst (the
 * tensor's start). */
static void fill_range(const syn_tensor *t, uint64_t seed, double std, txc_dtype dtype, void *dst, uint64_t first,
                       uint64_t n)
{
    if (dtype == TXC_F32) {
        float *f = (float *)dst + first;
        if (t->ones)
            for (uint64_t i = 0; i < n; i++)
                f[i] = 1.0f;
        else
            txc_synthetic_fill(seed, t->name, std, first, f, n);
        return;
    }
    enum { CHUNK = 8192 };
    float buf[CHUNK];
    for (uint64_t at = 0; at < n; at += CHUNK) {
        uint64_t k = n - at < CHUNK ? n - at : CHUNK;
        if (t->ones)
            for (uint64_t i = 0; i < k; i++)
                buf[i] = 1.0f;
        else
            txc_synthetic_fill(seed, t->name, std, first + at, buf, k);
        txc_dtype_convert(TXC_F32, buf, dtype, (char *)dst + (first + at) * 2, (size_t)k);
    }
}

/* Filling every tensor, in pieces of at most PIECE elements taken by up to
 * MAX_FILLERS threads (the values do not depend on who computes them). */
#define PIECE ((uint64_t)1 << 20)
#define MAX_FILLERS 16

typedef struct fill_job {
    const syn_tensor *t;
    int n;
    uint64_t seed;
    double std;
    txc_dtype dtype;
    unsigned char *data;
    uint64_t n_pieces;
    uint64_t *piece_start; /* first piece of tensor i (n + 1 entries) */
    atomic_uint_fast64_t next;
} fill_job;

static void *filler(void *arg)
{
    fill_job *j = arg;
    int ti = 0;
    for (;;) {
        uint64_t p = atomic_fetch_add(&j->next, 1);
        if (p >= j->n_pieces)
            return NULL;
        while (j->piece_start[ti + 1] <= p)
            ti++;
        while (j->piece_start[ti] > p)
            ti--;
        const syn_tensor *t = &j->t[ti];
        uint64_t first = (p - j->piece_start[ti]) * PIECE, total = (uint64_t)numel(t);
        uint64_t cnt = total - first < PIECE ? total - first : PIECE;
        fill_range(t, j->seed, j->std, j->dtype, j->data + t->offset, first, cnt);
    }
}

static txc_status fill_all(const syn_tensor *t, int n, uint64_t seed, double std, txc_dtype dtype,
                           unsigned char *data)
{
    fill_job j = {.t = t, .n = n, .seed = seed, .std = std, .dtype = dtype, .data = data};
    j.piece_start = malloc(sizeof(uint64_t) * ((size_t)n + 1));
    if (!j.piece_start)
        return txc_error(TXC_ERR_NOMEM, "out of memory (synthetic model)");
    for (int i = 0; i < n; i++) {
        j.piece_start[i] = j.n_pieces;
        j.n_pieces += ((uint64_t)numel(&t[i]) + PIECE - 1) / PIECE;
    }
    j.piece_start[n] = j.n_pieces;
    atomic_init(&j.next, 0);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int n_threads = cores < 1 ? 1 : cores > MAX_FILLERS ? MAX_FILLERS : (int)cores;
    if ((uint64_t)n_threads > j.n_pieces)
        n_threads = (int)(j.n_pieces ? j.n_pieces : 1);
    pthread_t th[MAX_FILLERS];
    int started = 0;
    for (int i = 1; i < n_threads; i++)
        if (pthread_create(&th[started], NULL, filler, &j) == 0)
            started++;
    filler(&j); /* this thread too; without helpers it does everything */
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    free(j.piece_start);
    return TXC_OK;
}

/* ---- the temporary folder ---------------------------------------------------------- */

/* A folder under $TXC_SYNTHETIC_DIR when set, else the first of /dev/shm,
 * $TMPDIR, /tmp with `need` bytes free; writes its path to dir (mkdtemp). */
static txc_status make_temp_dir(uint64_t need, char *dir, size_t cap)
{
    const char *tmpdir = getenv("TMPDIR"), *forced = getenv("TXC_SYNTHETIC_DIR");
    const char *cands[] = {"/dev/shm", tmpdir && *tmpdir ? tmpdir : "/tmp", "/tmp"};
    int n_cands = 3;
    if (forced && *forced) {
        cands[0] = forced;
        n_cands = 1;
    }
    char tried[512] = "";
    for (int i = 0; i < n_cands; i++) {
        struct statvfs sv;
        if (statvfs(cands[i], &sv) != 0 || access(cands[i], W_OK) != 0)
            continue;
        uint64_t avail = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
        if (avail < need + (64u << 20)) {
            snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s has %.1f GiB free", *tried ? ", " : "",
                     cands[i], (double)avail / (1u << 30));
            continue;
        }
        snprintf(dir, cap, "%s/txc-synthetic-XXXXXX", cands[i]);
        if (mkdtemp(dir))
            return TXC_OK;
        snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s: %s", *tried ? ", " : "", cands[i],
                 strerror(errno));
    }
    return txc_error(TXC_ERR_IO, "synthetic model: no temporary folder with %.1f GiB free (%s)",
                     (double)need / (1u << 30), *tried ? tried : "none writable");
}

/* The weights file: an unnamed file (O_TMPFILE) in `dir` reached through
 * the symlink dir/model.safetensors -> /proc/self/fd/N, so that nothing is
 * left behind if the process dies; where O_TMPFILE is not supported, a
 * plain file (removed right after loading). */
static int open_weights_file(const char *dir, char *path, size_t cap)
{
    snprintf(path, cap, "%s/model.safetensors", dir);
#ifdef O_TMPFILE
    int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd >= 0) {
        char target[64];
        snprintf(target, sizeof target, "/proc/self/fd/%d", fd);
        struct stat sb;
        if (stat(target, &sb) == 0 && symlink(target, path) == 0)
            return fd;
        close(fd);
    }
#endif
    return open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
}

static void remove_dir(const char *dir)
{
    char p[1100];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

static txc_status write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return txc_error(TXC_ERR_IO, "synthetic model: cannot write %s: %s", path, strerror(errno));
    size_t n = strlen(text);
    bool ok = fwrite(text, 1, n, f) == n;
    ok &= fclose(f) == 0;
    return ok ? TXC_OK : txc_error(TXC_ERR_IO, "synthetic model: cannot write %s", path);
}

/* config.json for this dtype (torch_dtype set to it). */
static char *config_text(const synthetic_entry *e, txc_dtype dtype)
{
    cJSON *j = cJSON_Parse(e->config_json);
    if (!j)
        return NULL;
    cJSON_ReplaceItemInObject(j, "torch_dtype", cJSON_CreateString(txc_dtype_name(dtype)));
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

/* The safetensors header for the tensors (offsets assigned, 64-byte
 * aligned), padded with spaces so the data section starts 64-aligned.
 * Returns the malloc'd header and its length (the 8 length bytes not
 * included); *data_size the data section's size. */
static char *make_header(syn_tensor *t, int n, txc_dtype dtype, size_t *hlen, uint64_t *data_size)
{
    const char *dt = dtype == TXC_F32 ? "F32" : dtype == TXC_BF16 ? "BF16" : "F16";
    cJSON *root = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(root, "__metadata__");
    cJSON_AddStringToObject(meta, "format", "pt");
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        uint64_t bytes = (uint64_t)numel(&t[i]) * txc_dtype_size(dtype);
        t[i].offset = off;
        cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
        cJSON_AddStringToObject(e, "dtype", dt);
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t[i].ndim; d++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + bytes)));
        off = (off + bytes + 63) & ~(uint64_t)63;
    }
    *data_size = off;
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!json)
        return NULL;
    size_t len = strlen(json), padded = ((8 + len + 63) & ~(size_t)63) - 8;
    char *h = malloc(padded + 1);
    if (h) {
        memcpy(h, json, len);
        memset(h + len, ' ', padded - len);
        h[padded] = 0;
        *hlen = padded;
    }
    cJSON_free(json);
    return h;
}

txc_status txc_model_synthetic(const char *name, txc_dtype dtype, uint64_t seed, txc_env *env, txc_model **out)
{
    txc_model_options o = {.env = env};
    return txc_model_synthetic_opts(name, dtype, seed, &o, out);
}

txc_status txc_model_synthetic_opts(const char *name, txc_dtype dtype, uint64_t seed, const txc_model_options *load_opts,
                                    txc_model **out)
{
    if (!out)
        return txc_error(TXC_ERR_INVALID, "txc_model_synthetic: out is NULL");
    *out = NULL;
    const synthetic_entry *e = find_entry(name);
    if (!e)
        return unknown_name(name);
    if (dtype != TXC_F32 && dtype != TXC_BF16 && dtype != TXC_F16)
        return txc_error(TXC_ERR_INVALID, "synthetic model: dtype %s is not supported (float32, bfloat16, float16)",
                         txc_dtype_name(dtype));
    txc_hf_config cfg;
    txc_status s = txc_synthetic_config(name, &cfg);
    if (s != TXC_OK)
        return s;
    int n = 0;
    syn_tensor *t = list_tensors(&cfg, &n);
    size_t hlen = 0;
    uint64_t data_size = 0;
    char *header = t ? make_header(t, n, dtype, &hlen, &data_size) : NULL;
    char *config = config_text(e, dtype);
    if (!t || !header || !config) {
        free(t);
        free(header);
        cJSON_free(config);
        return txc_error(TXC_ERR_NOMEM, "out of memory (synthetic model)");
    }
    uint64_t file_size = 8 + hlen + data_size;

    char dir[1024], path[1100];
    bool dir_made = false;
    int fd = -1;
    unsigned char *map = MAP_FAILED;
    s = make_temp_dir(file_size, dir, sizeof dir);
    if (s == TXC_OK) {
        dir_made = true;
        snprintf(path, sizeof path, "%s/config.json", dir);
        s = write_text(path, config);
    }
    if (s == TXC_OK && (fd = open_weights_file(dir, path, sizeof path)) < 0)
        s = txc_error(TXC_ERR_IO, "synthetic model: cannot create %s: %s", path, strerror(errno));
    if (s == TXC_OK) {
        /* Reserve the space first (a full tmpfs would otherwise fault mid-write). */
        int err = posix_fallocate(fd, 0, (off_t)file_size);
        if (err == EOPNOTSUPP || err == EINVAL)
            err = ftruncate(fd, (off_t)file_size) == 0 ? 0 : errno;
        if (err)
            s = txc_error(TXC_ERR_IO, "synthetic model: cannot allocate %.1f GiB in %s: %s",
                          (double)file_size / (1u << 30), dir, strerror(err));
    }
    if (s == TXC_OK && (map = mmap(NULL, (size_t)file_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE_IF_ANY, fd, 0)) ==
                            MAP_FAILED)
        s = txc_error(TXC_ERR_IO, "synthetic model: cannot map %s: %s", path, strerror(errno));
    if (s == TXC_OK) {
        for (int i = 0; i < 8; i++)
            map[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
        memcpy(map + 8, header, hlen);
        s = fill_all(t, n, seed, e->info.initializer_range, dtype, map + 8 + hlen);
        munmap(map, (size_t)file_size);
        txc_model_options opts = load_opts ? *load_opts : (txc_model_options){0};
        if (s == TXC_OK)
            s = txc_model_load(dir, &opts, out);
    }
    if (fd >= 0)
        close(fd); /* the loader's mapping keeps the (unnamed) file alive */
    if (dir_made)
        remove_dir(dir);
    free(t);
    free(header);
    cJSON_free(config);
    return s;
}
