"""``python -m cronjob_operator.envtest``: the command line of ``hack/local-cluster.sh``."""

import sys

from cronjob_operator.envtest._cli import main

sys.exit(main())
