// libFuzzer target: safetensors checkpoints (header JSON, offsets, dtypes, data).
#include "FuzzUtil.h"

#include <symjax/Checkpoint.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = sj::fuzz::write_input(data, size, ".safetensors");
    return sj::fuzz::run([&] {
        std::map<std::string, std::string> metadata;
        (void)sj::read_safetensors(path, &metadata);
    });
}
