# The notebooks here are inputs of tests/tools/test_batch*.py and test_report.py (one raises,
# one hangs in native code, ...): `pytest tests --nbval` (make test) must not collect them as
# notebooks to check.
collect_ignore_glob = ['*.ipynb']
