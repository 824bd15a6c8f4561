"""The book that `make book` built (build/book/), checked without rebuilding it: tools/bookcheck.py.

The site's tests skip, with a message naming `make book`, when build/book/ was not built by
`make book` or a source changed since; with ``BOOK_REQUIRED=1`` (.ci/run sets it after building
the book) they fail instead. The checker's own tests below them run on small pages made here, so
that a check that can never fail would be seen. book/nbreader.py (how folded cells become
toggles) is tested on a notebook made here.
"""

from __future__ import annotations

import importlib.util
import os

import bookcheck
import nbformat
import pytest

ROOT = bookcheck.ROOT


@pytest.fixture(scope='module')
def site():
    why = bookcheck.stale()
    if why:
        message = f'{why}: run `make book` first'
        if os.environ.get('BOOK_REQUIRED'):
            pytest.fail(f'{message} (BOOK_REQUIRED is set)')
        pytest.skip(message)
    return bookcheck.SITE


def test_home_page_leads_to_every_page(site):
    assert not bookcheck.home_problems(site, ROOT)


@pytest.mark.parametrize('source', bookcheck.notebooks())
def test_notebook_page(site, source):
    """Its page, every image of its stored outputs, its Colab and Kaggle links, its toggles."""
    assert not bookcheck.notebook_problems(site, ROOT, source)


@pytest.mark.parametrize('source', bookcheck.doc_pages())
def test_doc_page(site, source):
    assert not bookcheck.doc_problems(site, ROOT, source)


def test_no_page_shows_an_error_or_d2lbook_markup_and_every_link_resolves(site):
    problems = []
    for path in bookcheck.pages(site):
        page = path.read_text(encoding='utf-8')
        found = bookcheck.page_problems(page) + bookcheck.link_problems(site, path, page)
        problems += [f'{path.relative_to(site)}: {p}' for p in found]
    assert not problems


# The checker itself, on pages made here.

TOGGLE = (
    '<details class="admonition hide above-input"{open}>\n<summary>\n'
    '<p class="collapsed admonition-title">{title} (hiện mã)</p>\n</summary>\n'
    '<div class="cell_input"><pre><span class="c1"># @title {code}</span>\nx = 1</pre></div>\n'
    '</details>'
)


def test_toggle_problems_see_a_dropped_an_open_and_an_emptied_toggle():
    good = TOGGLE.format(open='', title='Nhập thư viện', code='Nhập thư viện')
    assert not bookcheck.toggle_problems(good, ['Nhập thư viện'])
    assert bookcheck.toggle_problems(good, ['Nhập thư viện', 'Vẽ biểu đồ']) == [
        '1 toggles for 2 folded cells'
    ]
    opened = TOGGLE.format(open=' open', title='A', code='A')
    assert 'starts collapsed' in bookcheck.toggle_problems(opened, ['A'])[0]
    emptied = TOGGLE.format(open='', title='A', code='B')
    assert 'does not hold the code' in bookcheck.toggle_problems(emptied, ['A'])[0]


def test_page_problems_see_errors_stderr_and_d2lbook_markup():
    assert not bookcheck.page_problems('<p>Ta đo (<code>x**2</code>)</p><pre>[**a**]</pre>')
    error = '<div class="output traceback highlight-ipythontb notranslate"></div>'
    stderr = '<div class="output stderr highlight-myst-ansi notranslate"></div>'
    markup = '<p>Xem :numref:<code>fig</code> và [<strong>chạy</strong>].</p>'
    found = bookcheck.page_problems(error + stderr + markup)
    assert len(found) == 4, found
    assert found[0].startswith('an error output') and found[1].startswith('an output on stderr')
    assert "raw d2lbook markup ':numref:'" in found[2]
    assert "raw d2lbook markup '[<strong>'" in found[3]


def test_link_problems_see_a_missing_file_and_a_missing_id(tmp_path):
    (tmp_path / 'a').mkdir()
    page = '<a href="b.html#x">b</a> <a href="../c.html">c</a> <a href="#y">y</a> <img src="d.png">'
    (tmp_path / 'a' / 'b.html').write_text('<h1 id="z">b</h1>', encoding='utf-8')
    (tmp_path / 'a' / 'p.html').write_text(page, encoding='utf-8')
    found = bookcheck.link_problems(tmp_path, tmp_path / 'a' / 'p.html', page)
    assert found == [
        "link '#y': no id 'y' on p.html",
        "link '../c.html': no such file in the site",
        "link 'b.html#x': no id 'x' on b.html",
        "link 'd.png': no such file in the site",
    ]
    assert not bookcheck.link_problems(tmp_path, tmp_path / 'a' / 'p.html', '<a href="b.html#z">')


def test_the_reader_folds_hidden_cells_behind_their_title():
    spec = importlib.util.spec_from_file_location('nbreader', ROOT / 'book' / 'nbreader.py')
    nbreader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nbreader)
    folded = nbformat.v4.new_code_cell('# @title Vẽ biểu đồ { display-mode: "form" }\nplt.show()')
    folded.metadata['jupyter'] = {'source_hidden': True}
    folded.metadata['tags'] = ['report-figure']
    nb = nbformat.v4.new_notebook(cells=[folded, nbformat.v4.new_code_cell('x = 1')])
    read = nbreader.read(nbformat.writes(nb))
    assert read.cells[0].metadata.tags == ['report-figure', 'hide-input']
    assert read.cells[0].metadata.mystnb['code_prompt_show'] == 'Vẽ biểu đồ (hiện mã)'
    assert read.cells[0].source == folded.source  # the code is kept, only collapsed
    assert 'tags' not in read.cells[1].metadata
