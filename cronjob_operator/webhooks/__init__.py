"""Admission and conversion webhooks: the kubebuilder tutorial's webhook and multiversion
chapters.

The manager serves them over HTTPS on every replica (``cli`` starts the server beside the
``Manager``; the controllers run on the leader only). The modules, from the wire in:

- ``server``: HTTPS with certificate reload (``runtime.certwatcher``), JSON in and out, bad
  requests answered with 400 rather than crashes;
- ``admission``: the AdmissionReview protocol and API-server-style field errors;
- ``cronjob``, ``configdeployment``: what each kind defaults and rejects;
- ``conversion``: CronJob v1 <-> v2 (``/convert``);
- ``manifests``: the list of webhooks, from which come the server's routes
  (``manifests.routes()``) and ``config/webhook/manifests.yaml``.

Layering: webhooks import ``api``, ``schedule`` and ``runtime``; none of those imports
webhooks.
"""

from cronjob_operator.webhooks.server import WebhookServer

__all__ = ["WebhookServer"]
