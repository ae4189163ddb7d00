"""The ConcurrencyGroup controller: it keeps a group's slots and waiting places true.

A CronJob takes and releases the slots of its own Jobs (``controllers/cronjob``,
``group_slots.py``); this controller, one per manager (the leader), does what no single
CronJob can: it frees the slots whose Jobs are gone or finished unseen by their
CronJob, drops the waiting places whose CronJob is gone or no longer waits, and so lets
the CronJob controller's watch on groups wake the next waiting run when a slot frees.
``reconciler`` decides with ``cronjob.groups.tidy``; docs/beyond-builtin.md (section 12)
has the user's view.
"""

from cronjob_operator.controllers.concurrencygroup.reconciler import (
    ConcurrencyGroupReconciler,
    setup,
)

__all__ = ["ConcurrencyGroupReconciler", "setup"]
