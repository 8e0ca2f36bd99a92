"""The README's Python example runs as written (the README must never lie)."""
import os
import re

import pytest

np = pytest.importorskip("numpy")


def test_readme_python_example_runs():
    readme = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")
    with open(readme, encoding="utf-8") as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md has no python example"
    scope = {}
    exec(compile(blocks[0], "README.md", "exec"), scope)  # noqa: S102 - our own README
    out = scope["out"]
    arr = np.asarray(out.array if hasattr(out, "array") else out)
    assert arr.shape == (16, 1024)
    assert np.isfinite(arr).all() and np.abs(arr).max() > 0
