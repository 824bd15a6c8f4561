"""One vocabulary (docs/glossary.md): banned forms in the prose and code comments of the collection.

Prose is the markdown of every notebook, README.md and docs/*.md (the glossary itself lists the
banned forms, so it is skipped), with code spans, fenced code, math, link targets and URLs taken
out. Comments are the ``#`` comments of every notebook's code cells. Each rule names the form the
glossary asks for instead.
"""

from __future__ import annotations

import io
import re
import tokenize
import unicodedata
from pathlib import Path

import nbformat
import pytest
from nbtools import NOTEBOOKS, ROOT

DOCS = ['README.md', *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / 'docs').glob('*.md'))]
DOCS.remove('docs/glossary.md')

# (banned regex, what to write instead); matched case-insensitively on NFC text.
EVERYWHERE = [
    (r'hàng chục(?! lần)', '"tensor" (the seed read *tensors* as *tens*)'),
    (r'máy biến áp', '"transformer"'),
    (r'đăng nhập', '"ghi log" (logging)'),
    (r'core kéo|core căng', '"lõi tensor (tensor core)"'),
    (r'mạng tái phát', '"mạng nơ-ron hồi tiếp"'),
    (r'chế phẩm', '"cài đặt"'),
    (r'làm không chỉ cần', '"đừng chỉ thêm"'),
    (
        r'\b\d+ nhân\b|\bnhân (?:cpu|vật lý)\b|\b(?:các|mọi|hai|nhiều|những) nhân\b(?! bản)',
        '"lõi" for CPU cores ("nhân" is multiplication)',
    ),
    (
        r'\blớp (?:dense|ẩn|đầu ra|đầu vào|tuyến tính|tích chập|keras)\b|\blớp \(layer',
        '"tầng" for a layer ("lớp" is a Python class)',
    ),
    (r'vẽ đồ thị', '"dựng đồ thị (tracing)", or "vẽ biểu đồ" for a plot'),
    (r'vị trí mềm', '"đặt thiết bị linh hoạt (soft placement)"'),
    (r'phần chạy', '"runtime của TensorFlow"'),
    (r'\blô\b', '"batch" (a batch of data)'),
    (r'bản sao \(replica', '"replica" (untranslated; "bản sao" is a copy)'),
    (r'tham số \(parameters?\)', '"thiết lập của notebook (parameters)"; "tham số" is a model\'s'),
    (r'khoảng hòa', '"dải hòa"'),
    (r'xung nhịp tăng tốc', '"xung nhịp boost" ("tăng tốc" is a speedup)'),
    (r'gửi(?: đi)?(?: toàn bộ| các| hết)? gradient|gửi đi và nhận về', '"truyền" for tensors'),
    (r'gửi/nhận(?! \(send/recv\))', '"phép toán gửi/nhận (send/recv)"'),
    (r'phép dò', '"phép đo thêm (probe)"'),
    (r'(?<!lượt )truyền (?:xuôi|ngược)|lượt (?:xuôi|ngược)', '"lượt truyền xuôi / ngược"'),
]
# A term glossed at its first use in each notebook: (the term, how its first use must read).
FIRST_USE = [
    (r'\bhost\b', 'host (CPU và bộ nhớ chính của nó'),
    (r'chạy khởi động', 'chạy khởi động (warm-up)'),
    (r'dải hòa', 'dải hòa (tie band)'),
    (r'\biqr\b', 'khoảng tứ phân vị (iqr)'),
    (r'lượt truyền xuôi', 'lượt truyền xuôi (forward pass)'),
    (r'lượt truyền ngược', 'lượt truyền ngược (backward pass)'),
    (r'phép đo thêm', 'phép đo thêm (probe)'),
]
#: An exercise's level-2 headings, in this order (docs/glossary.md); "Bài tập" closes it with the
#: follow-up exercises (D2L's own statement is in the introduction, under no heading).
HEADINGS = [
    'Cài đặt (setup)',
    'Lời giải',
    'Cách tìm ra đáp án',
    'Đào sâu thêm',
    'Tóm tắt',
    'Bài tập',
]
PROSE_ONLY = [
    (r'\bloss\b', '"hàm mất mát" / "giá trị mất mát" (`loss` only as code)'),
    (r'\bstrategy\b', '"chiến lược phân tán" / "chiến lược" (`strategy` only as code)'),
    (r'\d,\d', 'a decimal point, as in the code and its outputs (2.1, not 2,1)'),
    (r'\bops?\b', '"phép toán (op)"'),
    (r'\bcode\b', '"mã"'),
]
ENGLISH_WORDS = {
    'the',
    'a',
    'an',
    'is',
    'are',
    'of',
    'to',
    'and',
    'on',
    'in',
    'no',
    'not',
    'for',
    'with',
    'before',
    'after',
    'this',
    'that',
    'it',
    'as',
    'so',
    'be',
    'by',
    'from',
    'instead',
    'here',
}


def norm(text: str) -> str:
    return unicodedata.normalize('NFC', text).lower()


def prose(markdown: str) -> str:
    """The words of a markdown text: no code, math, link targets, URLs or explanatory brackets.

    Text in parentheses is dropped only for the rules that allow an English gloss such as
    "(loss scaling)"; see ``without_glosses``.
    """
    text = re.sub(r'```.*?```', ' ', markdown, flags=re.S)
    text = re.sub(r'`[^`]*`', ' ', text)
    text = re.sub(r'\$\$.*?\$\$|\$[^$]*\$', ' ', text, flags=re.S)
    text = re.sub(r'\]\([^)]*\)', ']', text)
    text = re.sub(r'<[^>]+>', ' ', text)
    return re.sub(r'https?://\S+', ' ', text)


def without_glosses(text: str) -> str:
    return re.sub(r'\([^()]*\)', ' ', text)


def comments(source: str) -> list[str]:
    """The ``#`` comments of a code cell (IPython magics and shell lines are skipped)."""
    code = '\n'.join('' if re.match(r'\s*[%!]', line) else line for line in source.splitlines())
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code + '\n').readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    return [t.string.lstrip('#').strip() for t in tokens if t.type == tokenize.COMMENT]


def english(comment: str) -> bool:
    """A comment in English: no Vietnamese letter and at least two common English words."""
    words = re.findall(r'[a-z]+', comment.lower())
    return not re.search(r'[^\x00-\x7f]', comment) and len(ENGLISH_WORDS.intersection(words)) >= 2


def problems_in(prose_text: str, comment_texts: list[str]) -> list[str]:
    """Every banned form found, as 'found -> write instead'."""
    found = []
    p = norm(prose_text)
    for rule, instead in EVERYWHERE:
        found += [f'{m.group()!r} -> {instead}' for m in re.finditer(rule, p)]
    bare = without_glosses(p)
    for rule, instead in PROSE_ONLY:
        found += [f'{m.group()!r} -> {instead}' for m in re.finditer(rule, bare)]
    for c in comment_texts:
        for rule, instead in EVERYWHERE:
            found += [
                f'{m.group()!r} in comment {c!r} -> {instead}' for m in re.finditer(rule, norm(c))
            ]
        if english(c):
            found.append(f'comment in English: {c!r} -> write comments in Vietnamese')
    return found


def notebook_problems(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    md = '\n\n'.join(prose(c.source) for c in nb.cells if c.cell_type == 'markdown')
    cm = [c for cell in nb.cells if cell.cell_type == 'code' for c in comments(cell.source)]
    return problems_in(md, cm)


def first_use_problems(markdown: str) -> list[str]:
    """Glossed terms whose first use in ``markdown`` (a notebook's prose, in order) lacks it."""
    text = norm(prose(markdown))
    found = []
    for term, glossed in FIRST_USE:
        first, glossed = re.search(term, text), norm(glossed)
        if first and not text.startswith(glossed, first.start() - glossed.index(first.group())):
            found.append(f'first use of {first.group()!r} must read {glossed!r}')
    return found


def heading_problems(markdown_cells: list[str]) -> list[str]:
    """An exercise's level-2 headings that are not the shared ones in the shared order."""
    heads = [m for c in markdown_cells for m in re.findall(r'^## (.+)$', c, flags=re.M)]
    if heads != [h for h in HEADINGS if h in heads]:
        return [f'headings {heads}: use {HEADINGS} (a subset, in this order)']
    return []


def test_there_is_something_to_check():
    assert NOTEBOOKS and 'README.md' in DOCS


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_notebook_vocabulary(path):
    found = notebook_problems(ROOT / path)
    assert not found, f'{path} (see docs/glossary.md):\n' + '\n'.join(found)


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_notebook_glosses_at_first_use_and_shared_headings(path):
    cells = [c.source for c in nbformat.read(ROOT / path, as_version=4).cells]
    markdown = [
        c.source
        for c in nbformat.read(ROOT / path, as_version=4).cells
        if c.cell_type == 'markdown'
    ]
    found = first_use_problems('\n\n'.join(markdown))
    if path.startswith('exercises/'):
        found += heading_problems(markdown)
    assert cells and not found, f'{path} (see docs/glossary.md):\n' + '\n'.join(found)


@pytest.mark.parametrize(
    'planted, fine',
    [
        ('Dữ liệu nằm trên host.', 'Dữ liệu nằm trên host (CPU và bộ nhớ chính của nó); host chờ.'),
        ('Vài lần chạy khởi động.', 'Vài lần chạy khởi động (warm-up), rồi chạy khởi động lại.'),
        ('Trong dải hòa.', 'Trong dải hòa (tie band) 1.1x; ngoài dải hòa.'),
        ('Trung vị và IQR.', 'Trung vị và khoảng tứ phân vị (IQR); IQR nhỏ.'),
        ('Đo lượt truyền xuôi.', 'Đo lượt truyền xuôi (forward pass), rồi lượt truyền xuôi nữa.'),
        ('Lượt truyền ngược tốn.', 'Lượt truyền ngược (backward pass) tốn gấp đôi.'),
        ('Một phép đo thêm.', 'Một phép đo thêm (probe): TF32 tắt.'),
    ],
)
def test_a_term_without_its_gloss_at_first_use_is_found(planted, fine):
    assert first_use_problems(planted) and not first_use_problems(fine)


def test_headings_outside_the_list_or_out_of_order_are_found():
    assert heading_problems(['## Lời giải', '## Tóm tắt', '## Bài tập']) == []
    assert heading_problems(['## Bài tập', '## Lời giải'])  # the D2L statement under "Bài tập"
    assert heading_problems(['## Lời giải', '## Bài tập', '## Đào sâu thêm'])
    assert heading_problems(['## Cách làm'])


@pytest.mark.parametrize('path', DOCS)
def test_document_vocabulary(path):
    found = problems_in(prose((ROOT / path).read_text(encoding='utf-8')), [])
    assert not found, f'{path} (see docs/glossary.md):\n' + '\n'.join(found)


@pytest.mark.parametrize(
    'planted',
    [
        'Ta nhân hai hàng chục trên GPU.',
        'Mô hình máy biến áp.',
        'Bật đăng nhập vị trí thiết bị.',
        'Máy có 2 nhân.',
        'Mỗi lớp Dense có hai tham số.',
        'Lần đầu, TensorFlow vẽ đồ thị.',
        'Đây là vị trí mềm.',
        'In loss ở mỗi bước.',
        'Tạo một strategy.',
        'Khoảng 2,1 tỉ FLOP.',
        'Mỗi op tốn thời gian.',
        'Khi phần chạy khởi động.',
        'Chia lô dữ liệu.',
        'Mỗi bản sao (replica) giữ một phần.',
        'Tham số (parameters) của notebook.',
        'Đoạn code này chạy trên GPU.',
        'Trong khoảng hòa.',
        'Xung nhịp tăng tốc (boost) của GPU.',
        'Mỗi replica gửi toàn bộ gradient đi.',
        'Cặp phép toán gửi/nhận giữa hai thiết bị.',
        'Phép dò (probe) với TF32 tắt.',
        'Đo lượt xuôi và lượt ngược.',
        'Thời gian truyền xuôi của mô hình.',
    ],
)
def test_a_planted_banned_form_is_found(planted, tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(planted)])
    path = tmp_path / 'planted.ipynb'
    nbformat.write(nb, path)
    assert notebook_problems(path), planted


@pytest.mark.parametrize(
    'fine',
    [
        'Phép nhân hai ma trận; nhân hai ma trận lớn; tham số được nhân bản trên các thiết bị.',
        'Máy có 2 lõi. Chậm đi hàng chục lần.',
        'Lớp `Device` là một chuỗi; tầng `Dense` có hai tham số.',
        'Giá trị mất mát `loss` của `strategy.run`; co giãn giá trị mất mát (loss scaling).',
        'Chiến lược phân tán (distribution strategy). Ma trận `(2,3)`; $1{,}0005^t$.',
        'Mỗi phép toán (op) tốn thời gian; mỗi replica giữ một bản sao của tham số.',
        'Thiết lập của notebook (parameters); runtime của TensorFlow; một batch dữ liệu.',
        'Xung nhịp boost; hệ số tăng tốc 1.9x; gửi phép toán (dispatch) cho từng replica.',
        'Cặp phép toán gửi/nhận (send/recv); truyền gradient; phép đo thêm (probe).',
        'Lượt truyền xuôi (forward pass) và lượt truyền ngược (backward pass).',
    ],
)
def test_the_glossary_forms_pass(fine):
    assert problems_in(prose(fine), []) == []


@pytest.mark.parametrize(
    'comment, is_english',
    [
        ('no C++ info/warning lines before the import', True),
        ('runs on d1; X is copied to d1 first', True),
        ('không in dòng INFO của C++', False),
        ('TF_CPP_MIN_LOG_LEVEL=2', False),
    ],
)
def test_english_comments_are_found(comment, is_english):
    assert english(comment) == is_english
