"""Sphinx configuration of the collection as a book (`make book` writes build/book/).

The sources are the repository itself (`sphinx-build -c book . build/book`): the home page
book/index.md, the seven notebooks with their stored outputs (never executed) and the pages of
docs/. A cell folded in a notebook (metadata `jupyter.source_hidden`) is collapsed behind a toggle
by book/nbreader.py. The site needs nothing from the network: MathJax is served from the site.
"""

import shutil
import sys
from pathlib import Path

import mathjax  # django-static-mathjax: a copy of MathJax 3, no dependency (requirements-book.txt)

sys.path.insert(0, str(Path(__file__).parent))

project = 'GPU với TensorFlow'
author = 'd2l-vi'
language = 'vi'
root_doc = 'book/index'

extensions = ['myst_nb']
include_patterns = [
    'book/index.md',
    'notebooks/*.ipynb',
    'exercises/*.ipynb',
    'docs/*.md',
    'docs/runs/*.md',
]
# Folders Sphinx never walks into (the venvs, build/, .git).
exclude_patterns = ['.*', 'build', 'tests', 'tools', 'benchmarks', '**/.ipynb_checkpoints']

# The stored outputs only: a notebook is read, never run.
nb_execution_mode = 'off'
nb_custom_formats = {'.ipynb': ['nbreader.read', {}]}
myst_enable_extensions = ['dollarmath']
myst_heading_anchors = 3

html_theme = 'sphinx_book_theme'
html_title = 'GPU với TensorFlow'
html_extra_path = ['redirect/index.html']  # build/book/index.html sends the reader to the home page
html_favicon = 'favicon.svg'
html_context = {'default_mode': 'light'}  # the theme's colour mode until the reader picks one
html_theme_options = {
    'repository_url': 'https://github.com/d2l-vi/d2l-tf-gpu',
    'repository_branch': 'main',
    'path_to_docs': '',
    'launch_buttons': {'colab_url': 'https://colab.research.google.com'},
    'use_repository_button': True,
    'home_page_in_toc': True,
}

# MathJax 3 from the site itself: the script and the fonts it loads, nothing else of the package.
MATHJAX = Path(mathjax.__file__).parent / 'static' / 'mathjax' / 'es5'
MATHJAX_FILES = ['tex-chtml.js', 'output/chtml/fonts/woff-v2']
mathjax_path = 'mathjax/tex-chtml.js'


def copy_mathjax(app, exception):
    if exception is not None:
        return
    target = Path(app.outdir) / '_static' / 'mathjax'
    for name in MATHJAX_FILES:
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        if (MATHJAX / name).is_dir():
            shutil.copytree(MATHJAX / name, target / name, dirs_exist_ok=True)
        else:
            shutil.copy2(MATHJAX / name, target / name)


def setup(app):
    app.connect('build-finished', copy_mathjax)
