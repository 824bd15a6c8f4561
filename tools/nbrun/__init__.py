"""The batch runner, ``python -m nbrun`` (see ``cli.py`` or ``--help``), and the collection's
budget, ``python -m nbrun.budget``. Maintainer tools: not installed with ``d2lhelpers``; run
them with ``tools/`` on PYTHONPATH (the Makefile sets it).

One job per module, in the order a batch goes through them:

- ``plan.py``: which notebooks, with which parameters, and where each one's files go (``Job``);
- ``run.py``: running the jobs one after the other, every ending accounted for (``Batch``);
- ``worker.py``: one notebook in its own process, with papermill (``python -m nbrun.worker``);
- ``processes.py``: a run's processes found and killed with psutil;
- ``summary.py``: ``summary.json`` (one ``Entry`` per notebook), written in every ending;
- ``report.py``: ``report.md``, from the summary and the cells the notebooks tag
  ``report-figure`` and ``report-headline``;
- ``cli.py``: the command line, signals, exit status (``__main__.py`` calls it);
- ``notebook.py``: a notebook's parameters, its committed form (``canonical``, ``refreshed``);
- ``kernel.py``: the notebooks' Jupyter kernel and environment (``QUIET_ENV``);
- ``atomic.py``: the maintainer tools' one atomic writer (the runner's and gpucheck's);
- ``budget.py``: the collection's budget (apart from the batch).

Nothing is imported here, so that a worker process loads only what it uses.
"""
