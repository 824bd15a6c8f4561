"""The batch report: ``OUT/report.md`` (TensorFlow- and matplotlib-free), one source.

It knows no notebook. It shows the machine and its environment as ``summary.json`` holds them
(JSON), a table of the notebooks (status, time, error), then for each one its parameters, its
error and what the notebook itself marked for the report with cell tags (``marked_outputs``, read
from the executed notebook):

- ``report-headline``: the text such a cell printed (stdout, and ``text/plain`` results) is the
  notebook's headline figures (the runner puts it in the entry's ``headline``);
- ``report-figure``: each PNG output of such a cell is a figure, written to
  ``OUT/figures/<notebook path without .ipynb>/figure-<k>.png``.

A notebook may tag several cells; a new notebook needs nothing here. The ``results`` a notebook
saved are not repeated: they are in ``summary.json``, and its headline prints the figures that
matter. The report links the PNG files by relative paths: open ``report.md`` in JupyterLab, on
GitHub or in any Markdown viewer from the ``OUT`` folder, and keep ``figures/`` next to it when
moving it. Every file is written atomically.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

import nbformat

from nbrun.atomic import atomic_write

from .notebook import tags
from .summary import ErrorInfo

__all__ = ['FIGURE_TAG', 'HEADLINE_TAG', 'Marked', 'marked_outputs', 'write_report']

FIGURE_TAG = 'report-figure'
HEADLINE_TAG = 'report-headline'


@dataclass
class Marked:
    """What a notebook's tagged cells hold: headline text and PNG figures."""

    headline: str = ''
    figures: list[bytes] = field(default_factory=list)


def marked_outputs(nb: nbformat.NotebookNode) -> Marked:
    """The outputs of the cells tagged ``report-headline`` and ``report-figure`` in ``nb``."""
    marked = Marked()
    texts = []
    for cell in nb.cells:
        if cell.get('cell_type') != 'code':
            continue
        cell_tags = tags(cell)
        for out in cell.get('outputs', []):
            kind = out.get('output_type')
            data = out.get('data', {})
            if FIGURE_TAG in cell_tags and 'image/png' in data:
                png = data['image/png']
                marked.figures.append(
                    base64.b64decode(''.join(png) if isinstance(png, list) else png)
                )
            if HEADLINE_TAG not in cell_tags:
                continue
            if kind == 'stream' and out.get('name') == 'stdout':
                texts.append(''.join(out.get('text', '')))
            elif kind in ('execute_result', 'display_data') and 'text/plain' in data:
                if not any(k.startswith('image/') for k in data):
                    texts.append(''.join(data['text/plain']) + '\n')
    marked.headline = ''.join(texts).rstrip()
    return marked


# --- the fields of an entry ---------------------------------------------------------------------


def _seconds(entry: dict[str, Any]) -> str:
    return '–' if entry.get('seconds') is None else f'{entry["seconds"]:.1f} s'


def _params(entry: dict[str, Any]) -> str:
    return ', '.join(
        f'{k}={json.dumps(v, ensure_ascii=False)}'
        for k, v in (entry.get('parameters') or {}).items()
    )


def _error(entry: dict[str, Any]) -> str:
    return str(ErrorInfo(**entry['error'])) if entry.get('error') else ''


_ENDINGS = {'finished': 'chạy hết', 'runner error': 'trình chạy bị lỗi'}


# --- the report ----------------------------------------------------------------------------------


@dataclass
class _Section:
    entry: dict[str, Any]
    figures: list[str]  # paths relative to OUT, POSIX
    problem: str = ''  # why the executed notebook could not be read


def _sections(summary: dict[str, Any], out: Path) -> list[_Section]:
    """Read each executed notebook's tagged outputs and write its figures."""
    sections = []
    for entry in summary.get('notebooks', []):
        marked, figures, problem = Marked(), [], ''
        if entry.get('output'):
            try:
                nb = nbformat.read(out / entry['output'], as_version=4)
                marked = marked_outputs(nb)
            except (OSError, ValueError) as err:
                problem = f'không đọc được notebook đã chạy: {err}'
            folder = PurePosixPath('figures') / PurePosixPath(entry['output']).with_suffix('')
            for stale in (out / folder).glob('figure-*.png'):  # from an earlier run
                stale.unlink()
            if marked.figures:
                (out / folder).mkdir(parents=True, exist_ok=True)
            for k, png in enumerate(marked.figures, 1):
                rel = folder / f'figure-{k}.png'
                atomic_write(out / rel, png)
                figures.append(str(rel))
        sections.append(_Section(entry, figures, problem))
    return sections


def _head(summary: dict[str, Any]) -> tuple[str, list[str]]:
    entries = summary.get('notebooks', [])
    ok = sum(e.get('status') == 'ok' for e in entries)
    ending = summary.get('ending', 'finished')
    first = (
        f'{ok}/{len(entries)} notebook chạy xong (ok) trong '
        f'{summary.get("wall_seconds", 0):.1f} s'
        + (', --inplace' if summary.get('inplace') else '')
        + f'; kết thúc: {_ENDINGS.get(ending, f"bị dừng ({ending})")}.'
    )
    notes = []
    load = summary.get('load_average') or {}
    if load:
        notes.append(
            f'Tải máy (load average 1 phút) lúc bắt đầu {load.get("start")}, lúc kết thúc '
            f'{load.get("end")}: số đo thời gian chỉ đáng tin khi máy rảnh.'
        )
    return first, notes


def table_cell(text: str) -> str:
    """``text`` as one cell of a Markdown table (also for gpucheck's run pages)."""
    return text.replace('|', '\\|').replace('\n', ' ')


def _markdown(summary: dict[str, Any], sections: list[_Section]) -> str:
    first, notes = _head(summary)
    lines = ['# Báo cáo chạy notebook (batch report)', '', first, '']
    if summary.get('command'):
        lines += [f'Lệnh: `{summary["command"]}`', '']
    for note in notes:
        lines += [note, '']
    machine = {k: summary.get(k) for k in ('machine', 'environment')}
    lines += ['## Máy đã chạy (môi trường)', '', '```json']
    lines += [json.dumps(machine, indent=1, ensure_ascii=False, default=str), '```']
    lines += [
        '',
        '## Các notebook',
        '',
        '| notebook | trạng thái | thời gian | lỗi |',
        '|---|---|---:|---|',
    ]
    for s in sections:
        e = s.entry
        lines.append(
            f'| {table_cell(e["notebook"])} | {e["status"]} | {_seconds(e)} '
            f'| {table_cell(_error(e))} |'
        )
    for s in sections:
        e = s.entry
        lines += ['', f'## {e["notebook"]}', '']
        lines.append(f'- trạng thái: {e["status"]}, {_seconds(e)}')
        if _params(e):
            lines.append(f'- tham số: `{_params(e)}`')
        if _error(e):
            lines.append(f'- lỗi: {_error(e)}')
        if s.problem:
            lines.append(f'- {s.problem}')
        headline = e.get('headline')
        if headline:
            fence = '```' if '```' not in headline else '~~~~'
            lines += ['', 'Số liệu chính:', '', fence, headline, fence]
        for k, rel in enumerate(s.figures, 1):
            lines += ['', f'![{e["notebook"]}, hình {k}]({quote(rel)})']
    return '\n'.join(lines) + '\n'


def write_report(summary: dict[str, Any], out: str | Path) -> Path:
    """Write ``out/report.md`` and its figures; return its path.

    ``summary`` is what ``summary.json`` holds; the executed notebooks are read from ``out``.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    sections = _sections(summary, out)
    return atomic_write(out / 'report.md', _markdown(summary, sections))
