"""Hygiene of every committed notebook in notebooks/ and exercises/ (their stored form, not a run).

Markers are read with nbval's own functions, so "marked" here means what nbval will do.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import nbformat
import pytest
from nbval.plugin import comment_markers, find_comment_markers, find_metadata_tags

from d2lhelpers.notebook import canonical, declared_parameters

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(
    p.relative_to(ROOT).as_posix()
    for folder in ('notebooks', 'exercises')
    for p in (ROOT / folder).rglob('*.ipynb')
    if '.ipynb_checkpoints' not in p.parts
)
COLAB = 'https://colab.research.google.com/github/d2l-vi/d2l-tf-gpu/blob/main/'
MACHINE_PATHS = ('/work/', '/tmp/', '/root/', '/home/')
D2LBOOK_MARKUP = (
    ':label:',
    ':numref:',
    ':eqref:',
    ':cite:',
    ':begin_tab:',
    ':end_tab:',
    '[**',
    '(**',
)
# Mistranslations of the seed chapter (see /work/shared/NOTES.md, "Vietnamese terms"), as regexes.
# "hàng chục" is the seed's word for "tensors"; "hàng chục lần" (tens of times) is correct Vietnamese.
MISTRANSLATIONS = (
    'hàng chục(?! lần)',
    'máy biến áp',
    'đăng nhập',
    'core kéo',
    'core căng',
    'mạng tái phát',
    'chế phẩm',
)

per_notebook = pytest.mark.parametrize('path', NOTEBOOKS)


def load(path: str) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / path, as_version=nbformat.NO_CONVERT)


def cell_name(cell) -> str:
    """How a message names a cell: its id (stable), else its first line."""
    return cell.get('id') or (cell.source.splitlines() or ['?'])[0][:40]


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == 'code']


def nbval_options(cell) -> dict:
    """What nbval does with this cell: {'skip': True}, {'check': False}, {'check_exception': True}."""
    options = dict(find_metadata_tags(cell.get('metadata', {})))
    options.update(find_comment_markers(cell.source))
    return options


def ignores_output(cell) -> bool:
    return nbval_options(cell).get('check', True) is False


def comment_lines(source: str) -> list[str]:
    return [
        line.strip().lstrip('#').strip()
        for line in source.splitlines()
        if line.strip().startswith('#')
    ]


def output_texts(cell):
    """Every text a cell's outputs hold (images skipped: base64 may contain any '/x/')."""
    for out in cell.get('outputs', []):
        if 'text' in out:
            yield out.text
        for mime, value in out.get('data', {}).items():
            if not mime.startswith('image/') or mime == 'image/svg+xml':
                yield value if isinstance(value, str) else ''.join(value)
        if out.output_type == 'error':
            yield out.get('evalue', '')
            yield '\n'.join(out.get('traceback', []))


def test_there_are_notebooks():
    assert NOTEBOOKS, 'no notebook in notebooks/ or exercises/: these tests would pass vacuously'


@per_notebook
def test_valid_nbformat_v4(path):
    nb = load(path)
    assert nb.nbformat == 4
    nbformat.validate(nb)


@per_notebook
def test_kernelspec_is_python3(path):
    spec = load(path).metadata.get('kernelspec', {})
    assert spec.get('name') == 'python3' and spec.get('language') == 'python', spec


@per_notebook
def test_no_papermill_metadata(path):
    nb = load(path)
    assert 'papermill' not in nb.metadata
    assert not [
        c.get('id')
        for c in nb.cells
        if 'injected-parameters' in c.get('metadata', {}).get('tags', [])
    ]


@per_notebook
def test_no_volatile_cell_metadata(path):
    bad = [
        (i, key)
        for i, c in enumerate(load(path).cells)
        for key in ('execution', 'papermill', 'ExecuteTime')
        if key in c.get('metadata', {})
    ]
    bad += [
        (i, 'output.metadata.execution')
        for i, c in enumerate(load(path).cells)
        for out in c.get('outputs', [])
        if 'execution' in out.get('metadata', {})
    ]
    assert not bad, f'volatile metadata (cell index, key): {bad}'


@per_notebook
def test_execution_counts_are_1_to_n(path):
    cells = code_cells(load(path))
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), (
        'stored outputs must come from one clean run: `make refresh NB=' + path + '`'
    )


@per_notebook
def test_execute_results_carry_their_cell_count(path):
    bad = [
        cell_name(c)
        for c in code_cells(load(path))
        for out in c.outputs
        if out.output_type == 'execute_result' and out.execution_count != c.execution_count
    ]
    assert not bad, f'cells with a mismatched execute_result count: {bad}'


@per_notebook
def test_no_stored_errors_outside_raises_exception_cells(path):
    bad = [
        cell_name(c)
        for c in code_cells(load(path))
        if any(out.output_type == 'error' for out in c.outputs)
        and not nbval_options(c).get('check_exception')
    ]
    assert not bad, f'stored error outputs in cells {bad} (not marked NBVAL_RAISES_EXCEPTION)'


@per_notebook
def test_no_machine_paths_in_outputs(path):
    bad = sorted(
        {
            (cell_name(c), p)
            for c in code_cells(load(path))
            for text in output_texts(c)
            for p in MACHINE_PATHS
            if p in text
        }
    )
    assert not bad, f'paths of the machine that ran the notebook (cell, path): {bad}'


@per_notebook
def test_nbval_markers_are_spelled_so_nbval_sees_them(path):
    # nbval only recognises a comment that is exactly the marker: `# NBVAL_IGNORE_OUTPUT: why`
    # or `# NBVAL_SKIP (why)` is silently ignored. The reason goes on its own comment line.
    bad = [
        (cell_name(c), line)
        for c in code_cells(load(path))
        for line in comment_lines(c.source)
        if 'NBVAL_' in line and line not in comment_markers
    ]
    assert not bad, (
        f'malformed nbval markers (cell, comment), put the reason on its own line: {bad}'
    )


@per_notebook
def test_ignore_output_on_at_most_a_third_of_code_cells(path):
    cells = code_cells(load(path))
    ignored = [cell_name(c) for c in cells if ignores_output(c)]
    assert 3 * len(ignored) <= len(cells), f'{len(ignored)} of {len(cells)} code cells: {ignored}'


@per_notebook
def test_ignore_output_cells_say_why(path):
    bad = [
        cell_name(c)
        for c in code_cells(load(path))
        if ignores_output(c)
        and not [line for line in comment_lines(c.source) if line and line not in comment_markers]
    ]
    assert not bad, f'NBVAL_IGNORE_OUTPUT cells without a comment saying why: {bad}'


@per_notebook
def test_skip_only_for_the_colab_install_cell(path):
    bad = [
        cell_name(c)
        for c in code_cells(load(path))
        if nbval_options(c).get('skip') and 'google.colab' not in c.source
    ]
    assert not bad, f'NBVAL_SKIP outside a Colab install cell: {bad}'


@per_notebook
def test_colab_badge_links_to_this_notebook(path):
    markdown = '\n'.join(c.source for c in load(path).cells if c.cell_type == 'markdown')
    links = re.findall(r'https://colab\.research\.google\.com/github/[^\s)"\']+', markdown)
    assert COLAB + path in links, f'no Colab badge linking to {COLAB + path}'
    assert set(links) == {COLAB + path}, f'Colab links to other notebooks: {set(links)}'


@per_notebook
def test_has_a_parameters_cell(path):
    assert [
        c for c in code_cells(load(path)) if 'parameters' in c.get('metadata', {}).get('tags', [])
    ], 'no cell tagged `parameters`'


@per_notebook
def test_markdown_has_no_d2lbook_markup(path):
    bad = sorted(
        {
            m
            for c in load(path).cells
            if c.cell_type == 'markdown'
            for m in D2LBOOK_MARKUP
            if m in c.source
        }
    )
    assert not bad, f'd2lbook markup that Jupyter and Colab show as raw text: {bad}'


@per_notebook
def test_no_seed_mistranslations(path):
    text = unicodedata.normalize('NFC', '\n'.join(c.source for c in load(path).cells)).lower()
    bad = [
        m.group()
        for w in MISTRANSLATIONS
        for m in re.finditer(unicodedata.normalize('NFC', w), text)
    ]
    assert not bad, f'mistranslations of the seed chapter: {bad}'


@per_notebook
def test_results_path_is_saved(path):
    nb = load(path)
    if 'results_path' not in declared_parameters(nb):
        pytest.skip('declares no results_path')
    assert any('save_results(' in c.source for c in code_cells(nb)), (
        'declares results_path but no code cell calls save_results('
    )


@per_notebook
def test_timing_notebooks_say_so_in_metadata(path):
    nb = load(path)
    if not any(re.search(r'\b(benchmark|Timer)\(', c.source) for c in code_cells(nb)):
        pytest.skip('times nothing')
    assert nb.metadata.get('d2l', {}).get('measures_time') is True, (
        'a notebook that times code needs metadata "d2l": {"measures_time": true}'
    )


@per_notebook
def test_stored_form_is_canonical(path):
    text = (ROOT / path).read_text(encoding='utf-8')
    expected = nbformat.writes(canonical(nbformat.reads(text, as_version=nbformat.NO_CONVERT)))
    if not expected.endswith('\n'):
        expected += '\n'
    assert text == expected, f'not in its committed form: run `make refresh NB={path}`'


def test_notebooks_named_by_helper_docstrings_exist():
    named = {
        m
        for module in ('devices', 'timing', 'params')
        for m in re.findall(
            r'(?:notebooks|exercises)/[\w.-]+\.ipynb',
            (ROOT / 'd2lhelpers' / f'{module}.py').read_text(encoding='utf-8'),
        )
    }
    assert named, 'the helper modules name no notebook that teaches them'
    missing = sorted(m for m in named if not (ROOT / m).exists())
    assert not missing, f'helper docstrings name notebooks that do not exist: {missing}'
