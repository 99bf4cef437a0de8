"""FerryMQ's shared library: settings, errors, the SQS wire protocol, SigV4, worker RPC and AWS adapters."""

__version__ = "0.1.0"
