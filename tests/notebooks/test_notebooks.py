"""Hygiene of every committed notebook in notebooks/ and exercises/ (their stored form, not a run).

Markers are read with nbval's own functions, so "marked" here means what nbval will do. The words
are checked by tests/notebooks/test_vocabulary.py.
"""

from __future__ import annotations

import base64
import re
import struct
import zlib

import nbformat
import pytest
from nbrun.notebook import canonical, declared_parameters
from nbtools import NOTEBOOKS, ROOT, code_cells, ignores_output, load, nbval_options, sanitize

from d2lhelpers.datasheets import DATASHEETS

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
DPI = 100  # matplotlib's default figure.dpi, which the inline backend keeps

per_notebook = pytest.mark.parametrize('path', NOTEBOOKS)


def cell_name(cell) -> str:
    """How a message names a cell: its id (stable), else its first line."""
    return cell.get('id') or (cell.source.splitlines() or ['?'])[0][:40]


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
def test_execution_counts_are_1_to_n(path):
    cells = code_cells(load(path))
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), (
        'stored outputs must come from one clean run: `make refresh NB=' + path + '`'
    )


@per_notebook
def test_no_stored_errors(path):
    # the batch runner fails a notebook at any error: a lesson catches the errors it teaches
    bad = [
        cell_name(c)
        for c in code_cells(load(path))
        if any(out.output_type == 'error' for out in c.outputs)
        or nbval_options(c).get('check_exception')
    ]
    assert not bad, f'stored error outputs, or cells marked to raise, in {bad}'


@per_notebook
def test_no_stored_output_on_stderr(path):
    bad = [
        cell_name(c)
        for c in code_cells(load(path))
        for out in c.get('outputs', [])
        if out.get('name') == 'stderr'
    ]
    assert not bad, f'cells with output on stderr (a warning a learner would see): {bad}'


XLA_ON = re.compile(r'jit_compile=(?!False)|set_jit\(|tf_xla_auto_jit|--xla_')


@per_notebook
def test_no_code_cell_compiles_with_xla(path):
    # TF 2.20 (Colab's) prints two lines on stderr the first time XLA compiles ("All log messages
    # before absl::InitializeLog() ...", "Compiled cluster using XLA!"), whatever
    # TF_CPP_MIN_LOG_LEVEL says; Keras 3's compile() turns XLA on for fit on a GPU unless it is
    # given jit_compile=False. So no cell turns XLA on, and every compile() turns it off.
    cells = code_cells(load(path))
    bad = [cell_name(c) for c in cells if XLA_ON.search(c.source)]
    bad += [
        cell_name(c)
        for c in cells
        for call in re.findall(r'\.compile\([^\n]*', c.source)
        if 'jit_compile=False' not in call
    ]
    assert not bad, f'cells that may compile with XLA: {bad}'


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
def test_nbval_markers_are_cell_tags_not_comments(path):
    # nbval reads the tags nbval-skip, nbval-ignore-output and raises-exception; a comment
    # marker would put test machinery in the learner's view.
    bad = [cell_name(c) for c in load(path).cells if 'NBVAL_' in c.source]
    assert not bad, f'cells with NBVAL_ text (use a cell tag instead): {bad}'


@per_notebook
def test_ignore_output_on_at_most_a_third_of_code_cells(path):
    cells = code_cells(load(path))
    ignored = [cell_name(c) for c in cells if ignores_output(c)]
    assert 3 * len(ignored) <= len(cells), f'{len(ignored)} of {len(cells)} code cells: {ignored}'


@per_notebook
def test_cells_not_compared_say_why_in_their_first_line(path):
    bad = [
        cell_name(c)
        for c in code_cells(load(path))
        if (ignores_output(c) or nbval_options(c).get('skip'))
        and not (c.source.lstrip().startswith('#') and comment_lines(c.source)[0])
    ]
    assert not bad, f'cells not compared whose first line is not a comment saying why: {bad}'


@per_notebook
def test_no_cell_is_skipped(path):
    # The install cell installs only on Colab or Kaggle: elsewhere nbval runs it as a no-op.
    bad = [cell_name(c) for c in code_cells(load(path)) if nbval_options(c).get('skip')]
    assert not bad, f'cells nbval skips: {bad}'


@per_notebook
def test_imports_only_from_the_package_top_level(path):
    import d2lhelpers

    bad = [
        cell_name(c) for c in code_cells(load(path)) if re.search(r'from d2lhelpers\.', c.source)
    ]
    assert not bad, f'import from a submodule of d2lhelpers (use `from d2lhelpers import`): {bad}'
    for c in code_cells(load(path)):
        for grouped, inline in re.findall(
            r'from d2lhelpers import (?:\(([\w\s,]+)\)|([\w \t,]+))', c.source
        ):
            names = (grouped or inline).split(',')
            unknown = {n.strip() for n in names if n.strip()} - set(d2lhelpers.__all__)
            assert not unknown, f'{cell_name(c)} imports names not in d2lhelpers.__all__: {unknown}'


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
def test_stored_form_is_canonical(path):
    text = (ROOT / path).read_text(encoding='utf-8')
    expected = nbformat.writes(canonical(nbformat.reads(text, as_version=nbformat.NO_CONVERT)))
    if not expected.endswith('\n'):
        expected += '\n'
    assert text == expected, f'not in its committed form: run `make refresh NB={path}`'


def report_cells(nb, tag: str) -> list:
    return [c for c in code_cells(nb) if tag in c.get('metadata', {}).get('tags', [])]


@per_notebook
def test_a_measuring_notebook_has_its_report_cells(path):
    nb = load(path)
    if 'results_path' not in declared_parameters(nb):
        pytest.skip('declares no results_path')
    headline = report_cells(nb, 'report-headline')
    assert len(headline) == 1 and 'save_results(' in headline[0].source, (
        'the cell that calls save_results( must be the one cell tagged report-headline'
    )
    if path != 'notebooks/use-gpu.ipynb':  # it saves where tensors went, and times nothing
        assert report_cells(nb, 'report-figure'), 'no cell tagged report-figure'


def png_size(data: str) -> tuple[int, int]:
    """(width, height) of a base64 PNG, after checking its signature and its IHDR checksum."""
    raw = base64.b64decode(data)
    assert raw[:8] == b'\x89PNG\r\n\x1a\n', 'not a PNG'
    length, kind = struct.unpack('>I4s', raw[8:16])
    assert kind == b'IHDR' and length == 13, 'no IHDR chunk first'
    (crc,) = struct.unpack('>I', raw[29:33])
    assert crc == zlib.crc32(raw[12:29]), 'IHDR checksum does not match: damaged PNG'
    assert raw.rstrip(b'\x00').endswith(b'IEND\xaeB`\x82'), 'no IEND chunk: truncated PNG'
    return struct.unpack('>II', raw[16:24])


@per_notebook
def test_each_figure_cell_holds_a_valid_png_of_its_figsize(path):
    # nbval does not compare images: this checks that each committed plot is there, is a whole
    # PNG, and has about the size its cell asks for (figsize x 100 dpi; the inline backend's
    # tight bounding box trims a few percent).
    for cell in report_cells(load(path), 'report-figure'):
        sizes = [
            (float(w) * DPI, float(h) * DPI)
            for w, h in re.findall(r'figsize=\(([\d.]+),\s*([\d.]+)\)', cell.source)
        ]
        pngs = [o.data['image/png'] for o in cell.outputs if 'image/png' in o.get('data', {})]
        assert sizes, f'{cell_name(cell)}: give the figure a figsize=(w, h)'
        assert pngs, f'{cell_name(cell)}: no PNG stored (the plot is missing)'
        for png in pngs:
            w, h = png_size(png)
            assert any(
                0.8 * fw <= w <= 1.05 * fw and 0.8 * fh <= h <= 1.05 * fh for fw, fh in sizes
            ), f'{cell_name(cell)}: {w}x{h} px for figsize {sizes}'


@per_notebook
def test_data_sheet_figures_are_printed_where_nbval_compares_them(path):
    # A data-sheet figure is a fixed value: printed on a line that the sanitizer leaves alone
    # (a line that says "data sheet"), a change to it fails nbval.
    fixed = {f'{s.bandwidth_gbs:g} GB/s' for s in DATASHEETS}
    fixed |= {f'{s.fp32_tflops:g} TFLOP/s' for s in DATASHEETS}
    masked = [
        (cell_name(c), line)
        for c in code_cells(load(path))
        for text in output_texts(c)
        for line in text.splitlines()
        if any(f in line for f in fixed) and sanitize(line) != line
    ]
    assert not masked, f'data-sheet figures on lines the sanitizer masks: {masked}'


HAND_MADE_DURATION = re.compile(r'\}\s?(?:ms|µs|us|ns|s)(?![\w/])')


@per_notebook
def test_durations_are_printed_by_format_seconds(path):
    # tests/sanitize.cfg masks a duration with its unit (format_seconds picks the unit from the
    # value); a hand-made unit such as f'{t * 1e3:.1f} ms' could be wrong without nbval noticing.
    bad = [
        (cell_name(c), m.group())
        for c in code_cells(load(path))
        for m in HAND_MADE_DURATION.finditer(c.source)
    ]
    assert not bad, f'durations formatted by hand (use format_seconds): {bad}'


def test_the_hand_made_duration_check_can_fail():
    assert HAND_MADE_DURATION.search("print(f'{t * 1e3:.1f} ms')")
    assert HAND_MADE_DURATION.search("f'{seconds}s'")
    assert not HAND_MADE_DURATION.search("f'{format_seconds(t)} mỗi bước, {n} số, {r:.1f} GB/s'")
