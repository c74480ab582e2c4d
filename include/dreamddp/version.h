/*
 * The library's version, written here and nowhere else: configure reads
 * these three lines for AC_INIT, so the package, the pkg-config file, the
 * man page and dd_version_string() all follow them. dreamddp.h includes
 * this file; keep it free of anything else, so that editing the API does
 * not rerun configure.
 */
#ifndef DREAMDDP_VERSION_H
#define DREAMDDP_VERSION_H

/** Library version, as "major.minor.patch" (dd_version_string()). */
#define DD_VERSION_MAJOR 0
#define DD_VERSION_MINOR 1
#define DD_VERSION_PATCH 0

#endif /* DREAMDDP_VERSION_H */
