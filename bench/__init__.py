"""Benchmarks of the controller runtime's hot paths (issue 3): one module per benchmark.

Each module runs as ``python -m bench.<name>`` (or ``python bench/<name>.py``) and
prints a markdown table plus the machine it ran on; ``bench/README.md`` lists the exact
commands and the figures measured. They are not part of the test suite's pass/fail:
``tests/unit/test_bench_smoke.py`` only runs each one at a tiny size so they do not rot.
"""
