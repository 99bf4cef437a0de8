"""FerryMQ's shared library: settings, errors, the SQS wire protocol, SigV4, worker RPC and AWS adapters."""

__version__ = "0.1.0"

# Imported here, so that `ferrymq.client` is the function: importing the submodule later cannot rebind it.
from ferrymq.client import client

__all__ = ["__version__", "client"]
