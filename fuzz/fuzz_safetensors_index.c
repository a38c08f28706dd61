/* fuzz_safetensors_index: txc_safetensors_open on a sharded checkpoint.
 * The input is model.safetensors.index.json, then up to three shard files
 * (parts separated by FZ_SEP, see fuzzutil.h) written as
 * "model-00001-of-00003.safetensors" ... in a private folder. Property: as
 * fuzz_safetensors, over all shards. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzzutil.h"
#include "txc/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *dir = fz_tmpdir();
    const uint8_t *part[4];
    size_t len[4];
    int n = fz_split(data, size, part, len, 4);
    fz_clear_dir(dir);
    fz_write(dir, "model.safetensors.index.json", part[0], len[0]);
    for (int i = 1; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i, 3);
        fz_write(dir, name, part[i], len[i]);
    }
    txc_safetensors *st = NULL;
    if (txc_safetensors_open(dir, &st) == TXC_OK) {
        if (!st)
            abort();
        fz_check_safetensors(st);
        for (int i = 0; i < txc_safetensors_shard_count(st); i++)
            if (!txc_safetensors_shard_path(st, i))
                abort();
        txc_safetensors_close(st);
    } else if (st) {
        abort();
    }
    return 0;
}
