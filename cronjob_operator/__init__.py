"""cronjob-operator: the kubebuilder CronJob tutorial on a small controller-runtime for Python.

The package is layered the way a kubebuilder project is: ``api`` holds the pydantic
models of our custom resources and the CRD generator, ``runtime`` is the
controller-runtime layer (informer cache, client, work queue, controllers, manager),
``controllers`` holds one reconciler per kind, ``schedule`` the pure cron and time-zone
logic they and the ``webhooks`` share, and ``cli`` turns flags into a manager.
``envtest`` starts a real local control plane for tests and the local run.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
