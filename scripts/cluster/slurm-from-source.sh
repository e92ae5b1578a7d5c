#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds Slurm from an upstream source archive (a release Debian does not
# package: 23.11, Ubuntu 24.04 LTS's) and installs it where Debian's
# packages would put the commands and headers, so the local cluster and the
# plugin's build find it as they find Debian's: /usr/bin/srun,
# /usr/sbin/slurmd, /usr/include/slurm/spank.h (plugins in /usr/lib/slurm).
# Only what scripts/cluster/local-cluster.sh uses is built in: munge auth,
# select/cons_tres, proctrack/linuxproc, task/none (and task/cgroup with
# cgroup/v1); no restd, no X11, no PMIx, no hwloc, no debug symbols.
# --enable-multiple-slurmd, Slurm's build for several slurmd on one host, as
# Debian builds its packages (their slurmstepd calls itself slurmstepd-NODE):
# the local cluster's nodes share one munged, which sees the step's
# credential decoded once per node and calls the second a replay; 23.11's
# cred/munge (_verify_signature) accepts a replay only in that build, and
# otherwise every node but one refuses the launch ("_verify_signature:
# failed decode"; srun: "Header lengths are longer than data received").
#
#   scripts/cluster/slurm-from-source.sh ARCHIVE     e.g. ../shared/vendor/slurm-23.11.4.tar.xz
#
# Meant for a Debian root of its own (scripts/cluster/release-matrix.sh's
# slurm-23.11): it refuses where Debian's Slurm packages are installed, as
# both would own /usr/bin/srun. Needs build-essential and libmunge-dev
# (scripts/install-deps.sh installs them when MN_SLURM_SOURCE names the
# archive, and then runs this). Idempotent: a stamp holds the archive's
# checksum and this script's options, and a second run with the same does
# nothing. Prints the time of each stage. MN_SLURM_JOBS: make -j (default
# nproc).
set -euo pipefail
archive=${1:?usage: slurm-from-source.sh ARCHIVE}
[ -f "$archive" ] || { echo "slurm-from-source: $archive: no such file" >&2; exit 1; }
prefix=/usr
stamp=$prefix/share/mn-nccl/slurm-source.stamp
opts=(--prefix="$prefix" --sysconfdir=/etc/slurm --libdir="$prefix/lib"
  --disable-static --disable-debug --disable-dependency-tracking --enable-multiple-slurmd
  --disable-slurmrestd --disable-x11 --disable-sview --disable-pam
  --with-munge=/usr --without-hwloc --without-pmix --without-ucx --without-nvml
  --without-rsmi --without-oneapi --without-hdf5 --without-lz4 --without-bpf
  --without-yaml --without-jwt --without-json --without-http-parser
  --without-freeipmi --without-rrdtool --without-rdkafka --without-readline)
# The release installed, from its slurm_version.h (23.11's srun --version
# wants a slurm.conf first, else it looks for one in DNS and fails).
installed() {
  local n
  n=$(awk '$2 == "SLURM_VERSION_NUMBER" {print $3}' "$prefix/include/slurm/slurm_version.h" 2>/dev/null)
  [ -n "$n" ] && printf 'Slurm %d.%02d.%d' $((n >> 16)) $(((n >> 8) & 255)) $((n & 255))
}
want="$(sha256sum "$archive" | cut -d' ' -f1) ${opts[*]}"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x $prefix/sbin/slurmd ]; then
  echo "slurm-from-source: $(installed) already installed from $(basename "$archive")"
  exit 0
fi
if dpkg-query -W -f='${Status}\n' slurmd slurmctld slurm-client libslurm-dev 2>/dev/null | grep -q 'install ok installed'; then
  echo "slurm-from-source: Debian's Slurm packages are installed here; build in a root without them" \
    "(scripts/cluster/release-matrix.sh slurm-23.11)" >&2
  exit 1
fi
[ -f /usr/include/munge.h ] || { echo "slurm-from-source: munge.h missing (apt-get install libmunge-dev)" >&2; exit 1; }

jobs=${MN_SLURM_JOBS:-$(nproc)}
work=$(mktemp -d /var/tmp/mn-slurm-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
t=$(date +%s)
if ! tar -xf "$archive" -C "$work" 2>"$work/unpack.log"; then
  echo "slurm-from-source: unpack failed: $archive:" >&2
  tail -5 "$work/unpack.log" >&2
  exit 1
fi
src=$(dirname "$(ls -d "$work"/*/configure 2>/dev/null | head -1)")
[ -x "$src/configure" ] || { echo "slurm-from-source: unpack failed: no */configure in $archive" >&2; exit 1; }
t_unpack=$(($(date +%s) - t))
# step NAME CMD...: runs CMD in the source tree, its seconds in $took.
step() {
  local name=$1 log=$work/$1.log
  shift
  t=$(date +%s)
  if ! (cd "$src" && "$@") >"$log" 2>&1; then
    echo "slurm-from-source: $name failed:" >&2
    tail -30 "$log" >&2
    exit 1
  fi
  took=$(($(date +%s) - t))
}
step configure ./configure "${opts[@]}"
t_configure=$took
step make make -j"$jobs"
t_make=$took
step install make -j"$jobs" install
t_install=$took
ldconfig
mkdir -p "$(dirname "$stamp")"
echo "$want" >"$stamp"
echo "slurm-from-source: $(installed) from $(basename "$archive") into $prefix:" \
  "unpack ${t_unpack} s, configure ${t_configure} s, make -j$jobs ${t_make} s, install ${t_install} s"
