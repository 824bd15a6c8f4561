"""The GPU reference pages (docs/gpu-*.md) against their figures.json, images and run folder.

A GPU page (e.g. ``docs/gpu-h200.md``) shows the figures of one real GPU run. It links to a
``figures.json`` beside its plots (``docs/gpu-h200/figures.json``) that lists every figure the page
quotes, each with the file of the run folder it comes from and its text exactly as printed there.
Checked here, without TensorFlow:

* every figure of figures.json appears verbatim on its page;
* when the run folder is present (``run_dir``, e.g. ``../shared/gpu-runs/h200-2026-11-30``; it is
  not part of the repository, so elsewhere this check is skipped), every figure appears verbatim in
  its source file (for a notebook, in the outputs of the cell with that execution count);
* every image the page shows exists and is a whole, valid PNG;
* README.md links to every GPU page, and every notebook whose markdown quotes a figure of that GPU
  (a paragraph that names it, e.g. "H200", next to a number with a unit) links to the page.

Making a page from a new run: see the section "Làm lại trang này từ một lần chạy mới" of the page
(under "Dành cho người bảo trì").
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path

import pytest
from nbtools import NOTEBOOKS, load

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / 'docs').glob('gpu-*.md'))
KINDS = {'machine', 'measured', 'artefact', 'data sheet'}
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
# A figure as the notebooks quote one: a number and its unit (2.02x, 39.511 ms, 3.0e-06, 82%).
FIGURE = re.compile(
    r'\b\d+(?:\.\d+)?(?:e-\d+\b|\s?(?:µs|ms|s|TFLOP/s|GFLOP/s|TB/s|GB/s|MiB|GB)\b|x\b|%)'
)


def page_text(page: str) -> str:
    return (ROOT / page).read_text(encoding='utf-8')


def link_targets(markdown: str) -> list[str]:
    """Targets of markdown links and images, ``[text](target)`` and ``![alt](target)``."""
    return re.findall(r'\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)', markdown)


def image_targets(markdown: str) -> list[str]:
    """Images shown by a markdown page: ``![alt](target)`` and ``<img src="target">``."""
    md = re.findall(r'!\[[^\]]*\]\(\s*<?([^)\s>]+)', markdown)
    html = re.findall(r'<img\b[^>]*\bsrc\s*=\s*["\']([^"\']+)["\']', markdown, flags=re.I)
    return md + html


def figures_of(page: str) -> tuple[Path, dict]:
    """The figures.json a page links to, and its content."""
    targets = [t for t in link_targets(page_text(page)) if t.endswith('figures.json')]
    assert len(targets) == 1, f'{page} must link to exactly one figures.json, found {targets}'
    path = (ROOT / page).parent / targets[0]
    assert path.is_file(), f'{page} links to {targets[0]}, which does not exist'
    return path, json.loads(path.read_text(encoding='utf-8'))


def png_problem(data: bytes) -> str | None:
    """Why ``data`` is not a whole PNG (signature, IHDR first, every chunk's CRC, IEND last)."""
    if data[:8] != PNG_SIGNATURE:
        return 'no PNG signature'
    pos, chunks = 8, []
    while pos + 12 <= len(data):
        (length,) = struct.unpack('>I', data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        if pos + 12 + length > len(data):
            return f'chunk {kind!r} at byte {pos} is cut off'
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack('>I', data[pos + 8 + length : pos + 12 + length])
        if zlib.crc32(kind + body) != crc:
            return f'chunk {kind!r} at byte {pos} has a wrong CRC'
        chunks.append(kind)
        pos += 12 + length
        if kind == b'IEND':
            break
    if not chunks or chunks[0] != b'IHDR' or chunks[-1] != b'IEND':
        return f'chunks {chunks[:3]}...{chunks[-1:]}: IHDR must come first and IEND last'
    width, height = struct.unpack('>II', data[16:24])
    if not (width and height):
        return f'empty image ({width} x {height})'
    return None


def notebook_output_text(path: Path, cell: int | None) -> str:
    """The text outputs of a notebook, or of its cell with execution count ``cell``."""
    nb = json.loads(path.read_text(encoding='utf-8'))
    texts = []
    for c in nb['cells']:
        if c['cell_type'] != 'code' or (cell is not None and c.get('execution_count') != cell):
            continue
        for out in c.get('outputs', []):
            text = out.get('text') or out.get('data', {}).get('text/plain', '')
            texts.append(''.join(text) if isinstance(text, list) else text)
    return '\n'.join(texts)


def test_there_is_a_gpu_page():
    assert 'docs/gpu-h200.md' in PAGES


@pytest.mark.parametrize('page', PAGES)
def test_figures_json_is_well_formed(page):
    path, doc = figures_of(page)
    assert doc['page'] == page, f'{path}: "page" is {doc["page"]!r}, not {page!r}'
    assert re.fullmatch(r'\d{4}-\d{2}-\d{2}', doc['date']), doc['date']
    assert doc['run_dir'] and doc['figures']
    ids = [f['id'] for f in doc['figures']]
    assert len(ids) == len(set(ids)), f'{path}: repeated ids'
    for f in doc['figures']:
        assert {'id', 'value', 'source', 'kind'} <= f.keys(), f
        assert f['kind'] in KINDS, f
        assert isinstance(f['value'], str) and f['value'].strip(), f
        assert (f['kind'] == 'data sheet') == f['source'].startswith('https://'), f
        if 'cell' in f:  # the execution count of a notebook cell
            assert isinstance(f['cell'], int) and f['source'].endswith('.ipynb'), f


@pytest.mark.parametrize('page', PAGES)
def test_every_figure_appears_verbatim_on_the_page(page):
    _, doc = figures_of(page)
    text = page_text(page)
    missing = [f'{f["id"]}: {f["value"]!r}' for f in doc['figures'] if f['value'] not in text]
    assert not missing, f'{page} does not show these figures of its figures.json:\n' + '\n'.join(
        missing
    )


@pytest.mark.parametrize('page', PAGES)
def test_every_figure_appears_verbatim_in_its_source_file(page):
    _, doc = figures_of(page)
    run = (ROOT / doc['run_dir']).resolve()
    if not run.is_dir():
        pytest.skip(f'run folder {doc["run_dir"]} is not here (it is not part of the repository)')
    wrong = []
    for f in doc['figures']:
        if f['kind'] == 'data sheet':
            continue
        source = run / f['source']
        if not source.is_file():
            wrong.append(f'{f["id"]}: no file {f["source"]} in {doc["run_dir"]}')
            continue
        if source.suffix == '.ipynb':
            text = notebook_output_text(source, f.get('cell'))
        else:
            text = source.read_text(encoding='utf-8')
        if f['value'] not in text:
            where = f'{f["source"]}' + (f' cell [{f["cell"]}]' if 'cell' in f else '')
            wrong.append(f'{f["id"]}: {f["value"]!r} is not in {where}')
    assert not wrong, f'{page}: figures that do not match the run:\n' + '\n'.join(wrong)


@pytest.mark.parametrize('page', PAGES)
def test_every_image_on_the_page_is_a_valid_png(page):
    images = image_targets(page_text(page))
    assert images, f'{page} shows no plot'
    problems = []
    for target in images:
        path = (ROOT / page).parent / target
        if not path.is_file():
            problems.append(f'{target}: no such file')
        elif problem := png_problem(path.read_bytes()):
            problems.append(f'{target}: {problem}')
    assert not problems, f'{page}:\n' + '\n'.join(problems)


@pytest.mark.parametrize('page', PAGES)
def test_readme_links_to_the_page(page):
    targets = {t.split('#')[0] for t in link_targets((ROOT / 'README.md').read_text('utf-8'))}
    assert page in targets, f'README.md does not link to {page}'


def gpu_name(page: str) -> str:
    """The GPU a page is about, as the notebooks write it: docs/gpu-h200.md -> 'H200'."""
    return Path(page).stem.removeprefix('gpu-').upper()


def quotes_gpu_figures(markdown: str, gpu: str) -> bool:
    """Whether a paragraph of ``markdown`` names ``gpu`` and quotes a figure (number and unit)."""
    paragraphs = re.split(r'\n\s*\n|\n(?=\s*(?:[-*]|\d+\.)\s)', markdown)
    return any(gpu in p and FIGURE.search(p) for p in paragraphs)


def links_to(notebook: str, markdown: str, page: str) -> bool:
    """Whether ``markdown`` of ``notebook`` has a link that resolves to ``page``."""
    folder = (ROOT / notebook).parent
    targets = {t.split('#')[0] for t in link_targets(markdown)}
    return any((folder / t).resolve() == (ROOT / page).resolve() for t in targets if t)


@pytest.mark.parametrize('page', PAGES)
def test_notebooks_that_quote_the_gpu_link_to_its_page(page):
    gpu, quoting, unlinked = gpu_name(page), [], []
    for path in NOTEBOOKS:
        markdown = '\n\n'.join(c.source for c in load(path).cells if c.cell_type == 'markdown')
        if quotes_gpu_figures(markdown, gpu):
            quoting.append(path)
            if not links_to(path, markdown, page):
                unlinked.append(path)
    assert quoting, f'no notebook quotes a figure of the {gpu}: is the detection broken?'
    assert not unlinked, (
        f'these notebooks quote {gpu} figures without linking to {page}: {unlinked}'
    )


def test_figure_quote_detection():
    assert quotes_gpu_figures('Trên H200, mức sàn đồ thị 39.511 ms, tức 2.02x.', 'H200')
    assert quotes_gpu_figures('- một lần chạy H200: độ lệch 3.0e-06', 'H200')
    assert not quotes_gpu_figures('GPU từ Ampere trở đi (A100, H100, H200...).', 'H200')
    assert not quotes_gpu_figures('Trên H200 nói trên.\n\nMột phép nhân 2 ms.', 'H200')
    assert gpu_name('docs/gpu-h200.md') == 'H200'


def tiny_png() -> bytes:
    """A whole 1 x 1 grey PNG, built here so the check below needs no file."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack('>I', len(body)) + kind + body + struct.pack('>I', zlib.crc32(kind + body))
        )

    header = struct.pack('>IIBBBBB', 1, 1, 8, 0, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + chunk(b'IHDR', header)
        + chunk(b'IDAT', zlib.compress(b'\x00\x80'))
        + chunk(b'IEND', b'')
    )


def test_png_check_finds_a_broken_png():
    good = tiny_png()
    assert png_problem(good) is None
    assert png_problem(good[:-6]) is not None  # cut off
    assert png_problem(good[:-12]) is not None  # no IEND
    assert png_problem(b'GIF89a' + good[6:]) is not None
    flipped = bytearray(good)
    flipped[-20] ^= 0xFF  # a byte of IDAT: its CRC no longer matches
    assert png_problem(bytes(flipped)) is not None
