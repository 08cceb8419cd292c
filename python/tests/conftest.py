"""Shared fixtures: the source and build folders (set by the ctest entry) and a fresh seed."""
import os

import numpy as np
import pytest

SOURCE_DIR = os.environ.get("SJ_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD_DIR = os.environ.get("SJ_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))


@pytest.fixture(autouse=True)
def _seed():
    np.random.seed(0)
    yield
