"""symjax.data: dataset readers (Fashion-MNIST / MNIST IDX files, CIFAR-10 binary batches, image
folders) and the seeded, prefetching, augmenting batch loader, over the C++ readers (which raise
symjax.IOError naming the file, the byte offset and what was wrong).

    train = symjax.data.fashion_mnist(train=True)           # a Dataset: u8 [N, 1, 28, 28], i32 [N]
    loader = symjax.data.Loader(train, batch_size=128, seed=42, mean=[0.286], std=[0.353])
    for x, y in loader.epoch(0):                            # f32 [B, 1, 28, 28], i32 [B]
        train_step(x, y)

The loader's workers build batches on their own threads; iterating waits for them without
holding the GIL.
"""
import os as _os
import types as _types

from ._core import data as _d

Dataset = _d.Dataset
read_idx = _d.read_idx
read_image = _d.read_image
read_image_folder = _d.read_image_folder
read_image_list = _d.read_image_list
read_cifar10_binary = _d.read_cifar10_binary
load_mnist_like = _d.load_mnist_like
shuffled_order = _d.shuffled_order
fashion_mnist_classes = _d.fashion_mnist_classes
cifar10_classes = _d.cifar10_classes

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


def fashion_mnist(path=None, train=True):
    """Fashion-MNIST from its IDX files (Debian's dataset-fashion-mnist installs them in
    /usr/share/datasets/fashion-mnist; $SJ_FASHION_MNIST overrides)."""
    path = path or _os.environ.get("SJ_FASHION_MNIST", FASHION_MNIST_DIR)
    return _d.load_mnist_like(path, train, _d.fashion_mnist_classes())


def mnist(path, train=True):
    """MNIST (or any MNIST-like IDX pair) from `path`."""
    return _d.load_mnist_like(path, train)


def cifar10(path, train=True):
    """CIFAR-10 from its binary batches in `path` (data_batch_1..5.bin, test_batch.bin)."""
    names = ["data_batch_%d.bin" % k for k in range(1, 6)] if train else ["test_batch.bin"]
    d = _d.read_cifar10_binary([_os.path.join(path, n) for n in names])
    return d


class _Batch(tuple):
    """(x, y) with the batch's dataset indices, position and epoch as attributes: .x, .y,
    .indices, .index, .epoch (set by symjax._core, which makes it without running Python code, so
    that Ctrl-C cannot lose a batch between the loader and the loop)."""


_d._set_batch_type(_Batch)


class Loader:
    """Seeded shuffling, batching, augmentation (random crop with zero padding, horizontal
    flips), normalisation ((pixel / 255 - mean[c]) / std[c]) and background prefetch.
    Batches come out in order whatever the number of workers, and (seed, epoch) fixes them.
    Data-parallel: with shard_rank=r, shard_count=n (e.g. symjax.dist.rank(), .size()) and the
    same seed on every rank, batch_size is the global batch and each rank builds only its rows
    [r b, (r + 1) b) of it, b = batch_size / n."""

    def __init__(self, data, batch_size=128, shuffle=True, drop_last=False, seed=0, workers=1,
                 prefetch=4, crop_padding=0, horizontal_flip=False, mean=(), std=(), shard_rank=0,
                 shard_count=1):
        self._l = _d.Loader(data, batch_size, shuffle, drop_last, seed, workers, prefetch,
                            crop_padding, horizontal_flip, list(mean), list(std), int(shard_rank),
                            int(shard_count))

    def epoch(self, e):
        """An iterator over the batches of epoch `e`: (x, y) tuples (with .indices, .index).
        Ctrl-C while it waits for a batch raises KeyboardInterrupt and takes no batch: iterating
        on gives the batch that was being waited for."""
        return self._l.epoch(int(e))

    def __len__(self):
        return self._l.batches_per_epoch

    @property
    def batches_per_epoch(self):
        return self._l.batches_per_epoch

    @property
    def samples_per_epoch(self):
        return self._l.samples_per_epoch

    def order(self, e):
        return self._l.order(int(e))

    @property
    def dataset(self):
        return self._l.dataset


# SymJAX's symjax.data.utils
utils = _types.SimpleNamespace()


def resample_images(images, target_shape, ratio="same", order=1, mode="nearest", data_format="channels_first"):
    """SymJAX's utils.resample_images: images [C, H, W] of any sizes to one array
    [N, C, H', W']; ratio "same" keeps the aspect ratio (centred on zeros), else stretches;
    order 1 interpolates linearly, 0 takes the nearest sample. Only channels_first."""
    if data_format != "channels_first":
        raise ValueError("resample_images: only data_format='channels_first' is supported")
    return _d.resample_images(list(images), list(target_shape),
                              "linear" if order == 1 else "nearest", ratio == "same")


utils.resample_images = resample_images

__all__ = [
    "Dataset", "Loader", "read_idx", "read_image", "read_image_folder", "read_image_list",
    "read_cifar10_binary", "load_mnist_like", "fashion_mnist", "mnist", "cifar10",
    "shuffled_order", "fashion_mnist_classes", "cifar10_classes", "resample_images", "utils",
]
