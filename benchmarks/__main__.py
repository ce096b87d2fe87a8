"""``python -m benchmarks``: run every benchmark and write the report."""

from benchmarks.harness import main

raise SystemExit(main())
