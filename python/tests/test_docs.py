"""docs/python.md's Python blocks run, in order, in one namespace; each ```output block after a
block is what it must print."""
import contextlib
import io
import os
import re

from conftest import SOURCE_DIR


def blocks(text):
    """(code, expected output or None) for each ```python block."""
    out = []
    for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S):
        lang, body = m.group(1), m.group(2)
        if lang == "python":
            out.append([body, None])
        elif lang == "output" and out and out[-1][1] is None:
            out[-1][1] = body
    return out


def test_python_md_blocks_run_and_print_their_output():
    with open(os.path.join(SOURCE_DIR, "docs", "python.md")) as f:
        text = f.read()
    ns = {}
    found = blocks(text)
    assert len(found) >= 4
    for code, expected in found:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, "docs/python.md", "exec"), ns)
        if expected is not None:
            assert buf.getvalue() == expected, code
