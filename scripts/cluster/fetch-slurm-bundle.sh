#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Unpacks a Debian release's Slurm and munge into .device/, for GPU machines
# that have no Slurm and no package registry (the device tool carries the
# folder; scripts/cluster/gpu-cluster.sh and scripts/gpu/gpu-proof.sh use it).
#
#   scripts/cluster/fetch-slurm-bundle.sh            Debian 12's Slurm 22.05 -> .device/slurm (about 13 MB)
#   scripts/cluster/fetch-slurm-bundle.sh trixie     Debian 13's Slurm 24.11 -> .device/slurm-trixie,
#                                            with the libraries it needs beyond glibc and
#                                            libstdc++, and this tree built against 24.11
#                                            (mn_nccl.so, mn-preflight) in .device/build-trixie
# The trixie bundle is made inside that release's root (scripts/cluster/release-matrix.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
top=$(pwd)
pkgs="slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge"

# Inside a root: download and unpack, then copy in every library that the
# daemons, clients and plugins load and that is not the C or C++ runtime.
bundle_here() {
  local out=$1
  rm -rf "$out" /tmp/mn-debs
  mkdir -p "$out/extra-libs" /tmp/mn-debs
  (cd /tmp/mn-debs && apt-get download $pkgs >/dev/null)
  for d in /tmp/mn-debs/*.deb; do dpkg -x "$d" "$out"; done
  rm -rf /tmp/mn-debs "$out/usr/share/doc" "$out/usr/share/man"
  local f lib
  for f in "$out"/usr/sbin/* "$out"/usr/bin/* "$out"/usr/lib/x86_64-linux-gnu/slurm-wlm/*.so \
    spank/.libs/mn_nccl.so helper/mn-preflight; do
    [ -f "$f" ] || continue
    LD_LIBRARY_PATH=$out/usr/lib/x86_64-linux-gnu/slurm-wlm:$out/usr/lib/x86_64-linux-gnu ldd "$f" 2>/dev/null |
      awk '$2 == "=>" && $3 ~ /^\// {print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libresolv.so* | libutil.so* | libanl.so* | libnsl.so* | ld-linux* | libstdc++.so* | libgcc_s.so*) continue ;;
    esac
    case "$lib" in "$out"/*) continue ;; esac
    cp -L "$lib" "$out/extra-libs/"
  done
  mkdir -p "$out/../build-trixie"
  cp spank/.libs/mn_nccl.so helper/mn-preflight "$out/../build-trixie/"
  strip --strip-debug "$out/../build-trixie/"* "$out"/extra-libs/* 2>/dev/null || true
}

case "${1:-bookworm}" in
  --inside) bundle_here "$2" ;;
  bookworm)
    out=.device/slurm
    rm -rf "$out" .device/debs
    mkdir -p "$out" .device/debs
    (cd .device/debs && apt-get download $pkgs libhttp-parser2.9 libdbus-1-3 >/dev/null)
    for d in .device/debs/*.deb; do dpkg -x "$d" "$out"; done
    rm -rf .device/debs "$out/usr/share/doc" "$out/usr/share/man"
    du -sh "$out"
    ;;
  trixie)
    root=${MN_ROOTS_DIR:-/var/tmp/mn-roots}/trixie
    bash scripts/cluster/release-matrix.sh --run trixie bash scripts/cluster/fetch-slurm-bundle.sh --inside /root/mn-bundle/slurm-trixie
    rm -rf .device/slurm-trixie .device/build-trixie
    mkdir -p .device
    cp -a "$root/root/mn-bundle/slurm-trixie" "$root/root/mn-bundle/build-trixie" .device/
    # Ubuntu 24.04 (the GPU machines) has glibc 2.39: nothing may need more.
    need=$(find .device/slurm-trixie .device/build-trixie -type f \( -name '*.so*' -o -perm -u+x \) -exec objdump -T {} \; 2>/dev/null |
      grep -o 'GLIBC_2\.[0-9]*' | sort -uV | tail -1)
    echo "bundle needs at most $need; $(du -sh .device/slurm-trixie | cut -f1) Slurm 24.11, build: $(ls .device/build-trixie | xargs)"
    ;;
  *) echo "usage: scripts/cluster/fetch-slurm-bundle.sh [bookworm|trixie]" >&2; exit 2 ;;
esac
