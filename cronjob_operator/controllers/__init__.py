"""The reconcilers, one per kind, each with the ``setup(manager)`` that registers it.

``cronjob`` (with its pure rules in ``cronjob_state`` and the time math in
``cronjob_operator.schedule``) and ``configdeployment`` (pure rules in
``configdeployment_state``). ``conditions`` and ``status`` hold what both share.
"""
