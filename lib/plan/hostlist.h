// SPDX-License-Identifier: Apache-2.0
// Slurm host lists: "node[01-04],gpu-a[1,3-5]-ib,login1".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "lib/util/outcome.h"

namespace mn {

class Hostlist {
public:
    // Expands a Slurm host list expression in Slurm's order. Zero padding
    // follows the width of each range's lower bound, as Slurm writes it.
    static Outcome<Hostlist> parse(const std::string& expr);

    const std::vector<std::string>& hosts() const { return hosts_; }
    std::size_t size() const { return hosts_.size(); }
    const std::string& operator[](std::size_t i) const { return hosts_[i]; }

    // The shortest Slurm form of a set of names, as sbatch --exclude takes
    // it: "node1,node2,node3,gpu07" -> "node[1-3],gpu07". Names sharing a
    // prefix and ending in digits become one bracket group (zero padding
    // kept); groups come in the order of their first name; duplicates go.
    static std::string compress(const std::vector<std::string>& hosts);

    // Refuse lists that would not fit any real step, before expanding them.
    static constexpr std::size_t kMaxHosts = 1u << 20;

private:
    std::vector<std::string> hosts_;
};

}  // namespace mn
