"""The collection's size budget, counted: ``python -m nbrun.budget [--check] [NOTEBOOK ...]``.

- non-blank code lines, at most ``MAX_CODE_LINES`` for the whole collection;
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
MAX_WORDS = 15000
MAX_CELL_LINES = 25
MAX_PLOT_LINES = 40
_TEXT = ('text/plain', 'text/markdown', 'text/html')


@dataclass
class Count:
    notebook: str
    code_lines: int = 0
    words: int = 0
    long_cells: list[str] = field(default_factory=list)  # 'cell 12: 31 lines'
    compared_chars: int = 0
    output_chars: int = 0


def _text(value: object) -> str:
    return ''.join(value) if isinstance(value, list) else str(value or '')


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
        hidden = cell.get('metadata', {}).get('jupyter', {}).get('source_hidden') is True
        limit = MAX_PLOT_LINES if hidden and 'plt.' in source else MAX_CELL_LINES
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
    code, words = sum(c.code_lines for c in counts), sum(c.words for c in counts)
    if code > MAX_CODE_LINES:
        found.append(f'{code} non-blank code lines (limit {MAX_CODE_LINES})')
    if words > MAX_WORDS:
        found.append(f'{words} prose words (limit {MAX_WORDS})')
    return found


def compared_share(counts: list[Count]) -> float:
    total = sum(c.output_chars for c in counts)
    return sum(c.compared_chars for c in counts) / total if total else 1.0


def render(counts: list[Count]) -> str:
    rows = [f'{"notebook":45} {"code lines":>10} {"words":>6} {"nbval compares":>14}']
    for c in counts:
        share = c.compared_chars / c.output_chars if c.output_chars else 1.0
        rows.append(f'{c.notebook:45} {c.code_lines:>10} {c.words:>6} {share:>14.0%}')
    code, words = sum(c.code_lines for c in counts), sum(c.words for c in counts)
    rows.append(
        f'{"total (limits " + str(MAX_CODE_LINES) + " / " + str(MAX_WORDS) + ")":45} '
        f'{code:>10} {words:>6} {compared_share(counts):>14.0%}'
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
