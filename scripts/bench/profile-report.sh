#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Names the samples of the test hook MN_PREFLIGHT_PROFILE=FILE (rank 0's
# CPU, helper/check/hooks.h) with the unstripped build they came from:
# the functions with the most samples of their own (self) and the most
# samples anywhere in their stack (inclusive), with their shares.
#   scripts/bench/profile-report.sh FILE [BINARY]   BINARY: helper/mn-preflight (unstripped)
set -euo pipefail
file=$1
bin=${2:-$(dirname "$0")/../../helper/mn-preflight}
[ -s "$file" ] || { echo "profile-report: no samples in $file" >&2; exit 2; }
command -v addr2line >/dev/null || { echo "profile-report: needs addr2line (binutils)" >&2; exit 2; }
python3 - "$file" "$bin" <<'PY'
import collections, subprocess, sys
path, binary = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
base = int(lines[0].split()[1], 16)
samples = [[int(a, 16) for a in l.split()] for l in lines[1:] if l.strip()]
size = int(subprocess.run(["stat", "-c", "%s", binary], capture_output=True, text=True).stdout or 0)
ours = sorted({a for s in samples for a in s if base <= a < base + (1 << 30)})
names = {}
if ours:
    out = subprocess.run(["addr2line", "-f", "-C", "-e", binary] + ["%x" % (a - base) for a in ours],
                         capture_output=True, text=True).stdout.split("\n")
    for i, a in enumerate(ours):
        n = out[2 * i] if 2 * i < len(out) else "?"
        names[a] = n if n != "??" else "?"
def name(a):
    return names.get(a, "[a shared library]")
self_c, incl_c = collections.Counter(), collections.Counter()
for s in samples:
    self_c[name(s[0])] += 1
    for n in {name(a) for a in s}:
        incl_c[n] += 1
total = len(samples)
print(f"profile-report: {total} samples (1 ms of CPU each) from {path}")
for title, c in (("self", self_c), ("inclusive", incl_c)):
    print(f"\n{title}:")
    for n, k in c.most_common(25):
        print(f"  {100.0 * k / total:5.1f} %  {k:6d}  {n[:150]}")
PY
