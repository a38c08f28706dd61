/* fuzz_tokenizer_load: txc_tokenizer_parse on tokenizer.json text. An
 * accepted tokenizer then encodes a few fixed texts and decodes the ids
 * (plainly and through the streaming detokenizer, which must agree), and
 * decodes every id below 512. Property: no crash, hang, leak or undefined
 * behaviour; ids in [0, vocab_size); the stream's pieces concatenate to
 * decode()'s text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzutil.h"
#include "txc/tokenizer.h"

static const char *const texts[] = {
    "Hello world", "  two  spaces\n\ttab", "<s>x</s> <|endoftext|>", "日本語 😀 ½", "a▁b", "<0x41>", "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    txc_tokenizer *t = NULL;
    if (txc_tokenizer_parse((const char *)data, size, &t) != TXC_OK) {
        if (t || !txc_last_error()[0])
            abort();
        return 0;
    }
    int32_t nv = txc_tokenizer_vocab_size(t);
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++)
        for (int add = 0; add < 2; add++) {
            int32_t *ids = NULL;
            size_t n = 0;
            if (txc_tokenizer_encode(t, texts[i], strlen(texts[i]), add, &ids, &n) != TXC_OK)
                continue; /* e.g. an unk_token that is not in the vocab */
            for (size_t k = 0; k < n; k++)
                if (ids[k] < 0 || ids[k] >= nv)
                    abort();
            size_t len;
            free(fz_check_decode(t, ids, n, add, &len));
            free(ids);
        }
    int32_t ids[512];
    int32_t m = nv < 512 ? nv : 512;
    for (int32_t i = 0; i < m; i++)
        ids[i] = i;
    size_t len;
    free(fz_check_decode(t, ids, (size_t)m, false, &len));
    txc_tokenizer_free(t);
    return 0;
}
