#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Proves the packages of this machine's Debian release:
#   - builds the .deb (dpkg-buildpackage -b in a copy of the tree), checks
#     its files and its Depends on the Slurm series it was built against;
#   - installs it with dpkg;
#   - builds the RPM with rpmbuild -tb from the `make dist` tarball and
#     checks its files, conffile and Requires;
#   - starts the local cluster with the INSTALLED plugin driven by the
#     INSTALLED plugstack line (Slurm's own /etc/slurm/plugstack.conf,
#     which includes plugstack.conf.d/*.conf), runs srun -N3
#     --ntasks-per-node=2 --mn-nccl=auto and checks each task's variables,
#     and that a step without the option is left alone (default=off);
#   - removes the package (the conffile stays) and purges it (it goes).
# Prints "integration: N passed, M failed" as tests/integration/*.sh do.
# Needs root; holds /tmp/mn-cluster.lock only while the cluster runs.
# MN_TEST_RPM=0 skips the RPM.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
LOCK=${MN_CLUSTER_LOCK:-/tmp/mn-cluster.lock}
CONFFILE=/etc/slurm/plugstack.conf.d/zz-mn_nccl.conf
# enroot's system mount of mn-preflight into pyxis containers.
ENROOT_MOUNT=/etc/enroot/mounts.d/50-mn-preflight.fstab
ENROOT_LINE="/usr/bin/mn-preflight /usr/bin/mn-preflight none x-create=file,bind,ro,nosuid,nodev,private"
PASSED=0
FAILED=0
work=$(mktemp -d /var/tmp/mn-pkg.XXXXXX)
start_s=$(date +%s)

pass() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
fail() {
  FAILED=$((FAILED + 1))
  echo "not ok - $1"
  shift
  [ $# -gt 0 ] && printf '    %s\n' "$@"
  return 0
}
summary() {
  echo "package tests: $(($(date +%s) - start_s)) s"
  echo "integration: $PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ]
}

[ "$(id -u)" -eq 0 ] || { fail "test-package.sh runs as root (dpkg -i, the cluster)"; summary; exit 1; }
if dpkg-query -W -f='${Status}' mn-nccl 2>/dev/null | grep -q 'install ok installed'; then
  fail "mn-nccl is already installed here: remove it first (dpkg -r mn-nccl), this test installs and removes its own"
  summary
  exit 1
fi

# The tree as git sees it, so nothing built here leaks into the package.
copy_tree() {
  mkdir -p "$1"
  if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$top" && git ls-files -z -co --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null) |
      tar -C "$1" -xf -
  else
    # No git (a minimal root): leave out what configure and make wrote.
    (cd "$top" && tar --exclude=.libs --exclude=.deps --exclude='*.o' --exclude='*.lo' --exclude='*.la' \
      --exclude=./Makefile --exclude=./config.status --exclude=./build_config.h --exclude=./config.log \
      --exclude=./libtool --exclude=./stamp-h1 --exclude=./mn-nccl.spec --exclude='./mn-nccl-*.tar.gz' \
      --exclude=./autom4te.cache -cf - .) | tar -C "$1" -xf -
  fi
}

series=$(awk '$2 == "SLURM_VERSION_NUMBER" {print $3}' /usr/include/slurm/slurm_version.h)
series=$(printf '%d.%02d' $((series >> 16)) $(((series >> 8) & 255)))
next=$(echo "$series" | awk -F. '{printf "%d.%02d", $1, $2 + 1}')
plugindir=$(dpkg -L slurm-wlm-basic-plugins | sed -n 's|/[^/]*\.so$||p' | sort | uniq -c | sort -rn | awk 'NR == 1 {print $2}')
echo "== packages for Slurm $series (PluginDir $plugindir)"

# ---- the .deb -----------------------------------------------------------------
copy_tree "$work/src/mn-nccl"
t=$(date +%s)
# Unit tests ran in make check already (scripts/test.sh); the package build
# is about what gets installed.
(cd "$work/src/mn-nccl" && DEB_BUILD_OPTIONS="nocheck parallel=$(nproc)" dpkg-buildpackage -b -us -uc) \
  >"$work/deb-build.log" 2>&1
rc=$?
deb=$(ls "$work"/src/mn-nccl_*.deb 2>/dev/null | head -1)
if [ $rc -eq 0 ] && [ -n "$deb" ]; then
  pass "dpkg-buildpackage -b: $(basename "$deb") in $(($(date +%s) - t)) s"
else
  fail "dpkg-buildpackage -b (rc=$rc)" "$(tail -15 "$work/deb-build.log")"
  summary
  exit 1
fi

files=$(dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|')
echo "$files" | grep -v '/$' | sed 's/^/    | /'
want=("$plugindir/mn_nccl.so" /usr/bin/mn-preflight /usr/share/man/man8/mn_nccl.8.gz
  /usr/share/man/man1/mn-preflight.1.gz "$CONFFILE" "$ENROOT_MOUNT")
missing=()
for f in "${want[@]}"; do grep -qxF "$f" <<<"$files" || missing+=("$f"); done
stray=$(grep -E '\.la$|/usr/local/|/usr/lib/slurm/' <<<"$files")
[ ${#missing[@]} -eq 0 ] && [ -z "$stray" ] &&
  pass "the .deb holds the plugin in $plugindir, mn-preflight, both man pages, $CONFFILE and $ENROOT_MOUNT" ||
  fail "the .deb's files" "missing: ${missing[*]:-none}" "stray: ${stray:-none}"

# The licence: Debian's form is the package's copyright file (DEP-5).
copyright=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ./usr/share/doc/mn-nccl/copyright 2>/dev/null)
grep -qx 'License: Apache-2.0' <<<"$copyright" &&
  pass "the .deb's /usr/share/doc/mn-nccl/copyright says License: Apache-2.0" ||
  fail "the .deb's copyright file names Apache-2.0" "$(head -12 <<<"$copyright")"

conffiles=$(dpkg-deb -I "$deb" conffiles 2>/dev/null | sort | paste -sd' ')
line=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ".$CONFFILE" 2>/dev/null)
mount_line=$(dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ".$ENROOT_MOUNT" 2>/dev/null)
[ "$conffiles" = "$ENROOT_MOUNT $CONFFILE" ] &&
  [ "$line" = "optional $plugindir/mn_nccl.so default=off port_range=20000-29999 force=0" ] &&
  [ "$mount_line" = "$ENROOT_LINE" ] &&
  pass "the conffiles are $CONFFILE ($line) and $ENROOT_MOUNT ($mount_line)" ||
  fail "the conffiles" "conffiles: $conffiles" "line: $line" "mount: $mount_line"

depends=$(dpkg-deb -f "$deb" Depends)
grep -qF "slurm-wlm-basic-plugins (>= $series), slurm-wlm-basic-plugins (<< $next)" <<<"$depends" &&
  pass "Depends pinned to Slurm $series: $depends" || fail "Depends pinned to Slurm $series" "Depends: $depends"

# dpkg waits for no one: retry while another install holds its lock.
dpkg_retry() {
  local i
  for i in $(seq 60); do
    dpkg "$@" >>"$work/dpkg.log" 2>&1 && return 0
    grep -q 'dpkg frontend lock\|dpkg status database is locked' "$work/dpkg.log" || return 1
    sleep 5
  done
  return 1
}

cleanup() {
  if [ -n "${cluster_up:-}" ]; then bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1; fi
  dpkg-query -W mn-nccl >/dev/null 2>&1 && dpkg -P mn-nccl >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

if dpkg_retry -i "$deb"; then
  pass "dpkg -i $(basename "$deb")"
else
  fail "dpkg -i" "$(tail -10 "$work/dpkg.log")"
  summary
  exit 1
fi
version=$(mn-preflight --version 2>&1)
grep -q "built for Slurm $series" <<<"$version" && pass "mn-preflight --version: $version" ||
  fail "mn-preflight --version names Slurm $series" "$version"
# The packaged binary never obeys the test build's fault-injection variables.
! grep -q 'test hooks' <<<"$version" && pass "the packaged mn-preflight has no test hooks" ||
  fail "the packaged mn-preflight has no test hooks (configure without --enable-test-hooks)" "$version"

# ---- the RPM from the dist tarball -------------------------------------------
# Built before the job: under scripts/test.sh the release roots may hold
# the cluster now, and the build fills that wait.
if [ "${MN_TEST_RPM:-1}" != 0 ]; then
  t=$(date +%s)
  copy_tree "$work/dist"
  (cd "$work/dist" && ./autogen.sh && ./configure --quiet && make -s dist) >"$work/dist.log" 2>&1
  tarball=$(ls "$work"/dist/mn-nccl-*.tar.gz 2>/dev/null | head -1)
  if [ -z "$tarball" ]; then
    fail "make dist" "$(tail -10 "$work/dist.log")"
  # --nodeps: the build dependencies are Debian packages here, not RPMs;
  # Debian's rpm has no debuginfo tools.
  elif rpmbuild -tb --nodeps --define "_topdir $work/rpm" --define 'debug_package %{nil}' "$tarball" \
    >"$work/rpm.log" 2>&1; then
    rpm=$(ls "$work"/rpm/RPMS/*/mn-nccl-*.rpm | head -1)
    pass "rpmbuild -tb $(basename "$tarball"): $(basename "$rpm") in $(($(date +%s) - t)) s"
    list=$(rpm -qlp "$rpm" 2>/dev/null)
    echo "$list" | sed 's/^/    | /'
    libdir=$(rpm --eval '%{_libdir}')
    missing=()
    # RHEL's rpm compresses man pages, Debian's does not.
    for f in "$libdir/slurm/mn_nccl\.so" /usr/bin/mn-preflight '/usr/share/man/man8/mn_nccl\.8(\.gz)?' \
      '/usr/share/man/man1/mn-preflight\.1(\.gz)?' "${CONFFILE//./\\.}" "${ENROOT_MOUNT//./\\.}"; do
      grep -qxE "$f" <<<"$list" || missing+=("$f")
    done
    [ ${#missing[@]} -eq 0 ] && pass "the RPM holds $libdir/slurm/mn_nccl.so, mn-preflight, man pages, $CONFFILE" ||
      fail "the RPM's files" "missing: ${missing[*]}"
    [ "$(rpm -qcp "$rpm" 2>/dev/null | sort | paste -sd' ')" = "$ENROOT_MOUNT $CONFFILE" ] &&
      pass "the RPM's config files: $CONFFILE and $ENROOT_MOUNT" ||
      fail "the RPM's config files" "$(rpm -qcp "$rpm" 2>&1)"
    [ "$(rpm -qp --qf '%{LICENSE}' "$rpm" 2>/dev/null)" = Apache-2.0 ] &&
      rpm -qLp "$rpm" 2>/dev/null | grep -q '/LICENSE$' &&
      pass "the RPM's License is Apache-2.0 and it ships LICENSE ($(rpm -qLp "$rpm" 2>/dev/null | paste -sd,))" ||
      fail "the RPM's licence" "License: $(rpm -qp --qf '%{LICENSE}' "$rpm" 2>&1)" "licence files: $(rpm -qLp "$rpm" 2>&1)"
    requires=$(rpm -qp --requires "$rpm" 2>/dev/null)
    grep -qx "slurm >= $series" <<<"$requires" && grep -qx "slurm < $next" <<<"$requires" &&
      pass "the RPM requires Slurm $series: $(grep '^slurm ' <<<"$requires" | paste -sd,)" ||
      fail "the RPM requires Slurm $series" "$requires"
  else
    fail "rpmbuild -tb" "$(tail -15 "$work/rpm.log")"
  fi
fi

# ---- a real job through the installed plugin ----------------------------------
# Slurm's own plugstack.conf where it includes plugstack.conf.d (Debian's
# does), so the job runs exactly as a site with the default file would.
plugstack=/etc/slurm/plugstack.conf
grep -qE '^[[:space:]]*include[[:space:]]+/etc/slurm/plugstack\.conf\.d/\*\.conf' "$plugstack" 2>/dev/null || plugstack=$CONFFILE
export SLURM_CONF=${MN_CLUSTER_DIR:-/tmp/mn-cluster}/slurm.conf
exec 9>"$LOCK"
flock 9
cluster_up=1
if MN_PLUGSTACK=$plugstack bash "$top/scripts/cluster/local-cluster.sh" start >"$work/cluster.log" 2>&1; then
  pass "local cluster up, plugstack.conf: include $plugstack"
  # Two tasks per node: task launch, every task a rank.
  out=$(timeout 120 srun -N3 --ntasks-per-node=2 --mn-nccl=auto --mn-nccl-explain bash -c \
    'echo "TASK $(hostname) RANK=${RANK-} WORLD_SIZE=${WORLD_SIZE-} LOCAL_RANK=${LOCAL_RANK-} MASTER_ADDR=${MASTER_ADDR-} MASTER_PORT=${MASTER_PORT-} NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME-}"' 2>&1)
  rc=$?
  echo "$out" | sed 's/^/    | /'
  tasks=$(grep '^TASK ' <<<"$out" | sort)
  ranks=$(sed -n 's/.* RANK=\([^ ]*\) .*/\1/p' <<<"$tasks" | sort -n | paste -sd,)
  local_ranks=$(sed -n 's/.* LOCAL_RANK=\([^ ]*\) .*/\1/p' <<<"$tasks" | sort -n | paste -sd,)
  addrs=$(sed -n 's/.* MASTER_ADDR=\([^ ]*\) .*/\1/p' <<<"$tasks" | sort -u)
  ports=$(sed -n 's/.* MASTER_PORT=\([^ ]*\) .*/\1/p' <<<"$tasks" | sort -u)
  sizes=$(sed -n 's/.* WORLD_SIZE=\([^ ]*\) .*/\1/p' <<<"$tasks" | sort -u)
  ifnames=$(sed -n 's/.* NCCL_SOCKET_IFNAME=\([^ ]*\).*/\1/p' <<<"$tasks" | sort -u)
  [ $rc -eq 0 ] && [ "$ranks" = 0,1,2,3,4,5 ] && [ "$local_ranks" = 0,0,0,1,1,1 ] && [ "$sizes" = 6 ] && [ "$addrs" = 10.250.0.10 ] &&
    [ "$(wc -l <<<"$ports")" = 1 ] && [ "$ports" -ge 20000 ] && [ "$ports" -le 29999 ] && [ "$ifnames" = "=eth0" ] &&
    pass "srun -N3 --ntasks-per-node=2 --mn-nccl=auto through the installed plugin: RANK 0-5, LOCAL_RANK 0-1, WORLD_SIZE=6, MASTER_ADDR=$addrs, MASTER_PORT=$ports" ||
    fail "srun -N3 --ntasks-per-node=2 --mn-nccl=auto through the installed plugin" \
      "rc=$rc ranks=$ranks local_ranks=$local_ranks sizes=$sizes addrs=$addrs ports=$ports ifnames=$ifnames"
  built=$(grep -c "mn-nccl [^ ]* built for Slurm $series, running in Slurm $series\." <<<"$out")
  [ "$built" = 3 ] && pass "--mn-nccl-explain names the build's Slurm series on each node" ||
    fail "--mn-nccl-explain names the build's Slurm series on each node" "lines: $built"

  out=$(timeout 120 srun -N3 bash -c 'echo "TASK $(hostname) RANK=${RANK-unset} MASTER_ADDR=${MASTER_ADDR-unset} MASTER_PORT=${MASTER_PORT-unset}"' 2>&1)
  rc=$?
  [ $rc -eq 0 ] && [ "$(grep -c '^TASK .* RANK=unset MASTER_ADDR=unset MASTER_PORT=unset$' <<<"$out")" = 3 ] &&
    pass "srun without --mn-nccl: environment untouched (default=off)" ||
    fail "srun without --mn-nccl: environment untouched (default=off)" "rc=$rc" "$out"

  help=$(srun --help 2>&1)
  grep -q -- '--mn-nccl' <<<"$help" && pass "srun --help lists --mn-nccl (srun loaded the installed plugin)" ||
    fail "srun --help lists --mn-nccl"
else
  fail "local cluster with the installed plugstack line" "$(tail -10 "$work/cluster.log")"
fi
bash "$top/scripts/cluster/local-cluster.sh" stop >/dev/null 2>&1
cluster_up=
exec 9>&-

# ---- remove, then purge ------------------------------------------------------
if dpkg_retry -r mn-nccl && [ ! -e "$plugindir/mn_nccl.so" ] && ! command -v mn-preflight >/dev/null && [ -f "$CONFFILE" ]; then
  pass "dpkg -r: plugin and mn-preflight gone, conffile $CONFFILE kept"
else
  fail "dpkg -r" "$(tail -5 "$work/dpkg.log")" "$(ls -l "$plugindir/mn_nccl.so" "$CONFFILE" 2>&1)"
fi
if dpkg_retry -P mn-nccl && [ ! -e "$CONFFILE" ]; then
  pass "dpkg -P: conffile removed"
else
  fail "dpkg -P" "$(tail -5 "$work/dpkg.log")"
fi

summary
