"""The README's Python example runs and prints a result."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def test_readme_example_prints_a_result():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "no python block in README's Python section"
    lines = [l for l in code.group(1).splitlines() if l.strip()]
    assert len(lines) == 5, "the README promises a five-line example"
    out = subprocess.run([sys.executable, "-c", code.group(1)], capture_output=True, text=True, cwd=ROOT / "docs")
    assert out.returncode == 0, out.stderr
    assert "xterm starts in" in out.stdout
    assert "plextor-ssd" in out.stdout and "cfq" in out.stdout
