"""cmake --install puts a working package under the prefix: symjax imports from
<prefix>/<SJ_PYTHON_INSTALL_DIR> and finds the installed libsymjax through its RPATH."""
import os
import re
import subprocess
import sys

import pytest

from conftest import BUILD_DIR


def test_cmake_install_to_a_prefix_imports(tmp_path):
    cache = os.path.join(BUILD_DIR, "CMakeCache.txt")
    if not os.path.exists(cache):
        pytest.skip("no CMake build at %s" % BUILD_DIR)
    with open(cache) as f:
        m = re.search(r"^SJ_PYTHON_INSTALL_DIR:\w+=(.*)$", f.read(), re.M)
    site = m.group(1)
    if os.path.isabs(site):
        pytest.skip("SJ_PYTHON_INSTALL_DIR is absolute (%s): not moved by --prefix" % site)
    prefix = str(tmp_path / "prefix")
    r = subprocess.run(["cmake", "--install", BUILD_DIR, "--prefix", prefix],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = os.path.join(prefix, site)
    code = ("import symjax, symjax.tensor as T, numpy as np; "
            "x = T.Placeholder((3,), 'float32'); "
            "print(symjax.__file__); print(symjax.function(x, outputs=x * 2)(np.arange(3)))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith(prefix)
    assert r.stdout.splitlines()[1] == "[0. 2. 4.]"
