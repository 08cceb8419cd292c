"""Runs the pytest suite of the Python front end for ctest: exit 77 (skipped) without pytest."""
import sys

try:
    import pytest
except ImportError:
    print("python_pytest: pytest is not installed (Debian: python3-pytest); skipped")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
