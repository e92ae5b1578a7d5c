#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs the whole suite (scripts/test.sh --here: install that release's own
# Debian packages, build, CMocka, the local multi-node Slurm) inside a minimal
# Debian root per release, made with debootstrap from Debian's packages:
#
#   bookworm     Debian 12   Slurm 22.05  torch 1.13
#   trixie       Debian 13   Slurm 24.11  torch 2.6
#   sid          unstable    Slurm 26.05  torch 2.14
#   slurm-23.11  Debian 12   Slurm 23.11  torch 1.13   Slurm built from its upstream
#                source (Ubuntu 24.04 LTS's release; Debian packages none):
#                MN_VENDOR (default ../shared/vendor)/slurm-23.11.*.tar.*,
#                skipped with a line saying how to get it where there is none
#
# slurm-23.11 runs a subset, to keep CI's time (its three siblings take
# about 40 min each beside the host's suite): our build against 23.11's
# headers, then on the local cluster only the files that prove what 23.11
# adds or changes: test_plugin (the plugin's variables and refusals),
# test_inline (srun --mn-preflight, offered from 23.11), test_example_job
# (the real torch job through sbatch) and test_spank_failures (23.11's
# column in mn_nccl(8)); no unit tests (the host's compiler, GCC 12, runs
# them) and no packages (the .deb depends on Debian's Slurm). The table
# line says "subset". MN_MATRIX_FULL=1 runs the whole suite there instead
# (about 24 min alone, the Slurm build not counted).
#
#   scripts/cluster/release-matrix.sh [SUITE...]      default: all four
#   scripts/cluster/release-matrix.sh --run SUITE CMD...
#                          run CMD in that root (tree copied to /root/mn-nccl,
#                          its packages and build made first), e.g. to
#                          reproduce one failure by hand
#
# Several releases run at once, each in its own root, taking the one local
# cluster in turn. Prints each release's log, then one table line per
# release (Slurm and torch versions, result, time), and exits non-zero when
# any release fails. Roots are kept in
# MN_ROOTS_DIR (default /var/tmp/mn-roots) and reused; MN_ROOTS_FRESH=1
# makes them anew. Each release's full log: MN_ROOTS_DIR/SUITE.test.log.
# Needs root (debootstrap, chroot, mounts, the cluster's namespaces).
# One user of a root at a time (MN_ROOTS_DIR/SUITE.lock): a second run of
# the same release waits for the first.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
ROOTS=${MN_ROOTS_DIR:-/var/tmp/mn-roots}
LOCK=${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}
suites=("$@")
[ ${#suites[@]} -gt 0 ] || suites=(bookworm trixie sid slurm-23.11)
[ "${1:-}" = --run ] && suites=()

die() { echo "release-matrix: $*" >&2; exit 1; }

# The Debian release a suite's root is made of.
codename() { case "$1" in slurm-23.11) echo bookworm ;; *) echo "$1" ;; esac; }

# Slurm from source (MN_SLURM_SOURCE for install-deps.sh): the archive a
# suite builds it from, or nothing for Debian's own packages.
VENDOR=${MN_VENDOR:-$top/../shared/vendor}
source_archive() {
  [ "$1" = slurm-23.11 ] || return 0
  local a
  a=$(ls -d "$VENDOR"/slurm-23.11.*.tar.* 2>/dev/null | sort -V | tail -1)
  [ -n "$a" ] && echo "$a"
  return 0
}
no_archive_line() {
  echo "$1: skipped: no slurm-23.11.*.tar.* in $VENDOR (MN_VENDOR); get SchedMD/slurm's tag slurm-23-11-4-1" \
    "(https://github.com/SchedMD/slurm/archive/refs/tags/slurm-23-11-4-1.tar.gz, saved as slurm-23.11.4.tar.gz)" \
    "or https://download.schedmd.com/slurm/slurm-23.11.4.tar.bz2 into that folder"
}
# What a root runs unless MN_MATRIX_FULL=1: the integration files whose
# outcome depends on the Slurm release (SPANK's contexts and failures, the
# inline check of 23.11+, the prolog's environment, that release's torch
# and torchrun; in sid also pyxis's inline check and Apptainer). The unit
# tests, the package and the other files are the host's, where the code
# under test is the same: with them every root took 40 to 80 min of CI's
# 90 beside the host's own suite.
SUBSET_RELEASE="test_plugin test_spank_failures test_inline test_prolog test_example_job"
subset_for() {
  case "$1" in
  sid) echo "$SUBSET_RELEASE test_containers test_apptainer test_watch" ;;
  *) echo "$SUBSET_RELEASE" ;;
  esac
}
# The variables the suite's test.sh runs with: the subset above (no unit
# tests, no package) unless MN_MATRIX_FULL=1; for Slurm built from source,
# the archive, copied into the root, and never the package test (its .deb
# depends on Debian's Slurm packages).
suite_env() {
  local a
  if [ "${MN_MATRIX_FULL:-0}" != 1 ]; then
    echo "MN_TEST_UNIT=0"
    echo "MN_TEST_PACKAGE=0"
    echo "MN_TEST_INTEGRATION=$(subset_for "$1")"
    # sid's watch: what the plugin's own putting in front changes (the
    # faults of processes, pauses, the rules of positions, the door and
    # the settings); the link faults and the CPU figure are the host's.
    [ "$1" != sid ] || echo "MN_IT_ONLY_test_watch=t_stopped_rank t_killed_rank t_pauses_are_not_hangs t_desync_skip t_strangers_at_the_watch_port t_refusals t_site_default"
  fi
  a=$(source_archive "$1")
  [ -n "$a" ] || return 0
  mkdir -p "$2/root/mn-vendor"
  cp -f "$a" "$2/root/mn-vendor/"
  echo "MN_SLURM_SOURCE=/root/mn-vendor/$(basename "$a")"
  echo "MN_TEST_PACKAGE=0"
}
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, namespaces)"

# The mirror this machine already uses, so roots come from the same archive.
mirror() {
  local m
  m=$(sed -n 's/^URIs: *\([^ ]*debian\/\{0,1\}\)$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  [ -n "$m" ] || m=$(awk '$1 == "deb" && $2 ~ /debian\/?$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null)
  echo "${m:-http://deb.debian.org/debian}"
}

ensure_debootstrap() {
  command -v debootstrap >/dev/null && return 0
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends debootstrap >/dev/null ||
    die "cannot install debootstrap"
}

# The cluster's unshare --mount needs the root to be a mount point; /proc,
# /sys and /dev come from the host (slaves, so unmounting never reaches it);
# /run is the root's own, for its network namespaces.
mount_root() {
  local d=$1 m
  mountpoint -q "$d" || mount --bind "$d" "$d"
  for m in proc sys dev; do
    mountpoint -q "$d/$m" && continue
    mount --rbind "/$m" "$d/$m" && mount --make-rslave "$d/$m"
  done
  mountpoint -q "$d/run" || mount -t tmpfs tmpfs "$d/run"
  mkdir -p "$d/run/netns" "$d/run/lock"
  # Name service as on the host: a real machine resolves its own name.
  cp -L /etc/resolv.conf "$d/etc/resolv.conf" 2>/dev/null || true
  cp -L /etc/hosts "$d/etc/hosts" 2>/dev/null || true
  # unstable's Release file expires within days; a mirror that serves a
  # frozen copy of the archive would otherwise refuse every sid install.
  echo 'Acquire::Check-Valid-Until "false";' >"$d/etc/apt/apt.conf.d/99mn-nccl-frozen-mirror"
  # One local cluster at a time on this machine (one bridge, fixed
  # addresses): the root's test.sh locks the host's lock file.
  touch "$LOCK" "$d/tmp/mn-cluster.lock"
  mountpoint -q "$d/tmp/mn-cluster.lock" || mount --bind "$LOCK" "$d/tmp/mn-cluster.lock"
}

umount_root() { umount -R "$1" 2>/dev/null || umount -lR "$1" 2>/dev/null || true; }

# in_root D CMD...: CMD with D as its / through pivot_root, in a mount
# namespace of its own, not chroot: Apptainer (tests/integration/
# test_apptainer.sh) refuses a chroot ("Running inside a weak chrooted
# environment, prefer pivot_root instead of chroot"): it joins its
# container's mount namespace, whose root would be this machine's /.
# D's own mounts (mount_root) come along; the machine's others are gone.
in_root() {
  local d=$1
  shift
  mkdir -p "$d/.mn-oldroot"
  unshare --mount --propagation private /bin/sh -c \
    'cd "$1" && shift && pivot_root . .mn-oldroot && cd / && umount -l /.mn-oldroot && exec "$@"' in_root "$d" "$@"
}

make_root() {
  local suite=$1 d=$2
  if [ "${MN_ROOTS_FRESH:-0}" = 1 ] && [ -d "$d" ]; then
    umount_root "$d"
    rm -rf --one-file-system "$d"
  fi
  # A root is whole only once debootstrap finished (a run stopped half-way
  # leaves a tree with apt-get but no working dpkg): start such a one anew.
  [ -e "$d/.mn-root-complete" ] && return 0
  umount_root "$d"
  rm -rf --one-file-system "$d"
  mkdir -p "$ROOTS"
  debootstrap --variant=minbase "$(codename "$suite")" "$d" "$(mirror)" >"$ROOTS/$suite.debootstrap.log" 2>&1 || {
    tail -5 "$ROOTS/$suite.debootstrap.log" >&2
    return 1
  }
  touch "$d/.mn-root-complete"
}

# An install stopped half-way (a run interrupted) leaves dpkg asking for
# "dpkg --configure -a"; finish it before the suite installs anything.
repair_root() {
  chroot "$1" env DEBIAN_FRONTEND=noninteractive dpkg --configure -a >/dev/null 2>&1 ||
    chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 -f install -y -qq >/dev/null 2>&1 || true
}

# The source tree as git sees it (tracked and new files, nothing ignored,
# so no build of this machine leaks into the root's build).
copy_tree() {
  local dest=$1
  rm -rf "$dest"
  mkdir -p "$dest"
  if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z -co --exclude-standard |
      tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -C "$dest" -xf -
  else
    (cd "$top" && tar --exclude=.libs --exclude='*.o' -cf - .) | tar -C "$dest" -xf -
  fi
}

# pyxis' and enroot's sources (scripts/cluster/containers.sh), where
# ../shared/vendor has them, at the same place beside the root's tree:
# the releases with spank_prepend_task_argv test srun --mn-preflight in a
# pyxis container (tests/integration/test_containers.sh, its base image).
# VENDOR (above): MN_VENDOR, default ../shared/vendor.
copy_vendor() {
  local dest=$1/root/shared/vendor a
  mkdir -p "$dest"
  for a in "$VENDOR"/pyxis-*.tar.gz "$VENDOR"/enroot-*.tar.gz; do
    [ ! -f "$a" ] || cp -f "$a" "$dest/"
  done
}
# What the root's test.sh builds of the container rig (MN_CONTAINERS):
# the base image alone, where Slurm can put the check in the container.
containers_for() {
  case "$1:${MN_MATRIX_FULL:-0}" in sid:* | trixie:1) echo inline ;; *) echo none ;; esac
}

# Holds SUITE's root for this process until it exits or lock_root is
# called again (fd 8).
lock_root() {
  mkdir -p "$ROOTS"
  exec 8>"$ROOTS/$1.lock"
  flock 8
}

# Writes SUITE's log to MN_ROOTS_DIR/SUITE.test.log (and, with --tee, to
# stdout, each line prefixed) and its table line to SUITE.result.
run_suite() {
  local suite=$1 tee=${2:-} d=$ROOTS/$1 log=$ROOTS/$1.test.log start rc
  start=$(date +%s)
  echo "== release-matrix: $suite ($d)"
  lock_root "$suite"
  rm -f "$ROOTS/$suite.result"
  if [ "$suite" = slurm-23.11 ] && [ -z "$(source_archive "$suite")" ]; then
    no_archive_line "$suite" | tee "$log"
    printf '%-11s skipped: no Slurm 23.11 source archive in %s\n' "$suite" "$VENDOR" >"$ROOTS/$suite.result"
    return 0
  fi
  if ! make_root "$suite" "$d"; then
    echo "$suite    no root (debootstrap failed; $ROOTS/$suite.debootstrap.log)" >"$ROOTS/$suite.result"
    return 1
  fi
  mount_root "$d"
  repair_root "$d"
  copy_tree "$d/root/mn-nccl"
  copy_vendor "$d"
  local -a env
  mapfile -t env < <(suite_env "$suite" "$d")
  # Debian's PATH for root: slurmd and pyxis find enroot in /usr/local/bin.
  in_root "$d" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
    MN_CLUSTER_LOCK=/tmp/mn-cluster.lock MN_CONTAINERS="$(containers_for "$suite")" "${env[@]}" \
    bash /root/mn-nccl/scripts/test.sh --here 2>&1 |
    sed -u "s/^/[$suite] /" | if [ "$tee" = --tee ]; then tee "$log"; else cat >"$log"; fi
  rc=${PIPESTATUS[0]}
  local slurm torch counts subset
  slurm=$(chroot "$d" dpkg-query -W -f='${Version}' slurmd 2>/dev/null)
  if [ -z "$slurm" ] || printf "%s\n" "${env[@]}" | grep -q "^MN_SLURM_SOURCE="; then
    # Built from source: no package to ask; its slurm_version.h says.
    slurm=$(awk '$2 == "SLURM_VERSION_NUMBER" {print $3}' "$d/usr/include/slurm/slurm_version.h" 2>/dev/null)
    [ -z "$slurm" ] || slurm=$(printf '%d.%02d.%d (source)' $((slurm >> 16)) $(((slurm >> 8) & 255)) $((slurm & 255)))
  fi
  torch=$(chroot "$d" dpkg-query -W -f='${Version}' python3-torch 2>/dev/null)
  counts=$(sed -n 's/^\[[^]]*\] \([0-9]* passed, [0-9]* failed\)$/\1/p' "$log" | tail -1)
  # test.sh's "subset: ..." line, where it ran one.
  subset=$(sed -n 's/^\[[^]]*\] subset: \(.*\)$/\1/p' "$log" | tail -1)
  umount_root "$d"
  printf '%-11s Slurm %-16s torch %-14s %-22s %4ss%s\n' "$suite" "${slurm:-?}" "${torch:-?}" \
    "${counts:-no summary}" "$(($(date +%s) - start))" "${subset:+  subset: $subset}" >"$ROOTS/$suite.result"
  [ "$rc" -eq 0 ]
}

ensure_debootstrap
if [ "${1:-}" = --run ]; then
  [ $# -ge 3 ] || die "usage: --run SUITE CMD..."
  d=$ROOTS/$2
  lock_root "$2"
  shift 2
  [ "$(basename "$d")" != slurm-23.11 ] || [ -n "$(source_archive slurm-23.11)" ] || die "$(no_archive_line slurm-23.11)"
  make_root "$(basename "$d")" "$d" || die "no root"
  mount_root "$d"
  trap 'umount_root "$d"' EXIT
  repair_root "$d"
  copy_tree "$d/root/mn-nccl"
  copy_vendor "$d"
  mapfile -t env < <(suite_env "$(basename "$d")" "$d")
  in_root "$d" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "${env[@]}" bash -c \
    'cd /root/mn-nccl && bash scripts/install-deps.sh --here >/dev/null && bash scripts/build.sh >/dev/null && "$@"' run "$@"
  exit
fi
failed=()
if [ ${#suites[@]} -eq 1 ]; then
  run_suite "${suites[0]}" --tee || failed+=("${suites[0]}")
else
  # The roots at once: each installs, builds and runs its unit tests while
  # the others do (the CPU work), and takes the one local cluster when it is
  # free (/tmp/mn-cluster.lock). One after the other, the last root's build
  # only began once the first had finished all its tests. Each log is
  # printed whole, in order, at the end.
  declare -A pid
  for s in "${suites[@]}"; do
    run_suite "$s" &
    pid[$s]=$!
  done
  for s in "${suites[@]}"; do
    wait "${pid[$s]}" || failed+=("$s")
  done
  for s in "${suites[@]}"; do cat "$ROOTS/$s.test.log" 2>/dev/null; done
fi
echo
echo "release-matrix:"
for s in "${suites[@]}"; do echo "  $(cat "$ROOTS/$s.result" 2>/dev/null || echo "$s    no result")"; done
# scripts/test.sh names each of these in its "what failed".
[ ${#failed[@]} -eq 0 ] || echo "release-matrix: failed: ${failed[*]}"
[ ${#failed[@]} -eq 0 ]
