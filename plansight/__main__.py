"""``python -m plansight``: the terminal entry point (see plansight.cli)."""

import sys

from plansight.cli import main

sys.exit(main())
