/* fuzz_tokenizer_encode: encode and decode with the real tokenizers of the
 * test data (<shared>/tokenizers/<name>/tokenizer.json; see fz_shared_dir).
 * Input: byte 0 picks the tokenizer (modulo the number of them, or only
 * $TXC_FUZZ_TOKENIZER when set, e.g. "gemma3"), byte 1's low bit is
 * add_special_tokens, bit 1 switches to decoding: the rest is then ids
 * (little-endian u32, taken modulo vocab_size + 16 so that a few are out of
 * range); otherwise the rest is the text.
 * Properties:
 *   - valid UTF-8 always encodes (every one of these tokenizers covers all
 *     of Unicode: byte-level BPE, or byte_fallback), invalid UTF-8 is
 *     TXC_ERR_INVALID; ids lie in [0, vocab_size);
 *   - decode succeeds on them, and the streaming detokenizer gives the same
 *     text (fz_check_decode);
 *   - round trip where the family is lossless, as tests/test_tokenizer.c and
 *     tests/test_tokenizer_families.c assert it: byte-level BPE (gpt2,
 *     llama3, deepseek_v3, gptoss; qwen3 for NFC text, its normalizer being
 *     NFC) gives decode(encode(x), keep special) == x; SentencePiece-style
 *     BPE (tinyllama, phi-3, mistral, gemma3) gives decode(encode(x), skip
 *     special) == x for text without "▁" (it decodes as a space) and, for
 *     mistral (Metaspace, prepend_scheme "first"), without a leading space.
 *     Texts holding an added token's content are left out of the round trip
 *     (lstrip/rstrip, and the normalizer does not run on added tokens).
 * A tokenizer file that is missing skips its inputs (the target then only
 * checks the others); none at all is an error of the setup. */
#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "fuzzutil.h"
#include "txc/tokenizer.h"

typedef struct family {
    const char *name;
    bool byte_level; /* else SentencePiece-style */
    bool nfc;        /* the normalizer is NFC */
    bool no_lead_space;
    bool tried;
    txc_tokenizer *tok;
    char **added; /* added tokens' contents */
    int n_added;
} family;

static family fams[] = {
    {.name = "gpt2", .byte_level = true, .nfc = false, .no_lead_space = false},
    {.name = "llama3", .byte_level = true, .nfc = false, .no_lead_space = false},
    {.name = "qwen3", .byte_level = true, .nfc = true, .no_lead_space = false},
    {.name = "deepseek_v3", .byte_level = true, .nfc = false, .no_lead_space = false},
    {.name = "gptoss", .byte_level = true, .nfc = false, .no_lead_space = false},
    {.name = "tinyllama-1.1b-chat-v1.0", .byte_level = false, .nfc = false, .no_lead_space = false},
    {.name = "phi-3-vision-128k-instruct", .byte_level = false, .nfc = false, .no_lead_space = false},
    {.name = "mistral-7b-v0.1", .byte_level = false, .nfc = false, .no_lead_space = true},
    {.name = "gemma3", .byte_level = false, .nfc = false, .no_lead_space = false},
};
#define N_FAMS (int)(sizeof fams / sizeof fams[0])

static void read_added(family *f, const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n);
    if (!buf || fread(buf, 1, (size_t)n, fp) != (size_t)n)
        fz_die(path);
    fclose(fp);
    cJSON *root = cJSON_ParseWithLength(buf, (size_t)n);
    free(buf);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), *a;
    f->added = calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof *f->added);
    cJSON_ArrayForEach(a, list)
    {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "content");
        if (cJSON_IsString(c) && c->valuestring[0])
            f->added[f->n_added++] = strdup(c->valuestring);
    }
    cJSON_Delete(root);
}

static family *get(int i)
{
    family *f = &fams[i];
    if (!f->tried) {
        f->tried = true;
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizers/%s/tokenizer.json", fz_shared_dir(), f->name);
        if (txc_tokenizer_load(path, &f->tok) != TXC_OK) {
            fprintf(stderr, "fuzz_tokenizer_encode: %s not loaded, skipped: %s\n", f->name, txc_last_error());
            f->tok = NULL;
        } else {
            read_added(f, path);
        }
    }
    return f->tok ? f : NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *only = getenv("TXC_FUZZ_TOKENIZER");
    int found = 0;
    for (int i = 0; i < N_FAMS; i++) {
        if (only && *only && strcmp(only, fams[i].name) != 0) {
            fams[i].tried = true; /* left out */
            continue;
        }
        found += get(i) != NULL;
    }
    if (!found) {
        fprintf(stderr, "fuzz_tokenizer_encode: no tokenizer under %s/tokenizers (set TXC_SHARED_DIR%s)\n",
                fz_shared_dir(), only ? ", check TXC_FUZZ_TOKENIZER" : "");
        exit(1);
    }
    return 0;
}

static bool valid_utf8(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0)
            return false;
        i += (size_t)k;
    }
    return true;
}

static bool has_bytes(const uint8_t *s, size_t n, const char *needle);

static bool holds_added(const family *f, const char *s, size_t n)
{
    for (int i = 0; i < f->n_added; i++)
        if (has_bytes((const uint8_t *)s, n, f->added[i]))
            return true;
    return false;
}

static bool has_bytes(const uint8_t *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t j = 0; j + m <= n; j++)
        if (memcmp(s + j, needle, m) == 0)
            return true;
    return false;
}

static bool is_nfc(const uint8_t *s, size_t n)
{
    utf8proc_uint8_t *out = NULL;
    utf8proc_ssize_t m = utf8proc_map(s, (utf8proc_ssize_t)n, &out, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    bool same = m >= 0 && (size_t)m == n && memcmp(out, s, n) == 0;
    free(out);
    return same;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int pick = data[0] % N_FAMS;
    family *f = NULL;
    for (int i = 0; i < N_FAMS && !f; i++) /* the first loaded one from the pick on, cyclically */
        f = get((pick + i) % N_FAMS);
    if (!f)
        return 0;
    bool add = data[1] & 1, decode_mode = data[1] & 2;
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    int32_t nv = txc_tokenizer_vocab_size(f->tok);
    if (decode_mode) {
        size_t m = n / 4;
        int32_t *ids = malloc(sizeof *ids * (m ? m : 1));
        for (size_t i = 0; i < m; i++) {
            uint32_t v = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
                         (uint32_t)p[4 * i + 3] << 24;
            ids[i] = (int32_t)(v % ((uint32_t)nv + 16u)) - (v >> 31 ? 8 : 0);
        }
        size_t len;
        free(fz_check_decode(f->tok, ids, m, add, &len));
        free(ids);
        return 0;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    txc_status st = txc_tokenizer_encode(f->tok, (const char *)p, n, add, &ids, &n_ids);
    bool valid = valid_utf8(p, n);
    if (valid != (st == TXC_OK)) {
        fprintf(stderr, "%s: encode gave %d (%s) for %s UTF-8\n", f->name, (int)st, txc_last_error(),
                valid ? "valid" : "invalid");
        abort();
    }
    if (st != TXC_OK)
        return 0;
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= nv)
            abort();
    bool skip = !f->byte_level;
    size_t len;
    char *text = fz_check_decode(f->tok, ids, n_ids, skip, &len);
    if (!text)
        abort(); /* ids that encode gave must decode */
    bool lossless = !holds_added(f, (const char *)p, n);
    if (f->byte_level) {
        lossless = lossless && !add && (!f->nfc || is_nfc(p, n));
    } else {
        lossless = lossless && !has_bytes(p, n, "\xE2\x96\x81") && !(f->no_lead_space && n && p[0] == ' ');
    }
    if (lossless && (len != n || memcmp(text, p, n) != 0)) {
        fprintf(stderr, "%s: round trip of %zu bytes gave %zu bytes: \"%.*s\" -> \"%s\"\n", f->name, n, len,
                (int)n, (const char *)p, text);
        abort();
    }
    free(text);
    free(ids);
    return 0;
}
