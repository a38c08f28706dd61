/* fuzz_generation_config: txc_generation_config_parse on
 * generation_config.json text. Property: OK or an error with a message; an
 * accepted config has the ranges the header states (temperature >= 0,
 * top_p and min_p in [0, 1], repetition_penalty > 0, top_k >= 0, at most
 * TXC_MAX_EOS eos ids). */
#include <stdint.h>
#include <stdlib.h>

#include "txc/hf_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    txc_generation_config g;
    if (txc_generation_config_parse((const char *)data, size, NULL, &g) != TXC_OK) {
        if (!txc_last_error()[0])
            abort();
        return 0;
    }
    if (!g.present || g.n_eos < 0 || g.n_eos > TXC_MAX_EOS)
        abort();
    if (!(g.temperature >= 0) || !(g.top_p >= 0 && g.top_p <= 1) || !(g.min_p >= 0 && g.min_p <= 1) ||
        !(g.repetition_penalty > 0) || g.top_k < 0)
        abort();
    return 0;
}
