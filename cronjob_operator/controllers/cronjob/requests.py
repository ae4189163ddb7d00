"""Run now: the run request annotation, whether it is handled, and why a token is refused.

The annotation ``RUN_ANNOTATION`` holds a request token (Flux's ``requestedAt``
convention); ``status.lastHandledRunRequest`` records the last token handled. The Job's
name is derived from the token (``api.cronjob_rules.manual_job_name``), so a token creates one Job
however often it is retried, by however many managers. The decision handles a request
before the suspend and pause checks, so it works while suspended or paused; the
admission webhook asks ``api.cronjob_rules.token_problem`` too, as the decision does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronjob_operator.api.batch_v1 import RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import manual_job_name

__all__ = ["run_request", "unrecorded_manual_job"]


def run_request(cronjob: Mapping[str, Any]) -> str | None:
    """The run request token on ``cronjob`` not yet handled, if any."""
    annotations = (cronjob.get("metadata") or {}).get("annotations") or {}
    token = annotations.get(RUN_ANNOTATION)
    if not token:
        return None
    handled = (cronjob.get("status") or {}).get("lastHandledRunRequest")
    return None if token == handled else str(token)


def unrecorded_manual_job(cronjob: Mapping[str, Any]) -> str | None:
    """The name of the manual Job that the stored status has not recorded: the one its
    unhandled run request asks for (None when there is none)."""
    token = run_request(cronjob)
    return None if token is None else manual_job_name(cronjob["metadata"]["name"], token)
