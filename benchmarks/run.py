"""``python benchmarks/run.py``: the same as ``python -m benchmarks``, from a path."""

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.harness import main

    raise SystemExit(main())
