"""Speed benchmarks of the loader; run them with ``python -m benchmarks.run``."""
