"""The worker's tasks; each writes what it computed to ``<output dir>/<tag>.json``, which the test reads.

Loaded by the worker process only: the broker URL, region, queue and output directory come from
``FERRYMQ_CELERY_BROKER_URL``, ``FERRYMQ_CELERY_REGION``, ``FERRYMQ_CELERY_QUEUE`` and ``FERRYMQ_CELERY_OUTPUT``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from celery import Task

from tests.e2e.celery_app.app import create_app

app = create_app(
    os.environ["FERRYMQ_CELERY_BROKER_URL"], os.environ["FERRYMQ_CELERY_REGION"], os.environ["FERRYMQ_CELERY_QUEUE"]
)
OUTPUT = Path(os.environ["FERRYMQ_CELERY_OUTPUT"])


def _record(task: Task, tag: str, **payload: Any) -> None:
    # Written aside and renamed, so the test never reads half a file.
    target = OUTPUT / f"{tag}.json"
    partial = target.with_suffix(".partial")
    partial.write_text(json.dumps({**payload, "task_id": task.request.id, "worker_pid": os.getpid()}))
    partial.replace(target)


@app.task(bind=True, name="ferrymq_e2e.add")
def add(self: Task, x: int, y: int, tag: str) -> None:
    _record(self, tag, result=x + y)


@app.task(bind=True, name="ferrymq_e2e.word_lengths")
def word_lengths(self: Task, text: str, tag: str) -> None:
    _record(self, tag, result={word: len(word) for word in text.split()})


@app.task(bind=True, name="ferrymq_e2e.fan_out")
def fan_out(self: Task, count: int, tag: str) -> None:
    """Sends ``count`` more tasks through the broker from inside the worker."""
    for i in range(count):
        add.delay(i, i, tag=f"{tag}-{i}")
    _record(self, tag, result=count)


@app.task(bind=True, name="ferrymq_e2e.retry_once", max_retries=3)
def retry_once(self: Task, tag: str) -> None:
    """Fails its first run and asks Celery to retry, which publishes the task again."""
    if self.request.retries == 0:
        raise self.retry(countdown=0)
    _record(self, tag, result=self.request.retries)
