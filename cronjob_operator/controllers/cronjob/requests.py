"""Run now: the run request annotation, whether it is handled, and why a token is refused.

The annotation ``RUN_ANNOTATION`` holds a request token (Flux's ``requestedAt``
convention); ``status.lastHandledRunRequest`` records the last token handled. The Job's
name is derived from the token (``jobs.manual_job_name``), so a token creates one Job
however often it is retried, by however many managers. The decision handles a request
before the suspend and pause checks, so it works while suspended or paused; the
admission webhook calls ``token_problem`` too. (Backfill requests are ``backfill.py``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cronjob_operator.api.batch_v1 import MAX_RUN_TOKEN_LENGTH, RUN_ANNOTATION
from cronjob_operator.controllers.cronjob.jobs import manual_job_name

__all__ = ["TOKEN_FIELD", "run_request", "token_problem", "unrecorded_manual_job"]

TOKEN_FIELD: Final = f"metadata.annotations[{RUN_ANNOTATION}]"


def run_request(cronjob: Mapping[str, Any]) -> str | None:
    """The run request token on ``cronjob`` not yet handled, if any."""
    annotations = (cronjob.get("metadata") or {}).get("annotations") or {}
    token = annotations.get(RUN_ANNOTATION)
    if not token:
        return None
    handled = (cronjob.get("status") or {}).get("lastHandledRunRequest")
    return None if token == handled else str(token)


def token_problem(token: str) -> str | None:
    """Why ``token`` is not an acceptable run request token (None if it is); the message
    names the annotation (the field) and the fix."""
    if len(token) > MAX_RUN_TOKEN_LENGTH:
        return (
            f"{TOKEN_FIELD}: the run request token is {len(token)} characters, at most "
            f"{MAX_RUN_TOKEN_LENGTH} are allowed; use a shorter token such as the current time"
        )
    return None


def unrecorded_manual_job(cronjob: Mapping[str, Any]) -> str | None:
    """The name of the manual Job that the stored status has not recorded: the one its
    unhandled run request asks for (None when there is none)."""
    token = run_request(cronjob)
    return None if token is None else manual_job_name(cronjob["metadata"]["name"], token)
