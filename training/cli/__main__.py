"""``python -m training.cli ...``: the ``interp-init`` command without its console script
(an offline node that runs the project from ``PYTHONPATH``)."""

import sys

from training.cli import main

if __name__ == "__main__":
    sys.exit(main())
