"""One vocabulary (docs/glossary.md): banned forms in the prose and code comments of the collection.

Prose is the markdown of every notebook, README.md, the book's home page (book/index.md) and
docs/*.md (the glossary itself lists the banned forms, so it is skipped), with code spans, fenced
code, math, link targets and URLs taken out. Comments are the ``#`` comments of every notebook's
code cells. Each rule names the form the glossary asks for instead. Two forms are banned in any
text at all (``ANYWHERE``: a notebook's sources and stored outputs, README.md, CONTRIBUTING.md,
the book's home page and every page under docs/), and two English terms may appear only inside
their Vietnamese gloss (``GLOSS_ONLY``). Every notebook ends with "## Bài tập"
(``last_heading_problems``).
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

DOCS = [
    'README.md',
    'book/index.md',
    *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / 'docs').glob('*.md')),
]
DOCS.remove('docs/glossary.md')
#: Every text a reader can see, for the ANYWHERE rules (generated run pages included; the
#: glossary, which lists the banned forms, is not).
ALL_TEXTS = [
    'README.md',
    'CONTRIBUTING.md',
    'book/index.md',
    *sorted(
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / 'docs').rglob('*.md')
        if p.name != 'glossary.md' or p.parent != ROOT / 'docs'
    ),
]

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
#: Banned in every text, code strings and stored outputs included (the glossary forbids them in the
#: glossary's own table only as examples, and that file is skipped).
ANYWHERE = [
    (
        r'bộ tăng tốc',
        'the site\'s own label in quotes: mục "Accelerator" của Kaggle, chọn "GPU T4 x2" '
        '("tăng tốc" is a speedup)',
    ),
    (
        r'câu trả lời (?:trên|cho|của) gpu|đáp án gpu',
        '"Đáp án trên GPU", the one label of the GPU answer (printed by `ref.header`)',
    ),
]
EVERYWHERE += ANYWHERE
#: English terms allowed only inside their gloss: (term, the gloss, what to write after it).
GLOSS_ONLY = [
    (r'\bcache\b', 'bộ nhớ đệm (cache)', '"bộ nhớ đệm" ("bộ nhớ đệm L2" for an L2 cache)'),
    (
        r'memory growth',
        'tăng dần bộ nhớ (memory growth)',
        '"tăng dần bộ nhớ" (`set_memory_growth`, `TF_FORCE_GPU_ALLOW_GROWTH` stay as code)',
    ),
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
    (r'bộ nhớ đệm|\bcache\b', 'bộ nhớ đệm (cache)'),
    (r'tăng dần bộ nhớ|memory growth', 'tăng dần bộ nhớ (memory growth)'),
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


def outside_glosses(text: str) -> list[tuple[str, str]]:
    """(term, write instead) for each GLOSS_ONLY term of ``text`` (normalised) outside its gloss."""
    found = []
    for term, gloss, instead in GLOSS_ONLY:
        rest = text.replace(norm(gloss), ' ')
        found += [(m.group(), instead) for m in re.finditer(term, rest)]
    return found


def problems_in(prose_text: str, comment_texts: list[str]) -> list[str]:
    """Every banned form found, as 'found -> write instead'."""
    found = []
    p = norm(prose_text)
    for rule, instead in EVERYWHERE:
        found += [f'{m.group()!r} -> {instead}' for m in re.finditer(rule, p)]
    found += [f'{term!r} outside its gloss -> {instead}' for term, instead in outside_glosses(p)]
    bare = without_glosses(p)
    for rule, instead in PROSE_ONLY:
        found += [f'{m.group()!r} -> {instead}' for m in re.finditer(rule, bare)]
    for c in comment_texts:
        for rule, instead in EVERYWHERE:
            found += [
                f'{m.group()!r} in comment {c!r} -> {instead}' for m in re.finditer(rule, norm(c))
            ]
        found += [
            f'{term!r} outside its gloss in comment {c!r} -> {instead}'
            for term, instead in outside_glosses(norm(c))
        ]
        if english(c):
            found.append(f'comment in English: {c!r} -> write comments in Vietnamese')
    return found


def anywhere_problems(text: str) -> list[str]:
    """The ANYWHERE forms in a whole text."""
    t = norm(text)
    return [
        f'{m.group()!r} -> {instead}' for rule, instead in ANYWHERE for m in re.finditer(rule, t)
    ]


def cell_text(cell) -> str:
    """A cell's source and the text of its stored outputs (streams, text values, errors)."""
    parts = [cell.source]
    for out in cell.get('outputs', []):
        parts.append(out.get('text', ''))
        parts += [v for k, v in out.get('data', {}).items() if k.startswith('text/')]
        parts += out.get('traceback', [])
    return '\n'.join(p if isinstance(p, str) else ''.join(p) for p in parts)


def notebook_problems(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    md = '\n\n'.join(prose(c.source) for c in nb.cells if c.cell_type == 'markdown')
    cm = [c for cell in nb.cells if cell.cell_type == 'code' for c in comments(cell.source)]
    found = problems_in(md, cm)
    printed = [
        f'{problem} (in a code cell or its output)'
        for cell in nb.cells
        if cell.cell_type == 'code'
        for problem in anywhere_problems(cell_text(cell))
    ]
    return found + printed


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


def last_heading_problems(markdown_cells: list[str]) -> list[str]:
    """Every notebook ends with "## Bài tập" (after Tóm tắt, Lời giải, Đào sâu thêm...), and
    "Cách tìm ra đáp án" is a heading, never an inline lead-in."""
    text = '\n\n'.join(markdown_cells)
    heads = re.findall(r'^## (.+?)\s*$', text, flags=re.M)
    found = []
    if not heads or heads[-1] != 'Bài tập':
        found.append(f'level-2 headings {heads}: "## Bài tập" must be the last one')
    for line in re.findall(r'^(?!#)[*_ ]*cách tìm ra\b.*$', norm(text), flags=re.M):
        found.append(f'{line[:60]!r}: make it the heading "## Cách tìm ra đáp án"')
    return found


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
        ('Vừa bộ nhớ đệm L2.', 'Vừa bộ nhớ đệm (cache) L2; bộ nhớ đệm L1 nhỏ hơn.'),
        ('Vừa cache L2, tức bộ nhớ đệm (cache).', 'Bộ nhớ đệm (cache): bộ nhớ đệm L2.'),
        ('Bật tăng dần bộ nhớ.', 'Bật tăng dần bộ nhớ (memory growth); tăng dần bộ nhớ tắt.'),
    ],
)
def test_a_term_without_its_gloss_at_first_use_is_found(planted, fine):
    assert first_use_problems(planted) and not first_use_problems(fine)


def test_headings_outside_the_list_or_out_of_order_are_found():
    assert heading_problems(['## Lời giải', '## Tóm tắt', '## Bài tập']) == []
    assert heading_problems(['## Bài tập', '## Lời giải'])  # the D2L statement under "Bài tập"
    assert heading_problems(['## Lời giải', '## Bài tập', '## Đào sâu thêm'])
    assert heading_problems(['## Cách làm'])


@pytest.mark.parametrize('path', NOTEBOOKS)
def test_bai_tap_is_the_last_level_2_heading(path):
    nb = nbformat.read(ROOT / path, as_version=4)
    found = last_heading_problems([c.source for c in nb.cells if c.cell_type == 'markdown'])
    assert not found, f'{path} (see docs/glossary.md):\n' + '\n'.join(found)


def test_the_last_heading_and_an_inline_lead_in_are_found():
    assert last_heading_problems(['## Tóm tắt', '## Bài tập\n\n1. Đo lại.']) == []
    assert (
        last_heading_problems(['## Lời giải', '## Cách tìm ra đáp án\n\nĐo.', '## Bài tập']) == []
    )
    assert last_heading_problems(['## Tóm tắt', '## Bài tập', '## Lời giải'])
    assert last_heading_problems(['## Tóm tắt', '## Bài tập', '## Đào sâu thêm'])
    assert last_heading_problems(['## Tóm tắt'])  # no "Bài tập" at all
    assert last_heading_problems(['## Lời giải\n\nCách tìm ra: đo hai lần.', '## Bài tập'])
    assert last_heading_problems(['**Cách tìm ra đáp án.** Đo hai lần.', '## Bài tập'])


@pytest.mark.parametrize('path', [*NOTEBOOKS, *ALL_TEXTS])
def test_banned_anywhere(path):
    if path.endswith('.ipynb'):
        cells = nbformat.read(ROOT / path, as_version=4).cells
        text = '\n'.join(cell_text(c) for c in cells)
    else:
        text = (ROOT / path).read_text(encoding='utf-8')
    found = anywhere_problems(text)
    assert not found, f'{path} (see docs/glossary.md):\n' + '\n'.join(found)


@pytest.mark.parametrize(
    'source, output',
    [
        ("print('Câu trả lời trên GPU (tham khảo):')", ''),
        ('print(ref.header)', 'Câu trả lời cho GPU (tham khảo), lần chạy h200'),
        ("x = 1  # bật bộ tăng tốc 'GPU T4 x2'", ''),
        ('label = "Đáp án GPU"', ''),
        ('gpus = tf.config.list_physical_devices()  # bật memory growth', ''),
        ('x = 1  # dữ liệu nằm trong cache', ''),
    ],
)
def test_a_planted_form_in_code_comments_or_outputs_is_found(source, output, tmp_path):
    cell = nbformat.v4.new_code_cell(source)
    if output:
        cell.outputs = [nbformat.v4.new_output('stream', name='stdout', text=output)]
    path = tmp_path / 'planted.ipynb'
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    assert notebook_problems(path), source


def test_identifiers_and_glosses_in_comments_pass(tmp_path):
    source = (
        'for g in gpus:\n'
        '    tf.config.experimental.set_memory_growth(g, True)  # tăng dần bộ nhớ (memory growth)\n'
        "os.environ['TF_FORCE_GPU_ALLOW_GROWTH'] = 'true'  # tăng dần bộ nhớ cho mọi GPU\n"
        'print(ref.header)  # dòng "Đáp án trên GPU (tham khảo)"'
    )
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [
        nbformat.v4.new_output('stream', name='stdout', text='Đáp án trên GPU (tham khảo)')
    ]
    path = tmp_path / 'fine.ipynb'
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), path)
    assert notebook_problems(path) == []


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
        'Kaggle cho dùng bộ tăng tốc "GPU T4 x2".',
        'Chọn bộ tăng tốc (accelerator) GPU.',
        'Câu trả lời trên GPU, từ lần chạy tham khảo.',
        'Ô trên là câu trả lời cho GPU.',
        '### Đáp án GPU',
        'Bộ nhớ đệm (cache) L2 lớn; dữ liệu vừa cache.',
        'Hai mảng nằm vừa L2 cache.',
        'Bật memory growth cho mọi GPU.',
        'Chế độ tăng dần bộ nhớ (memory growth); memory growth tắt khi chia GPU.',
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
        'Mục "Accelerator" của Kaggle, chọn "GPU T4 x2"; hệ số tăng tốc 1.9x.',
        'Bộ nhớ đệm (cache) L2; sau đó chỉ bộ nhớ đệm L2, và `cache` trong mã.',
        'Tăng dần bộ nhớ (memory growth); `set_memory_growth`; tăng dần bộ nhớ tắt.',
        'Đáp án trên GPU (tham khảo), lần chạy h200-2026-11-30; câu trả lời ngắn.',
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
