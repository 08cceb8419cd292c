// libFuzzer target: PNG and JPEG decoding (read_image, which the image-folder reader calls),
// keeping the file's channels and converting to 1 and 3.
#include "FuzzUtil.h"

#include <symjax/Data.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = sj::fuzz::write_input(data, size, ".img");
    static const int kChannels[] = {0, 1, 3}; // the last byte picks the conversion
    int channels = size ? kChannels[data[size - 1] % 3] : 0;
    return sj::fuzz::run([&] { (void)sj::data::read_image(path, channels); });
}
