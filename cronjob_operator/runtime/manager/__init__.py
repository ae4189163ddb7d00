"""The manager: one cache, client, recorder and metrics registry; it runs the Runnables.

``Manager`` with its ``Options`` starts the probe and metrics servers, the cache and the
recorder on every replica and, with leader election, the controllers on the leader only
(the sequence is in docs/architecture.md). ``Runnable`` is the protocol it runs.

Machinery: ``_manager``.
"""

from cronjob_operator.runtime.manager._manager import SKIPPED_REASON, Manager, Options
from cronjob_operator.runtime.runnable import Runnable

__all__ = ["SKIPPED_REASON", "Manager", "Options", "Runnable"]
