/* fuzz_safetensors: txc_safetensors_open on one .safetensors file (the
 * input, in a memfd). Property: the open succeeds or records an error; an
 * accepted file's every tensor lies inside the mapping with nbytes =
 * numel * dtype size, and reading all of its bytes is safe. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzzutil.h"
#include "txc/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fz_memfd(data, size, path, sizeof path);
    txc_safetensors *st = NULL;
    if (txc_safetensors_open(path, &st) == TXC_OK) {
        if (!st)
            abort();
        fz_check_safetensors(st);
        txc_safetensors_close(st);
    } else if (st) {
        abort();
    }
    close(fd);
    return 0;
}
