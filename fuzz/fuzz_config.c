/* libFuzzer target: the DREAMDDP_* value parsers. Any string either parses
 * to a value inside the field's range or is refused; none crashes. */
#include "core/config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const colours[] = {"red", "green", "blue", NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s == NULL) {
        return 0;
    }
    memcpy(s, data, size);
    s[size] = '\0'; /* an environment value ends at its first NUL */

    int i;
    double d;
    size_t z;
    unsigned u;
    dd_iflist_t list;
    if (dd_config_parse_int(s, -5, 100, &i) == DD_OK && (i < -5 || i > 100)) {
        abort();
    }
    if (dd_config_parse_float(s, -1, 1e6, &d) == DD_OK &&
        (!isfinite(d) || d < -1 || d > 1e6)) {
        abort();
    }
    if (dd_config_parse_size(s, &z) == DD_OK && z > SIZE_MAX / 2) {
        abort();
    }
    if (dd_config_parse_duration(s, &d) == DD_OK && (!isfinite(d) || d < 0)) {
        abort();
    }
    (void)dd_config_parse_bool(s, &i);
    if (dd_config_parse_enum(s, colours, &i) == DD_OK && (i < 0 || i > 2)) {
        abort();
    }
    (void)dd_config_parse_flags(s, colours, &u);
    if (dd_config_parse_iflist(s, &list) == DD_OK) {
        (void)dd_iflist_match(&list, "eth0");
        dd_iflist_release(&list);
    }
    free(s);
    return 0;
}
