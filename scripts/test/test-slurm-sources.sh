#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the plugin against the spank.h of Slurm releases Debian does not
# package, from their upstream source archives (../shared/vendor, or the
# files given): warning-free, exporting only slurm_spank_* and plugin_*,
# plugin_version that release's number, and spank_prepend_task_argv used
# where the release has it (the inline check compiled in).
#
#   scripts/test/test-slurm-sources.sh [slurm-X.Y.Z.tar.xz ...]
#
# Without files it takes every slurm-*.tar.* in MN_VENDOR (default
# ../shared/vendor beside the repository) and, where a clone of SchedMD's
# repository is at hand (MN_SLURM_GIT, default ../.mirror/SchedMD+slurm/repo),
# the newest tag of each series in MN_SLURM_SERIES (24.05 25.05 25.11);
# where there is none it says how to get one and skips. The last line is
# "slurm-sources: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
vendor=${MN_VENDOR:-$top/../shared/vendor}
archives=("$@")
tags_dir=$(mktemp -d /tmp/mn-slurm-tags.XXXXXX)
trap 'rm -rf "$tags_dir"' EXIT
if [ ${#archives[@]} -eq 0 ]; then
  shopt -s nullglob
  archives=("$vendor"/slurm-*.tar.*)
  shopt -u nullglob
  git_repo=${MN_SLURM_GIT:-$top/../.mirror/SchedMD+slurm/repo}
  if git -C "$git_repo" rev-parse --git-dir >/dev/null 2>&1; then
    for s in ${MN_SLURM_SERIES:-24.05 25.05 25.11}; do
      # The newest release of the series: slurm-25-05-8-1.
      tag=$(git -C "$git_repo" tag -l "slurm-${s/./-}-*-1" | grep -E -- '-[0-9]+-1$' | sort -V | tail -1)
      [ -n "$tag" ] || { echo "slurm-sources: no release tag of $s in $git_repo"; continue; }
      git -C "$git_repo" archive --prefix="$tag/" "$tag" slurm META | gzip -1 >"$tags_dir/$tag.tar.gz" &&
        archives+=("$tags_dir/$tag.tar.gz")
    done
  else
    echo "slurm-sources: no clone of SchedMD/slurm at $git_repo (MN_SLURM_GIT): 24.05, 25.05 and 25.11 not built"
  fi
fi
if [ ${#archives[@]} -eq 0 ]; then
  echo "slurm-sources: skipped: no slurm-*.tar.* in $vendor; get one from SchedMD's tags" \
    "(https://github.com/SchedMD/slurm/archive/refs/tags/slurm-23-11-4-1.tar.gz) or https://download.schedmd.com/slurm/," \
    "or give its path"
  echo "slurm-sources: 0 passed, 0 failed"
  exit 0
fi
source scripts/test/build-copy.sh
passed=0
failed=0
ok() { echo "ok - $1"; passed=$((passed + 1)); }
bad() { echo "not ok - $1"; [ -z "${2:-}" ] || sed 's/^/    /' <<<"$2"; failed=$((failed + 1)); }

for a in "${archives[@]}"; do
  work=$(mktemp -d /tmp/mn-slurm-src.XXXXXX)
  # The headers and META only: the whole tree is not needed to compile a
  # SPANK plugin.
  if ! tar -xf "$a" -C "$work" --wildcards '*/slurm/*.h' '*/slurm/*.h.in' '*/META' 2>"$work/tar.err"; then
    bad "$(basename "$a"): unpacks" "$(cat "$work/tar.err")"
    rm -rf "$work"
    continue
  fi
  src=$(dirname "$(dirname "$(ls "$work"/*/slurm/spank.h | head -1)")")
  field() { sed -n "s/^ *$1:[[:space:]]*\([0-9]*\).*/\1/p" "$src/META" | head -1; }
  major=$(field Major) minor=$(field Minor) micro=$(field Micro)
  rel="Slurm $major.$minor.$micro"
  number=$(printf '0x%02x%02x%02x' "$major" "$minor" "$micro")
  # configure writes slurm_version.h from META; this is that line.
  prefix=$work/usr
  mkdir -p "$prefix/include/slurm"
  cp "$src"/slurm/*.h "$prefix/include/slurm/"
  sed "s/^#undef SLURM_VERSION_NUMBER$/#define SLURM_VERSION_NUMBER $number/" "$src/slurm/slurm_version.h.in" \
    >"$prefix/include/slurm/slurm_version.h"
  build=$top/build-slurm-$major.$minor
  # A compile check only: no debug info.
  if ! build_copy "$build" --with-slurm="$prefix" CXXFLAGS="-g0 -O2" >"$work/configure.out" 2>&1; then
    bad "$rel: configure --with-slurm (its headers)" "$(tail -15 "$work/configure.out")"
    rm -rf "$work"
    continue
  fi
  make -C "$build" -s clean >/dev/null 2>&1
  if ! make -C "$build" -s -j"$(nproc)" spank/mn_nccl.la >"$work/make.out" 2>&1; then
    bad "$rel: the plugin builds against its spank.h" "$(grep -m20 'error' "$work/make.out")"
    rm -rf "$work"
    continue
  fi
  warnings=$(grep -c 'warning:' "$work/make.out")
  [ "$warnings" -eq 0 ] && ok "$rel: the plugin builds against its spank.h, no warning" ||
    bad "$rel: the plugin builds warning-free against its spank.h ($warnings warnings)" "$(grep -m10 'warning:' "$work/make.out")"
  so=$build/spank/.libs/mn_nccl.so
  others=$(nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | grep -Ev '^(slurm_spank_|plugin_)' | head)
  [ -z "$others" ] && ok "$rel: only slurm_spank_* and plugin_* exported" || bad "$rel: exports only slurm_spank_* and plugin_*" "$others"
  # Slurm refuses a plugin of another series: plugin_version must be this one.
  # Read from the file (the plugin is linked -z now: it loads only into Slurm).
  got=$(python3 - "$so" <<'EOF_PY' 2>&1
import subprocess, sys
path = sys.argv[1]
def table(*args):
    return subprocess.run(["readelf", "-W", *args, path], check=True, capture_output=True, text=True).stdout.splitlines()
sym = next(l.split() for l in table("--dyn-syms") if l.split()[-1:] == ["plugin_version"])
addr, size = int(sym[1], 16), int(sym[2])
for l in table("-S"):
    f = l.replace("[ ", "[").split()
    if len(f) > 5 and f[0].startswith("[") and f[0] != "[Nr]":
        start, off, length = int(f[3], 16), int(f[4], 16), int(f[5], 16)
        if start <= addr < start + length:
            with open(path, "rb") as so:
                so.seek(off + addr - start)
                print("0x%06x" % int.from_bytes(so.read(size), "little"))
            break
EOF_PY
)
  [ "$got" = "$number" ] && ok "$rel: plugin_version $got (this release's SLURM_VERSION_NUMBER)" ||
    bad "$rel: plugin_version is $number" "got: $got"
  # The inline check needs spank_prepend_task_argv: used where spank.h has it.
  # The symbols read whole first: under pipefail, grep -q leaving early
  # could end nm with SIGPIPE and turn the answer over.
  undefined=$(nm -D --undefined-only "$so")
  if grep -q 'spank_prepend_task_argv' "$prefix/include/slurm/spank.h"; then
    grep -q ' spank_prepend_task_argv$' <<<"$undefined" &&
      ok "$rel: spank.h has spank_prepend_task_argv, and the plugin uses it (--mn-preflight offered)" ||
      bad "$rel: the plugin uses spank_prepend_task_argv (the inline check)" "not among its undefined symbols"
  else
    ! grep -q ' spank_prepend_task_argv$' <<<"$undefined" &&
      ok "$rel: no spank_prepend_task_argv in spank.h, none used (--mn-preflight refused)" ||
      bad "$rel: no spank_prepend_task_argv used where spank.h lacks it"
  fi
  rm -rf "$work"
done
echo "slurm-sources: $passed passed, $failed failed"
[ $failed -eq 0 ]
