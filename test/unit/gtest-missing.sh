#!/bin/sh
echo "FAIL: GoogleTest was not found by configure, so the unit tests were not built." >&2
echo "      Install it (Debian: apt-get install libgtest-dev) and re-run ./configure." >&2
exit 1
