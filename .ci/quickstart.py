"""Runs the README's quickstart (every ```python block of its "## Quickstart" section, in
order) against the npurt that is installed: `make wheel-check` runs it in a bare venv that
holds only the wheel and its declared dependencies."""

import pathlib
import re
import sys

import npurt

readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
section = readme.split("\n## Quickstart", 1)[1].split("\n## ", 1)[0]
blocks = re.findall(r"```python\n(.*?)```", section, re.S)
assert blocks, "no python block in the README's quickstart"
env = {"__name__": "__quickstart__"}  # one namespace: later blocks use earlier imports, as a reader would
for i, code in enumerate(blocks):
    exec(compile(code, f"README.md quickstart block {i + 1}", "exec"), env)
assert not npurt.__file__.startswith(str(pathlib.Path(__file__).resolve().parent.parent / "python")), npurt.__file__
print(f"quickstart: OK ({len(blocks)} blocks, npurt {npurt.__version__} from {npurt.__file__}, python {sys.version.split()[0]})")
