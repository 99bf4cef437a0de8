"""A durable stand-in for the AWS services FerryMQ uses (DynamoDB, S3, KMS), built on moto's server.

moto keeps state in memory only; this package adds a write-ahead journal and snapshots so the state
survives ``kill -9``. Run it as ``python -m ferrymq.infra.standin --host H --port P --data-dir D``.
"""
