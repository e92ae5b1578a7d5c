// SPDX-License-Identifier: Apache-2.0
// Runs a fuzz target over files and directories of inputs, without
// libFuzzer: how every build (gcc, the sanitizer build) replays the corpora.
//   fuzz_TARGET [FILE|DIR]...   (default: $MN_FUZZ_CORPUS/TARGET, else the
//   source tree's tests/fuzz/corpus/TARGET)
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

bool is_dir(const std::string& p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void collect(const std::string& p, std::vector<std::string>& files) {
    if (!is_dir(p)) {
        files.push_back(p);
        return;
    }
    DIR* d = opendir(p.c_str());
    if (!d) return;
    while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n != "." && n != ".." && n[0] != '.') collect(p + "/" + n, files);
    }
    closedir(d);
}

}  // namespace

int main(int argc, char** argv) {
    if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
    std::vector<std::string> roots(argv + 1, argv + argc);
    if (roots.empty()) {
        std::string name = argv[0];
        name = name.substr(name.find_last_of('/') + 1);
        if (name.rfind("lt-", 0) == 0) name = name.substr(3);  // libtool's wrapper
        const char* base = std::getenv("MN_FUZZ_CORPUS");
#ifdef MN_FUZZ_CORPUS_DIR
        if (!base || !*base) base = MN_FUZZ_CORPUS_DIR;
#endif
        if (!base || name.rfind("fuzz_", 0) != 0) {
            std::fprintf(stderr, "usage: %s FILE|DIR... (or set MN_FUZZ_CORPUS)\n", argv[0]);
            return 2;
        }
        roots.push_back(std::string(base) + "/" + name.substr(5));
    }
    std::vector<std::string> files;
    for (const auto& r : roots) collect(r, files);
    std::sort(files.begin(), files.end());
    if (files.empty()) {
        std::fprintf(stderr, "%s: no inputs under %s\n", argv[0], roots[0].c_str());
        return 1;
    }
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        if (!in) {
            std::fprintf(stderr, "%s: cannot read %s\n", argv[0], f.c_str());
            return 1;
        }
        std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        std::fprintf(stderr, "replay %s (%zu bytes)\n", f.c_str(), bytes.size());
        LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    }
    std::printf("%s: %zu inputs replayed, every property held\n", argv[0], files.size());
    return 0;
}
