"""Usage records: what every answered request cost, for audit, billing and analytics.

:mod:`ferrymq.usage.schema` defines the record (versioned), :mod:`ferrymq.usage.writer` ships them to S3 or
Kinesis Data Firehose without ever blocking a request.
"""
