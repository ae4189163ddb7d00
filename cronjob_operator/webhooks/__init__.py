"""Admission and conversion webhooks: the kubebuilder tutorial's webhook and multiversion
chapters.

The manager serves them over HTTPS on every replica (``cli`` starts the runtime's
``runtime.webhook.WebhookServer`` beside the ``Manager``, with these routes; the
controllers run on the leader only). The generic parts, the HTTPS server and the
AdmissionReview protocol with API-server-style field errors, are the runtime's
(``runtime.webhook``); what is here is this application's:

- ``cronjob``, ``configdeployment``: what each kind defaults and rejects;
- ``conversion``: CronJob v1 <-> v2 (``/convert``);
- ``manifests``: the list of webhooks, from which come the server's routes
  (``manifests.routes()``) and ``config/webhook/manifests.yaml``.

Layering: webhooks import ``api``, ``schedule`` and ``runtime``; none of those imports
webhooks.
"""

__all__: list[str] = []
