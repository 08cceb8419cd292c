"""Builds the Python package symjax with CMake (docs/python.md, "Install").

    /usr/bin/python3 -m pip install . --no-build-isolation

runs CMake on this repository in $SYMJAX_BUILD_DIR (default build-pip/) with only the library and
the Python module (tests, examples, tools and benchmarks off), then packs python/symjax/, the
module symjax/_core and libsymjax beside it (the module finds it through its $ORIGIN RPATH).
Extra CMake arguments come from $CMAKE_ARGS (e.g. -DCMAKE_CXX_COMPILER_LAUNCHER=ccache).
"""
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


class CMakeBuild(build_ext):
    def run(self):
        build_dir = os.environ.get("SYMJAX_BUILD_DIR", os.path.join(HERE, "build-pip"))
        jobs = os.environ.get("SYMJAX_BUILD_JOBS", str(os.cpu_count() or 2))
        configure = [
            "cmake", "-S", HERE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
            "-DSJ_BUILD_TESTS=OFF", "-DSJ_BUILD_EXAMPLES=OFF", "-DSJ_BUILD_TOOLS=OFF",
            "-DSJ_BUILD_BENCH=OFF", "-DSJ_BUILD_PYTHON=ON", "-DCMAKE_INSTALL_LIBDIR=lib",
            "-DSJ_PYTHON_INSTALL_DIR:STRING=python-site",
            "-DPython3_EXECUTABLE=" + sys.executable,
        ] + shlex.split(os.environ.get("CMAKE_ARGS", ""))
        if shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        if not os.path.exists(os.path.join(build_dir, "CMakeCache.txt")) or \
                os.environ.get("SYMJAX_RECONFIGURE"):
            subprocess.check_call(configure)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "symjax_python",
                               "-j", jobs])
        # install into a staging folder: the installed libsymjax finds libsymjax_env beside it
        # ($ORIGIN), which the build tree's copy does not
        stage = os.path.join(build_dir, "stage")
        if os.path.exists(stage):
            shutil.rmtree(stage)
        subprocess.check_call(["cmake", "--install", build_dir, "--prefix", stage])
        dst = os.path.join(self.build_lib, "symjax")
        if os.path.exists(dst):
            shutil.rmtree(dst)
        shutil.copytree(os.path.join(stage, "python-site", "symjax"), dst,
                        ignore=shutil.ignore_patterns("__pycache__"))
        # libsymjax (by its soname) and the OpenMP wait-policy library beside the module
        for lib in glob.glob(os.path.join(stage, "lib", "libsymjax*.so*")):
            base = os.path.basename(lib)
            if base == "libsymjax_env.so" or re.fullmatch(r"libsymjax\.so\.\d+\.\d+", base):
                shutil.copy2(os.path.realpath(lib), os.path.join(dst, base))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(
    packages=[],
    cmdclass={"build_ext": CMakeBuild},
    distclass=BinaryDistribution,
    zip_safe=False,
)
