// spank.h for C++: its hooks are declared outside its own extern "C", and
// SPANK_PLUGIN's arrays would get internal linkage in C++ without the
// extern declarations below (see shared/notes/spank.md).
#pragma once

extern "C" {
#include <slurm/spank.h>
#include <slurm/slurm_version.h>
}

#ifndef SLURM_VERSION_NUM
#define SLURM_VERSION_NUM(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#endif
