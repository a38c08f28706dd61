/* fuzz_chat_template: txc_chat_template_parse, then render. The input is
 * the template source, optionally followed (after FZ_SEP, see
 * fuzzutil.h) by the user message's content; the conversation is a
 * system, user, assistant, user exchange with the special tokens set, and
 * add_generation_prompt is the input length's parity. The render's own
 * guards bound its output (64 MiB) and memory (512 MiB), and its time with a
 * step budget of FZ_MAX_STEPS (a real template takes a few thousand steps
 * per message; the default budget, 10^8, is seconds per input here);
 * libFuzzer's -timeout and -rss_limit_mb (scripts/fuzz.sh) catch the rest.
 * Property: parse and render succeed or fail with a message, and a
 * successful render is NUL-terminated at the length it reports. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzutil.h"
#include "txc/chat_template.h"

#define FZ_MAX_STEPS 200000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *part[2];
    size_t len[2];
    int n = fz_split(data, size, part, len, 2);
    txc_chat_template *t = NULL;
    if (txc_chat_template_parse((const char *)part[0], len[0], &t) != TXC_OK) {
        if (t || !txc_last_error()[0])
            abort();
        return 0;
    }
    char *content = NULL;
    if (n > 1) {
        content = malloc(len[1] + 1);
        memcpy(content, part[1], len[1]);
        content[len[1]] = '\0';
    }
    if (txc_chat_template_set_max_steps(t, FZ_MAX_STEPS) != TXC_OK)
        abort();
    txc_chat_template_set_token(t, "bos_token", "<s>");
    txc_chat_template_set_token(t, "eos_token", "</s>");
    txc_chat_message m[] = {
        {"system", "Be brief."},
        {"user", content ? content : "Hi there"},
        {"assistant", "Hello! How can I help?"},
        {"user", "Tell me a story."},
    };
    char *out = NULL;
    size_t out_len = 0;
    txc_status st = txc_chat_template_render(t, m, 4, size & 1, &out, &out_len);
    if (st == TXC_OK) {
        if (!out || out[out_len] != '\0')
            abort();
    } else if (out || !txc_last_error()[0]) {
        abort();
    }
    free(out);
    free(content);
    txc_chat_template_free(t);
    return 0;
}
