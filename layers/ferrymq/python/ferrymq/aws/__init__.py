"""Adapters: the only code that talks to botocore. Each turns ClientErrors into FerryMQ errors."""
