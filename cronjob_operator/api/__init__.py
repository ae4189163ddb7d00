"""The API of our custom resources: pydantic models, their kinds, and CRD generation.

The kubebuilder ``api/v1`` package, in Python: ``batch_v1`` (CronJob) and ``apps_v1``
(ConfigDeployment) hold the types of each group and version, with the ``Kind`` that
clients, caches and watches use; ``core`` the built-in Job and Pod template types they
embed; ``meta`` the model base, scalar types and metav1 parts; ``markers`` the
type-level markers (printer columns, short names, root CEL rules); ``crdgen`` turns all
of it into the CRDs under ``config/crd/bases``.

The controllers handle objects as JSON dicts (see ``cronjob_operator.runtime.objects``);
they use the models to build objects and ``read_settings`` to read what they act on.
Importing the package imports no model: the names below load their module on first use
(``cronjob_operator._lazy``), so the rules in ``cronjob_rules`` load without pydantic.
"""

from typing import TYPE_CHECKING

from cronjob_operator._lazy import exports, type_checking_homes

if TYPE_CHECKING:
    from cronjob_operator.api.apps_v1 import CONFIG_DEPLOYMENT, ConfigDeployment
    from cronjob_operator.api.batch_v1 import CRONJOB, CronJob

__all__ = ["CONFIG_DEPLOYMENT", "CRONJOB", "ConfigDeployment", "CronJob"]

if not TYPE_CHECKING:  # mypy reads the imports above, so a misspelt name stays an error
    __getattr__, __dir__ = exports(globals(), type_checking_homes(globals()))
