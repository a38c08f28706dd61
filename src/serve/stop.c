/* Stop strings on the decoded text (OpenAI's `stop`: the text stops before
 * the first occurrence of any of them, which is not returned). Text that
 * could be the beginning of a stop string is held back until the next
 * tokens decide; txc generate --stop does the same on stdout. */
#include "serve/serve_impl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *p = realloc(*buf, c);
    if (!p)
        return false;
    *buf = p;
    *cap = c;
    return true;
}

static bool release(serve_request *r, const char *s, size_t n)
{
    if (n == 0)
        return true;
    if (!grow(&r->text, &r->cap_text, r->n_text + n + 1))
        return false;
    memcpy(r->text + r->n_text, s, n);
    r->n_text += n;
    r->text[r->n_text] = 0;
    return true;
}

int serve_stop_feed(serve_request *r, const char *piece, size_t n, bool final)
{
    if (r->n_stop == 0)
        return release(r, piece, n) ? 0 : -1;
    if (!grow(&r->held, &r->cap_held, r->n_held + n + 1))
        return -1;
    memcpy(r->held + r->n_held, piece, n);
    r->n_held += n;
    /* the earliest complete stop string */
    size_t cut = SIZE_MAX;
    for (int i = 0; i < r->n_stop; i++) {
        size_t m = strlen(r->stop[i]);
        for (size_t j = 0; j + m <= r->n_held && j < cut; j++)
            if (memcmp(r->held + j, r->stop[i], m) == 0) {
                cut = j;
                break;
            }
    }
    if (cut != SIZE_MAX) {
        bool okay = release(r, r->held, cut);
        r->n_held = 0;
        return okay ? 1 : -1;
    }
    /* hold the longest tail that is a proper prefix of a stop string */
    size_t keep = 0;
    for (int i = 0; i < r->n_stop && !final; i++) {
        size_t m = strlen(r->stop[i]);
        for (size_t k = m - 1 < r->n_held ? m - 1 : r->n_held; k > keep; k--)
            if (memcmp(r->held + r->n_held - k, r->stop[i], k) == 0) {
                keep = k;
                break;
            }
    }
    if (!release(r, r->held, r->n_held - keep))
        return -1;
    memmove(r->held, r->held + r->n_held - keep, keep);
    r->n_held = keep;
    return 0;
}
