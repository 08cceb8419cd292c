// libFuzzer target: CIFAR-10 binary batches.
#include "FuzzUtil.h"

#include <symjax/Data.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = sj::fuzz::write_input(data, size, ".bin");
    return sj::fuzz::run([&] { (void)sj::data::read_cifar10_binary({path}); });
}
