"""Example: the SymJAX paper's CIFAR-10 network, trained end to end (Python twin of
examples/cifar10.cpp: the same network, schedule, seeds and printed lines).

  Conv 32 3x3 VALID - BN - ReLU - MaxPool 2 / Conv 64 3x3 VALID - BN - ReLU - MaxPool 2 /
  Dense 128 - BN - ReLU / Dense 10

batch 32, Adam with the paper's piecewise-constant schedule (0.005, then 0.001 from epoch 50 and
0.0005 from epoch 75), random crops of the zero-padded (4 pixels) images inside the graph.

    PYTHONPATH=build/python python3 examples/python/cifar10.py [--epochs 10] [--data DIR]
        [--batch 32] [--seed 0] [--limit N] [--csv FILE]

Data: DIR holding the official binary batches (data_batch_{1..5}.bin, test_batch.bin), or the
cache that ./build/cifar10 writes when it decodes ../shared/data/cifar10's archives
($SJ_DATA_CACHE, else ~/.cache/symjax/cifar10: train_from_jpeg.bin, test_from_png.bin).
"""
import argparse
import os
import sys
import time

import numpy as np

import symjax
import symjax.tensor as T
from symjax import data, nn


def load(path):
    batches = [os.path.join(path, "data_batch_%d.bin" % k) for k in range(1, 6)]
    if all(os.path.exists(b) for b in batches):
        return (data.read_cifar10_binary(batches),
                data.read_cifar10_binary([os.path.join(path, "test_batch.bin")]))
    cache = os.environ.get("SJ_DATA_CACHE") or os.path.join(
        os.environ.get("HOME", "/tmp"), ".cache", "symjax", "cifar10")
    train_bin = os.path.join(cache, "train_from_jpeg.bin")
    test_bin = os.path.join(cache, "test_from_png.bin")
    if os.path.exists(train_bin) and os.path.exists(test_bin):
        return data.read_cifar10_binary([train_bin]), data.read_cifar10_binary([test_bin])
    raise symjax.IOError("cifar10: %s holds neither the CIFAR-10 binary batches nor is there a "
                         "decoded cache in %s (run ./build/cifar10 once to make it)" % (path, cache))


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", default="../shared/data/cifar10")
    p.add_argument("--csv", default="")
    o = p.parse_args(argv)

    train, test = load(o.data)
    if 0 < o.limit < len(train):
        train = train.slice(0, o.limit)
    pixel_mean, pixel_std = [0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]
    train_loader = data.Loader(train, batch_size=o.batch, seed=o.seed, mean=pixel_mean,
                               std=pixel_std)
    test_loader = data.Loader(test, batch_size=500, shuffle=False, mean=pixel_mean, std=pixel_std)
    steps_per_epoch = train_loader.batches_per_epoch

    # The paper's network (made in the same order as the C++ example, so its initial draws are
    # the same).
    with symjax.Scope("cifar10"):
        net = nn.Sequential([
            nn.RandomCrop(padding=[(4, 4)], seed=o.seed),
            nn.Conv2D(3, 32, 3), nn.BatchNorm(32), nn.ReLU(), nn.MaxPool2D(2),
            nn.Conv2D(32, 64, 3), nn.BatchNorm(64), nn.ReLU(), nn.MaxPool2D(2),
            nn.Flatten(), nn.Dense(64 * 6 * 6, 128), nn.BatchNorm(128), nn.ReLU(),
            nn.Dense(128, 10),
        ])
        x = T.Placeholder((None, 3, 32, 32), "float32", name="images")
        y = T.Placeholder((None,), "int32", name="labels")
        spe = float(steps_per_epoch)
        adam = nn.optimizers.Adam(lambda step: nn.schedules.piecewise_constant(
            step, [50 * spe, 75 * spe], [0.005, 0.001, 0.0005]))
        logits = net(x, mode="train")
        loss = nn.losses.sparse_softmax_crossentropy_logits(y, logits).mean()
        correct = nn.metrics.correct(y, logits).sum()
        train_step = symjax.function(
            x, y, outputs=[loss, correct],
            updates={**adam.minimize(loss, net.trainable_variables()),
                     **symjax.state_updates(loss)})
        eval_logits = net(x, mode="eval")
        eval_step = symjax.function(x, y, outputs=[
            nn.losses.sparse_softmax_crossentropy_logits(y, eval_logits).sum(),
            nn.metrics.correct(y, eval_logits).sum()])

    print("cifar10: %d train / %d test images, %d steps of %d per epoch"
          % (len(train), len(test), steps_per_epoch, o.batch))
    csv = open(o.csv, "w") if o.csv else None
    if csv:
        csv.write("epoch,train_loss,train_acc,test_loss,test_acc,seconds,images_per_s\n")
    for epoch in range(1, o.epochs + 1):
        t = time.perf_counter()
        l = c = 0.0
        n = 0
        for bx, by in train_loader.epoch(epoch - 1):
            r = train_step(bx, by)
            bn = by.shape[0]
            l += float(r[0]) * bn
            c += float(r[1])
            n += bn
        secs = time.perf_counter() - t
        tl = tc = 0.0
        for bx, by in test_loader.epoch(0):
            r = eval_step(bx, by)
            tl += float(r[0])
            tc += float(r[1])
        nt = float(len(test))
        print("epoch %2d  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.1f s (%.0f img/s)"
              % (epoch, l / n, 100 * c / n, tl / nt, 100 * tc / nt, secs, n / secs))
        sys.stdout.flush()
        if csv:
            csv.write("%d,%g,%g,%g,%g,%g,%g\n" % (epoch, l / n, c / n, tl / nt, tc / nt, secs,
                                                  n / secs))
            csv.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
