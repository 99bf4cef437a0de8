"""Celery configured for FerryMQ: kombu's SQS transport, with the endpoint taken from the broker URL's host."""

from __future__ import annotations

from urllib.parse import quote

from celery import Celery

# Short long-polls keep the worker's warm shutdown quick; the test waits for results, not for the broker.
_TRANSPORT_OPTIONS = {
    "is_secure": False,
    "wait_time_seconds": 1,
    "polling_interval": 0.1,
    "visibility_timeout": 60,
}


def broker_url(host: str, port: int, access_key: str, secret_key: str) -> str:
    """``sqs://KEY:SECRET@HOST:PORT``; kombu builds the endpoint URL from the host and port."""
    return f"sqs://{quote(access_key, safe='')}:{quote(secret_key, safe='')}@{host}:{port}"


def create_app(url: str, region: str, queue: str) -> Celery:
    """An app whose tasks all go to ``queue`` and that needs nothing but the broker (no results, no events)."""
    app = Celery("ferrymq_e2e", broker=url)
    app.conf.update(
        broker_transport_options={**_TRANSPORT_OPTIONS, "region": region},
        broker_connection_retry_on_startup=False,
        task_default_queue=queue,
        task_ignore_result=True,
        # Remote control and events need fanout exchanges, which plain SQS does not have.
        worker_enable_remote_control=False,
        worker_send_task_events=False,
        worker_prefetch_multiplier=1,
    )
    return app
