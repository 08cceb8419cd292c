// libFuzzer target: IDX files (MNIST, Fashion-MNIST), raw or gzip-compressed.
#include "FuzzUtil.h"

#include <symjax/Data.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = sj::fuzz::write_input(data, size, ".idx");
    return sj::fuzz::run([&] { (void)sj::data::read_idx(path); });
}
