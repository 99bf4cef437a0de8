"""Stop moto from keeping every model object it ever creates.

moto's ``BaseModel.__new__`` appends each new instance to a per-class list, ``instances_tracked``, for its
dashboard (``/moto-api/data.json``); only a full moto reset empties those lists. A DynamoDB item is such a
model, so every item a PutItem or UpdateItem replaced, and every item deleted, stayed reachable forever.
TransactWriteItems is worse: to roll back on failure moto deep-copies each table a transaction names (once
per operation on it), and every copied table and item landed in those lists too, so each transaction kept a
whole copy of the table. Under queue churn (dedup items put and swept, queue records and tombstones written
in transactions) that was the stand-in's memory growing without bound, faster as the tables grew.

:func:`install` makes ``BaseModel.__new__`` create instances without recording them and empties what was
recorded so far. The dashboard then lists nothing; nothing else in moto reads the lists.
"""

from __future__ import annotations

from typing import Any

_MARKER = "_ferrymq_untracked"


def install() -> None:
    """Stop recording moto model instances and drop the ones recorded so far. Idempotent."""
    from moto.core.common_models import BaseModel
    from moto.core.model_instances import reset_model_data

    if not getattr(BaseModel.__new__, _MARKER, False):

        def untracked_new(cls: type, *args: Any, **kwargs: Any) -> Any:
            # moto's own __new__ less the append; the arguments are __init__'s.
            return super(BaseModel, cls).__new__(cls)

        setattr(untracked_new, _MARKER, True)
        # Assigned after class creation, __new__ must be a staticmethod; subclasses inherit the change.
        BaseModel.__new__ = staticmethod(untracked_new)  # type: ignore[method-assign,assignment]
    reset_model_data()
