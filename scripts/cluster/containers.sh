#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The container rig of tests/integration/test_containers.sh: NVIDIA's pyxis
# (the SPANK plugin behind srun --container-image) and enroot (the runtime
# it drives), built from their upstream sources in ../shared/vendor as a
# DGX-style cluster has them, and a Debian 12 image with python3-torch.
#
#   scripts/cluster/containers.sh install   Debian's packages enroot needs, enroot 4.1.2
#                                   (config in /etc/enroot, with the extra hook
#                                   50-slurm-pytorch.sh in its hooks.d) and pyxis
#                                   0.24.0 (/usr/local/lib/slurm/spank_pyxis.so)
#   scripts/cluster/containers.sh image     /var/tmp/mn-containers/torch.sqsh: a minbase
#                                   bookworm root with python3-torch, PYTORCH_VERSION
#                                   in its /etc/environment (the image's ENV to enroot)
#   scripts/cluster/containers.sh base      /var/tmp/mn-containers/base.sqsh: glibc, bash and
#                                   a few tools copied from this root, nothing else (seconds):
#                                   the image for the inline check (mn-preflight needs
#                                   only glibc in a container)
#   scripts/cluster/containers.sh all       install, image, then base, under one lock
#   scripts/cluster/containers.sh inline    install, then base (the release roots: no torch image)
#   scripts/cluster/containers.sh status [--wait SECONDS] [--image torch|base]
#                                   one line, "ready: ...", "skipped: ...", "failed: ..."
#                                   or "missing: ..."; exit 0 only when ready with that
#                                   image (default torch). --wait first waits that long
#                                   for a running install or image (scripts/test.sh starts
#                                   `all` in the background).
#
# Idempotent: a second run finds the builds and the image kept in the work
# directory and only checks them. Where the vendor directory lacks the source
# archives, install and image print one line saying how to get them, leave a
# "skipped" marker (status then says "skipped: ...", and the test skips) and
# exit 0. Each part prints how long it took.
#
# Settings (environment): MN_VENDOR (default ../shared/vendor beside the
# repository), MN_CONTAINERS_DIR (default /var/tmp/mn-containers: sources,
# builds, logs, the image and the state markers).
set -eEuo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
VENDOR=${MN_VENDOR:-$top/../shared/vendor}
WORK=${MN_CONTAINERS_DIR:-/var/tmp/mn-containers}
ENROOT_VER=4.1.2
PYXIS_VER=0.24.0
PYXIS_SO=/usr/local/lib/slurm/spank_pyxis.so
IMAGE=$WORK/torch.sqsh
BASE=$WORK/base.sqsh
# The image's recipe: a change here makes the next `image` build it anew.
IMAGE_RECIPE="bookworm minbase python3 python3-torch PYTORCH_VERSION marker v1"
PKGS=(squashfs-tools squashfuse fuse-overlayfs parallel pigz makeself libbsd-dev jq zstd libcap2-bin
  debootstrap build-essential libslurm-dev curl util-linux passwd)

say() { echo "containers: $*"; }
die() { echo "containers: $*" >&2; exit 1; }

# A failed part leaves its reason for status (and so the test) to report.
failed() {
  echo "$*" >"$WORK/failed"
  die "failed: $*"
}

# Any other command that fails in install or image: named in the marker too.
on_error() { failed "$part: line $1 of $0 exited $2"; }
part=""

# timed NAME CMD...: runs CMD and prints how long it took.
timed() {
  local t0
  part=$1
  shift
  t0=$(date +%s)
  "$@"
  say "$part: $(($(date +%s) - t0)) s"
}

need_root() { [ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, make install, debootstrap)"; }

# The one lock of install and image (fd 7): two runs never build at once,
# and status --wait waits on it. No daemon is started under it.
take_lock() {
  mkdir -p "$WORK"
  exec 7>"$WORK/.lock"
  flock 7
}

# Where the vendor directory lacks an archive: say how to get it, leave the
# marker, and stop with success (a skip, not a failure).
vendor_or_skip() {
  local missing=() a
  for a in "pyxis-$PYXIS_VER.tar.gz" "enroot-$ENROOT_VER.tar.gz"; do
    [ -f "$VENDOR/$a" ] || missing+=("$a")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    rm -f "$WORK/skipped"
    return 0
  fi
  local why="no ${missing[*]} in $VENDOR; get them with git archive from https://github.com/NVIDIA/pyxis (tag v$PYXIS_VER) and https://github.com/NVIDIA/enroot (tag v$ENROOT_VER), e.g. git -C pyxis archive --prefix=pyxis-$PYXIS_VER/ -o pyxis-$PYXIS_VER.tar.gz v$PYXIS_VER, or set MN_VENDOR to where they are"
  echo "$why" >"$WORK/skipped"
  say "skipped: $why"
  exit 0
}

# The directories enroot's configuration below names, made for every user
# (enroot makes the per-user one under them with umask 077), and pyxis'
# runtime_path, which slurmd makes only when it loaded pyxis at its start.
# /dev/fuse as Debian's udev rules leave it (0666), for users' squashfuse.
runtime_dirs() {
  mkdir -p /run/enroot /tmp/enroot-data /tmp/enroot-cache /run/pyxis
  chmod 1777 /run/enroot /tmp/enroot-data /tmp/enroot-cache
  chmod 0755 /run/pyxis
  [ ! -c /dev/fuse ] || chmod 0666 /dev/fuse
}

install_packages() {
  local missing=() p
  for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || { say "packages: all present"; return 0; }
  say "packages: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Debian's postinst scripts would start services; there is no init here.
  local rc_added=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    rc_added=1
  fi
  local rc=0
  { apt-get -o DPkg::Lock::Timeout=900 update -qq &&
    nice -n 15 apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}"; } \
    >"$WORK/apt.log" 2>&1 || rc=$?
  [ $rc_added = 0 ] || rm -f /usr/sbin/policy-rc.d
  [ $rc -eq 0 ] || { tail -20 "$WORK/apt.log" >&2; failed "install: apt-get install ${missing[*]} (log: $WORK/apt.log)"; }
}

# stamp_ok FILE TEXT: FILE holds TEXT (a build of these inputs is done).
stamp_ok() { [ -f "$1" ] && [ "$(cat "$1")" = "$2" ]; }

# enroot with glibc and Debian's libbsd (the archive has no submodules:
# musl, makeself and the kernel headers come from Debian), configuration in
# /etc/enroot. Built once per archive; installed again only when missing.
build_enroot() {
  local archive=$VENDOR/enroot-$ENROOT_VER.tar.gz src=$WORK/src/enroot-$ENROOT_VER want
  want="$(sha256sum <"$archive" | cut -d' ' -f1) glibc sysconfdir=/etc"
  local args=(FORCE_GLIBC=1 "LDLIBS=-l:libbsd.a -l:libbsd.so.0" prefix=/usr/local sysconfdir=/etc)
  if ! stamp_ok "$WORK/enroot.built" "$want"; then
    rm -rf "$src" "$WORK/enroot.built"
    mkdir -p "$WORK/src"
    tar -xzf "$archive" -C "$WORK/src"
    cp "$(command -v makeself)" "$src/deps/makeself/makeself.sh"
    mkdir -p "$src/deps/dist/linux/include"
    touch "$src/deps/linux-headers/.stamp"
    nice -n 15 make -C "$src" -j1 "${args[@]}" >"$WORK/enroot-build.log" 2>&1 ||
      { tail -20 "$WORK/enroot-build.log" >&2; failed "install: enroot build (log: $WORK/enroot-build.log)"; }
    rm -f /usr/local/bin/enroot  # installed anew below
    echo "$want" >"$WORK/enroot.built"
  fi
  if [ "$(/usr/local/bin/enroot version 2>/dev/null)" != "$ENROOT_VER" ] || [ ! -d /usr/local/lib/enroot ]; then
    make -C "$src" "${args[@]}" install >"$WORK/enroot-install.log" 2>&1 ||
      { tail -20 "$WORK/enroot-install.log" >&2; failed "install: enroot make install (log: $WORK/enroot-install.log)"; }
  fi
}

# What a DGX-style site adds to enroot's stock configuration: the extra
# PyTorch hook (MASTER_ADDR, MASTER_PORT, WORLD_SIZE for images that set
# PYTORCH_VERSION), and paths every user can make: the default runtime path
# /run/enroot is root's only, and a shared $HOME would be shared by nodes.
configure_enroot() {
  install -m 755 /usr/local/share/enroot/hooks.d/50-slurm-pytorch.sh /etc/enroot/hooks.d/50-slurm-pytorch.sh
  mkdir -p /etc/enroot/enroot.conf.d
  cat >/etc/enroot/enroot.conf.d/mn-nccl.conf <<'EOF'
# Written by mn-nccl's scripts/cluster/containers.sh (test rig): per-user
# paths under directories made mode 1777 for every user. Values are eval'd.
ENROOT_RUNTIME_PATH /run/enroot/user-$(id -u)
ENROOT_DATA_PATH    /tmp/enroot-data/user-$(id -u)
ENROOT_CACHE_PATH   /tmp/enroot-cache/user-$(id -u)
EOF
  runtime_dirs
}

# pyxis against Debian's libslurm-dev: a SPANK plugin loads only in the
# Slurm series it was built for, so a new libslurm-dev builds it anew.
build_pyxis() {
  local archive=$VENDOR/pyxis-$PYXIS_VER.tar.gz src=$WORK/src/pyxis-$PYXIS_VER want
  want="$(sha256sum <"$archive" | cut -d' ' -f1) slurm $(dpkg-query -W -f='${Version}' libslurm-dev)"
  if ! stamp_ok "$WORK/pyxis.built" "$want" || [ ! -f "$src/spank_pyxis.so" ]; then
    rm -rf "$src" "$WORK/pyxis.built"
    mkdir -p "$WORK/src"
    tar -xzf "$archive" -C "$WORK/src"
    nice -n 15 make -C "$src" -j1 >"$WORK/pyxis-build.log" 2>&1 ||
      { tail -20 "$WORK/pyxis-build.log" >&2; failed "install: pyxis build (log: $WORK/pyxis-build.log)"; }
    echo "$want" >"$WORK/pyxis.built"
  fi
  cmp -s "$src/spank_pyxis.so" "$PYXIS_SO" || install -D -m 644 "$src/spank_pyxis.so" "$PYXIS_SO"
}

do_install() {
  need_root
  vendor_or_skip
  rm -f "$WORK/failed"
  local t0
  t0=$(date +%s)
  timed packages install_packages
  timed "enroot $ENROOT_VER" build_enroot
  timed "enroot configuration" configure_enroot
  timed "pyxis $PYXIS_VER" build_pyxis
  echo "enroot $ENROOT_VER pyxis $PYXIS_VER slurm $(dpkg-query -W -f='${Version}' libslurm-dev)" >"$WORK/installed"
  say "install: $(($(date +%s) - t0)) s in all (enroot $(/usr/local/bin/enroot version), $PYXIS_SO)"
}

# The Debian mirror and security archive this machine's apt uses (one-line
# or deb822 sources), so the image comes from the same archive as the host.
mirror_of() {
  local suffix=$1 m
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -n "s/^URIs: *\([^ ]*\/$suffix\/\{0,1\}\)\$/\1/p" | head -1 || true)
  [ -n "$m" ] || m=$(awk -v s="/$suffix/?\$" '$1 == "deb" && $2 ~ s {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
  echo "${m:-http://deb.debian.org/$suffix}"
}

# The root's /proc only while apt runs in it.
IMAGE_ROOT=$WORK/image-root
umount_root_proc() { ! mountpoint -q "$IMAGE_ROOT/proc" || umount "$IMAGE_ROOT/proc"; }

# The host's downloaded packages, hard-linked (or copied) into the root's
# apt cache: debootstrap and apt take a package from there when its
# checksum matches, and download only the rest.
seed_apt_cache() {
  local d=$IMAGE_ROOT/var/cache/apt/archives
  mkdir -p "$d"
  compgen -G "/var/cache/apt/archives/*.deb" >/dev/null || return 0
  cp -l -n /var/cache/apt/archives/*.deb "$d/" 2>/dev/null || cp -n /var/cache/apt/archives/*.deb "$d/"
}

image_debootstrap() {
  umount_root_proc
  rm -rf "$IMAGE_ROOT"
  seed_apt_cache
  nice -n 15 debootstrap --variant=minbase bookworm "$IMAGE_ROOT" "$(mirror_of debian)" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -10 "$WORK/debootstrap.log" >&2; failed "image: debootstrap (log: $WORK/debootstrap.log)"; }
}

image_torch() {
  local main security
  main=$(mirror_of debian)
  security=$(mirror_of debian-security)
  cat >"$IMAGE_ROOT/etc/apt/sources.list" <<EOF
deb $main bookworm main
deb $main bookworm-updates main
deb $security bookworm-security main
EOF
  printf '#!/bin/sh\nexit 101\n' >"$IMAGE_ROOT/usr/sbin/policy-rc.d"
  chmod +x "$IMAGE_ROOT/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$IMAGE_ROOT/etc/resolv.conf" 2>/dev/null || true
  seed_apt_cache
  mount -t proc proc "$IMAGE_ROOT/proc"
  local rc=0
  {
    chroot "$IMAGE_ROOT" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 update -qq &&
      nice -n 15 chroot "$IMAGE_ROOT" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends python3 python3-torch
  } >"$WORK/image-apt.log" 2>&1 || rc=$?
  umount_root_proc
  [ $rc -eq 0 ] || { tail -20 "$WORK/image-apt.log" >&2; failed "image: apt-get install python3-torch in the root (log: $WORK/image-apt.log)"; }
  # The image's ENV, as a Docker image's ENV reaches enroot (its rootfs'
  # /etc/environment, runtime.sh's _do_environ): NGC's PyTorch images set
  # PYTORCH_VERSION, which turns on enroot's 50-slurm-pytorch.sh hook and
  # pyxis' RANK/LOCAL_RANK remap.
  local torch
  torch=$(chroot "$IMAGE_ROOT" dpkg-query -W -f='${Version}' python3-torch | sed 's/[+~-].*//')
  sed -i '/^PYTORCH_VERSION=/d' "$IMAGE_ROOT/etc/environment" 2>/dev/null || true
  echo "PYTORCH_VERSION=$torch" >>"$IMAGE_ROOT/etc/environment"
  # A marker only the image has: a program that reads it ran in the container.
  echo "mn-nccl test image: Debian bookworm minbase, python3-torch $torch" >"$IMAGE_ROOT/etc/mn-nccl-image"
  rm -f "$IMAGE_ROOT/usr/sbin/policy-rc.d" "$IMAGE_ROOT"/var/cache/apt/archives/*.deb
  rm -rf "$IMAGE_ROOT"/var/lib/apt/lists/*
  : >"$IMAGE_ROOT/etc/resolv.conf"
}

# Uncompressed (-noI -noD -noF -noX): packing costs the least CPU, the
# image is read from the local disk only.
image_pack() {
  rm -f "$IMAGE.tmp"
  nice -n 15 mksquashfs "$IMAGE_ROOT" "$IMAGE.tmp" -all-root -noappend -noI -noD -noF -noX -no-progress \
    >"$WORK/mksquashfs.log" 2>&1 || { tail -10 "$WORK/mksquashfs.log" >&2; failed "image: mksquashfs (log: $WORK/mksquashfs.log)"; }
  mv -f "$IMAGE.tmp" "$IMAGE"
  echo "$IMAGE_RECIPE" >"$WORK/image.built"
  rm -rf "$IMAGE_ROOT"
}

do_image() {
  need_root
  vendor_or_skip
  rm -f "$WORK/failed"
  if [ -f "$IMAGE" ] && stamp_ok "$WORK/image.built" "$IMAGE_RECIPE"; then
    say "image: $IMAGE present ($(du -h "$IMAGE" | cut -f1))"
    return 0
  fi
  command -v debootstrap >/dev/null && command -v mksquashfs >/dev/null ||
    failed "image: debootstrap or mksquashfs missing (run $0 install first)"
  trap umount_root_proc EXIT
  local t0
  t0=$(date +%s)
  timed "image: debootstrap --variant=minbase bookworm" image_debootstrap
  timed "image: python3-torch in the root" image_torch
  timed "image: mksquashfs" image_pack
  trap - EXIT
  say "image: $(($(date +%s) - t0)) s in all ($IMAGE, $(du -h "$IMAGE" | cut -f1))"
}

# The inline check's image: this root's glibc (Debian's libc6), bash and the tools the
# tests' programs use, a marker, and the directories enroot fills. Built
# anew each time (a second or two).
BASE_TOOLS=(/bin/bash /bin/cat /bin/ls /usr/bin/env /bin/hostname)
do_base() {
  need_root
  vendor_or_skip
  rm -f "$WORK/failed"
  command -v mksquashfs >/dev/null || failed "base: mksquashfs missing (run $0 install first)"
  local t0 r=$WORK/base-root t lib
  t0=$(date +%s)
  rm -rf "$r"
  mkdir -p "$r"/{etc,proc,sys,dev,run,tmp,root,usr/local/bin,var/tmp,usr/bin,usr/sbin,usr/lib,usr/lib64}
  # Merged /usr, as Debian's own roots are.
  for t in bin sbin lib lib64; do ln -s "usr/$t" "$r/$t"; done
  chmod 1777 "$r/tmp" "$r/var/tmp"
  for t in "${BASE_TOOLS[@]}"; do
    t=$(readlink -f "$t")
    install -D "$t" "$r$t"
    for lib in $(ldd "$t" | grep -o '/[^ ]*'); do
      [ -e "$r$lib" ] || install -D "$(readlink -f "$lib")" "$r$lib"
    done
  done
  ln -sf bash "$r/usr/bin/sh"
  # glibc whole (libm, libdl, librt... with libc), as any glibc image has it.
  for lib in $(dpkg -L libc6 | grep '\.so[.0-9]*$'); do
    [ -e "$r$lib" ] || install -D "$(readlink -f "$lib")" "$r$lib"
  done
  cp /etc/passwd /etc/group "$r/etc/"
  echo "mn-nccl base image: $(ldd --version | sed -n 1p)" >"$r/etc/mn-nccl-image"
  rm -f "$BASE.tmp"
  nice -n 15 mksquashfs "$r" "$BASE.tmp" -all-root -noappend -noI -noD -noF -noX -no-progress >"$WORK/base.log" 2>&1 ||
    { tail -10 "$WORK/base.log" >&2; failed "base: mksquashfs (log: $WORK/base.log)"; }
  mv -f "$BASE.tmp" "$BASE"
  rm -rf "$r"
  say "base: $(($(date +%s) - t0)) s ($BASE, $(du -h "$BASE" | cut -f1))"
}

# One line on the rig; exit 0 only when it is ready.
do_status() {
  local wait=0 image=$IMAGE
  [ "${1:-}" = --wait ] && { wait=${2:-0}; shift 2; }
  [ "${1:-}" = --image ] && [ "${2:-}" = base ] && image=$BASE
  if [ "$wait" -gt 0 ] && [ -e "$WORK/.lock" ]; then
    exec 7<"$WORK/.lock"
    flock -s -w "$wait" 7 || { echo "failed: install or image still running after ${wait} s (log: scripts/cluster/containers.sh's output)"; return 1; }
    exec 7<&-
  fi
  if [ -f "$WORK/skipped" ]; then echo "skipped: $(cat "$WORK/skipped")"; return 1; fi
  if [ -f "$WORK/failed" ]; then echo "failed: $(cat "$WORK/failed")"; return 1; fi
  local how="run: sudo bash scripts/cluster/containers.sh all (about 6 min the first time)"
  if [ ! -f "$WORK/installed" ] || [ "$(/usr/local/bin/enroot version 2>/dev/null)" != "$ENROOT_VER" ] ||
    [ ! -f "$PYXIS_SO" ] || [ ! -x /etc/enroot/hooks.d/50-slurm-pytorch.sh ]; then
    echo "missing: enroot $ENROOT_VER, pyxis $PYXIS_VER or the pytorch hook not installed; $how"
    return 1
  fi
  if [ "$(cut -d' ' -f6 "$WORK/installed")" != "$(dpkg-query -W -f='${Version}' libslurm-dev 2>/dev/null)" ]; then
    echo "missing: pyxis was built for another Slurm ($(cat "$WORK/installed")); $how"
    return 1
  fi
  if [ ! -f "$image" ]; then echo "missing: no image $image; $how"; return 1; fi
  [ "$(id -u)" -ne 0 ] || runtime_dirs
  echo "ready: enroot $ENROOT_VER, pyxis $PYXIS_SO, image $image"
}

case "${1:-}" in
  install) take_lock; trap 'on_error $LINENO $?' ERR; do_install ;;
  image) take_lock; trap 'on_error $LINENO $?' ERR; do_image ;;
  base) take_lock; trap 'on_error $LINENO $?' ERR; do_base ;;
  all) take_lock; trap 'on_error $LINENO $?' ERR; t_all=$(date +%s); do_install; do_image; do_base; say "all: $(($(date +%s) - t_all)) s" ;;
  inline) take_lock; trap 'on_error $LINENO $?' ERR; t_all=$(date +%s); do_install; do_base; say "inline: $(($(date +%s) - t_all)) s" ;;
  status) shift; do_status "$@" ;;
  *) sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
