"""A small Celery application for the end-to-end test of Celery on FerryMQ (kombu's SQS transport).

``app.create_app`` configures Celery for a FerryMQ endpoint; ``tasks`` is the module the worker process
loads (``celery -A tests.e2e.celery_app.tasks worker``), configured from the environment.
"""
