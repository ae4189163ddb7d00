"""``python -m cronjob_operator``: the same as the ``cronjob-operator`` console script."""

import sys

from cronjob_operator.cli import main

sys.exit(main())
