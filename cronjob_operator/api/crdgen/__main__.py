"""``python -m cronjob_operator.api.crdgen``: regenerate (or check) config/crd."""

import sys

from cronjob_operator.api.crdgen.command import main

sys.exit(main())
