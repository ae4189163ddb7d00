"""Log lines carry the reconcile's identity, in JSON and in text."""

from __future__ import annotations

import json
import logging

import pytest

from cronjob_operator.runtime import logs


@pytest.fixture
def emit() -> logging.Logger:
    logger = logging.getLogger("test.reconciler")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    return logger


def capture(logger: logging.Logger, formatter: logging.Formatter) -> list[str]:
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(self.format(record))

    handler = Collect()
    handler.setFormatter(formatter)
    handler.addFilter(logs.ContextFilter())
    logger.handlers[:] = [handler]
    return lines


def test_json_lines_carry_controller_namespace_name_and_reconcile_id(emit: logging.Logger) -> None:
    lines = capture(emit, logs.JsonFormatter())
    with logs.reconcile_scope("cronjob", "ns", "hello") as reconcile_id:
        emit.info("created job %s", "hello-1", extra={"job": "hello-1"})
    emit.info("outside")
    inside, outside = (json.loads(line) for line in lines)
    assert inside["controller"] == "cronjob"
    assert inside["namespace"] == "ns"
    assert inside["name"] == "hello"
    assert inside["reconcileID"] == reconcile_id
    assert inside["logger"] == "test.reconciler"
    assert inside["msg"] == "created job hello-1"
    assert inside["job"] == "hello-1"
    assert "reconcileID" not in outside


def test_text_lines_keep_the_logger_name(emit: logging.Logger) -> None:
    lines = capture(emit, logs.TextFormatter())
    with logs.reconcile_scope("cronjob", "ns", "hello"):
        emit.warning("slow")
    assert "test.reconciler: slow" in lines[0]
    assert "controller=cronjob namespace=ns name=hello reconcileID=" in lines[0]
