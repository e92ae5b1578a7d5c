#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds a copy of the working tree in DIR with its own configure options
# (the sanitizer and fuzz builds): autotools refuse a second build beside an
# in-tree one, and the copy keeps the integration tests' paths ($TOP/helper,
# $TOP/spank) pointing at its own binaries.
#   source scripts/test/build-copy.sh; build_copy DIR CONFIGURE-ARGS...
# Copies the files git tracks or would track (mtimes kept, so make rebuilds
# only what changed), runs autogen and configure when their inputs or the
# options changed. The caller runs make in DIR.
build_copy() {
  local dir=$1 src
  shift
  src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  mkdir -p "$dir"
  (cd "$src" && git ls-files -z -co --exclude-standard | while IFS= read -r -d '' f; do
     [ -e "$f" ] && printf '%s\0' "$f"
   done | tar --null -T - -cf -) | tar -xf - -C "$dir" || return 1
  (
    cd "$dir" || exit 1
    if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
      ./autogen.sh >autogen.out 2>&1 || { cat autogen.out; exit 1; }
      rm -f config.status
    fi
    if [ ! -f config.status ] || [ "$(cat .configured-with 2>/dev/null)" != "$*" ]; then
      ./configure --quiet "$@" >configure.out 2>&1 || { tail -20 configure.out; exit 1; }
      echo "$*" >.configured-with
    fi
  )
}
