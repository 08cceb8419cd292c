// sj-train: trains a classifier on Fashion-MNIST end to end with symjax.
//
//   sj-train [--model mlp|cnn|lstm] [--epochs N] [--batch 128] [--lr X] [--seed 0] [--threads N]
//            [--out runs/fmnist-mlp] [--resume] ...        (sj-train --help lists everything)
//   mpirun -np 2 sj-train --model cnn --distributed     data-parallel on 2 processes
//
// One compiled function trains (forward, symbolic gradient, Adam update, all fused and
// JIT-compiled), another evaluates. Per epoch the program evaluates the test set, appends a row
// to <out>/metrics.csv, redraws <out>/metrics.png with gnuplot and writes <out>/checkpoint
// .safetensors atomically; --resume continues from that checkpoint and reproduces the
// uninterrupted run bit for bit (the data order and dropout streams are functions of the step).
#include <symjax/Dist.h>
#include <symjax/nn.h>
#include <symjax/nn/DataParallel.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace sj;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
    std::string model = "mlp";
    // epochs, lr and dropout: these are mlp's and cnn's defaults; lstm has its own
    // (kLstmDefaults), used when the option is not given.
    int64_t epochs = 12;
    int64_t batch = 128;
    double lr = 1e-3;
    std::string schedule = "cosine";
    double dropout = 0.2;
    uint64_t seed = 0;
    int threads = 0;
    std::string data = "/usr/share/datasets/fashion-mnist";
    std::string out = "runs/fmnist-mlp";
    std::string backend;
    bool resume = false;
    bool plot = true;
    int64_t limit = 0, test_limit = 0;
    int64_t stop_after = 0;
    bool profile = false;
    bool flush_denormals = FunctionOptions::default_flush_denormals();
    std::string progress = "auto";
    bool distributed = false;
    bool sync_bn = false;
    bool overlap = true;
};

const char* kUsage = R"(usage: sj-train [options]

Trains a classifier on Fashion-MNIST with symjax and reports per-epoch test accuracy.

  --model NAME      mlp (784-512-512-10, ReLU, dropout), cnn (2 x conv-BN-ReLU-pool,
                    dense 128, dropout) or lstm (the image as 28 rows of 28 pixels,
                    LSTM 128, dense 10 on the final hidden state)       [mlp]
  --epochs N        number of epochs                      [12; lstm: 5]
  --batch N         batch size                                          [128]
  --lr X            peak learning rate of Adam            [0.001; lstm: 0.002]
  --schedule S      cosine (decays to 0 over the run) or constant       [cosine]
  --dropout P       dropout rate of the hidden layers (0 disables; lstm: on the final
                    hidden state)                         [0.2; lstm: 0]
  --seed N          seed of the initialisation, data order and dropout  [0]
  --threads N       worker threads, 1 to 4 per core (default: all cores)
  --data DIR        Fashion-MNIST IDX files (.gz or raw)  [/usr/share/datasets/fashion-mnist]
  --out DIR         metrics.csv, metrics.png, checkpoint.safetensors    [runs/fmnist-<model>]
  --resume          continue from <out>/checkpoint.safetensors
  --stop-after N    stop after epoch N, as if interrupted (resume later with --resume)
  --backend NAME    cpu, reference or cuda (docs/gpu.md)                [cpu]
  --no-plot         do not run gnuplot
  --profile         print the training step's per-kernel time profile at the end
  --flush-denormals floats below the normal range count as zero in the steps (faster once
                    gradients become tiny; docs/functions.md)  [SJ_FLUSH_DENORMALS, else off]
  --progress MODE   auto, bar or lines (bar needs a terminal)           [auto]
  --distributed     data-parallel over the processes of `mpirun -np K`: --batch is the global
                    batch (a multiple of K), each process trains on its share, gradients are
                    averaged; rank 0 evaluates and writes the metrics, plot and checkpoint;
                    the default --threads is the cores / the processes on this machine
  --sync-bn         with --distributed: batch-norm statistics over the global batch
  --no-overlap      with --distributed: wait at each gradient bucket's all_reduce instead of
                    overlapping it with the rest of the backward pass (for comparison)
  --limit N         train on the first N images only (smoke tests)
  --test-limit N    evaluate on the first N test images only
  -h, --help        this text
)";

/// --model lstm's defaults where they differ from the others' (docs/sj-train.md, "Numbers").
struct LstmDefaults {
    int64_t epochs;
    double lr, dropout;
};
constexpr LstmDefaults kLstmDefaults{5, 2e-3, 0.0};

struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

template <class T> T parse_number(const std::string& flag, const std::string& v) {
    std::istringstream in(v);
    T x{};
    in >> x;
    if (in.fail() || !in.eof())
        throw UsageError("sj-train: " + flag + " expects a number, got '" + v + "'");
    return x;
}

/// --threads N: a whole number >= 1, lowered to sj::max_threads() with a warning.
int parse_threads(const std::string& v) {
    try {
        return parse_thread_count(v, "sj-train: --threads");
    } catch (const InputError& e) {
        throw UsageError(e.what());
    }
}

Options parse_args(int argc, char** argv) {
    Options o;
    bool out_given = false;
    std::set<std::string> given; // the options on the command line
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        given.insert(a);
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw UsageError("sj-train: " + a + " needs a value");
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            std::exit(0);
        } else if (a == "--model") o.model = value();
        else if (a == "--epochs") o.epochs = parse_number<int64_t>(a, value());
        else if (a == "--batch") o.batch = parse_number<int64_t>(a, value());
        else if (a == "--lr") o.lr = parse_number<double>(a, value());
        else if (a == "--schedule") o.schedule = value();
        else if (a == "--dropout") o.dropout = parse_number<double>(a, value());
        else if (a == "--seed") o.seed = parse_number<uint64_t>(a, value());
        else if (a == "--threads") o.threads = parse_threads(value());
        else if (a == "--data") o.data = value();
        else if (a == "--out") o.out = value(), out_given = true;
        else if (a == "--backend") o.backend = value();
        else if (a == "--resume") o.resume = true;
        else if (a == "--stop-after") o.stop_after = parse_number<int64_t>(a, value());
        else if (a == "--no-plot") o.plot = false;
        else if (a == "--profile") o.profile = true;
        else if (a == "--flush-denormals")
            o.flush_denormals = true;
        else if (a == "--distributed") o.distributed = true;
        else if (a == "--sync-bn") o.sync_bn = true;
        else if (a == "--no-overlap")
            o.overlap = false;
        else if (a == "--progress") o.progress = value();
        else if (a == "--limit") o.limit = parse_number<int64_t>(a, value());
        else if (a == "--test-limit") o.test_limit = parse_number<int64_t>(a, value());
        else throw UsageError("sj-train: unknown option '" + a + "' (see --help)");
    }
    if (!out_given) o.out = "runs/fmnist-" + o.model;
    if (o.model != "mlp" && o.model != "cnn" && o.model != "lstm")
        throw UsageError("sj-train: --model must be mlp, cnn or lstm, got '" + o.model + "'");
    if (o.model == "lstm") {
        if (!given.count("--epochs"))
            o.epochs = kLstmDefaults.epochs;
        if (!given.count("--lr"))
            o.lr = kLstmDefaults.lr;
        if (!given.count("--dropout"))
            o.dropout = kLstmDefaults.dropout;
    }
    if (o.epochs < 1) throw UsageError("sj-train: --epochs must be >= 1");
    if (o.batch < 1) throw UsageError("sj-train: --batch must be >= 1");
    if (!(o.lr > 0) || !std::isfinite(o.lr)) throw UsageError("sj-train: --lr must be > 0");
    if (!(o.dropout >= 0 && o.dropout < 1)) throw UsageError("sj-train: --dropout must be in [0, 1)");
    if (o.schedule != "cosine" && o.schedule != "constant")
        throw UsageError("sj-train: --schedule must be cosine or constant");
    if (o.progress != "auto" && o.progress != "bar" && o.progress != "lines")
        throw UsageError("sj-train: --progress must be auto, bar or lines");
    if (o.stop_after < 0) throw UsageError("sj-train: --stop-after must be >= 0");
    if (o.limit < 0 || o.test_limit < 0) throw UsageError("sj-train: limits must be >= 0");
    return o;
}

// ---------------------------------------------------------------------------------------------
// Progress: a redrawn bar on a terminal, a plain line every ~20% of the epoch otherwise.

std::string hms(double s) {
    const auto t = static_cast<int64_t>(std::max(0.0, std::round(s)));
    char buf[32];
    if (t >= 3600)
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                      static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
    else
        std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(t / 60),
                      static_cast<long long>(t % 60));
    return buf;
}

class Progress {
public:
    Progress(bool bar, int64_t epochs) : bar_(bar), epochs_(epochs) {}

    void begin(int64_t epoch, int64_t batches) {
        epoch_ = epoch, batches_ = batches, next_line_ = 1;
        start_ = last_draw_ = Clock::now();
    }

    void update(int64_t done, int64_t images, double loss, double acc) {
        const auto now = Clock::now();
        const double el = std::chrono::duration<double>(now - start_).count();
        const double ips = el > 0 ? images / el : 0;
        const double eta = done > 0 ? el * (batches_ - done) / done : 0;
        if (bar_) {
            if (done < batches_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
            last_draw_ = now;
            constexpr int kWidth = 24;
            const int fill = static_cast<int>(kWidth * done / std::max<int64_t>(batches_, 1));
            std::string b(static_cast<size_t>(fill), '#');
            b.resize(kWidth, '.');
            std::fprintf(stdout, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld  loss %.4f  acc %5.1f%%  "
                         "%6.0f img/s  ETA %s",
                         static_cast<long long>(epoch_), static_cast<long long>(epochs_), b.c_str(),
                         static_cast<long long>(done), static_cast<long long>(batches_), loss,
                         100 * acc, ips, hms(eta).c_str());
            std::fflush(stdout);
        } else if (done * 5 >= next_line_ * batches_ && done < batches_) {
            while (done * 5 >= next_line_ * batches_) ++next_line_;
            std::printf("epoch %lld/%lld  batch %lld/%lld  loss %.4f  acc %.1f%%  %.0f img/s  ETA %s\n",
                        static_cast<long long>(epoch_), static_cast<long long>(epochs_),
                        static_cast<long long>(done), static_cast<long long>(batches_), loss,
                        100 * acc, ips, hms(eta).c_str());
            std::fflush(stdout);
        }
    }

    void end() {
        if (bar_) std::fputs("\r\033[K", stdout);
    }

private:
    bool bar_;
    int64_t epochs_, epoch_ = 0, batches_ = 0, next_line_ = 1;
    Clock::time_point start_, last_draw_;
};

// ---------------------------------------------------------------------------------------------
// Models

/// Reads each [N, 1, 28, 28] image as a sequence of 28 rows of 28 pixels through an LSTM and
/// returns its final hidden state, [N, hidden] (the output after the last row).
class RowLstm : public nn::Module {
public:
    explicit RowLstm(int64_t hidden)
        : lstm_(std::make_shared<nn::LSTM>(28, hidden, nn::RecurrentOptions{.batch_first = true})) {
        add_child(lstm_);
    }
    Tensor forward(const Tensor& x, nn::Mode) const override {
        return lstm_->run(reshape(x, {-1, 28, 28})).h[0];
    }

private:
    std::shared_ptr<nn::LSTM> lstm_;
};

nn::Sequential build_model(const Options& o) {
    Scope scope("model");
    if (o.model == "lstm") {
        // 28 steps of 28 pixels, LSTM 128, dense 10 on the final hidden state (82,186 parameters).
        nn::Sequential net{RowLstm(128)};
        if (o.dropout > 0)
            net.add(nn::Dropout(o.dropout, {.seed = o.seed}));
        net.add(nn::Dense(128, 10));
        return net;
    }
    std::optional<uint64_t> dseed = o.seed;
    if (o.model == "mlp") {
        nn::Sequential net{nn::Flatten(), nn::Dense(784, 512), nn::ReLU()};
        if (o.dropout > 0) net.add(nn::Dropout(o.dropout, {.seed = dseed}));
        net.add(nn::Dense(512, 512)).add(nn::ReLU());
        if (o.dropout > 0) net.add(nn::Dropout(o.dropout, {.seed = *dseed + 1}));
        net.add(nn::Dense(512, 10));
        return net;
    }
    // cnn: two conv-BN-ReLU-pool stages, then a dense layer with dropout (~420k parameters).
    nn::Sequential net{nn::Conv2D(1, 32, 3, {.padding = "SAME", .bias = false}),
                       nn::BatchNorm(32, {.momentum = 0.9, .sync = o.sync_bn}),
                       nn::ReLU(),
                       nn::MaxPool2D({2, 2}),
                       nn::Conv2D(32, 64, 3, {.padding = "SAME", .bias = false}),
                       nn::BatchNorm(64, {.momentum = 0.9, .sync = o.sync_bn}),
                       nn::ReLU(),
                       nn::MaxPool2D({2, 2}),
                       nn::Flatten(),
                       nn::Dense(64 * 7 * 7, 128),
                       nn::ReLU()};
    if (o.dropout > 0) net.add(nn::Dropout(o.dropout, {.seed = dseed}));
    net.add(nn::Dense(128, 10));
    return net;
}

// ---------------------------------------------------------------------------------------------
// Metrics file and plot

struct EpochRow {
    int64_t epoch = 0;
    double train_loss = 0, train_acc = 0, test_loss = 0, test_acc = 0, seconds = 0, ips = 0, lr = 0;
};

const char* kCsvHeader = "epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s,lr";

// Note [Metrics and checkpoint agree]
// Each epoch writes its metrics.csv row first and its checkpoint second. A run killed between
// the two leaves a row for an epoch the checkpoint does not hold; --resume drops it and trains
// that epoch again, which writes the same row. (The other order lost rows: a run killed after
// the checkpoint but before the row resumed after that epoch, and its row was never written.)

/// The rows of an earlier run for epochs 1..`upto` (used by --resume; later rows belong to
/// epochs the checkpoint does not hold). Warns about missing epochs.
std::vector<std::string> read_csv_rows(const fs::path& p, int64_t upto) {
    std::vector<std::string> rows;
    std::ifstream in(p);
    std::string line;
    int64_t line_no = 0, expect = 1;
    while (std::getline(in, line)) {
        ++line_no;
        if (line.empty() || line.rfind("epoch", 0) == 0) continue;
        int64_t epoch = 0;
        const std::string first = line.substr(0, line.find(','));
        auto [end, ec] = std::from_chars(first.data(), first.data() + first.size(), epoch);
        SJ_CHECK(ec == std::errc() && end == first.data() + first.size() && epoch >= 1, IOError)
            << p.string() << ": line " << line_no << ": expected a row starting with an epoch "
            << "number >= 1, got '" << line << "'";
        if (epoch > upto) continue;
        SJ_CHECK(epoch >= expect, IOError)
            << p.string() << ": line " << line_no << ": epoch " << epoch << " after epoch "
            << expect - 1 << " (rows must be in order, one per epoch)";
        if (epoch > expect)
            std::fprintf(stderr, "sj-train: warning: %s has no rows for epochs %lld..%lld\n",
                         p.c_str(), static_cast<long long>(expect),
                         static_cast<long long>(epoch - 1));
        rows.push_back(line);
        expect = epoch + 1;
    }
    if (expect <= upto)
        std::fprintf(stderr, "sj-train: warning: %s has no rows for epochs %lld..%lld (the "
                     "checkpoint holds epoch %lld)\n",
                     p.c_str(), static_cast<long long>(expect), static_cast<long long>(upto),
                     static_cast<long long>(upto));
    return rows;
}

void write_csv(const fs::path& p, const std::vector<std::string>& rows) {
    const fs::path tmp = p.string() + ".tmp";
    {
        std::ofstream out(tmp, std::ios::trunc);
        out << kCsvHeader << "\n";
        for (const auto& r : rows) out << r << "\n";
        if (!out) throw IOError(tmp.string() + ": cannot write the metrics file");
    }
    fs::rename(tmp, p);
}

std::string csv_row(const EpochRow& r) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%lld,%.6f,%.6f,%.6f,%.6f,%.3f,%.1f,%.6g",
                  static_cast<long long>(r.epoch), r.train_loss, r.train_acc, r.test_loss,
                  r.test_acc, r.seconds, r.ips, r.lr);
    return buf;
}

/// Draws loss and accuracy per epoch with gnuplot; a missing gnuplot is a warning, not an error.
void plot(const fs::path& dir) {
    const fs::path script = dir / "metrics.gp";
    {
        std::ofstream gp(script);
        gp << "set terminal pngcairo size 1000,420 noenhanced\n"
              "set output '" << (dir / "metrics.png").string() << "'\n"
              "set datafile separator ','\n"
              "set key autotitle columnhead\n"
              "set multiplot layout 1,2 title 'sj-train: Fashion-MNIST'\n"
              "set xlabel 'epoch'; set grid\n"
              "set title 'loss'\n"
              "plot '" << (dir / "metrics.csv").string() << "' using 1:2 with linespoints title 'train', "
              "'' using 1:4 with linespoints title 'test'\n"
              "set title 'accuracy'; set format y '%.0f%%'; set key bottom right\n"
              "plot '" << (dir / "metrics.csv").string() << "' using 1:($3*100) with linespoints title 'train', "
              "'' using 1:($5*100) with linespoints title 'test'\n"
              "unset multiplot\n";
    }
    const std::string cmd = "gnuplot '" + script.string() + "' 2>'" + (dir / "gnuplot.log").string() + "'";
    int rc = std::system(cmd.c_str());
    if (rc != 0) {
        // pngcairo is missing from gnuplot-nox builds without cairo: retry with the gd png driver.
        std::string alt = script.string() + ".png";
        std::ifstream in(script);
        std::stringstream s;
        s << in.rdbuf();
        std::string text = s.str();
        text.replace(0, text.find('\n'), "set terminal png size 1000,420 noenhanced");
        std::ofstream(script) << text;
        rc = std::system(cmd.c_str());
    }
    if (rc != 0)
        std::fprintf(stderr, "sj-train: warning: gnuplot failed (see %s); metrics.csv is complete\n",
                     (dir / "gnuplot.log").c_str());
}

// ---------------------------------------------------------------------------------------------

volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_sigint(int) { g_stop = 1; }

int run(Options o) {
    // --distributed without --threads: the processes of one machine share its cores
    if (o.distributed && o.threads == 0 && !std::getenv("SJ_NUM_THREADS"))
        o.threads = std::max(1, int(std::thread::hardware_concurrency()) /
                                    std::max(1, dist::local_size()));
    if (o.threads > 0) {
        // Read by symjax's thread pool and by oneDNN's OpenMP runtime when they start.
        setenv("SJ_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
        setenv("OMP_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
    }
    const fs::path out = o.out;
    const fs::path ckpt = out / "checkpoint.safetensors";
    // --distributed: every process runs this program; rank 0 alone evaluates and writes files
    const int world = o.distributed ? dist::size() : 1, rank = o.distributed ? dist::rank() : 0;
    const bool root = rank == 0;
    if (o.batch % world != 0)
        throw UsageError("sj-train: --batch " + std::to_string(o.batch) +
                         " (the global batch) must be a multiple of the " +
                         std::to_string(world) + " processes");
    if (!root)
        o.plot = false;
    if (root)
        fs::create_directories(out);

    // Data: u8 images [N, 1, 28, 28], converted to normalised f32 batches by the loader.
    const auto t_load = Clock::now();
    if (!fs::exists(o.data))
        throw IOError(o.data + ": no such directory; install Debian's dataset-fashion-mnist "
                               "(apt-get install dataset-fashion-mnist) or pass --data DIR");
    data::Dataset train = data::load_mnist_like(o.data, true, data::fashion_mnist_classes());
    data::Dataset test = data::load_mnist_like(o.data, false, data::fashion_mnist_classes());
    if (o.limit > 0 && o.limit < train.size()) train = train.slice(0, o.limit);
    if (o.test_limit > 0 && o.test_limit < test.size()) test = test.slice(0, o.test_limit);
    // Per-channel normalisation with the training set's statistics (pixels in [0, 1]).
    const std::vector<float> pixel_mean{0.2860f}, pixel_std{0.3530f};
    // --distributed: every process's loader has the same seed and builds only its share of
    // each global batch (LoaderOptions::shard_rank)
    data::Loader train_loader(train, {.batch_size = o.batch, .shuffle = true, .seed = o.seed,
                                      .mean = pixel_mean, .std = pixel_std,
                                      .shard_rank = rank, .shard_count = world});
    data::Loader test_loader(test, {.batch_size = 1000, .shuffle = false, .mean = pixel_mean,
                                    .std = pixel_std});
    const int64_t steps_per_epoch = train_loader.batches_per_epoch();
    const int64_t total_steps = steps_per_epoch * o.epochs;
    if (root)
        std::printf(
            "sj-train: Fashion-MNIST %lld train / %lld test images (%.2f s to load), model %s, "
            "%lld epochs of %lld batches of %lld\n",
            static_cast<long long>(train.size()), static_cast<long long>(test.size()),
            std::chrono::duration<double>(Clock::now() - t_load).count(), o.model.c_str(),
            static_cast<long long>(o.epochs), static_cast<long long>(steps_per_epoch),
            static_cast<long long>(o.batch));
    if (root && o.distributed)
        std::printf("sj-train: data-parallel over %d processes (MPI: %s), %lld images per process "
                    "per step\n",
                    world, dist::using_mpi() ? "yes" : "no",
                    static_cast<long long>(o.batch / world));

    // Graph: one training function (loss, number correct; Adam and state updates), one eval.
    const auto t_build = Clock::now();
    nn::Sequential net = build_model(o);
    Placeholder x({-1, 1, 28, 28}, f32, "images");
    Placeholder y({-1}, i32, "labels");
    const double peak = o.lr;
    const bool cosine = o.schedule == "cosine";
    nn::optim::Adam adam(cosine ? nn::optim::LearningRate([=](const Tensor& step) {
        return nn::schedules::cosine_decay(step, peak, static_cast<double>(total_steps));
    })
                            : nn::optim::LearningRate(peak));
    Tensor logits = net(x, nn::Mode::Train);
    Tensor loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, logits));
    Tensor correct = sum(nn::metrics::correct(y, logits));
    // --distributed: gradients averaged over the processes, parameters broadcast from rank 0
    nn::DataParallel dp(adam);
    Updates updates = (o.distributed ? dp.minimize(loss, net.trainable_variables())
                                     : adam.minimize(loss, net.trainable_variables())) +
                      state_updates(loss);

    Tensor eval_logits = net(x, nn::Mode::Eval);
    Tensor eval_loss = sum(nn::losses::sparse_softmax_crossentropy_logits(y, eval_logits));
    Tensor eval_correct = sum(nn::metrics::correct(y, eval_logits));

    // Resume: the checkpoint holds every variable (model and optimizer state) and the epoch.
    int64_t start_epoch = 1;
    std::vector<std::string> rows;
    if (o.resume) {
        SJ_CHECK(fs::exists(ckpt), IOError)
            << ckpt.string() << ": no checkpoint to resume from (train without --resume first)";
        std::map<std::string, std::string> meta;
        read_safetensors(ckpt.string(), &meta);
        for (const char* k : {"model", "batch", "seed", "train_images", "epochs_planned"})
            SJ_CHECK(meta.count(k), IOError) << ckpt.string() << ": metadata lacks '" << k << "'";
        auto mismatch = [&](const char* k, const std::string& now) {
            SJ_CHECK(meta.at(k) == now, InputError)
                << "--resume: the checkpoint was trained with " << k << " " << meta.at(k)
                << ", this run asks for " << now << "; use the same settings or another --out";
        };
        mismatch("model", o.model);
        mismatch("batch", std::to_string(o.batch));
        mismatch("seed", std::to_string(o.seed));
        mismatch("train_images", std::to_string(train.size()));
        mismatch("epochs_planned", std::to_string(o.epochs));
        load_variables(ckpt.string());
        start_epoch = std::stoll(meta.at("epoch")) + 1;
        // Rows and checkpoint agree from here on (Note [Metrics and checkpoint agree]).
        rows = read_csv_rows(out / "metrics.csv", start_epoch - 1);
        if (root)
            write_csv(out / "metrics.csv", rows);
        if (root)
            std::printf("sj-train: resumed from %s after epoch %lld\n", ckpt.c_str(),
                        static_cast<long long>(start_epoch - 1));
        if (start_epoch > o.epochs) {
            if (root)
                std::printf("sj-train: the checkpoint already finished all %lld epochs\n",
                            static_cast<long long>(o.epochs));
            return 0;
        }
    }

    FunctionOptions fo;
    if (!o.backend.empty()) fo.backend = o.backend;
    fo.flush_denormals = o.flush_denormals;
    // Dropout draws from the function's call counter: starting it at the number of steps done
    // makes a resumed run draw the same masks as an uninterrupted one.
    fo.rng_counter = static_cast<uint64_t>((start_epoch - 1) * steps_per_epoch);
    FunctionOptions train_fo = fo;
    train_fo.profile = o.profile;
    train_fo.overlap_collectives = o.overlap;
    Function train_step = function({x, y}, {loss, correct}, updates, train_fo);
    Function eval_step = function({x, y}, {eval_loss, eval_correct}, {}, fo);
    if (root)
        std::printf("sj-train: graph built and planned in %.2f s (%zu kernels and %zu library "
                    "calls per training step)\n",
                    std::chrono::duration<double>(Clock::now() - t_build).count(),
                    train_step.stats().kernels, train_step.stats().library_calls);

    const bool tty = isatty(fileno(stdout)) && std::getenv("TERM") && std::string(std::getenv("TERM")) != "dumb";
    Progress progress(root && (o.progress == "bar" || (o.progress == "auto" && tty)), o.epochs);
    std::signal(SIGINT, on_sigint);

    double best = 0, train_seconds = 0;
    int64_t best_epoch = 0, images_seen = 0, train_calls = 0;
    double comm_wait_ms = 0; // --distributed: time the training step waited for collectives
    EpochRow last;
    for (int64_t epoch = start_epoch; epoch <= o.epochs; ++epoch) {
        // Train.
        const auto t0 = Clock::now();
        double loss_sum = 0, correct_sum = 0;
        int64_t seen = 0, done = 0;
        progress.begin(epoch, steps_per_epoch);
        for (data::Batch& b : train_loader.epoch(epoch - 1)) {
            std::vector<Array> r = train_step(b.x, b.y);
            comm_wait_ms += train_step.stats().collective_wait_ms;
            ++train_calls;
            const int64_t n = b.y.shape()[0];
            loss_sum += r[0].item<double>() * static_cast<double>(n);
            correct_sum += r[1].item<double>();
            seen += n, ++done;
            SJ_CHECK(std::isfinite(loss_sum), InputError)
                << "training diverged at epoch " << epoch << ", batch " << done
                << " (loss is not finite); try a smaller --lr";
            if (root) // the images of every process; the loss and accuracy of this one
                progress.update(done, seen * world, loss_sum / seen, correct_sum / seen);
            if (g_stop) break;
        }
        progress.end();
        if (g_stop) {
            std::printf("sj-train: interrupted during epoch %lld; the last checkpoint (epoch %lld) "
                        "is intact: rerun with --resume\n",
                        static_cast<long long>(epoch), static_cast<long long>(epoch - 1));
            return 130;
        }
        if (o.distributed) { // the epoch's metrics over every process's share
            Array totals = dist::all_reduce(
                Array(std::vector<double>{loss_sum, correct_sum, double(seen)}, {3}));
            loss_sum = totals.at(0), correct_sum = totals.at(1), seen = int64_t(totals.at(2));
        }
        const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
        train_seconds += secs, images_seen += seen;
        if (!root) { // rank 0 evaluates, prints and writes; the others stop where it stops
            if (epoch == o.stop_after && epoch < o.epochs)
                return 0;
            continue;
        }

        // Evaluate.
        double test_loss = 0, test_correct = 0;
        for (data::Batch& b : test_loader.epoch(0)) {
            std::vector<Array> r = eval_step(b.x, b.y);
            test_loss += r[0].item<double>();
            test_correct += r[1].item<double>();
        }
        EpochRow row{epoch,
                     loss_sum / seen,
                     correct_sum / seen,
                     test_loss / test.size(),
                     test_correct / test.size(),
                     secs,
                     seen / secs,
                     cosine ? 0.5 * peak * (1 + std::cos(M_PI * epoch * steps_per_epoch / total_steps))
                            : peak};
        last = row;
        if (row.test_acc > best) best = row.test_acc, best_epoch = epoch;
        std::printf("epoch %2lld/%lld  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  "
                    "%.1f s  %.0f img/s\n",
                    static_cast<long long>(epoch), static_cast<long long>(o.epochs), row.train_loss,
                    100 * row.train_acc, row.test_loss, 100 * row.test_acc, secs, row.ips);
        std::fflush(stdout);

        // The row first, then the checkpoint (Note [Metrics and checkpoint agree]).
        rows.push_back(csv_row(row));
        write_csv(out / "metrics.csv", rows);
        save_variables(ckpt.string(), "*",
                       {{"epoch", std::to_string(epoch)},
                        {"model", o.model},
                        {"batch", std::to_string(o.batch)},
                        {"seed", std::to_string(o.seed)},
                        {"train_images", std::to_string(train.size())},
                        {"epochs_planned", std::to_string(o.epochs)},
                        {"test_accuracy", std::to_string(row.test_acc)}});
        if (o.plot) plot(out);
        if (epoch == o.stop_after && epoch < o.epochs) {
            std::printf("sj-train: stopped after epoch %lld as asked; continue with --resume\n",
                        static_cast<long long>(epoch));
            return 0;
        }
    }
    if (!root)
        return 0;
    if (o.profile) std::printf("%s\n", train_step.profile_report().c_str());
    if (o.distributed && world > 1)
        std::printf("sj-train: waited %.3f ms per step for the gradient all_reduce (%s)\n",
                    comm_wait_ms / double(std::max<int64_t>(train_calls, 1)),
                    o.overlap ? "what the backward pass did not hide" : "--no-overlap");
    std::printf("sj-train: done: test accuracy %.2f%% (best %.2f%% at epoch %lld), %.1f s of "
                "training at %.0f img/s; wrote %s/{metrics.csv,%scheckpoint.safetensors}\n",
                100 * last.test_acc, 100 * best, static_cast<long long>(best_epoch), train_seconds,
                images_seen / std::max(train_seconds, 1e-9), out.c_str(),
                o.plot ? "metrics.png," : "");
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(parse_args(argc, argv));
    } catch (const UsageError& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "sj-train: error: %s\n", e.what());
        return 1;
    }
}
