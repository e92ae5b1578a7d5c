#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the previous release's mn-preflight from this clone's history, for
# tests/integration/test_upgrade.sh (a rolling upgrade: the two releases
# check together). scripts/test/previous-release names it: "VERSION COMMIT".
#   scripts/test/build-previous.sh        prints the binary's path
# Builds once into /tmp/mn-previous-VERSION (kept); one build at a time
# (/tmp/mn-previous.lock). Exits non-zero, saying why, when the clone lacks
# that commit (exit 3: a shallow clone, git fetch --unshallow) or the build
# fails (exit 1).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
read -r version commit <"$top/scripts/test/previous-release"
dir=/tmp/mn-previous-$version
exec 8>/tmp/mn-previous.lock
flock 8
if [ ! -x "$dir/helper/mn-preflight" ]; then
  git -C "$top" cat-file -e "$commit^{commit}" 2>/dev/null || {
    echo "build-previous: this clone has no commit $commit (mn-nccl $version): fetch the whole history (git fetch --unshallow)" >&2
    exit 3
  }
  rm -rf "$dir.part"
  mkdir -p "$dir.part"
  git -C "$top" archive "$commit" | tar -x -C "$dir.part"
  (
    cd "$dir.part"
    ./autogen.sh >build.log 2>&1
    # As the release was built (its CPU ring as fast as then).
    ./configure --quiet >>build.log 2>&1
    make -s -j"$(nproc)" helper/mn-preflight >>build.log 2>&1
  ) || { echo "build-previous: building mn-nccl $version failed:" >&2; tail -20 "$dir.part/build.log" >&2; exit 1; }
  rm -rf "$dir"
  mv "$dir.part" "$dir"
fi
echo "$dir/helper/mn-preflight"
