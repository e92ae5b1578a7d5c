#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Compiles lib/fabric/topology.cc against both hwloc APIs it guards for:
# the hwloc 2 headers of this machine (pkg-config hwloc) and hwloc 3's
# (the master branch of open-mpi/hwloc, unreleased: an OS device's one type
# became the bitmask `types`). -Wall -Wextra -Werror, the project's flags.
#
#   scripts/test/test-hwloc3.sh
#
# hwloc 3's headers come from a clone at MN_HWLOC_GIT (default
# ../.mirror/open-mpi+hwloc/repo beside the repository) or an unpacked
# source tree at MN_HWLOC_SRC; only its configure runs (for
# include/hwloc/autogen/config.h), in a cache under /tmp keyed by commit.
# Without either, or when the source is not hwloc 3 yet, it says so in one
# line and skips (exit 0): CI never needs the network for it. The last line
# is "hwloc3: N passed, M failed" (or "hwloc3: skipped: ...").
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
top=$(pwd)
git_repo=${MN_HWLOC_GIT:-$top/../.mirror/open-mpi+hwloc/repo}
src=${MN_HWLOC_SRC:-}
if [ -z "$src" ]; then
  if ! git -C "$git_repo" rev-parse --git-dir >/dev/null 2>&1; then
    echo "hwloc3: skipped: no hwloc 3 source (a clone of github.com/open-mpi/hwloc at MN_HWLOC_GIT, default $git_repo, or a tree at MN_HWLOC_SRC)"
    exit 0
  fi
  commit=$(git -C "$git_repo" rev-parse HEAD)
  cache=/tmp/mn-hwloc3.$commit
  src=$cache/src
  if [ ! -f "$cache/build/include/hwloc/autogen/config.h" ]; then
    rm -rf "$cache" && mkdir -p "$cache"
    git -C "$git_repo" archive --format=tar --prefix=src/ HEAD | tar -x -C "$cache" || { echo "hwloc3: 0 passed, 1 failed (git archive)"; exit 1; }
  fi
else
  cache=/tmp/mn-hwloc3.src.$(echo "$src" | md5sum | cut -c1-12)
fi
api=$(sed -n 's/^#define HWLOC_API_VERSION \(0x[0-9a-fA-F]*\).*/\1/p' "$src/include/hwloc.h" 2>/dev/null)
if [ -z "$api" ] || [ $((api)) -lt $((0x00030000)) ]; then
  echo "hwloc3: skipped: $src is hwloc API ${api:-unknown}, not 3.x"
  exit 0
fi
build=$cache/build
if [ ! -f "$build/include/hwloc/autogen/config.h" ]; then
  mkdir -p "$build"
  # Headers only: no optional backend is needed for the config header.
  if ! (cd "$src" && { [ -x configure ] || nice ./autogen.sh >"$cache/autogen.log" 2>&1; }) ||
    ! (cd "$build" && nice "$src/configure" --disable-libxml2 --disable-cairo --disable-opencl --disable-cuda \
      --disable-nvml --disable-rsmi --disable-levelzero --disable-gl --disable-libudev --disable-plugins \
      >"$cache/configure.log" 2>&1); then
    echo "hwloc3: 0 passed, 1 failed (hwloc's autogen or configure: $cache/*.log)"
    exit 1
  fi
fi

tmp=$(mktemp -d /tmp/mn-hwloc3-cc.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
# topology.cc reads only HAVE_HWLOC from the build's config header.
echo '#define HAVE_HWLOC 1' >"$tmp/build_config.h"
flags=(-std=c++17 -Wall -Wextra -Werror -O2 -D_FORTIFY_SOURCE=2 -fstack-protector-strong -fPIC -I"$tmp" -I"$top")
passed=0 failed=0
compile() {  # OBJ LABEL HWLOC-INCLUDES...
  local obj=$1 label=$2
  shift 2
  if nice "${CXX:-g++}" "${flags[@]}" "$@" -c lib/fabric/topology.cc -o "$tmp/$obj.o" 2>"$tmp/$obj.err"; then
    echo "hwloc3: topology.cc against $label: ok"
    passed=$((passed + 1))
  else
    echo "hwloc3: topology.cc against $label: FAILED"
    sed 's/^/  /' "$tmp/$obj.err" | head -40
    failed=$((failed + 1))
  fi
}
if pkg-config --exists hwloc 2>/dev/null; then
  # shellcheck disable=SC2046
  compile hwloc2 "hwloc $(pkg-config --modversion hwloc) (this machine's)" $(pkg-config --cflags hwloc)
fi
compile hwloc3 "hwloc 3 (API $api, $(git -C "$git_repo" describe --always 2>/dev/null || echo "$src"))" \
  -I"$build/include" -I"$src/include"
# Built for hwloc 3, it loads hwloc 3's library, never libhwloc.so.15 (2.x).
if [ -f "$tmp/hwloc3.o" ]; then
  # Read whole before grep: under pipefail, grep -q leaving early had
  # strings die of SIGPIPE, and the test read that as a failure.
  names=$(strings "$tmp/hwloc3.o")
  if grep -qx 'libhwloc.so' <<<"$names" && ! grep -q 'libhwloc.so.15' <<<"$names"; then
    echo "hwloc3: the hwloc 3 build loads libhwloc.so: ok"
    passed=$((passed + 1))
  else
    echo "hwloc3: the hwloc 3 build does not load libhwloc.so: FAILED"
    failed=$((failed + 1))
  fi
fi
echo "hwloc3: $passed passed, $failed failed"
[ "$failed" = 0 ]
