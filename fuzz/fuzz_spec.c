/* libFuzzer target: strategy specs (DREAMDDP_STRATEGY) and codec specs
 * (DREAMDDP_COMPRESSION). A spec that parses has a window from 1 to 1024
 * and formats to a spec that parses to the same; a codec that opens closes
 * cleanly. */
#include "compress/codec.h"
#include "core/log.h"
#include "sched/plan/strategy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* Refusals are logged; a fuzzer makes millions of them. */
    dd_log_configure(DD_LOG_ERROR, 0, "/dev/null", 0);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1), back[64];
    if (s == NULL) {
        return 0;
    }
    memcpy(s, data, size);
    s[size] = '\0';

    dd_strategy_t st;
    if (dd_strategy_parse(s, &st) == DD_OK) {
        if (st.window < 1 || st.window > 1024) {
            abort();
        }
        dd_strategy_t again;
        dd_strategy_format(&st, back, sizeof(back));
        if (dd_strategy_parse(back, &again) != DD_OK || again.kind != st.kind ||
            again.window != st.window) {
            abort();
        }
    }
    dd_codec_ref_t ref;
    if (dd_codec_open(s, &ref) == DD_OK) {
        dd_codec_close(&ref);
    }
    free(s);
    return 0;
}
