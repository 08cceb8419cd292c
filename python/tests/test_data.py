"""symjax.data from Python: IDX and CIFAR-10 readers on files written here, the loader's batches
against NumPy's normalisation, determinism, prefetch without the GIL, and IOErrors."""
import gzip
import os
import struct
import threading
import time

import numpy as np
import pytest

import symjax as sj
from symjax import data


def write_idx(path, array, compress=False):
    codes = {np.uint8: 0x08, np.int32: 0x0C, np.float32: 0x0D}
    header = struct.pack(">BBBB", 0, 0, codes[array.dtype.type], array.ndim)
    header += b"".join(struct.pack(">I", d) for d in array.shape)
    body = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(body)


def mnist_dir(tmp_path, n=10):
    rng = np.random.RandomState(0)
    images = rng.randint(0, 256, (n, 28, 28)).astype(np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    write_idx(str(tmp_path / "train-images-idx3-ubyte.gz"), images, compress=True)
    write_idx(str(tmp_path / "train-labels-idx1-ubyte"), labels)
    return images, labels


def test_read_idx_and_mnist_like(tmp_path):
    images, labels = mnist_dir(tmp_path)
    np.testing.assert_array_equal(data.read_idx(str(tmp_path / "train-labels-idx1-ubyte")), labels)
    d = data.mnist(str(tmp_path))
    assert len(d) == 10 and d.images.shape == (10, 1, 28, 28)
    np.testing.assert_array_equal(d.images[:, 0], images)
    np.testing.assert_array_equal(d.labels, labels.astype(np.int32))


def test_loader_batches_are_normalised_and_deterministic(tmp_path):
    images, labels = mnist_dir(tmp_path, 20)
    d = data.mnist(str(tmp_path))
    loader = data.Loader(d, batch_size=8, seed=3, mean=[0.5], std=[0.25], workers=2)
    assert len(loader) == 3 and loader.samples_per_epoch == 20
    batches = list(loader.epoch(0))
    again = list(loader.epoch(0))
    for b, c in zip(batches, again):
        np.testing.assert_array_equal(b.x, c.x)
    first = batches[0]
    assert first.x.dtype == np.float32 and first.y.dtype == np.int32
    idx = np.array(first.indices)
    np.testing.assert_array_equal(idx, loader.order(0)[:8])
    want = (images[idx][:, None].astype(np.float32) / 255 - 0.5) / 0.25
    np.testing.assert_allclose(first.x, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(first.y, labels[idx])
    assert sorted(np.concatenate([b.indices for b in batches]).tolist()) == list(range(20))


def test_sharded_loaders_split_each_global_batch(tmp_path):
    mnist_dir(tmp_path, 20)
    d = data.mnist(str(tmp_path))
    opts = dict(batch_size=8, seed=3, crop_padding=2, horizontal_flip=True, drop_last=True)
    whole = list(data.Loader(d, **opts).epoch(1))
    parts = [list(data.Loader(d, shard_rank=r, shard_count=2, **opts).epoch(1)) for r in range(2)]
    assert len(whole) == len(parts[0]) == len(parts[1]) == 2
    for k, g in enumerate(whole):
        np.testing.assert_array_equal(np.concatenate([parts[0][k].x, parts[1][k].x]), g.x)
        np.testing.assert_array_equal(np.concatenate([parts[0][k].y, parts[1][k].y]), g.y)
    with pytest.raises(sj.InputError, match="equal shares"):
        data.Loader(d, batch_size=8, shard_rank=0, shard_count=3)


def test_function_stats_count_parallel_regions():
    x = sj.tensor.Placeholder((1000,), "float32", name="x")
    f = sj.function(x, outputs=[x * 2.0 + 1.0])
    f(np.zeros(1000, np.float32))
    assert f.stats["kernels"] == 1 and f.stats["parallel_regions"] == 0  # 8 KB: one thread
    assert f.stats["packed_weights"] == 0  # no matmul, no update


def test_cifar10_binary(tmp_path):
    rng = np.random.RandomState(1)
    recs = [(i % 10, rng.randint(0, 256, 3072).astype(np.uint8)) for i in range(7)]
    path = str(tmp_path / "test_batch.bin")
    with open(path, "wb") as f:
        for lab, px in recs:
            f.write(bytes([lab]) + px.tobytes())
    d = data.cifar10(str(tmp_path), train=False)
    assert d.images.shape == (7, 3, 32, 32)
    np.testing.assert_array_equal(d.images[3].reshape(-1), recs[3][1])
    np.testing.assert_array_equal(d.labels, [r[0] for r in recs])


def test_dataset_from_numpy_and_slice():
    imgs = np.zeros((5, 3, 4, 4), np.uint8)
    d = data.Dataset(imgs, np.arange(5), ["a", "b", "c", "d", "e"])
    assert len(d.slice(1, 3)) == 2 and d.classes[4] == "e"
    with pytest.raises(sj.ShapeError):
        data.Dataset(np.zeros((5, 4, 4), np.uint8), np.arange(5))


def test_readers_raise_ioerror_naming_the_file(tmp_path):
    bad = tmp_path / "bad-idx"
    bad.write_bytes(b"\x00\x00\x99\x01")
    with pytest.raises(sj.IOError, match="bad-idx"):
        data.read_idx(str(bad))
    with pytest.raises(OSError):
        data.read_cifar10_binary([str(tmp_path / "missing.bin")])


def test_loader_waits_without_the_gil(tmp_path):
    mnist_dir(tmp_path, 2000)
    tmp2 = tmp_path
    d = data.mnist(str(tmp2))
    loader = data.Loader(d, batch_size=1000, workers=1, prefetch=1)
    ticks = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.0005)

    t = threading.Thread(target=ticker)
    t.start()
    for _ in range(5):
        for _b in loader.epoch(0):
            pass
    stop.set()
    t.join()
    assert len(ticks) > 0


def test_resample_images_symjax_utils():
    im1 = np.random.rand(3, 2, 2)
    im2 = np.random.rand(3, 4, 4)
    images = data.utils.resample_images([im1, im2], (4, 4))
    assert np.array_equal(images[0, :, ::3, ::3], im1)
    assert np.array_equal(images[1], im2)


@pytest.mark.skipif(not os.path.isdir(data.FASHION_MNIST_DIR), reason="dataset-fashion-mnist")
def test_fashion_mnist_from_debian_package():
    d = data.fashion_mnist(train=False)
    assert d.images.shape == (10000, 1, 28, 28) and d.classes[0] == "T-shirt/top"
