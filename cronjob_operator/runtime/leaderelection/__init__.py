"""Leader election on a coordination.k8s.io Lease (client-go's elector).

Machinery: ``_elector`` (acquire, renew, release on a REST client), ``_leaserecord``
(the pure decisions on a Lease record, shared with sharding's member Leases).
"""

from cronjob_operator.runtime.leaderelection._elector import (
    JITTER_FACTOR,
    POD_NAME_ENV,
    LeaderElectionConfig,
    LeaderElector,
    default_identity,
)
from cronjob_operator.runtime.leaderelection._leaserecord import (
    LeaderElectionRecord,
    Observation,
    acquired_record,
    format_micro_time,
    lease_spec,
    may_acquire,
    observe,
    record_from_lease,
    released_record,
)

__all__ = [
    "JITTER_FACTOR",
    "POD_NAME_ENV",
    "LeaderElectionConfig",
    "LeaderElectionRecord",
    "LeaderElector",
    "Observation",
    "acquired_record",
    "default_identity",
    "format_micro_time",
    "lease_spec",
    "may_acquire",
    "observe",
    "record_from_lease",
    "released_record",
]
