"""The reconcilers, one per kind, each with the ``setup(manager)`` that registers it.

``cronjob`` (a package: observe, decide, act, with its pure rules by concept and the
time math in ``cronjob_operator.schedule``) and ``configdeployment`` (a package: observe,
decide, act, with its pure rules in ``decide`` and ``sources``), and ``concurrencygroup``
(the ConcurrencyGroup controller: it frees the slots and drops the lapsed waiting places
of a group, deciding with ``cronjob.groups``). Only what is about CronJobs,
ConfigDeployments and ConcurrencyGroups lives here: the clock, owner references, the status
writer and conditions they share come from ``cronjob_operator.runtime`` (``clock``;
``controllerutil``, which has the status writer and conditions too).
"""

__all__: list[str] = []  # each reconciler is a package of its own, imported by name
