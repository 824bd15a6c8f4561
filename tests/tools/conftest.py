"""The maintainer tools in tools/ (nbrun, gpucheck) are importable in these tests."""

import sys
from pathlib import Path

TOOLS = str(Path(__file__).resolve().parents[2] / 'tools')
if TOOLS not in sys.path:
    sys.path.insert(0, TOOLS)
