// SPDX-License-Identifier: Apache-2.0
// The container inputs (lib/plan/containers): a --container-env list or
// PYXIS_CONTAINER_ENV (the user's), a task's command line in front of an
// apptainer/singularity image, and an enroot mounts.d file. The first
// byte picks which; the rest is the input ('\n' between argv words, and
// between a mounts.d text and the path asked for, the path last).
#include <algorithm>

#include "tests/fuzz/fuzz.h"
#include "lib/plan/containers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 1 || size > 4096) return 0;
    const uint8_t which = data[0] % 3;
    ++data, --size;
    if (which == 0) {
        const std::string list(reinterpret_cast<const char*>(data), size);
        // The plugin's default for pyxis leaves out nothing of the plugin's
        // and keeps every name the user gave, first.
        const std::string merged = mn::pyxis_container_env(list);
        FUZZ_CHECK(mn::left_out_of(merged).empty(), "'%s' -> '%s' leaves names out", list.c_str(), merged.c_str());
        FUZZ_CHECK(mn::pyxis_container_env(merged) == merged, "not stable: '%s'", merged.c_str());
        const auto out = mn::left_out_of(list);
        for (const auto& n : out) FUZZ_CHECK(mn::is_plugin_variable(n), "'%s' is not the plugin's", n.c_str());
        return 0;
    }
    std::vector<std::string> words = fuzz::fields(data, size, '\n', 64);
    if (which == 1) {
        auto c = mn::apptainer_command(words);
        if (!c) return 0;
        FUZZ_CHECK(c->runtime == "apptainer" || c->runtime == "singularity", "runtime '%s'", c->runtime.c_str());
        FUZZ_CHECK(c->command >= 3 && c->command <= words.size(), "command at %zu of %zu", c->command, words.size());
        FUZZ_CHECK(words[c->command - 1] == c->image, "the image is the word before the command");
        FUZZ_CHECK(!mn::apptainer_env_prefix(c->runtime).empty(), "prefix");
        return 0;
    }
    const std::string path = words.back();
    words.pop_back();
    std::string fstab;
    for (const auto& w : words) fstab += w + "\n";
    if (mn::enroot_mounts(fstab, path)) {
        // Only a line that names the path can mount it, and a comment never does.
        FUZZ_CHECK(!path.empty() && fstab.find(path) != std::string::npos, "'%s' not in the text", path.c_str());
        std::string uncommented;
        for (const auto& w : words) {
            const auto a = w.find_first_not_of(" \t");
            if (a != std::string::npos && w[a] != '#') uncommented += w + "\n";
        }
        FUZZ_CHECK(mn::enroot_mounts(uncommented, path), "a comment mounted '%s'", path.c_str());
    }
    return 0;
}
