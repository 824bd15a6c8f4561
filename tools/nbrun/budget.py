"""The collection's size budget, counted: ``python -m nbrun.budget [--check] [NOTEBOOK ...]``.

It counts what a learner reads:
- non-blank code lines a learner sees (cells not hidden), at most ``MAX_VISIBLE_LINES``; a hidden
  cell is one JupyterLab and Colab both fold (``hidden``): metadata ``jupyter.source_hidden`` and
  ``cellView: form``, first line ``# @title <what it prints>``;
- all non-blank code lines, hidden ones included, at most ``MAX_CODE_LINES``;
- printed text lines (streams and text values, not figures), at most ``MAX_OUTPUT_LINES``;
- no code cell over ``MAX_CELL_LINES`` non-blank lines, except a plot cell whose source is hidden
  (metadata ``jupyter.source_hidden``), which may have ``MAX_PLOT_LINES``;
- prose words (whitespace-separated tokens of the markdown cells), at most ``MAX_WORDS``;
- the share of stored text output that nbval compares (characters of text outputs in cells not
  tagged ``nbval-ignore-output`` or ``nbval-skip``, over all of them): printed, not limited.

``make test`` prints the table; ``tests/notebooks/test_lessons.py`` fails when a limit is passed.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

MAX_CODE_LINES = 1200
MAX_VISIBLE_LINES = 850
MAX_WORDS = 14000
MAX_OUTPUT_LINES = 320
MAX_CELL_LINES = 25
MAX_PLOT_LINES = 40
_TEXT = ('text/plain', 'text/markdown', 'text/html')


@dataclass
class Count:
    notebook: str
    code_lines: int = 0
    visible_lines: int = 0
    words: int = 0
    output_lines: int = 0
    long_cells: list[str] = field(default_factory=list)  # 'cell 12: 31 lines'
    compared_chars: int = 0
    output_chars: int = 0


def _text(value: object) -> str:
    return ''.join(value) if isinstance(value, list) else str(value or '')


def hidden(cell: dict) -> bool:
    """Folded in JupyterLab (``source_hidden``) and in Colab (a form cell with a ``@title``)."""
    meta = cell.get('metadata', {})
    return (
        meta.get('jupyter', {}).get('source_hidden') is True
        and meta.get('cellView') == 'form'
        and _text(cell.get('source')).startswith('# @title ')
    )


def _output_lines(cell: dict) -> int:
    n = 0
    for out in cell.get('outputs', []):
        if out.get('output_type') == 'stream':
            n += len(_text(out.get('text')).splitlines())
        elif out.get('output_type') == 'execute_result':
            n += len(_text(out.get('data', {}).get('text/plain')).splitlines())
    return n


def _output_chars(cell: dict) -> int:
    n = 0
    for out in cell.get('outputs', []):
        if out.get('output_type') == 'stream':
            n += len(_text(out.get('text')))
        elif out.get('output_type') == 'error':
            n += len(_text(out.get('evalue'))) + len(_text(out.get('traceback')))
        else:
            n += sum(len(_text(out.get('data', {}).get(k))) for k in _TEXT)
    return n


def count_one(path: Path) -> Count:
    nb = json.loads(Path(path).read_text(encoding='utf-8'))
    c = Count(Path(path).as_posix())
    for i, cell in enumerate(nb['cells']):
        source = _text(cell.get('source'))
        if cell['cell_type'] == 'markdown':
            c.words += len(source.split())
        if cell['cell_type'] != 'code':
            continue
        lines = sum(1 for line in source.splitlines() if line.strip())
        c.code_lines += lines
        c.visible_lines += 0 if hidden(cell) else lines
        c.output_lines += _output_lines(cell)
        limit = MAX_PLOT_LINES if hidden(cell) and 'plt.' in source else MAX_CELL_LINES
        if lines > limit:
            c.long_cells.append(f'cell {i}: {lines} lines (limit {limit})')
        chars = _output_chars(cell)
        c.output_chars += chars
        tags = cell.get('metadata', {}).get('tags', [])
        if not {'nbval-ignore-output', 'nbval-skip'} & set(tags):
            c.compared_chars += chars
    return c


def count(paths: list[Path]) -> list[Count]:
    return [count_one(p) for p in paths]


def problems(counts: list[Count]) -> list[str]:
    found = [f'{c.notebook}: {cell}' for c in counts for cell in c.long_cells]
    for what, limit in LIMITS.items():
        total = sum(getattr(c, what) for c in counts)
        if total > limit:
            found.append(f'{total} {NAMES[what]} (limit {limit})')
    return found


LIMITS = {
    'visible_lines': MAX_VISIBLE_LINES,
    'code_lines': MAX_CODE_LINES,
    'words': MAX_WORDS,
    'output_lines': MAX_OUTPUT_LINES,
}
NAMES = {
    'visible_lines': 'visible code lines',
    'code_lines': 'non-blank code lines',
    'words': 'prose words',
    'output_lines': 'printed output lines',
}


def compared_share(counts: list[Count]) -> float:
    total = sum(c.output_chars for c in counts)
    return sum(c.compared_chars for c in counts) / total if total else 1.0


def render(counts: list[Count]) -> str:
    head = ['visible', 'hidden', 'words', 'output', 'nbval compares']
    rows = [f'{"notebook":45}' + ''.join(f' {h:>8}' for h in head[:4]) + f' {head[4]:>14}']

    def row(name: str, cs: list[Count], share: float) -> str:
        visible, code = sum(c.visible_lines for c in cs), sum(c.code_lines for c in cs)
        words, out = sum(c.words for c in cs), sum(c.output_lines for c in cs)
        return f'{name:45} {visible:>8} {code - visible:>8} {words:>8} {out:>8} {share:>14.0%}'

    for c in counts:
        rows.append(
            row(c.notebook, [c], c.compared_chars / c.output_chars if c.output_chars else 1)
        )
    rows.append(row('total', counts, compared_share(counts)))
    rows.append(
        f'limits: visible {MAX_VISIBLE_LINES}, all code {MAX_CODE_LINES}, words {MAX_WORDS}, '
        f'output {MAX_OUTPUT_LINES}'
    )
    rows += [f'over the limit: {p}' for p in problems(counts)]
    return '\n'.join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog='python -m nbrun.budget', description=__doc__.split('\n')[0])
    ap.add_argument('notebooks', nargs='*', help='default: notebooks/*.ipynb exercises/*.ipynb')
    ap.add_argument('--check', action='store_true', help='exit 1 when a limit is passed')
    args = ap.parse_args(argv)
    paths = [Path(p) for p in args.notebooks] or sorted(
        [*Path('notebooks').glob('*.ipynb'), *Path('exercises').glob('*.ipynb')]
    )
    counts = count(paths)
    print('budget of the notebooks:\n' + render(counts))
    return 1 if args.check and problems(counts) else 0


if __name__ == '__main__':
    sys.exit(main())
