"""Read a notebook for the book: folded cells stay, collapsed behind a toggle.

A cell folded in JupyterLab and Colab (metadata `jupyter.source_hidden`, first line
`# @title ...`) gets MyST-NB's `hide-input` tag, and its toggle shows the title: the code is one
click away, its outputs are shown as in Colab. The stored notebook file is not changed.
"""

import re

import nbformat

TITLE = re.compile(r'#\s*@title\s+(.*?)\s*(\{.*\})?\s*$')


def title_of(source):
    """The `# @title` text of a cell's first line, or None."""
    first = source.split('\n', 1)[0]
    match = TITLE.match(first)
    return match.group(1) if match else None


def read(text):
    """The notebook in `text` (a .ipynb file's JSON), its folded cells tagged `hide-input`."""
    nb = nbformat.reads(text, as_version=4)
    for cell in nb.cells:
        if cell.cell_type != 'code' or not cell.metadata.get('jupyter', {}).get('source_hidden'):
            continue
        tags = cell.metadata.setdefault('tags', [])
        if 'hide-input' not in tags:
            tags.append('hide-input')
        title = title_of(cell.source) or 'Ô mã được gấp lại'
        cell.metadata['mystnb'] = {
            'code_prompt_show': f'{title} (hiện mã)',
            'code_prompt_hide': f'{title} (ẩn mã)',
        }
    return nb
