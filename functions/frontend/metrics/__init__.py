"""The gateway's metrics: what requests and queues did, as Prometheus text on ``GET /metrics`` and as
CloudWatch ``AWS/SQS``-style metrics.

- :mod:`.recorder`: counts kept on the request path (latency per action and error code, throttles, messages
  sent, received and deleted per queue, empty receives, sent sizes), as plain numbers a request updates in
  a few dictionary and attribute operations; nothing there locks, formats or calls out.
- :mod:`.depths`: queue depths (visible, in flight, delayed, age of the oldest message), refreshed by a task
  that reads the catalog and asks the workers.
- :mod:`.exposition`: both as Prometheus metric families, rendered by prometheus_client when scraped.
- :mod:`.cloudwatch`: both as CloudWatch metric data, put every period.
- :mod:`.service`: the parts put together for the gateway, and their background tasks.
"""
