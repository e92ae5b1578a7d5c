# SPDX-License-Identifier: Apache-2.0
# Sourced by the demo and the integration tests: the workarounds the clients
# need for bugs of Debian's own torch builds. The plugin sets none of these;
# they are the user's business, as on any cluster with these builds.
# - torch 1.13 (Debian 12): torchrun under Python 3.11 needs PET_REDIRECTS
#   and PET_TEE set.
# - torch 2.6 (Debian 13): TCPStore asks for libuv by default, and the build
#   has none ("use_libuv was requested but PyTorch was build without libuv
#   support"): USE_LIBUV=0 for init_process_group, and for torchrun, whose
#   static rendezvous has no such knob, scripts/torch/debian-torch/sitecustomize.py.
export PET_REDIRECTS=1 PET_TEE=1
torch_lacks_libuv() {
  ! /usr/bin/python3 - 2>/dev/null <<'PY'
import sys, torch.distributed as dist
if not hasattr(dist, "TCPStore"): sys.exit(0)
try:
    dist.TCPStore("127.0.0.1", 0, 1, True, use_libuv=True, wait_for_workers=False)
except TypeError:
    pass          # no use_libuv knob at all (torch < 2.2): nothing to avoid
except RuntimeError as e:
    sys.exit(1 if "libuv" in str(e) else 0)
PY
}
if torch_lacks_libuv; then
  export USE_LIBUV=0
  export PYTHONPATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/debian-torch${PYTHONPATH:+:$PYTHONPATH}"
fi
