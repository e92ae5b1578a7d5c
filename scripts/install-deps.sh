#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs, from Debian 12's packages, everything mn-nccl needs to build,
# to run the local multi-node Slurm and to run its tests. Idempotent.
#   scripts/install-deps.sh [--here]   --here: without the RPM and fuzzing tools
# MN_SLURM_SOURCE=ARCHIVE: Slurm from that upstream source archive instead of
# Debian's packages (munge and libmunge-dev in their place, then
# scripts/cluster/slurm-from-source.sh ARCHIVE): for a Debian root of its
# own, as release-matrix.sh's slurm-23.11.
set -euo pipefail
slurm_source=${MN_SLURM_SOURCE:-}
# The Slurm from source, once the packages it builds with are in (a no-op
# when that archive is installed already).
from_source() {
  [ -z "$slurm_source" ] || bash "$(dirname "$0")/cluster/slurm-from-source.sh" "$slurm_source"
}

pkgs=(
  build-essential autoconf automake libtool pkg-config
  munge
  libhwloc-dev libibverbs-dev libcmocka-dev
  iproute2 util-linux procps
  python3-torch
  libssl-dev  # mn-preflight's handshake (OpenSSL's libcrypto)
  zlib1g-dev libzstd-dev  # their archives: Debian 13's libcrypto.a needs them (mn-preflight carries libcrypto)
  nlohmann-json3-dev  # every JSON mn-preflight writes or reads (header-only)
  debhelper dpkg-dev fakeroot  # the .deb
)
if [ -n "$slurm_source" ]; then
  pkgs+=(libmunge-dev)  # Slurm's auth/munge, built here
else
  pkgs+=(libslurm-dev slurmctld slurmd slurm-client)
fi
# The RPM, the libFuzzer build and promtool (tests/integration/test_fleet.sh
# checks the metrics files with it) run on the host only (scripts/test.sh);
# the release roots (--here) skip them and these packages.
[ "${1:-}" = --here ] || pkgs+=(rpm clang libclang-rt-dev prometheus)
# Apptainer for tests/integration/test_apptainer.sh, only where the release
# packages it: Debian unstable (1.4) does, Debian 12 and 13 do not (there
# the test says it skips). Asked of this system's apt lists (read whole:
# grep -q would end the pipe early, and pipefail call that a failure).
if [[ "$(LC_ALL=C apt-cache policy apptainer 2>/dev/null)" == *"Candidate: "[0-9]* ]]; then
  pkgs+=(apptainer)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  from_source
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing ${missing[*]}; run this script as root" >&2
  exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=900 update -qq
# Debian's postinst scripts try to start munge/slurm services; there is no
# init system on CI machines and we run our own daemons, so keep them quiet.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod +x /usr/sbin/policy-rc.d
  trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/tmp/mn-nccl-apt.log 2>&1 || {
  tail -30 /tmp/mn-nccl-apt.log >&2
  exit 1
}
from_source
echo "install-deps: done"
