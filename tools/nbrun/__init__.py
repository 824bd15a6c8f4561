"""The batch runner, ``python -m nbrun`` (see ``cli.py`` or ``--help``).

One job per module, in the order a batch goes through them:

- ``plan.py``: which notebooks, with which parameters, and where each one's files go (``Job``);
- ``run.py``: running the jobs, a few at a time, every ending accounted for (``Batch``);
- ``worker.py``: one notebook in its own process, with papermill (``python -m ...worker``);
- ``processes.py``: a run's processes found and killed with psutil;
- ``summary.py``: ``summary.json``, written in every ending;
- ``report.py``: ``report.md`` and ``report.html``, from the summary and the cells the notebooks
  tag ``report-figure`` and ``report-headline``;
- ``cli.py``: the command line, signals, exit status.

Nothing is imported here, so that a worker process loads only what it uses.
"""
