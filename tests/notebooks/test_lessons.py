"""The lesson skeleton (issue #17): short answers first, GPU answers from data, plots hidden.

- every exercise's first solution cell prints its short answer (``Đáp án ngắn``);
- every exercise prints the GPU answer from a stored reference run (``reference(...)``);
- the GPU answer comes right after the short answer, and no lesson cell prints a figure marked as
  an artefact (artefacts stay on the run's page);
- no cell types a regime label or an "x mức sàn" ratio: ``BenchmarkResult.breakdown`` prints them;
- every plumbing cell (install, stored runs, GPU answers, saving, plots) is folded in JupyterLab
  and in Colab (``nbrun.budget.hidden``), and a plumbing cell left visible is found;
- every exercise ends with the run-by-run table (``compare_runs``);
- the collection stays within its budget (code lines, cell length, prose words).
"""

from __future__ import annotations

import re

import pytest
from nbrun import budget
from nbtools import NOTEBOOKS, ROOT, code_cells, load

from d2lhelpers.reference import ANSWER, reference_runs

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
    assert any(text_of(c).startswith(f'{ANSWER} (tham khảo), lần chạy ') for c in cells)


PLUMBING = re.compile(
    r'reference\(|save_results\(|compare_runs\(|host_ratio\(|%pip install|plt\.|^import os',
    re.MULTILINE,
)


def visible_plumbing(nb) -> list[str]:
    """The first lines of code cells that do plumbing and are not folded in JupyterLab and Colab."""
    return [
        c.source.splitlines()[0]
        for c in code_cells(nb)
        if PLUMBING.search(c.source) and not budget.hidden(c)
    ]


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_plumbing_cells_are_folded_in_jupyterlab_and_colab(path):
    assert not visible_plumbing(load(path)), path


def test_a_plumbing_cell_left_visible_is_found():
    nb = load(NOTEBOOKS[0])
    cell = next(c for c in code_cells(nb) if 'save_results(' in c.source)
    assert not visible_plumbing(nb)
    del cell.metadata['cellView']  # folded in JupyterLab, shown by Colab
    assert visible_plumbing(nb) == [cell.source.splitlines()[0]]


@pytest.mark.parametrize('path', EXERCISES)
def test_an_exercise_ends_with_the_run_by_run_table(path):
    last = code_cells(load(path))[-1]
    printed = text_of(last)
    assert 'compare_runs(' in last.source and 'Lần chạy này so với các lần chạy lưu sẵn' in printed
    assert len(re.findall(r' \(\d+\.\d+x\)', printed)) >= 2, printed  # ratios to this run
    runs = reference_runs()
    assert sum(run in printed for run in runs) >= 2, printed


def test_the_collection_is_within_its_budget():
    report = budget.count([ROOT / p for p in NOTEBOOKS])
    assert not budget.problems(report), budget.render(report)


@pytest.mark.parametrize('path', EXERCISES)
def test_the_gpu_answer_follows_the_short_answer(path):
    cells = solution_cells(load(path))
    assert 'reference(' in cells[1].source, 'the cell after the short answer quotes a stored run'


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_no_lesson_cell_prints_an_artefact(path):
    bad = [c.id for c in code_cells(load(path)) if 'số đo hỏng (artefact)' in text_of(c)]
    assert not bad, f'{path}: cells {bad} print a figure marked as an artefact'


REGIME_BY_HAND = re.compile(
    r'x mức sàn|print\(.*(?:chi phí cố định|băng thông bộ nhớ|chế độ)'
    r"|=\s*'(?:chi phí cố định|băng thông bộ nhớ|tính toán)"
)


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_no_cell_types_a_regime_or_a_ratio_to_the_floor(path):
    bad = [
        f'{c.id}: {line.strip()}'
        for c in code_cells(load(path))
        for line in c.source.splitlines()
        if REGIME_BY_HAND.search(line)
    ]
    assert not bad, f'{path}: print them with result.breakdown(floor):\n' + '\n'.join(bad)


@pytest.mark.parametrize(
    'line',
    [
        "print(f'{r.median / floor:.2f}x mức sàn')",
        "regime = 'chi phí cố định (overhead) / mức sàn' if near else 'tính toán'",
        "print(f'- chế độ: {regime}')",
        "print('- vậy gần trọn thời gian là chi phí cố định (tham khảo)')",
    ],
)
def test_a_regime_typed_by_hand_is_found(line):
    assert REGIME_BY_HAND.search(line)
