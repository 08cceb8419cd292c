"""examples/python: the paper's three examples give the numbers of the C++ examples
(examples/*.cpp). The C++ programs are run when the build has them (SJ_BUILD_DIR); the values
ExamplesTest.cmake checks for them are asserted either way."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD_DIR, SOURCE_DIR

EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")


def run_py(name, *args):
    env = dict(os.environ)
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def run_cpp(name, *args):
    exe = os.path.join(BUILD_DIR, name)
    if not os.path.exists(exe):
        return None
    out = subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def numbers(text, keep=lambda line: True):
    return [line for line in text.splitlines() if keep(line)]


def test_sgd_matches_cpp():
    py = run_py("sgd.py")
    assert "sgd: OK" in py
    # ExamplesTest.cmake's values: cost 0.367879 at step 0, 0.051723 at step 9
    assert re.search(r"0 +0\.367879 +0\.000000", py) and re.search(r"9 +0\.051723 +-0\.721001", py)
    cpp = run_cpp("sgd")
    if cpp is not None:
        assert py == cpp


def test_mvn_pdf_matches_cpp():
    py = run_py("mvn_pdf.py")
    assert "mvn_pdf: OK" in py
    assert "centre density 0.159155" in py and "neighbour density 0.006993" in py
    assert "peak density 0.124279" in py
    cpp = run_cpp("mvn_pdf")
    if cpp is not None:
        assert py == cpp


def _write_batches(folder, rng):
    """Synthetic CIFAR-10 binary batches (as tests/integration/cifar10_example_test.sh)."""
    def batch(path, records):
        with open(path, "wb") as f:
            for i in range(records):
                f.write(bytes([i % 10]))
                f.write(rng.randint(0, 256, 3072, dtype=np.uint8).tobytes())

    for k in range(1, 6):
        batch(os.path.join(folder, "data_batch_%d.bin" % k), 40)
    batch(os.path.join(folder, "test_batch.bin"), 30)


def test_cifar10_one_epoch_matches_cpp(tmp_path):
    _write_batches(str(tmp_path), np.random.RandomState(7))
    args = ["--data", str(tmp_path), "--epochs", "1", "--batch", "16"]
    py = run_py("cifar10.py", *args)
    assert "cifar10: 200 train / 30 test images, 13 steps of 16 per epoch" in py
    line = [l for l in py.splitlines() if l.startswith("epoch  1")]
    assert len(line) == 1
    cpp = run_cpp("cifar10", *args)
    if cpp is not None:
        # the same losses and accuracies (timings differ)
        strip = lambda s: re.sub(r"\s+[0-9.]+ s \([0-9]+ img/s\)", "", s)
        cpp_line = [l for l in cpp.splitlines() if l.startswith("epoch  1")]
        assert strip(line[0]) == strip(cpp_line[0])


def test_data_parallel_under_mpirun():
    """examples/python/data_parallel.py on 2 MPI processes over loopback: the ranks end with
    bit-identical parameters equal to one process on the global batch (checked by the script)."""
    import shutil

    import symjax
    mpirun = shutil.which("mpirun")
    if mpirun is None or not symjax.dist.built_with_mpi():
        pytest.skip("no mpirun, or symjax built without MPI")
    env = dict(os.environ, OMPI_MCA_btl="self,vader,tcp", OMPI_MCA_btl_tcp_if_include="lo",
               OMPI_MCA_oob_tcp_if_include="lo", OMPI_MCA_rmaps_base_oversubscribe="1",
               SJ_NUM_THREADS="1", OMP_NUM_THREADS="1")
    args = [mpirun, "--oversubscribe", "-np", "2"]
    if os.geteuid() == 0:
        args.insert(1, "--allow-run-as-root")
    args += ["-x", "PYTHONPATH", sys.executable, os.path.join(EXAMPLES, "data_parallel.py")]
    out = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "data_parallel: OK (2 processes)" in out.stdout, out.stdout + out.stderr


def test_data_parallel_as_one_process():
    """The same script without mpirun: a world of one, the averaging is the identity."""
    assert "data_parallel: OK (1 processes)" in run_py("data_parallel.py")
