// SPDX-License-Identifier: Apache-2.0
// spank.h for C++. spank.h declares the slurm_spank_* hooks outside its own
// extern "C", so they are defined extern "C" in spank/mn_nccl.cc; and
// SPANK_PLUGIN's const arrays (plugin_name, plugin_type, plugin_version)
// would get internal linkage in C++, so mn_nccl.cc declares them extern
// first: Slurm's loader finds them with dlsym.
#pragma once

extern "C" {
#include <slurm/spank.h>
#include <slurm/slurm_version.h>
}

#ifndef SLURM_VERSION_NUM
#define SLURM_VERSION_NUM(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#endif

// spank_prepend_task_argv, which the inline check needs: in spank.h since
// Slurm 23.11 (SchedMD's slurm-23-11-1-1 onwards).
#define MN_HAVE_PREPEND_TASK_ARGV (SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0))
