#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Generates ./configure from configure.ac and Makefile.am.
set -e
cd "$(dirname "$0")"
mkdir -p m4 build-aux
autoreconf -fi
