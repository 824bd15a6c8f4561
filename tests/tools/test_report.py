"""The batch report, on notebooks the runner really executed.

It knows no notebook: what it shows comes from ``summary.json`` and from the cells each
notebook tags ``report-figure`` (PNG outputs) and ``report-headline`` (text outputs). Here a
notebook of ``tests/tools/nb/`` and a new notebook made by the test itself go through a real batch.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from batch_support import batch, copy, new_notebook, summary
from nbrun import cli
from nbrun.report import marked_outputs, write_report
from nbrun.summary import Entry, machine, make_summary
from runfixtures import gpu_env

ROOT = Path(__file__).resolve().parents[2]
PNG = b'\x89PNG\r\n\x1a\n'

PLOT = (
    'import matplotlib.pyplot as plt\n\n'
    'fig, ax = plt.subplots(figsize=(2, 1.5), dpi=40)\n'
    'ax.plot([0, 1], [{y}, 0])\n'
    'plt.show()'
)


def test_the_report_shows_what_the_notebooks_tagged(tmp_path):
    """figure.ipynb (tests/tools/nb) and a new notebook, which fails after drawing its figures."""
    copy(tmp_path, 'figure')
    new_notebook(
        tmp_path / 'sub' / 'new.ipynb',
        [
            (PLOT.format(y=1), ['report-figure']),
            (PLOT.format(y=2), []),  # not tagged: not in the report
            ("print('số mới: 42 <b>&')\n{'n': 42}", ['report-headline']),
            (PLOT.format(y=3) + "\nprint('không phải số chính')", ['report-figure']),
            ("raise ValueError('sau các hình')", []),
        ],
    )
    run = batch(tmp_path, '.', '-p', 'points', '3', '--out', 'out', '--no-report')
    assert run.returncode == 1, run.stdout + run.stderr  # sub/new.ipynb fails, at its end
    out = tmp_path / 'out'
    data = summary(out)
    stale = out / 'figures' / 'figure' / 'figure-9.png'
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(PNG)  # from an earlier run: removed
    md = write_report(data, out).read_text(encoding='utf-8')
    assert not (out / 'report.html').exists()  # one report, one format

    figures = sorted(p.relative_to(out).as_posix() for p in (out / 'figures').rglob('*.png'))
    assert figures == [
        'figures/figure/figure-1.png',
        'figures/sub/new/figure-1.png',
        'figures/sub/new/figure-2.png',
    ]
    assert all((out / f).read_bytes().startswith(PNG) for f in figures)
    assert (out / figures[1]).read_bytes() != (out / figures[2]).read_bytes()
    for f in figures:
        assert f']({f})' in md, f

    # the headlines: stdout and the value of the tagged cell, nothing from other cells
    assert "số mới: 42 <b>&\n{'n': 42}" in md and 'không phải số chính' not in md
    assert 'lớn nhất: 4 ở n = 2' in md  # -p points 3
    # the results stay in summary.json: the report does not format them a second time
    assert data['notebooks'][0]['results'] == {'squares': [0, 1, 4], 'best': {'n': 2, 'value': 4}}
    assert 'squares' not in md
    # the summary carries the headlines the report shows
    headlines = {e['notebook']: e['headline'] for e in data['notebooks']}
    assert headlines == {
        'figure.ipynb': 'lớn nhất: 4 ở n = 2',
        'sub/new.ipynb': "số mới: 42 <b>&\n{'n': 42}",
    }
    # the table: status, time, the error; then parameters
    assert '## sub/new.ipynb' in md and '## figure.ipynb' in md
    assert '| sub/new.ipynb | failed |' in md and 'ValueError (ô 4): sau các hình |' in md
    assert 'points=3' in md
    for e in data['notebooks']:
        assert f'| {e["notebook"]} | {e["status"]} | {e["seconds"]:.1f} s |' in md


def test_marked_outputs_of_a_notebook():
    png = nbformat.v4.new_output(
        'display_data', data={'image/png': 'iVBORw0KGgo=', 'text/plain': '<Figure>'}
    )
    figure = nbformat.v4.new_code_cell('', outputs=[png], metadata={'tags': ['report-figure']})
    headline = nbformat.v4.new_code_cell(
        '',
        metadata={'tags': ['report-headline']},
        outputs=[
            nbformat.v4.new_output('stream', name='stdout', text='a: 1\n'),
            nbformat.v4.new_output('stream', name='stderr', text='warning\n'),
            png,
            nbformat.v4.new_output('execute_result', data={'text/plain': '2'}, execution_count=1),
        ],
    )
    untagged = nbformat.v4.new_code_cell('', outputs=[png])
    marked = marked_outputs(nbformat.v4.new_notebook(cells=[figure, headline, untagged]))
    assert marked.headline == 'a: 1\n2'
    assert marked.figures == [PNG]


def test_the_command_writes_the_report_and_its_environment(tmp_path, monkeypatch, capsys):
    """The command asks a fresh interpreter for the environment (TensorFlow), then writes. The
    summary comes from ``make_summary`` and the environment from ``EnvReport`` (``gpu_env``),
    their producers."""
    env = gpu_env()
    data = make_summary([Entry('ok.ipynb', 'ok', 1.5)], wall_seconds=2.0, machine=machine())
    monkeypatch.setattr(cli, 'environment', lambda: env)
    cli._report(data, tmp_path)
    again = summary(tmp_path)
    assert again['environment'] == env and again['report_seconds'] >= 0
    md = (tmp_path / 'report.md').read_text(encoding='utf-8')
    assert '"name": "NVIDIA H100 80GB HBM3"' in md and f'"cores": {machine()["cores"]}' in md
    assert '| ok.ipynb | ok | 1.5 s |  |' in md
    assert 'report: ' in capsys.readouterr().out
