"""The lesson skeleton (issue #17): short answers first, GPU answers from data, plots hidden.

- every exercise's first solution cell prints its short answer (``Đáp án ngắn``);
- every exercise prints the GPU answer from a stored reference run (``reference(...)``);
- every plot cell hides its source (JupyterLab's ``source_hidden``, Colab's ``#@title``);
- the collection stays within its budget (code lines, cell length, prose words).
"""

from __future__ import annotations

import re
import sys

import pytest
from nbtools import NOTEBOOKS, ROOT, code_cells, load

sys.path.insert(0, str(ROOT / 'tools'))
from nbrun import budget  # noqa: E402

EXERCISES = [p for p in NOTEBOOKS if p.startswith('exercises/')]


def text_of(cell) -> str:
    out = []
    for o in cell.get('outputs', []):
        if o.get('output_type') == 'stream':
            out.append(o.get('text', ''))
        elif 'data' in o:
            out.append(o['data'].get('text/plain', ''))
    return ''.join(t if isinstance(t, str) else ''.join(t) for t in out)


def solution_cells(nb) -> list:
    """The code cells after the ``## Lời giải`` heading."""
    cells, seen = [], False
    for cell in nb.cells:
        if cell.cell_type == 'markdown' and cell.source.lstrip().startswith('## Lời giải'):
            seen = True
        elif seen and cell.cell_type == 'code':
            cells.append(cell)
    return cells


@pytest.mark.parametrize('path', EXERCISES)
def test_the_first_solution_cell_prints_the_short_answer(path):
    cells = solution_cells(load(path))
    assert cells, f'{path}: no "## Lời giải" heading followed by code'
    printed = text_of(cells[0])
    assert printed.lstrip().startswith('Đáp án ngắn'), printed[:200]
    assert 3 <= len(printed.strip().splitlines()) <= 7, printed


@pytest.mark.parametrize('path', EXERCISES)
def test_an_exercise_prints_the_gpu_answer_from_a_reference_run(path):
    cells = [c for c in code_cells(load(path)) if 'reference(' in c.source]
    assert cells, f'{path} never calls reference(...)'
    assert any('Số đo tham khảo' in text_of(c) for c in cells)
    assert any('(tham khảo)' in text_of(c) for c in cells)


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_plot_cells_hide_their_source(path):
    for cell in code_cells(load(path)):
        if 'report-figure' in cell.metadata.get('tags', []):
            assert cell.metadata.get('jupyter', {}).get('source_hidden') is True, path
            assert re.match(r'# ?@title ', cell.source), cell.source[:80]  # Colab's form title


def test_the_collection_is_within_its_budget():
    report = budget.count([ROOT / p for p in NOTEBOOKS])
    assert not budget.problems(report), budget.render(report)
