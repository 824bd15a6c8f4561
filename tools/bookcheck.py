"""What `make book` built, checked without rebuilding it: the pages of build/book/.

    PYTHONPATH=tools python -m bookcheck [build/book]    # one line per problem, exit 1 if any

`sphinx-build -W` fails on a warning; this catches what Sphinx does not call a warning:
- a page for every notebook (`notebooks/*.ipynb`, `exercises/*.ipynb`) and every page of docs/;
- on a notebook's page: every image of its stored outputs, its Colab and Kaggle links, and one
  toggle per folded cell (metadata `jupyter.source_hidden`), collapsed, titled by the cell's
  `# @title` line, with the cell's code inside it (collapsed, not dropped);
- on a page of docs/: every image of its Markdown;
- on every page: no error output (a traceback), no output on stderr, no raw d2lbook markup
  (`:label:`, `:numref:`, `[**...**]`, ...) in its text, and every internal link (`href`, `src`)
  resolves to a file of the site, its `#fragment` to an id on that page.
It reads only HTML and the notebooks' JSON (no Sphinx): well under a second.
"""

from __future__ import annotations

import html
import json
import re
import sys
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / 'build' / 'book'
#: Written by `make book` after sphinx-build and this check both passed.
STAMP = '.built'
HOME = 'book/index.html'
#: Where a notebook page must link to (its badges): each opens the notebook's own path.
LAUNCH = ('https://colab.research.google.com/', 'https://kaggle.com/kernels/welcome?src=')

IMAGE_MIMES = ('image/png', 'image/jpeg', 'image/svg+xml', 'image/gif')
TITLE = re.compile(r'#\s*@title\s+(.*?)\s*(\{.*\})?\s*$')
MARKDOWN_IMAGE = re.compile(r'!\[[^\]]*\]\(([^)\s]+)')
#: d2lbook markup that JupyterLab, Colab and Sphinx all show as raw text: its roles in the text,
#: and its `[**...**]` / `(**...**)` (code to run) as bold text in brackets in the HTML.
D2LBOOK = re.compile(r':(?:label|numref|eqref|cite|width|begin_tab|end_tab):|[\[(]\*\*')
D2LBOOK_BOLD = re.compile(r'[\[(]<strong>')
ID = re.compile(r'\sid="([^"]*)"')
LINK = re.compile(r'\s(?:href|src)="([^"]*)"')
IMAGE = re.compile(r'<img\s[^>]*?src="([^"]*)"')
CLASS = re.compile(r'\sclass="([^"]*)"')
TOGGLE = re.compile(r'<details class="[^"]*\bhide\b[^"]*"([^>]*)>(.*?)</details>', re.S)
TOGGLE_TITLE = re.compile(r'<p class="collapsed admonition-title">(.*?)</p>', re.S)
PRE = re.compile(r'<pre\b.*?</pre>', re.S)
DROPPED = re.compile(r'<(script|style|pre|code|textarea)\b.*?</\1>', re.S)
TAG = re.compile(r'<[^>]+>')


def notebooks(root: Path = ROOT) -> list[str]:
    """The collection's notebooks, as paths from the repository root."""
    return sorted(
        p.relative_to(root).as_posix()
        for folder in ('notebooks', 'exercises')
        for p in (root / folder).glob('*.ipynb')
    )


def doc_pages(root: Path = ROOT) -> list[str]:
    """The Markdown pages of docs/ (the run pages included), as paths from the repository root."""
    return sorted(
        p.relative_to(root).as_posix()
        for pattern in ('*.md', 'runs/*.md')
        for p in (root / 'docs').glob(pattern)
    )


def page_of(source: str) -> str:
    """The HTML page built from a source file (a path from the repository root)."""
    return Path(source).with_suffix('.html').as_posix()


def title_of(source: str) -> str | None:
    """The `# @title` text of a code cell's first line, or None."""
    match = TITLE.match(source.split('\n', 1)[0])
    return match.group(1) if match else None


def text_of(fragment: str) -> str:
    """The text of an HTML fragment: tags dropped, entities decoded."""
    return html.unescape(TAG.sub('', fragment))


def folded_titles(nb: dict) -> list[str | None]:
    """The `# @title` of every folded code cell of a notebook (its JSON), in order."""
    return [
        title_of(''.join(cell['source']))
        for cell in nb['cells']
        if cell['cell_type'] == 'code' and cell['metadata'].get('jupyter', {}).get('source_hidden')
    ]


def output_images(nb: dict) -> int:
    """How many images the stored outputs of a notebook (its JSON) hold."""
    return sum(
        any(mime in output.get('data', {}) for mime in IMAGE_MIMES)
        for cell in nb['cells']
        if cell['cell_type'] == 'code'
        for output in cell.get('outputs', [])
    )


def local_images(markdown: str) -> int:
    """How many images of a Markdown text are files of the repository (not URLs)."""
    return sum(not urlsplit(target).scheme for target in MARKDOWN_IMAGE.findall(markdown))


def content_images(page: str) -> list[str]:
    """The `src` of every image the build copied into the site for a page's content."""
    return [src for src in IMAGE.findall(page) if '_images/' in src]


def toggle_problems(page: str, titles: list[str | None]) -> list[str]:
    """A notebook page's toggles against the titles of the notebook's folded cells."""
    problems = []
    toggles = TOGGLE.findall(page)
    if len(toggles) != len(titles):
        problems.append(f'{len(toggles)} toggles for {len(titles)} folded cells')
    for (attributes, body), title in zip(toggles, titles, strict=False):
        shown = TOGGLE_TITLE.search(body)
        shown = text_of(shown.group(1)) if shown else ''
        code = '\n'.join(text_of(pre) for pre in PRE.findall(body))
        if ' open' in f' {attributes}':
            problems.append(f'toggle {shown!r} is open: a folded cell starts collapsed')
        if title and title not in shown:
            problems.append(f'toggle {shown!r} does not show the cell title {title!r}')
        if title and title not in code:
            problems.append(f'toggle {shown!r} does not hold the code of the cell {title!r}')
    return problems


def page_problems(page: str) -> list[str]:
    """What no page may show: an error output, an output on stderr, raw d2lbook markup."""
    problems = []
    for classes in CLASS.findall(page):
        words = set(classes.split())
        if 'output' in words and words & {'traceback', 'error'}:
            problems.append(f'an error output (class "{classes}")')
        if 'output' in words and 'stderr' in words:
            problems.append(f'an output on stderr (class "{classes}")')
    kept = DROPPED.sub('', page)
    text = text_of(kept)
    hits = [(text, m) for m in D2LBOOK.finditer(text)] + [
        (kept, m) for m in D2LBOOK_BOLD.finditer(kept)
    ]
    for where, match in hits:
        context = ' '.join(text_of(where[max(0, match.start() - 40) : match.end() + 40]).split())
        problems.append(f'raw d2lbook markup {match.group()!r}: ...{context}...')
    return problems


@cache
def _ids(path: Path) -> frozenset[str]:
    return frozenset(html.unescape(i) for i in ID.findall(path.read_text(encoding='utf-8')))


def link_problems(site: Path, path: Path, page: str) -> list[str]:
    """Every internal link of a page that does not resolve (a file of the site, an id on it)."""
    problems = []
    for raw in sorted(set(LINK.findall(page))):
        link = html.unescape(raw)
        parts = urlsplit(link)
        if parts.scheme or parts.netloc or link.startswith('//'):
            continue  # external: not checked offline
        target = path
        if parts.path:
            target = (path.parent / unquote(parts.path)).resolve()
            if parts.path.endswith('/'):
                target = target / 'index.html'
            if not target.is_relative_to(site.resolve()) or not target.is_file():
                problems.append(f'link {link!r}: no such file in the site')
                continue
        fragment = unquote(parts.fragment)
        if fragment and target.suffix == '.html' and fragment not in _ids(target):
            problems.append(f'link {link!r}: no id {fragment!r} on {target.name}')
    return problems


def notebook_problems(site: Path, root: Path, source: str) -> list[str]:
    """A notebook's page: its output images, Colab and Kaggle links, a toggle per folded cell."""
    path = site / page_of(source)
    if not path.is_file():
        return [f'no page {page_of(source)}']
    page = path.read_text(encoding='utf-8')
    nb = json.loads((root / source).read_text(encoding='utf-8'))
    markdown = '\n'.join(
        ''.join(cell['source']) for cell in nb['cells'] if cell['cell_type'] == 'markdown'
    )
    problems = []
    wanted = output_images(nb) + local_images(markdown)
    found = len(content_images(page))
    if found != wanted:
        problems.append(f'{found} images on the page, {wanted} in the notebook')
    links = {html.unescape(link) for link in LINK.findall(page)}
    for host in LAUNCH:
        if not any(link.startswith(host) and link.endswith(f'/{source}') for link in links):
            problems.append(f'no link to {host}.../{source}')
    return problems + toggle_problems(page, folded_titles(nb))


def doc_problems(site: Path, root: Path, source: str) -> list[str]:
    """A page of docs/: it exists and shows every image of its Markdown."""
    path = site / page_of(source)
    if not path.is_file():
        return [f'no page {page_of(source)}']
    wanted = local_images((root / source).read_text(encoding='utf-8'))
    found = len(content_images(path.read_text(encoding='utf-8')))
    return [] if found == wanted else [f'{found} images on the page, {wanted} in its Markdown']


def home_problems(site: Path, root: Path) -> list[str]:
    """The home page exists and leads to every notebook's and every doc's page."""
    path = site / HOME
    if not path.is_file():
        return [f'no home page {HOME}']
    links = {
        (path.parent / unquote(urlsplit(html.unescape(link)).path)).resolve()
        for link in LINK.findall(path.read_text(encoding='utf-8'))
    }
    return [
        f'no link to {page_of(source)}'
        for source in notebooks(root) + doc_pages(root)
        if (site / page_of(source)).resolve() not in links
    ]


def pages(site: Path) -> list[Path]:
    """Every HTML page of the site (not the theme's templates in _static/)."""
    return sorted(p for p in site.rglob('*.html') if '_static' not in p.relative_to(site).parts)


def stale(site: Path = SITE, root: Path = ROOT) -> str | None:
    """Why `site` is not the site of the checkout in `root` (None: it is)."""
    stamp = Path(site) / STAMP
    if not stamp.is_file():
        return f'{site} was not built, or its last build failed'
    built = stamp.stat().st_mtime
    book = sorted(
        p.relative_to(root).as_posix()
        for pattern in ('*.*', 'redirect/*')
        for p in (root / 'book').glob(pattern)
    )
    for source in notebooks(root) + doc_pages(root) + book:
        if (root / source).stat().st_mtime > built:
            return f'{source} changed after {site} was built'
    return None


def check(site: Path = SITE, root: Path = ROOT) -> list[str]:
    """Every problem of the built site, one line each (empty: the site is as it should be)."""
    site = Path(site)
    problems = [f'{HOME}: {p}' for p in home_problems(site, root)]
    for source in notebooks(root):
        problems += [f'{source}: {p}' for p in notebook_problems(site, root, source)]
    for source in doc_pages(root):
        problems += [f'{source}: {p}' for p in doc_problems(site, root, source)]
    for path in pages(site):
        page = path.read_text(encoding='utf-8')
        name = path.relative_to(site).as_posix()
        problems += [f'{name}: {p}' for p in page_problems(page) + link_problems(site, path, page)]
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0]) if args else SITE
    problems = check(site)
    for problem in problems:
        print(f'bookcheck: {problem}')
    print(f'bookcheck: {site}: {len(pages(site))} pages, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
