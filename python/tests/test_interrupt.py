"""Ctrl-C from Python: SIGINT, sent to this process by a child process, stops a long compiled call
(a while_loop or scan of 10^9 steps, on both backends), a long compile, a long `get()` and the
loader's iteration promptly with KeyboardInterrupt, changing no variable and losing no batch."""
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import symjax as sj
import symjax.tensor as T
from symjax import data

# A call is polled every 10 ms (Note [Ctrl-C]); a second is ample on a loaded 2-core machine.
PROMPT_S = 1.0


class Interrupter:
    """A child process that sends SIGINT to this one `delay` seconds after start, as a terminal
    does on Ctrl-C (a thread of this process could not: it needs the GIL, which a compile holds),
    and prints when (CLOCK_MONOTONIC, shared by every process)."""

    CHILD = ("import os, signal, sys, time\n"
             "time.sleep(float(sys.argv[2]))\n"
             "t = time.monotonic()\n"
             "os.kill(int(sys.argv[1]), signal.SIGINT)\n"
             "print(t, flush=True)\n")

    def __init__(self, delay):
        self.delay = delay
        self.child = None

    @property
    def sent(self):
        """When the signal was sent (waits for the child)."""
        return float(self.child.communicate(timeout=30)[0])

    def __enter__(self):
        self.child = subprocess.Popen(
            [sys.executable, "-c", self.CHILD, str(os.getpid()), str(self.delay)],
            stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *exc):
        if self.child.poll() is None:
            self.child.kill()
        self.child.wait()
        return False


def interrupted(call, delay=0.3):
    """Runs call() with a SIGINT `delay` seconds in: returns (the KeyboardInterrupt, the seconds
    from the signal to the exception). Fails when call() returns or raises something else."""
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with Interrupter(delay) as sig:
        try:
            call()
        except KeyboardInterrupt as e:
            caught = time.monotonic()
            return e, caught - sig.sent
    pytest.fail("the call returned before the interrupt")


@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_ctrl_c_stops_a_long_while_loop_and_changes_no_variable(backend):
    n = T.Placeholder((), "float64", name="n")
    w = T.Variable(np.array([1.0, 2.0], "float32"), name="w")
    count = T.while_loop(lambda i, n: i < n, lambda i, n: i + 1.0, T.zeros((), "float64"),
                         non_sequences=[n], name="count")
    f = sj.function(n, outputs=count, updates={w: w * 2.0 + count.astype("float32")},
                    backend=backend)
    e, latency = interrupted(lambda: f(1e9))
    assert latency < PROMPT_S, latency
    # the note says where the C++ call stopped
    assert any("count: interrupted after" in note for note in getattr(e, "__notes__", [])), \
        getattr(e, "__notes__", None)
    np.testing.assert_array_equal(w.value, np.array([1.0, 2.0], "float32"))
    # the function runs again and commits: w <- 2 w + 3
    assert float(f(3.0)) == 3.0
    np.testing.assert_array_equal(w.value, np.array([5.0, 7.0], "float32"))


def test_ctrl_c_stops_a_long_scan():
    x = T.Placeholder((), "float32", name="x")
    total, _ = T.scan(lambda c: (c + 1.0, None), x, [], length=10**9, name="steps")
    f = sj.function(x, outputs=total)
    e, latency = interrupted(lambda: f(0.0))
    assert latency < PROMPT_S, latency
    assert any("steps: interrupted after" in n for n in getattr(e, "__notes__", []))


def test_ctrl_c_stops_compiling_a_loop_of_constants():
    # the compiler folds a loop whose inputs are all constants: it runs at compile time
    total, _ = T.scan(lambda c: (c + 1.0, None), T.zeros(()), [], length=10**9, name="folded")
    e, latency = interrupted(lambda: sj.function(outputs=total))
    assert latency < PROMPT_S, latency
    assert any("folded: interrupted after" in n for n in getattr(e, "__notes__", []))


def test_ctrl_c_stops_get():
    # Tensor.get() runs the reference interpreter, polled between loop steps too
    count = T.while_loop(lambda i: i < 1e9, lambda i: i + 1.0, T.zeros((), "float64"))
    _, latency = interrupted(count.get)
    assert latency < PROMPT_S, latency


def test_a_signal_handler_exception_arrives_unchanged():
    # a handler of the user's own: its exception is what the caller gets
    class Stop(Exception):
        pass

    def handler(signum, frame):
        raise Stop("from the handler")

    n = T.Placeholder((), "float64", name="n")
    count = T.while_loop(lambda i, n: i < n, lambda i, n: i + 1.0, T.zeros((), "float64"),
                         non_sequences=[n])
    f = sj.function(n, outputs=count)
    old = signal.signal(signal.SIGINT, handler)
    try:
        with Interrupter(0.3):
            with pytest.raises(Stop, match="from the handler"):
                f(1e9)
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_call_from_another_thread_is_not_polled_and_completes():
    # Python runs signal handlers on its main thread only: a call on another thread never takes
    # the GIL to poll, and finishes with its result while the main thread waits
    n = T.Placeholder((), "float64", name="n")
    count = T.while_loop(lambda i, n: i < n, lambda i, n: i + 1.0, T.zeros((), "float64"),
                         non_sequences=[n])
    f = sj.function(n, outputs=count)
    out = []
    t = threading.Thread(target=lambda: out.append(float(f(1e5))))
    t.start()
    t.join()
    assert out == [1e5]


def test_ctrl_c_during_loader_iteration_loses_no_batch():
    # batches built on the caller's thread (workers=0) big enough that building one takes about
    # 0.1 s: the interrupt lands while the loader works, most often in the first epoch
    rng = np.random.RandomState(0)
    n, batch = 2048, 512
    images = rng.randint(0, 256, (n, 3, 64, 64)).astype(np.uint8)
    ds = data.Dataset(images, (np.arange(n) % 10).astype(np.int32))
    loader = data.Loader(ds, batch_size=batch, seed=1, workers=0, crop_padding=4,
                         horizontal_flip=True)
    ep = loader.epoch(0)
    seen = []

    def iterate_forever():
        for b in ep:
            seen.append(b.index)
        # the epoch ended before the signal: start over with new epochs until it comes
        e = 1
        while True:
            for _ in loader.epoch(e):
                pass
            e += 1

    _, latency = interrupted(iterate_forever, delay=0.2)
    assert latency < PROMPT_S, latency
    if len(seen) < len(ep):
        # iterating on gives every batch of the epoch exactly once, in order
        for b in ep:
            seen.append(b.index)
        assert seen == list(range(len(ep)))
        assert ep.consumed == len(ep)


def test_loader_batches_keep_their_attributes():
    ds = data.Dataset(np.zeros((5, 1, 2, 2), np.uint8), np.arange(5).astype(np.int32))
    b = next(iter(data.Loader(ds, batch_size=2, shuffle=False).epoch(0)))
    x, y = b
    assert isinstance(b, tuple) and len(b) == 2
    assert b.x is x and b.y is y
    assert (b.index, b.epoch, list(b.indices)) == (0, 0, [0, 1])
    np.testing.assert_array_equal(y, [0, 1])
