#!/bin/sh
# Prints the version that include/dreamddp/version.h defines (its three
# DD_VERSION_* lines, in that order) as major.minor.patch; configure.ac's
# AC_INIT runs it, from the top of the source tree. Fails on anything else.
v=$(sed -n -e 's/^#define DD_VERSION_MAJOR //p' \
        -e 's/^#define DD_VERSION_MINOR //p' \
        -e 's/^#define DD_VERSION_PATCH //p' include/dreamddp/version.h |
    paste -s -d . -)
case "$v" in
*[!0-9.]* | *..* | .* | *. | "") ;;
*.*.*.*) ;;
*.*.*)
    printf '%s' "$v"
    exit 0
    ;;
esac
echo "config/version.sh: cannot read the version from include/dreamddp/version.h: '$v'" >&2
exit 1
