#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# GCC 12's ASan runtime does not hold its allocator's locks across fork():
# a thread of a multi-threaded process (slurmstepd forking a task) that
# allocates at the moment of the fork leaves the child a lock nobody will
# ever release, and the child, between fork and exec, waits on it forever
# (seen in Slurm's own setup_env(), with no plugin loaded; the step then
# hangs and its node drains with "Kill task failed"). LLVM 17's runtime
# takes those locks around fork; Debian 12 has none that does.
#
# While the sanitizer run's cluster is up, this finds such children: one
# thread, inside the cluster's slurmstepd tree, in futex() on an address of
# the ASan allocator's own space (x86-64: 0x600000000000 up to its region
# table just past 0x640000000000), in two looks 2 s apart. A single-threaded
# process can never be woken from such a wait. It kills each one and writes
# a line to LOG; tests/integration/lib.sh's run() re-runs a command once
# when LOG grew while it ran.
#   scripts/test/asan-fork-watch.sh LOG      (until killed)
set -u
log=$1
declare -A seen=()

# A field of /proc/PID/status, read without starting a program.
status_field() {
  local key val
  while read -r key val; do
    [ "$key" = "$2:" ] && { echo "$val"; return 0; }
  done 2>/dev/null <"/proc/$1/status"
  return 1
}

under_slurmstepd() {
  local p=$1 i comm
  for ((i = 0; i < 8; i++)); do
    p=$(status_field "$p" PPid) || return 1
    [ "$p" -gt 1 ] || return 1
    read -r comm 2>/dev/null <"/proc/$p/comm" || return 1
    [ "$comm" = slurmstepd ] && return 0
  done
  return 1
}

stuck_on_allocator() {
  local pid=$1 nr addr
  read -r nr addr _ 2>/dev/null <"/proc/$pid/syscall" || return 1
  [ "$nr" = 202 ] || return 1
  # 0x6000_0000_0000 <= addr < 0x6500_0000_0000
  [[ $addr =~ ^0x6[0-4][0-9a-f]{10}$ ]] || return 1
  [ "$(status_field "$pid" Threads)" = 1 ]
}

while true; do
  declare -A now=()
  for d in /proc/[0-9]*; do
    pid=${d#/proc/}
    stuck_on_allocator "$pid" || continue
    under_slurmstepd "$pid" || continue
    if [ -n "${seen[$pid]:-}" ]; then
      echo "$(date +%T) pid $pid ($(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | cut -c1-80)) waited on the ASan allocator's lock after fork: killed" >>"$log"
      kill -9 "$pid" 2>/dev/null
    else
      now[$pid]=1
    fi
  done
  seen=()
  for p in "${!now[@]}"; do seen[$p]=1; done
  unset now
  sleep 2
done
