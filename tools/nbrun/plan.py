"""Which notebooks a batch runs, with which parameters, and where each one's files go.

- ``collect(paths)``: the notebooks named on the command line (files or folders);
- ``read_parameters(pairs)``: the ``-p NAME VALUE`` pairs;
- ``plan(notebooks, common, inplace)``: one ``Job`` per notebook.

Every problem found here is a ``UsageError`` (exit status 2, nothing is run).

A notebook is named by its path relative to the current folder (``Job.name``), and its files
under ``--out`` keep that path, folders included (``sub/ok.ipynb`` gives ``OUT/sub/ok.ipynb`` and
``OUT/logs/sub/ok.log``): nothing is flattened, so two notebooks never share a file. A notebook
outside the current folder is a usage error (``make`` runs from the repository's root).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import yaml

from .notebook import declared_parameters, one_line

__all__ = ['DEFAULT_DIRS', 'Job', 'UsageError', 'collect', 'read_parameters', 'plan']

DEFAULT_DIRS = ('notebooks', 'exercises')


class UsageError(Exception):
    """A bad command line (exit status 2, before anything runs)."""


@dataclass
class Job:
    """One notebook to run."""

    source: Path  # the notebook as committed (absolute)
    name: str  # its POSIX path relative to the current folder: messages, summary, files under --out
    parameters: dict[str, Any] = field(default_factory=dict)
    wants_results: bool = False  # declares `results_path`: the runner gives it one
    digest: str = ''  # sha256 of the source when planned (--inplace: edited meanwhile?)


def display_name(path: Path) -> str:
    """``path`` relative to the current folder, POSIX; a ``UsageError`` when it is not below it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        raise UsageError(
            f'{path} is not below the current folder: run the batch from a folder that holds '
            'every notebook (their files under --out keep their paths relative to it)'
        ) from None


def collect(paths: list[str]) -> list[Path]:
    """The notebooks named by ``paths`` (files or folders), in order, without duplicates.

    With no paths: ``notebooks/`` and ``exercises/`` (a missing one of them is skipped).
    """
    found: list[Path] = []
    for p in paths or list(DEFAULT_DIRS):
        path = Path(p)
        if path.is_dir():
            items = sorted(
                q
                for q in path.rglob('*.ipynb')
                if '.ipynb_checkpoints' not in q.parts and not q.name.startswith('.')
            )
        elif path.is_file() and path.suffix == '.ipynb':
            items = [path]
        elif not paths and not path.exists():
            continue
        else:
            raise UsageError(f'not a notebook or a folder: {p}')
        found += [q.resolve() for q in items if q.resolve() not in found]
    if not found:
        raise UsageError(f'no notebooks found in {", ".join(paths or DEFAULT_DIRS)}')
    return found


def read_parameters(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """The parameters of ``-p NAME VALUE`` pairs (VALUE is YAML), for every notebook."""
    common: dict[str, Any] = {}
    for name, value in pairs:
        if not name.isidentifier():
            raise UsageError(f'-p {name}: not a parameter name')
        if name == 'results_path':
            raise UsageError('results_path is set by the runner; do not pass it')
        try:
            common[name] = yaml.safe_load(value)
        except yaml.YAMLError as err:
            raise UsageError(
                f'-p {name}: cannot read {value!r} as YAML '
                f'({one_line(err)}); quote it, e.g. -p {name} "[64, 128]"'
            ) from err
        try:
            json.dumps(common[name], allow_nan=False)
        except (TypeError, ValueError):
            raise UsageError(
                f'parameter `{name}`: {common[name]!r} is not a plain value '
                '(number, string, list, mapping)'
            ) from None
    return common


def plan(
    notebooks: list[Path], common: dict[str, Any] | None = None, inplace: bool = False
) -> list[Job]:
    """One ``Job`` per notebook, with its parameters (``notebook.declared_parameters``).

    A ``common`` parameter goes to every notebook that declares it; one that no notebook
    declares is an error.
    """
    common = dict(common or {})
    jobs = []
    for path in notebooks:
        name = display_name(path)
        try:
            raw = path.read_bytes()
            nb = nbformat.reads(raw.decode('utf-8'), as_version=4)
            declared = declared_parameters(nb)
        except Exception as err:  # any unreadable notebook is a usage error
            raise UsageError(f'cannot read {name}: {one_line(err)}') from err
        jobs.append(
            Job(
                source=path,
                name=name,
                parameters={k: v for k, v in common.items() if k in declared},
                wants_results='results_path' in declared and not inplace,
                digest=hashlib.sha256(raw).hexdigest(),
            )
        )
    used = {k for j in jobs for k in j.parameters}
    unknown = sorted(set(common) - used)
    if unknown:
        raise UsageError(
            f'no notebook of this run declares the parameter(s) '
            f'{", ".join(f"`{u}`" for u in unknown)}'
        )
    return jobs
