# SPDX-License-Identifier: Apache-2.0
# Only on Debian 13's torch 2.6, which is built without libuv: torchrun's
# static rendezvous, and its workers' env:// rendezvous on the agent's store,
# create their TCPStore with the library default (use_libuv=True) and no way
# to say otherwise, so every torchrun fails with "use_libuv was requested but
# PyTorch was build without libuv support". scripts/torch/debian-torch.sh puts this
# directory on PYTHONPATH for the test clients only when that build is
# present; it makes those two modules ask for the store torch does have.
# The plugin is not involved.
import importlib.abc
import sys

_TARGETS = {"torch.distributed.rendezvous", "torch.distributed.elastic.rendezvous.static_tcp_rendezvous"}


class _NoLibuvStore(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in _TARGETS:
            return None
        import importlib.util
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        loader_exec = spec.loader.exec_module

        def exec_module(module):
            loader_exec(module)
            store = module.TCPStore
            module.TCPStore = lambda *a, **kw: store(*a, **{"use_libuv": False, **kw})

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _NoLibuvStore())
