"""The end-to-end tests run against whole stacks: the ``stack``, ``private_stack``, ``protocol`` and ``sqs``
fixtures come from :mod:`tests.support.stack` (a plugin of the root conftest, so that the fuzz tests share
the session's stack); ``Stack`` is importable from here too."""

from tests.support.stack import Stack

__all__ = ["Stack"]
