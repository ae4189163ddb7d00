"""Run now: the run request annotation, whether it is handled, and why it is refused.

The annotation ``RUN_ANNOTATION`` holds a request token (Flux's ``requestedAt``
convention), or a JSON request with a token and the overrides of that run
(``api.run_overrides``); ``status.lastHandledRunRequest`` records the last token
handled. The Job's name is derived from the token (``api.cronjob_rules.manual_job_name``),
so a token creates one Job however often it is retried, by however many managers. The
decision handles a request before the suspend and pause checks, so it works while
suspended or paused; the admission webhook asks ``api.run_overrides.request_problem``
too, as the decision does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cronjob_operator.api.batch_v1 import RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import manual_job_name
from cronjob_operator.api.run_overrides import RunRequest, container_problem, parse_run_request

__all__ = ["run_request", "unrecorded_manual_job"]


def run_request(cronjob: Mapping[str, Any]) -> RunRequest | str | None:
    """The run request on ``cronjob`` not yet handled, if any; or why the one it holds
    cannot be run (a message naming the annotation, the field and the fix)."""
    annotations = (cronjob.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(RUN_ANNOTATION)
    if not raw:
        return None
    request = parse_run_request(str(raw))
    if isinstance(request, str):
        return request
    handled = (cronjob.get("status") or {}).get("lastHandledRunRequest")
    if request.token == handled:
        return None
    if request.overrides is not None:
        job_spec = ((cronjob.get("spec") or {}).get("jobTemplate") or {}).get("spec") or {}
        problem = container_problem(request.overrides, job_spec)
        if problem is not None:
            return problem
    return request


def unrecorded_manual_job(cronjob: Mapping[str, Any]) -> str | None:
    """The name of the manual Job that the stored status has not recorded: the one its
    unhandled run request asks for (None when there is none)."""
    request = run_request(cronjob)
    if not isinstance(request, RunRequest):
        return None
    return manual_job_name(cronjob["metadata"]["name"], request.token)
