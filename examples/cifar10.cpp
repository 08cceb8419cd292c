// Example: the SymJAX paper's CIFAR-10 network, trained end to end.
//
//   Conv 32 3x3 VALID - BN - ReLU - MaxPool 2 / Conv 64 3x3 VALID - BN - ReLU - MaxPool 2 /
//   Dense 128 - BN - ReLU / Dense 10
//
// batch 32, Adam with the paper's piecewise-constant schedule (0.005, then 0.001 from epoch 50 and
// 0.0005 from epoch 75), random crops of the zero-padded (4 pixels) images inside the graph. The
// paper reports 72.1% test accuracy (its log shows it at the 6th epoch).
//
//   ./build/cifar10 [--epochs 10] [--data DIR] [--csv FILE] [--threads N] [--limit N]
//
// Data: DIR holding the official binary batches (data_batch_{1..5}.bin, test_batch.bin), or the
// two archives of ../shared/data/cifar10 (JPEG train set, lossless PNG test set), which are
// unpacked and decoded once into a cache directory ($SJ_DATA_CACHE, else ~/.cache/symjax/cifar10)
// in the binary-batch layout. Accuracy is reported on the test set the data holds (the lossless
// PNG one for the archives); training on the JPEG copy is slightly harder than on the originals.
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace sj;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    int64_t epochs = 10, batch = 32, limit = 0;
    int threads = 0;
    uint64_t seed = 0;
    std::string data = "../shared/data/cifar10";
    std::string csv;
};

double seconds_since(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

/// Writes a dataset in the CIFAR-10 binary layout (per record: label byte, 3072 pixel bytes).
void write_binary(const data::Dataset& d, const fs::path& path) {
    const fs::path tmp = path.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        const uint8_t* px = d.images.data<uint8_t>();
        const int32_t* lb = d.labels.data<int32_t>();
        for (int64_t i = 0; i < d.size(); ++i) {
            const char label = static_cast<char>(lb[i]);
            out.write(&label, 1);
            out.write(reinterpret_cast<const char*>(px + i * 3072), 3072);
        }
        if (!out) throw IOError(tmp.string() + ": cannot write the decoded-data cache");
    }
    fs::rename(tmp, path);
}

/// The train and test sets from `dir`: binary batches if present, else the shared archives.
std::pair<data::Dataset, data::Dataset> load(const Options& o) {
    const fs::path dir = o.data;
    if (fs::exists(dir / "test_batch.bin")) {
        std::vector<std::string> train;
        for (int i = 1; i <= 5; ++i) train.push_back((dir / ("data_batch_" + std::to_string(i) + ".bin")).string());
        return {data::read_cifar10_binary(train), data::read_cifar10_binary({(dir / "test_batch.bin").string()})};
    }
    const fs::path jpeg = dir / "cifar10-train-test-jpeg.tar.gz", png = dir / "cifar10-test-png.tar.gz";
    SJ_CHECK(fs::exists(jpeg) && fs::exists(png), IOError)
        << dir.string() << ": neither the CIFAR-10 binary batches (data_batch_1.bin ... "
        << "test_batch.bin) nor the archives " << jpeg.filename().string() << " and "
        << png.filename().string() << "; pass --data DIR";
    const char* env = std::getenv("SJ_DATA_CACHE");
    const char* home = std::getenv("HOME");
    const fs::path cache = env ? fs::path(env) : fs::path(home ? home : "/tmp") / ".cache/symjax/cifar10";
    const fs::path train_bin = cache / "train_from_jpeg.bin", test_bin = cache / "test_from_png.bin";
    if (!fs::exists(train_bin) || !fs::exists(test_bin)) {
        std::printf("cifar10: unpacking and decoding the archives into %s (once)\n", cache.c_str());
        std::fflush(stdout);
        const auto t = Clock::now();
        fs::create_directories(cache / "raw");
        for (const fs::path& a : {jpeg, png}) {
            const std::string cmd = "tar -xzf '" + a.string() + "' -C '" + (cache / "raw").string() + "'";
            SJ_CHECK(std::system(cmd.c_str()) == 0, IOError) << a.string() << ": tar failed (" << cmd << ")";
        }
        data::Dataset tr = data::read_image_folder((cache / "raw/train").string(), 3, o.threads);
        SJ_CHECK(tr.classes == data::cifar10_classes(), IOError)
            << (cache / "raw/train").string() << ": the class folders are not CIFAR-10's ten classes";
        data::Dataset te = data::read_image_list((cache / "raw").string(), "metadata.json", 3, o.threads);
        write_binary(tr, train_bin);
        write_binary(te, test_bin);
        fs::remove_all(cache / "raw");
        std::printf("cifar10: decoded %lld + %lld images in %.1f s\n", static_cast<long long>(tr.size()),
                    static_cast<long long>(te.size()), seconds_since(t));
    }
    return {data::read_cifar10_binary({train_bin.string()}), data::read_cifar10_binary({test_bin.string()})};
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) throw InputError("cifar10: " + a + " needs a value");
            return argv[++i];
        };
        auto num = [&]() -> int64_t {
            const std::string v = next();
            try {
                size_t used = 0;
                int64_t x = std::stoll(v, &used);
                if (used == v.size() && x >= 0) return x;
            } catch (const std::exception&) {
            }
            throw InputError("cifar10: " + a + " expects a non-negative integer, got '" + v + "'");
        };
        if (a == "--epochs") o.epochs = num();
        else if (a == "--batch") o.batch = num();
        else if (a == "--limit") o.limit = num();
        else if (a == "--threads") o.threads = parse_thread_count(next(), "cifar10: --threads");
        else if (a == "--seed") o.seed = static_cast<uint64_t>(num());
        else if (a == "--data") o.data = next();
        else if (a == "--csv") o.csv = next();
        else throw InputError("cifar10: unknown option '" + a + "' (options: --epochs --batch --data --csv --threads --seed --limit)");
    }
    if (o.epochs < 1 || o.batch < 1) throw InputError("cifar10: --epochs and --batch must be >= 1");
    return o;
}

int run(const Options& o) {
    if (o.threads > 0) {
        setenv("SJ_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
        setenv("OMP_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
    }
    auto [train, test] = load(o);
    if (o.limit > 0 && o.limit < train.size()) train = train.slice(0, o.limit);
    const std::vector<float> pixel_mean{0.4914f, 0.4822f, 0.4465f}, pixel_std{0.2470f, 0.2435f, 0.2616f};
    data::Loader train_loader(train, {.batch_size = o.batch, .seed = o.seed, .mean = pixel_mean, .std = pixel_std});
    data::Loader test_loader(test, {.batch_size = 500, .shuffle = false, .mean = pixel_mean, .std = pixel_std});
    const int64_t steps_per_epoch = train_loader.batches_per_epoch();

    // The paper's network.
    Scope scope("cifar10");
    nn::Sequential net{nn::RandomCrop({.padding = {{4, 4}}, .seed = o.seed}),
                       nn::Conv2D(3, 32, 3), nn::BatchNorm(32), nn::ReLU(), nn::MaxPool2D({2, 2}),
                       nn::Conv2D(32, 64, 3), nn::BatchNorm(64), nn::ReLU(), nn::MaxPool2D({2, 2}),
                       nn::Flatten(), nn::Dense(64 * 6 * 6, 128), nn::BatchNorm(128), nn::ReLU(),
                       nn::Dense(128, 10)};
    Placeholder x({-1, 3, 32, 32}, f32, "images");
    Placeholder y({-1}, i32, "labels");
    // Piecewise constant per epoch, as the paper's schedule (its boundaries are epochs 50 and 75).
    const double spe = static_cast<double>(steps_per_epoch);
    nn::optim::Adam adam(nn::optim::LearningRate([spe](const Tensor& step) {
        return nn::schedules::piecewise_constant(step, {50 * spe, 75 * spe}, {0.005, 0.001, 0.0005});
    }));
    Tensor logits = net(x, nn::Mode::Train);
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, logits));
    Tensor correct = sum(nn::metrics::correct(y, logits));
    Function train_step = function({x, y}, {loss, correct},
                                   adam.minimize(loss, net.trainable_variables()) + state_updates(loss));
    Tensor eval_logits = net(x, nn::Mode::Eval);
    Function eval_step = function({x, y}, {sum(nn::losses::sparse_softmax_crossentropy_logits(y, eval_logits)),
                                           sum(nn::metrics::correct(y, eval_logits))});

    std::printf("cifar10: %lld train / %lld test images, %lld steps of %lld per epoch\n",
                static_cast<long long>(train.size()), static_cast<long long>(test.size()),
                static_cast<long long>(steps_per_epoch), static_cast<long long>(o.batch));
    std::ofstream csv;
    if (!o.csv.empty()) {
        csv.open(o.csv, std::ios::trunc);
        csv << "epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s\n";
    }
    for (int64_t epoch = 1; epoch <= o.epochs; ++epoch) {
        const auto t = Clock::now();
        double l = 0, c = 0;
        int64_t n = 0;
        int64_t done = 0, next_report = 1;
        for (data::Batch& b : train_loader.epoch(epoch - 1)) {
            std::vector<Array> r = train_step(b.x, b.y);
            const int64_t bn = b.y.shape()[0];
            l += r[0].item<double>() * bn, c += r[1].item<double>(), n += bn;
            if (++done * 5 >= next_report * steps_per_epoch && done < steps_per_epoch) {
                ++next_report; // a progress line every fifth of an epoch
                const double el = seconds_since(t);
                std::printf("  epoch %lld: %lld/%lld batches, loss %.4f, acc %.2f%%, %.0f img/s, ETA %.0f s\n",
                            static_cast<long long>(epoch), static_cast<long long>(done),
                            static_cast<long long>(steps_per_epoch), l / n, 100 * c / n, n / el,
                            el * (steps_per_epoch - done) / done);
                std::fflush(stdout);
            }
        }
        const double secs = seconds_since(t);
        double tl = 0, tc = 0;
        for (data::Batch& b : test_loader.epoch(0)) {
            std::vector<Array> r = eval_step(b.x, b.y);
            tl += r[0].item<double>(), tc += r[1].item<double>();
        }
        const double nt = static_cast<double>(test.size());
        std::printf("epoch %2lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.1f s (%.0f img/s)\n",
                    static_cast<long long>(epoch), l / n, 100 * c / n, tl / nt, 100 * tc / nt, secs, n / secs);
        std::fflush(stdout);
        if (csv.is_open())
            csv << epoch << "," << l / n << "," << c / n << "," << tl / nt << "," << tc / nt << "," << secs
                << "," << n / secs << "\n" << std::flush;
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(parse(argc, argv));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cifar10: error: %s\n", e.what());
        return 1;
    }
}
