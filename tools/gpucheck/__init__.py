"""GPU acceptance tools (maintainers only, not part of the d2lhelpers package): ``python -m
gpucheck`` (``make gpu-check``) runs every notebook on this GPU, records the run (``record``) and
checks it (``check``, its rules in ``presence``, ``sheet`` and ``order``); ``driver`` asks the
driver, without TensorFlow; ``page`` writes ``docs/runs/<id>.md`` from a stored run.
"""
