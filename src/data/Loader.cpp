// The batch loader: seeded order, augmentation, normalisation, ordered background prefetch.
#include <symjax/Data.h>
#include <symjax/Error.h>
#include <symjax/Interrupt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <thread>

namespace sj::data {

// ---- Dataset ------------------------------------------------------------------------------

Dataset Dataset::take(const std::vector<int64_t>& indices) const {
    SJ_CHECK(images.defined() && labels.defined(), InputError) << "Dataset::take: empty dataset";
    const int64_t n = size();
    Shape shape = images.shape();
    shape[0] = static_cast<int64_t>(indices.size());
    const int64_t sample = images.nbytes() / std::max<int64_t>(n, 1);
    Dataset out;
    out.images = Array(images.dtype(), shape);
    out.labels = Array(DType::I32, {shape[0]});
    out.classes = classes;
    const auto* src = static_cast<const uint8_t*>(images.raw());
    auto* dst = static_cast<uint8_t*>(out.images.raw());
    const int32_t* ly = labels.data<int32_t>();
    int32_t* oy = out.labels.data<int32_t>();
    for (size_t k = 0; k < indices.size(); ++k) {
        const int64_t i = indices[k];
        SJ_CHECK(i >= 0 && i < n, InputError)
            << "Dataset::take: index " << i << " out of range for " << n << " samples";
        std::memcpy(dst + k * sample, src + i * sample, static_cast<size_t>(sample));
        oy[k] = ly[i];
    }
    return out;
}

Dataset Dataset::slice(int64_t begin, int64_t end) const {
    SJ_CHECK(0 <= begin && begin <= end && end <= size(), InputError)
        << "Dataset::slice: [" << begin << ", " << end << ") is not within [0, " << size() << ")";
    std::vector<int64_t> idx(static_cast<size_t>(end - begin));
    for (int64_t i = begin; i < end; ++i) idx[i - begin] = i;
    return take(idx);
}

// ---- order and per-sample randomness ------------------------------------------------------

namespace {

/// A uniform draw in [0, range) from rng without modulo bias: reject the lowest 2^64 mod range
/// values. Unlike std::uniform_int_distribution this is the same on every standard library.
uint64_t bounded(std::mt19937_64& rng, uint64_t range) {
    const uint64_t threshold = (0 - range) % range;
    for (;;) {
        uint64_t r = rng();
        if (r >= threshold) return r % range;
    }
}

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

} // namespace

std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch) {
    std::vector<int64_t> order(static_cast<size_t>(std::max<int64_t>(n, 0)));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
    std::mt19937_64 rng(seed + static_cast<uint64_t>(epoch));
    for (int64_t i = n - 1; i > 0; --i)
        std::swap(order[i], order[bounded(rng, static_cast<uint64_t>(i) + 1)]);
    return order;
}

// ---- Loader -------------------------------------------------------------------------------

struct Loader::Shared {
    Dataset data;
    LoaderOptions opt;
    int64_t n = 0, c = 0, h = 0, w = 0;
    int64_t samples = 0, batches = 0;
    /// lut[c * 256 + v] = (v / 255 - mean[c]) / std[c]
    std::vector<float> lut;
};

Loader::Loader(Dataset data, LoaderOptions opt) {
    auto sh = std::make_shared<Shared>();
    SJ_CHECK(data.images.defined() && data.labels.defined(), InputError)
        << "Loader: the dataset has no images or labels";
    if (data.images.rank() == 3) {
        const Shape& s = data.images.shape();
        data.images = data.images.reshape({s[0], 1, s[1], s[2]});
    }
    SJ_CHECK(data.images.dtype() == DType::U8 && data.images.rank() == 4, InputError)
        << "Loader: images must be u8 [N, C, H, W] (or [N, H, W]), got "
        << data.images.type_str();
    SJ_CHECK(data.labels.dtype() == DType::I32 && data.labels.rank() == 1 &&
                 data.labels.shape()[0] == data.images.shape()[0],
             InputError)
        << "Loader: labels must be i32 [N] with N = " << data.images.shape()[0] << ", got "
        << data.labels.type_str();
    sh->n = data.images.shape()[0];
    sh->c = data.images.shape()[1];
    sh->h = data.images.shape()[2];
    sh->w = data.images.shape()[3];
    SJ_CHECK(sh->n > 0, InputError) << "Loader: the dataset is empty";
    SJ_CHECK(opt.batch_size >= 1, InputError)
        << "Loader: batch_size must be >= 1, got " << opt.batch_size;
    SJ_CHECK(opt.workers >= 0 && opt.workers <= 256, InputError)
        << "Loader: workers must be in 0..256, got " << opt.workers;
    SJ_CHECK(opt.prefetch >= 1, InputError) << "Loader: prefetch must be >= 1, got "
                                            << opt.prefetch;
    SJ_CHECK(opt.augment.crop_padding >= 0, InputError)
        << "Loader: crop_padding must be >= 0, got " << opt.augment.crop_padding;
    for (const auto* v : {&opt.mean, &opt.std})
        SJ_CHECK(v->empty() || v->size() == 1 || static_cast<int64_t>(v->size()) == sh->c,
                 InputError)
            << "Loader: " << (v == &opt.mean ? "mean" : "std") << " has " << v->size()
            << " values for " << sh->c << " channels (give 1 or " << sh->c << ")";
    for (float s : opt.std)
        SJ_CHECK(std::isfinite(s) && s > 0, InputError)
            << "Loader: std values must be finite and > 0, got " << s;
    for (float m : opt.mean)
        SJ_CHECK(std::isfinite(m), InputError) << "Loader: mean values must be finite, got " << m;
    sh->samples = opt.drop_last ? sh->n / opt.batch_size * opt.batch_size : sh->n;
    SJ_CHECK(sh->samples > 0, InputError)
        << "Loader: drop_last with " << sh->n << " samples and batch_size " << opt.batch_size
        << " leaves no batch";
    sh->batches = (sh->samples + opt.batch_size - 1) / opt.batch_size;
    SJ_CHECK(opt.shard_count >= 1 && opt.shard_rank >= 0 && opt.shard_rank < opt.shard_count, InputError)
        << "Loader: shard_rank " << opt.shard_rank << " of shard_count " << opt.shard_count
        << " (need 0 <= shard_rank < shard_count)";
    SJ_CHECK(opt.batch_size % opt.shard_count == 0, InputError)
        << "Loader: batch_size " << opt.batch_size << " (the global batch) does not split into "
        << opt.shard_count << " equal shares";
    SJ_CHECK(sh->samples % opt.batch_size % opt.shard_count == 0, InputError)
        << "Loader: the last batch of " << sh->samples % opt.batch_size << " samples does not split into "
        << opt.shard_count << " equal shares (drop_last, or a dataset size that splits)";
    sh->lut.resize(static_cast<size_t>(sh->c * 256));
    for (int64_t c = 0; c < sh->c; ++c) {
        const double m = opt.mean.empty() ? 0.0 : opt.mean[opt.mean.size() == 1 ? 0 : c];
        const double s = opt.std.empty() ? 1.0 : opt.std[opt.std.size() == 1 ? 0 : c];
        for (int v = 0; v < 256; ++v)
            sh->lut[c * 256 + v] = static_cast<float>((v / 255.0 - m) / s);
    }
    sh->data = std::move(data);
    sh->opt = std::move(opt);
    sh_ = std::move(sh);
}

Loader::~Loader() = default;

int64_t Loader::batches_per_epoch() const { return sh_->batches; }
int64_t Loader::samples_per_epoch() const { return sh_->samples; }
const Dataset& Loader::dataset() const { return sh_->data; }
const LoaderOptions& Loader::options() const { return sh_->opt; }

std::vector<int64_t> Loader::order(int64_t e) const {
    if (sh_->opt.shuffle) return shuffled_order(sh_->n, sh_->opt.seed, e);
    std::vector<int64_t> o(static_cast<size_t>(sh_->n));
    for (int64_t i = 0; i < sh_->n; ++i) o[i] = i;
    return o;
}

// ---- Epoch --------------------------------------------------------------------------------

namespace {
struct Slot {
    Batch batch;
    std::exception_ptr err;
};
} // namespace

struct Epoch::State {
    std::shared_ptr<const Loader::Shared> sh;
    int64_t epoch = 0;
    std::vector<int64_t> order;

    std::mutex mu;
    std::condition_variable can_build, can_take;
    std::map<int64_t, Slot> ready; // finished batches by index, waiting for the consumer
    int64_t next_build = 0;        // next batch index a worker claims
    int64_t consumed = 0;          // batches handed to the consumer
    bool stop = false;
    std::vector<std::thread> workers;

    /// Builds batch i: gather, augment, normalise, then the user's transform. Pure in
    /// (seed, epoch, i), so the result does not depend on which thread builds it.
    Batch build(int64_t i, bool poll = false) const {
        const Loader::Shared& s = *sh;
        const LoaderOptions& o = s.opt;
        // this shard's rows of global batch i (all of them without sharding)
        const int64_t global = std::min(o.batch_size, s.samples - i * o.batch_size);
        const int64_t b = global / o.shard_count;
        const int64_t begin = i * o.batch_size + int64_t(o.shard_rank) * b;
        Batch out;
        out.index = i;
        out.epoch = epoch;
        out.x = Array(DType::F32, {b, s.c, s.h, s.w});
        out.y = Array(DType::I32, {b});
        out.indices.assign(order.begin() + begin, order.begin() + begin + b);
        const uint8_t* img = s.data.images.data<uint8_t>();
        const int32_t* lab = s.data.labels.data<int32_t>();
        float* x = out.x.data<float>();
        int32_t* y = out.y.data<int32_t>();
        const int64_t plane = s.h * s.w, sample = s.c * plane;
        const int64_t pad = o.augment.crop_padding;
        for (int64_t k = 0; k < b; ++k) {
            if (poll && k % 16 == 0 && poll_interrupt())
                SJ_THROW(Interrupted)
                    << "loader: interrupted while building batch " << i << " of epoch " << epoch
                    << "; the next call returns that batch again";
            const int64_t idx = out.indices[k];
            y[k] = lab[idx];
            // Per-sample draws keyed by (seed, epoch, dataset index).
            uint64_t key = splitmix64(splitmix64(o.seed) ^ static_cast<uint64_t>(epoch));
            key = splitmix64(key ^ static_cast<uint64_t>(idx));
            const uint64_t span = 2 * static_cast<uint64_t>(pad) + 1;
            const int64_t dy = static_cast<int64_t>(splitmix64(key + 1) % span);
            const int64_t dx = static_cast<int64_t>(splitmix64(key + 2) % span);
            const bool flip = o.augment.horizontal_flip && (splitmix64(key + 3) >> 63);
            const uint8_t* src = img + idx * sample;
            float* dst = x + k * sample;
            for (int64_t c = 0; c < s.c; ++c) {
                const float* lut = s.lut.data() + c * 256;
                for (int64_t yy = 0; yy < s.h; ++yy) {
                    const int64_t sy = yy + dy - pad;
                    float* row = dst + c * plane + yy * s.w;
                    for (int64_t xx = 0; xx < s.w; ++xx) {
                        // crop, then flip (torchvision's RandomCrop + RandomHorizontalFlip)
                        const int64_t sx = (flip ? s.w - 1 - xx : xx) + dx - pad;
                        const bool inside = sy >= 0 && sy < s.h && sx >= 0 && sx < s.w;
                        row[xx] = lut[inside ? src[c * plane + sy * s.w + sx] : 0];
                    }
                }
            }
        }
        if (o.transform) o.transform(out);
        return out;
    }

    void work() {
        for (;;) {
            int64_t i;
            {
                std::unique_lock<std::mutex> lock(mu);
                can_build.wait(lock, [&] {
                    return stop || next_build >= sh->batches ||
                           next_build < consumed + sh->opt.prefetch;
                });
                if (stop || next_build >= sh->batches) return;
                i = next_build++;
            }
            Slot slot;
            try {
                slot.batch = build(i);
            } catch (...) {
                slot.err = std::current_exception();
            }
            std::lock_guard<std::mutex> lock(mu);
            ready.emplace(i, std::move(slot));
            can_take.notify_all();
        }
    }

    ~State() {
        {
            std::lock_guard<std::mutex> lock(mu);
            stop = true;
        }
        can_build.notify_all();
        for (auto& t : workers) t.join();
    }
};

Epoch Loader::epoch(int64_t e) {
    auto s = std::make_unique<Epoch::State>();
    s->sh = sh_;
    s->epoch = e;
    s->order = order(e);
    const int nw = static_cast<int>(std::min<int64_t>(sh_->opt.workers, sh_->batches));
    Epoch::State* raw = s.get();
    for (int t = 0; t < nw; ++t) s->workers.emplace_back([raw] { raw->work(); });
    return Epoch(std::move(s));
}

Epoch::Epoch(std::unique_ptr<State> s) : s_(std::move(s)) {}
Epoch::~Epoch() = default;
Epoch::Epoch(Epoch&&) noexcept = default;
Epoch& Epoch::operator=(Epoch&&) noexcept = default;

int64_t Epoch::size() const { return s_ ? s_->sh->batches : 0; }

int64_t Epoch::consumed() const {
    if (!s_) return 0;
    std::lock_guard<std::mutex> lock(s_->mu);
    return s_->consumed;
}

std::optional<Batch> Epoch::next() {
    if (!s_) return std::nullopt;
    State& s = *s_;
    if (s.workers.empty()) { // synchronous mode
        int64_t i;
        {
            std::lock_guard<std::mutex> lock(s.mu);
            if (s.consumed >= s.sh->batches) return std::nullopt;
            i = s.consumed++; // a batch whose transform throws is skipped, as with workers
        }
        try {
            return s.build(i, true);
        } catch (const Interrupted&) {
            // nothing lost: the next call builds batch i again
            std::lock_guard<std::mutex> lock(s.mu);
            --s.consumed;
            throw;
        }
    }
    Slot slot;
    {
        std::unique_lock<std::mutex> lock(s.mu);
        if (s.consumed >= s.sh->batches) return std::nullopt;
        // waits in short slices to poll for an interrupt, which takes nothing from the queue
        while (!s.can_take.wait_for(lock, std::chrono::milliseconds(10),
                                    [&] { return s.ready.count(s.consumed) > 0; }))
            if (poll_interrupt())
                SJ_THROW(Interrupted)
                    << "loader: interrupted while waiting for batch " << s.consumed << " of epoch "
                    << s.epoch << "; the next call returns it";
        auto it = s.ready.find(s.consumed);
        slot = std::move(it->second);
        s.ready.erase(it);
        ++s.consumed;
    }
    s.can_build.notify_all();
    if (slot.err) std::rethrow_exception(slot.err);
    return std::move(slot.batch);
}

Epoch::Iterator Epoch::begin() {
    Iterator it;
    it.ep_ = this;
    it.cur_ = next();
    return it;
}

Epoch::Iterator& Epoch::Iterator::operator++() {
    cur_ = ep_->next();
    return *this;
}

} // namespace sj::data
