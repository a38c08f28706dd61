/* fuzz_config: txc_hf_config_parse on config.json text. Property: OK or an
 * error with a message; an accepted config keeps the invariants the header
 * states (positive sizes, num_key_value_heads dividing num_attention_heads,
 * counts within their arrays, NUL-terminated strings). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "txc/hf_config.h"

static void terminated(const char *s, size_t cap)
{
    if (!memchr(s, '\0', cap))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    txc_hf_config c;
    if (txc_hf_config_parse((const char *)data, size, NULL, &c) != TXC_OK) {
        if (!txc_last_error()[0])
            abort();
        return 0;
    }
    if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.intermediate_size <= 0 || c.num_hidden_layers <= 0 ||
        c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 || c.head_dim <= 0 ||
        c.num_attention_heads % c.num_key_value_heads != 0)
        abort();
    if (c.n_eos < 0 || c.n_eos > TXC_MAX_EOS || c.n_short_factor < 0 || c.n_short_factor > TXC_MAX_ROPE_FACTORS ||
        c.n_long_factor < 0 || c.n_long_factor > TXC_MAX_ROPE_FACTORS || c.n_layer_types < 0 ||
        c.n_layer_types > TXC_MAX_LAYER_TYPES)
        abort();
    terminated(c.model_type, sizeof c.model_type);
    terminated(c.architecture, sizeof c.architecture);
    terminated(c.hidden_act, sizeof c.hidden_act);
    terminated(c.torch_dtype, sizeof c.torch_dtype);
    terminated(c.rope_scaling_type, sizeof c.rope_scaling_type);
    terminated(c.layer_type_other, sizeof c.layer_type_other);
    return 0;
}
