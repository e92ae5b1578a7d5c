#!/usr/bin/env bash
# Unpacks Debian 12's Slurm 22.05 and munge into .device/slurm, for GPU
# machines that have no Slurm and no package registry (the device tool
# carries the folder; scripts/gpu-proof.sh uses it). About 13 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
out=.device/slurm
pkgs="slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge libhttp-parser2.9 libdbus-1-3"
rm -rf "$out" .device/debs
mkdir -p "$out" .device/debs
(cd .device/debs && apt-get download $pkgs >/dev/null)
for d in .device/debs/*.deb; do dpkg -x "$d" "$out"; done
rm -rf .device/debs "$out/usr/share/doc" "$out/usr/share/man"
du -sh "$out"
