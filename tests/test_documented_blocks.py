"""The Python blocks of the README and of the documentation pages run as they are and print
what they computed (the docstring examples run as doctests, the gallery in the docs build)."""

import contextlib
import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pmap_sklearn.datasets._paths import candidate_roots

from .conftest import shared_data_root

ROOT = Path(__file__).resolve().parents[1]


def _markdown_blocks(path):
    return re.findall(r"```python\n(.*?)```", path.read_text(encoding="utf-8"), re.S)


def _rst_blocks(path):
    """The indented bodies of the ``.. code-block:: python`` directives."""
    blocks = []
    for match in re.finditer(
        r"^\.\. code-block:: python\n\n((?:(?:   .*)?\n)+)", path.read_text(encoding="utf-8"), re.M
    ):
        blocks.append(textwrap.dedent(match.group(1)))
    return blocks


#: The first line of a documentation block that continues the previous one of its page.
CONTINUED = "# continued"
BLOCKS = [(f"README.md:{i}", code) for i, code in enumerate(_markdown_blocks(ROOT / "README.md"))]
for page in sorted((ROOT / "docs").rglob("*.rst")):
    if "generated" in page.name or "_build" in page.parts or "auto_examples" in page.parts:
        continue
    previous = ""
    for i, code in enumerate(_rst_blocks(page)):
        # A block that starts "# continued" runs after the blocks of the page before it.
        code = previous + code if code.startswith(CONTINUED) else code
        BLOCKS.append((f"{page.relative_to(ROOT)}:{i}", code))
        previous = code


def _needs(code):
    """Skip reasons of a block: the shared data or an optional package it uses."""
    if ("load_weizmann" in code or "load_ocr" in code) and shared_data_root() is None:
        pytest.skip("the block needs the shared data (set PMAP_SKLEARN_DATA)")
    for loader, folder in (
        ("load_conll2002", "conll2002"),
        ("load_ud_treebank", "ud_english_ewt"),
        ("load_multilabel", "multilabel"),
    ):
        if loader in code and not any((root / folder).is_dir() for root in candidate_roots()):
            pytest.skip(f"the block needs the shared data's {folder}/ (set PMAP_SKLEARN_DATA)")
    if "dask" in code:
        pytest.importorskip("distributed")
    if "skimage" in code:
        pytest.importorskip("skimage")
    if "skops" in code:
        pytest.importorskip("skops")


def test_the_readme_and_the_guide_have_their_examples():
    assert sum(name.startswith("README") for name, _ in BLOCKS) >= 4
    assert len(BLOCKS) >= 9


@pytest.mark.parametrize("name, code", BLOCKS, ids=[name for name, _ in BLOCKS])
def test_documented_block_runs_and_prints(name, code, tmp_path):
    _needs(code)
    if 'if __name__ == "__main__":' in code:  # a script (dask's workers import it): run it so
        script = tmp_path / "block.py"
        script.write_text(code)
        done = subprocess.run(
            [sys.executable, str(script)], capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"{name} failed as a script:\n{done.stderr[-3000:]}"
        assert done.stdout.strip(), f"{name} printed nothing"
        return
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        exec(compile(code, name, "exec"), {"__name__": "__doc_block__"})
    assert output.getvalue().strip(), f"{name} printed nothing"
