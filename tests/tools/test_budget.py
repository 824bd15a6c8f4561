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
    body = [f'x{i} = {i}\n' for i in range(lines - len(body))] + body
    cell = nbformat.v4.new_code_cell('\n'.join(body), outputs=list(outputs))
    if hidden:
        cell.metadata['jupyter'] = {'source_hidden': True}
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

    small = write(tmp_path / 'small.ipynb', [words(), code(25)])
    assert budget.problems(budget.count([small])) == []
    assert budget.main(['--check', str(small)]) == 0
    # 49 cells of 25 lines: 1225 lines, no cell too long; 3 x 6000 words
    big = write(tmp_path / 'big.ipynb', [words(), words(), words()] + [code(25) for _ in range(49)])
    found = budget.problems(budget.count([big]))
    assert found == [
        f'1225 non-blank code lines (limit {budget.MAX_CODE_LINES})',
        f'18000 prose words (limit {budget.MAX_WORDS})',
    ]
    capsys.readouterr()
    assert budget.main(['--check', str(big)]) == 1
    assert budget.main([str(big)]) == 0  # without --check it only prints
    table = capsys.readouterr().out
    assert 'over the limit: 1225 non-blank code lines' in table and '1225' in table


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
