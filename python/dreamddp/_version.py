"""The package's version: the library's, as include/dreamddp/version.h
defines it (config/version.sh prints it; tests/tools/test_version.sh checks
that the two agree). A separate module so that setup.py reads it without
importing the package."""

VERSION = "0.1.0"
