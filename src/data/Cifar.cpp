// CIFAR-10 binary batch reader (records of 1 label byte + 3072 pixel bytes, channel-major).
#include "data/DataIO.h"

#include <symjax/Data.h>

#include <cstring>

namespace sj::data {

const std::vector<std::string>& cifar10_classes() {
    static const std::vector<std::string> names = {"airplane", "automobile", "bird",  "cat",
                                                   "deer",     "dog",        "frog",  "horse",
                                                   "ship",     "truck"};
    return names;
}

Dataset read_cifar10_binary(const std::vector<std::string>& paths) {
    constexpr int64_t kPixels = 3 * 32 * 32;
    constexpr int64_t kRecord = 1 + kPixels;
    SJ_CHECK(!paths.empty(), IOError) << "read_cifar10_binary: no files given";
    std::vector<std::vector<uint8_t>> files;
    int64_t total = 0;
    for (const std::string& p : paths) {
        files.push_back(detail::read_file(p));
        const auto n = static_cast<int64_t>(files.back().size());
        SJ_CHECK(n > 0, IOError) << p << ": byte 0: empty file (expected " << kRecord
                                 << "-byte CIFAR-10 records)";
        SJ_CHECK(n % kRecord == 0, IOError)
            << p << ": byte " << n / kRecord * kRecord << ": truncated record: the file has " << n
            << " bytes, not a multiple of the " << kRecord << "-byte CIFAR-10 record ("
            << n % kRecord << " bytes of a last record)";
        total += n / kRecord;
    }
    Dataset ds;
    ds.images = Array(DType::U8, {total, 3, 32, 32});
    ds.labels = Array(DType::I32, {total});
    ds.classes = cifar10_classes();
    auto* img = ds.images.data<uint8_t>();
    auto* lab = ds.labels.data<int32_t>();
    int64_t k = 0;
    for (size_t f = 0; f < files.size(); ++f) {
        const std::vector<uint8_t>& b = files[f];
        const auto records = static_cast<int64_t>(b.size()) / kRecord;
        for (int64_t r = 0; r < records; ++r, ++k) {
            const uint8_t* rec = b.data() + r * kRecord;
            SJ_CHECK(rec[0] < 10, IOError)
                << paths[f] << ": byte " << r * kRecord << ": label " << int(rec[0])
                << " of record " << r << " is not a CIFAR-10 class (0..9)";
            lab[k] = rec[0];
            std::memcpy(img + k * kPixels, rec + 1, kPixels);
        }
    }
    return ds;
}

} // namespace sj::data
