"""sj-train --model cnn's training loop written in Python with symjax (bench/run fmnist_cnn_python):
the same model, loader, optimizer, schedule and seed as tools/sj-train.cpp, timed the same way
(images per second over the training batches of each epoch). Prints each epoch as sj-train does
and one JSON line per epoch (impl "symjax-python").

    PYTHONPATH=build/python python3 python/bench/train_cnn.py [--epochs 1] [--limit N]
"""
import argparse
import json
import os
import time

import symjax as sj
import symjax.tensor as T
from symjax import data, nn


def build_model(seed, dropout):
    with sj.Scope("model"):
        layers = [nn.Conv2D(1, 32, 3, padding="SAME", bias=False), nn.BatchNorm(32, momentum=0.9),
                  nn.ReLU(), nn.MaxPool2D(2),
                  nn.Conv2D(32, 64, 3, padding="SAME", bias=False), nn.BatchNorm(64, momentum=0.9),
                  nn.ReLU(), nn.MaxPool2D(2),
                  nn.Flatten(), nn.Dense(64 * 7 * 7, 128), nn.ReLU()]
        if dropout > 0:
            layers.append(nn.Dropout(dropout, seed=seed))
        layers.append(nn.Dense(128, 10))
        return nn.Sequential(layers)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dropout", type=float, default=0.2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--data", default=data.FASHION_MNIST_DIR)
    o = p.parse_args()

    train = data.fashion_mnist(o.data, train=True)
    test = data.fashion_mnist(o.data, train=False)
    if 0 < o.limit < len(train):
        train = train.slice(0, o.limit)
    train_loader = data.Loader(train, batch_size=o.batch, shuffle=True, seed=o.seed,
                               mean=[0.2860], std=[0.3530])
    test_loader = data.Loader(test, batch_size=1000, shuffle=False, mean=[0.2860], std=[0.3530])
    steps = train_loader.batches_per_epoch
    total = float(steps * o.epochs)

    net = build_model(o.seed, o.dropout)
    x = T.Placeholder((None, 1, 28, 28), "float32", name="images")
    y = T.Placeholder((None,), "int32", name="labels")
    adam = nn.optimizers.Adam(lambda s: nn.schedules.cosine_decay(s, o.lr, total))
    logits = net(x, mode="train")
    loss = nn.losses.sparse_softmax_crossentropy_logits(y, logits).mean()
    correct = nn.metrics.correct(y, logits).sum()
    updates = {**adam.minimize(loss, net.trainable_variables()), **sj.state_updates(loss)}
    eval_logits = net(x, mode="eval")
    train_step = sj.function(x, y, outputs=[loss, correct], updates=updates)
    eval_step = sj.function(x, y, outputs=[
        nn.losses.sparse_softmax_crossentropy_logits(y, eval_logits).sum(),
        nn.metrics.correct(y, eval_logits).sum()])

    for epoch in range(1, o.epochs + 1):
        t0 = time.perf_counter()
        loss_sum = correct_sum = 0.0
        seen = 0
        for bx, by in train_loader.epoch(epoch - 1):
            r = train_step(bx, by)
            n = by.shape[0]
            loss_sum += float(r[0]) * n
            correct_sum += float(r[1])
            seen += n
        secs = time.perf_counter() - t0
        tl = tc = 0.0
        for bx, by in test_loader.epoch(0):
            r = eval_step(bx, by)
            tl += float(r[0])
            tc += float(r[1])
        print("epoch %2d/%d  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.1f s  %.0f img/s"
              % (epoch, o.epochs, loss_sum / seen, 100 * correct_sum / seen, tl / len(test),
                 100 * tc / len(test), secs, seen / secs), flush=True)
        print(json.dumps({"bench": "fmnist_cnn", "case": "train_epoch", "impl": "symjax-python",
                          "threads": int(os.environ.get("SJ_NUM_THREADS", os.cpu_count() or 1)),
                          "epoch": epoch, "batch": o.batch, "value": round(seen / secs, 1),
                          "unit": "images/s", "epoch_s": round(secs, 3),
                          "train_loss": round(loss_sum / seen, 6),
                          "test_accuracy": round(tc / len(test), 6)}), flush=True)


if __name__ == "__main__":
    main()
