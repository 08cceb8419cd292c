// Datasets and the training data loader: IDX, CIFAR-10 binary and image-folder readers, and a
// seeded, prefetching, augmenting batch loader.
//
//   auto train = sj::data::load_mnist_like("/usr/share/datasets/fashion-mnist", true);
//   sj::data::LoaderOptions o;
//   o.batch_size = 128;
//   o.seed = 42;
//   o.mean = {0.286f};
//   o.std = {0.353f};
//   sj::data::Loader loader(train, o);
//   for (int64_t e = 0; e < 10; ++e)
//       for (auto& batch : loader.epoch(e))   // batch.x: f32 [B, 1, 28, 28], batch.y: i32 [B]
//           step(batch.x, batch.y);
//
// Every reader throws sj::IOError naming the file, the byte offset and what was wrong; none of
// them aborts. See docs/data.md.
#pragma once

#include <symjax/Array.h>
#include <symjax/Interpolation.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sj::data {

/// Labelled images held in memory.
struct Dataset {
    /// u8 [N, C, H, W] (C = 1 for grayscale, 3 for RGB).
    Array images;
    /// i32 [N], each in [0, classes.size()).
    Array labels;
    /// Class names in label order.
    std::vector<std::string> classes;

    int64_t size() const { return images.defined() ? images.shape()[0] : 0; }
    int64_t channels() const { return images.shape()[1]; }
    int64_t height() const { return images.shape()[2]; }
    int64_t width() const { return images.shape()[3]; }
    /// Samples [begin, end) as a new dataset (copies); e.g. a validation split.
    Dataset slice(int64_t begin, int64_t end) const;
    /// The samples at `indices`, in that order (copies).
    Dataset take(const std::vector<int64_t>& indices) const;
};

/// The class names of Fashion-MNIST, in label order.
const std::vector<std::string>& fashion_mnist_classes();
/// The class names of CIFAR-10, in label order.
const std::vector<std::string>& cifar10_classes();

/// Reads an IDX file (the MNIST format), raw or gzip-compressed (detected by its magic bytes).
/// Element types: u8 -> u8; i8, i16, i32 -> i32; f32 -> f32; f64 -> f64. The shape is the one in
/// the file's header. Rejects bad magic, unknown types, truncated or trailing data.
Array read_idx(const std::string& path);

/// Pairs `<prefix>-images-idx3-ubyte[.gz]` with `<prefix>-labels-idx1-ubyte[.gz]` in `dir`,
/// prefix "train" or "t10k". Images come out u8 [N, 1, H, W], labels i32 [N]. `classes` names
/// the labels; empty means "0", "1", ... up to the largest label.
Dataset load_mnist_like(const std::string& dir, bool train,
                        const std::vector<std::string>& classes = {});

/// Reads CIFAR-10 binary batches (records of 1 label byte then 1024 R, 1024 G, 1024 B bytes) and
/// concatenates them in order: images u8 [N, 3, 32, 32], labels i32 [N] (each < 10).
Dataset read_cifar10_binary(const std::vector<std::string>& paths);

/// Decodes one PNG or JPEG file (detected by its magic bytes) to u8 [C, H, W]. `channels` 0
/// keeps the file's own (1 for gray, 3 for colour; alpha is dropped, 16-bit is reduced to 8-bit);
/// 1 or 3 converts.
Array read_image(const std::string& path, int channels = 0);

/// Reads `root/<class>/<image>.{png,jpg,jpeg}`: classes are the subfolders sorted by name (label
/// = position), images sorted by file name within each class. All images must have the same
/// height and width. `channels` 0 takes the first image's channel count and converts the others
/// to it; 1 or 3 forces. Decoding runs on `threads` threads (0: hardware concurrency; at most
/// max_threads()).
Dataset read_image_folder(const std::string& root, int channels = 0, int threads = 0);

/// Reads a list of images described by a JSON file at `root/metadata`:
/// `{"classes": [names...], "images": [{"image_path": "test_images/00000.png", "label_id": 3},
/// ...]}` (paths relative to root), in the order of the "images" array. This is the layout of the
/// lossless CIFAR-10 PNG test set.
Dataset read_image_list(const std::string& root, const std::string& metadata = "metadata.json",
                        int channels = 0, int threads = 0);

/// Augmentation applied to each training sample on the loader's worker threads.
struct Augment {
    /// Random crop of the original size from the image padded by this many black pixels (value 0
    /// before normalisation, as torchvision's RandomCrop) on each side; 0 disables.
    int crop_padding = 0;
    /// Mirror left-right with probability 1/2.
    bool horizontal_flip = false;
};

/// One batch. `x` is f32 [B, C, H, W]: pixels scaled to [0, 1], then (v - mean[c]) / std[c].
struct Batch {
    Array x;
    /// i32 [B].
    Array y;
    /// Dataset indices of the samples, in batch order.
    std::vector<int64_t> indices;
    /// Position of this batch in its epoch (0-based) and the epoch number.
    int64_t index = 0;
    int64_t epoch = 0;
};

/// Options of a Loader.
struct LoaderOptions {
    int64_t batch_size = 128;
    /// Visit samples in a new random order each epoch (else in dataset order).
    bool shuffle = true;
    /// Drop the last batch when it is smaller than batch_size.
    bool drop_last = false;
    /// Seeds the order (std::mt19937_64 seeded with seed + epoch) and the augmentation.
    uint64_t seed = 0;
    /// Background threads building batches; 0 builds them on the consumer's thread.
    int workers = 1;
    /// Batches built ahead of the consumer (bound of the queue), at least 1.
    int prefetch = 4;
    Augment augment;
    /// Per-channel mean and standard deviation, in [0, 1] pixel units; one value per channel or
    /// one for all; empty means 0 and 1 (only the scaling to [0, 1]).
    std::vector<float> mean, std;
    /// Data-parallel sharding: of each global batch of batch_size samples (the same on every
    /// rank, with the same seed), this loader builds only rows [shard_rank * b, (shard_rank + 1)
    /// * b), b = batch_size / shard_count: what nn::shard_batch would keep of the whole batch,
    /// bit for bit (augmentation draws are keyed by the sample), without building the rest.
    /// Every global batch must split into equal shares: batch_size a multiple of shard_count,
    /// and the last batch too unless drop_last.
    int shard_rank = 0, shard_count = 1;
    /// Optional hook run on each finished batch on the worker thread (extra augmentation, ...).
    /// An exception it throws is rethrown to the consumer at that batch.
    std::function<void(Batch&)> transform;
};

class Loader;

/// One pass over the data. Iterate with a range-for, or call next() until it returns nullopt.
/// Batches come out in order whatever the number of workers, and the same (seed, epoch) gives
/// the same batches bit for bit. Destroying an Epoch (also mid-way) stops and joins its workers.
class Epoch {
public:
    ~Epoch();
    Epoch(Epoch&&) noexcept;
    Epoch& operator=(Epoch&&) noexcept;
    Epoch(const Epoch&) = delete;
    Epoch& operator=(const Epoch&) = delete;

    /// The next batch, or nullopt at the end of the epoch. Rethrows a worker's exception.
    std::optional<Batch> next();
    /// Batches in this epoch.
    int64_t size() const;
    /// Batches handed out so far.
    int64_t consumed() const;

    /// Input iterator for range-for; the batch it points at lives until the next increment.
    class Iterator {
    public:
        Batch& operator*() { return *cur_; }
        Batch* operator->() { return &*cur_; }
        Iterator& operator++();
        bool operator!=(const Iterator& o) const { return cur_.has_value() != o.cur_.has_value(); }
        bool operator==(const Iterator& o) const { return !(*this != o); }

    private:
        friend class Epoch;
        Epoch* ep_ = nullptr;
        std::optional<Batch> cur_;
    };
    Iterator begin();
    Iterator end() { return Iterator{}; }

    struct State;

private:
    friend class Loader;
    explicit Epoch(std::unique_ptr<State> s);
    std::unique_ptr<State> s_;
};

/// Seeded shuffling, batching, augmentation, normalisation and background prefetch.
class Loader {
public:
    /// Validates the options against the dataset (InputError on a bad batch size, a mean/std of
    /// the wrong length, a zero std...).
    Loader(Dataset data, LoaderOptions options = {});
    ~Loader();

    /// Starts epoch `e` (workers begin filling the queue at once).
    Epoch epoch(int64_t e);
    /// Batches per epoch (counts the short last batch unless drop_last).
    int64_t batches_per_epoch() const;
    /// Samples per epoch (those dropped by drop_last excluded; all shards together).
    int64_t samples_per_epoch() const;
    /// The order of dataset indices in epoch `e`.
    std::vector<int64_t> order(int64_t e) const;
    const Dataset& dataset() const;
    const LoaderOptions& options() const;

    struct Shared;

private:
    std::shared_ptr<const Shared> sh_;
};

/// SymJAX's symjax.data.utils.resample_images: images [C, H, W] of any sizes (the same C and
/// dtype) -> one Array [N, C, H', W'] with spatial_shape = {H', W'}. keep_aspect (SymJAX's
/// ratio="same") scales each image by min(H' / H, W' / W) to floor(H s) x floor(W s) (one side
/// exactly fills its target) and centres it on a zero canvas (offsets (H' - h) / 2, (W' - w) / 2);
/// else each image is stretched to H' x W'. Samples follow the align_corners convention (output
/// j of m samples reads input j (n - 1) / (m - 1), so corners land on corners, as SymJAX's
/// np.linspace grid): Linear interpolates, Nearest rounds halves up. Computed in double; integer
/// dtypes are rounded to nearest and saturated. Runs on the host (no graph).
Array resample_images(const std::vector<Array>& images, const Shape& spatial_shape,
                      interpolation::Method method = interpolation::Method::Linear,
                      bool keep_aspect = true);

/// The permutation of [0, n) used for `epoch`: Fisher-Yates driven by std::mt19937_64 seeded
/// with seed + epoch, with unbiased bounded draws (same result on every standard library).
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed, int64_t epoch);

} // namespace sj::data
