"""What several test files need to know about the committed notebooks and the nbval sanitizer.

Imported by the test modules as ``nbtools`` (pytest puts ``tests/`` on ``sys.path``).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

# Without nbval (a Colab or a staged GPU machine running `pytest tests -m gpu`), the modules that
# import this one are skipped instead of failing the collection.
_plugin = pytest.importorskip('nbval.plugin')
find_comment_markers = _plugin.find_comment_markers
find_metadata_tags = _plugin.find_metadata_tags
get_sanitize_patterns = _plugin.get_sanitize_patterns

ROOT = Path(__file__).resolve().parents[2]
SANITIZE_CFG = ROOT / 'tests' / 'sanitize.cfg'
NOTEBOOKS = sorted(
    p.relative_to(ROOT).as_posix()
    for folder in ('notebooks', 'exercises')
    for p in (ROOT / folder).rglob('*.ipynb')
    if '.ipynb_checkpoints' not in p.parts
)
PATTERNS = get_sanitize_patterns(SANITIZE_CFG.read_text(encoding='utf-8'))


def sanitize(s: str) -> str:
    """What nbval does to every compared string (``IPyNbCell.sanitize``), with our patterns."""
    for regex, replace in dict(PATTERNS).items():
        s = re.sub(regex, replace, s)
    return s


def load(path: str | Path) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / path, as_version=nbformat.NO_CONVERT)


def code_cells(nb: nbformat.NotebookNode) -> list:
    return [c for c in nb.cells if c.cell_type == 'code']


def nbval_options(cell) -> dict:
    """What nbval does with this cell, e.g. ``{'skip': True}`` or ``{'check': False}``."""
    options = dict(find_metadata_tags(cell.get('metadata', {})))
    options.update(find_comment_markers(cell.source))
    return options


def ignores_output(cell) -> bool:
    return nbval_options(cell).get('check', True) is False
