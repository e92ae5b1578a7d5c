// SPDX-License-Identifier: Apache-2.0
// One dlsym'd call, typed: the loaders of the libraries used where present
// (CUDA, NCCL, NVML in mn-preflight; hwloc and libibverbs in both) take each
// call's type from its declaration (the library's header or our fallback).
#pragma once

#include <dlfcn.h>

namespace mn {

// `f` = the symbol `name` of `lib`; false when the library lacks it.
template <typename F>
bool sym(void* lib, const char* name, F& f) {
    f = reinterpret_cast<F>(dlsym(lib, name));
    return f != nullptr;
}

}  // namespace mn
