"""The collection's budget (``python -m nbrun.budget``) on small synthetic notebooks."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbrun import budget


def write(path: Path, cells: list[nbformat.NotebookNode]) -> Path:
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    return path


def code(lines: int, *, hidden: bool = False, plot: bool = False, tags=(), outputs=()):
    """A code cell of ``lines`` non-blank lines (and as many blank ones, which do not count)."""
    body = ['plt.show()'] if plot else []
    body = ['# @title a figure'] * hidden + body
    body = [f'x{i} = {i}\n' for i in range(lines - len(body))] + body
    body = body[-1:] + body[:-1] if hidden and not plot else body  # the title first
    body = [body[-2], *body[:-2], body[-1]] if hidden and plot else body
    cell = nbformat.v4.new_code_cell('\n'.join(body), outputs=list(outputs))
    if hidden:
        cell.metadata['jupyter'] = {'source_hidden': True}
        cell.metadata['cellView'] = 'form'
    if tags:
        cell.metadata['tags'] = list(tags)
    return cell


def test_long_cells_and_the_hidden_plot_allowance(tmp_path):
    path = write(
        tmp_path / 'cells.ipynb',
        [
            code(25),  # at the limit: fine
            code(26),  # over it
            code(30, hidden=True, plot=True),  # a hidden plot cell may have 40
            code(30, hidden=True),  # hidden, but no plot: 25
            code(30, plot=True),  # a plot, but its source is shown: 25
            code(41, hidden=True, plot=True),  # over 40
        ],
    )
    (count,) = budget.count([path])
    assert count.code_lines == 25 + 26 + 30 + 30 + 30 + 41
    assert count.long_cells == [
        'cell 1: 26 lines (limit 25)',
        'cell 3: 30 lines (limit 25)',
        'cell 4: 30 lines (limit 25)',
        'cell 5: 41 lines (limit 40)',
    ]
    assert budget.problems([count]) == [f'{path.as_posix()}: {c}' for c in count.long_cells]


def test_the_collection_limits(tmp_path, capsys):
    def words():
        return nbformat.v4.new_markdown_cell('một  hai\nba ' * 2000)  # 6000 words

    lines = nbformat.v4.new_output('stream', name='stdout', text='a\n' * 300)
    small = write(tmp_path / 'small.ipynb', [words(), code(25, outputs=[lines])])
    assert budget.problems(budget.count([small])) == []
    assert budget.main(['--check', str(small)]) == 0
    # 34 visible cells of 25 lines: 850; 15 hidden: 1225 in all; 3 x 6000 words; 600 lines out
    cells = [words(), words(), words()] + [code(25) for _ in range(34)]
    cells += [code(25, hidden=True) for _ in range(14)] + [code(25, hidden=True, outputs=[lines])]
    big = write(tmp_path / 'big.ipynb', cells)
    found = budget.problems(budget.count([big]))
    assert found == [
        f'1225 non-blank code lines (limit {budget.MAX_CODE_LINES})',
        f'18000 prose words (limit {budget.MAX_WORDS})',
    ]
    more = write(tmp_path / 'more.ipynb', [code(1, outputs=[lines]), code(1, outputs=[lines])])
    assert budget.problems(budget.count([more])) == [
        f'600 printed output lines (limit {budget.MAX_OUTPUT_LINES})'
    ]
    capsys.readouterr()
    assert budget.main(['--check', str(big)]) == 1
    assert budget.main([str(big)]) == 0  # without --check it only prints
    table = capsys.readouterr().out
    assert 'over the limit: 1225 non-blank code lines' in table and '1225' in table


def test_a_plumbing_cell_left_visible_counts_as_visible(tmp_path):
    """A cell is hidden only when JupyterLab and Colab both fold it."""
    folded = code(10, hidden=True)
    lab_only = code(10, hidden=True)
    del lab_only.metadata['cellView']  # Colab would show it
    untitled = code(10, hidden=True)
    untitled.source = untitled.source.replace('# @title a figure', 'x = 0')  # no form title
    cells = [code(841), folded, lab_only, untitled]
    (count,) = budget.count([write(tmp_path / 'visible.ipynb', cells)])
    assert (count.visible_lines, count.code_lines) == (861, 871)
    assert budget.problems([count]) == [
        'cell 0: 841 lines (limit 25)'.join([f'{count.notebook}: ', '']),
        f'861 visible code lines (limit {budget.MAX_VISIBLE_LINES})',
    ]


def test_the_share_of_output_nbval_compares(tmp_path):
    stream = nbformat.v4.new_output('stream', name='stdout', text='abcd')  # 4
    plot = nbformat.v4.new_output(
        'display_data', data={'image/png': 'iVBORw0KGgo=' * 100, 'text/plain': '<Figure>'}
    )  # 8 (the PNG is no text)
    value = nbformat.v4.new_output(
        'execute_result', data={'text/plain': 'xy', 'text/html': '<b>xy</b>'}, execution_count=1
    )  # 2 + 9
    error = nbformat.v4.new_output('error', ename='E', evalue='bad', traceback=['tb1', 'tb2'])  # 9
    path = write(
        tmp_path / 'outputs.ipynb',
        [
            code(1, outputs=[stream, plot]),  # compared: 12
            code(1, tags=['nbval-ignore-output'], outputs=[value]),  # 11
            code(1, tags=['nbval-skip'], outputs=[stream]),  # 4
            code(1, outputs=[error]),  # compared: 9
            nbformat.v4.new_markdown_cell('no output'),
        ],
    )
    (count,) = budget.count([path])
    assert (count.compared_chars, count.output_chars) == (21, 36)
    assert budget.compared_share([count]) == pytest.approx(21 / 36)
    assert budget.compared_share([]) == 1.0
    assert f'{21 / 36:.0%}' in budget.render([count])
