/* fuzz_tier_text.c: libFuzzer target for the stored text of a tier's
 * usage and sends in flight (queue/tier_text.c), which a hand-edited or
 * damaged database can hold anything in. The first byte picks usage or
 * flight; the rest is the column's text, NUL-terminated in an exact-size
 * buffer. Whatever is read must be a value the worker can use (flight
 * seconds ascending, counts above 0, at most Q_TIER_FLIGHT_MAX of them),
 * and formatting it and reading that back must give the same value. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "queue/internal.h"
#include "queue/tiers.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
usage_round_trip(const char *s)
{
    struct q_tier_usage u, again;
    char text[Q__USAGE_TEXT];

    q__usage_parse(s, &u);
    if (u.last_s < 0)
        abort();
    q__usage_format(&u, text, sizeof(text));
    q__usage_parse(text, &again);
    if (memcmp(&u, &again, sizeof(u)) != 0 && u.last_s > 0)
        abort(); /* what was read does not survive a store */
}

static void
flight_round_trip(const char *s)
{
    struct q_tier_flight f, again;
    char text[Q__FLIGHT_TEXT];

    q__flight_parse(s, &f);
    if (f.n < 0 || f.n > Q_TIER_FLIGHT_MAX || f.probe_until < 0)
        abort();
    for (int i = 0; i < f.n; i++) {
        if (f.count[i] == 0 || f.at[i] <= 0 ||
            (i > 0 && f.at[i] <= f.at[i - 1]))
            abort();
    }
    q__flight_format(&f, text, sizeof(text));
    q__flight_parse(text, &again);
    if (again.n != f.n || again.probe_until != f.probe_until)
        abort();
    for (int i = 0; i < f.n; i++) {
        if (again.at[i] != f.at[i] || again.count[i] != f.count[i])
            abort();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s;

    if (size == 0)
        return 0;
    if ((s = malloc(size)) == NULL)
        return 0;
    memcpy(s, data + 1, size - 1);
    s[size - 1] = '\0';
    if (data[0] & 1)
        flight_round_trip(s);
    else
        usage_round_trip(s);
    free(s);
    return 0;
}
