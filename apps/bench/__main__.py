"""``python -m apps.bench``: see :mod:`apps.bench.cli`."""
import sys

from apps.bench.cli import main

if __name__ == "__main__":
    sys.exit(main())
