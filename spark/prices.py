"""The price table: a JSON file (``spark/prices.json``, SQS's public prices, by default), read once by the driver."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DEFAULT_PRICES = Path(__file__).with_name("prices.json")
GB = 1024**3


@dataclass(frozen=True, slots=True)
class Tier:
    up_to: float | None  # cumulative monthly quantity where the tier ends; None: no end
    price: float  # per unit of quantity (one request, one byte, one KMS call)


@dataclass(frozen=True, slots=True)
class Prices:
    currency: str
    free_requests: int
    requests: dict[str, tuple[Tier, ...]]  # queue type -> tiers over request units
    transfer_free_bytes: float
    transfer: tuple[Tier, ...]  # tiers over bytes
    kms_free: int
    kms_per_call: float

    @classmethod
    def load(cls, path: Path | str | None = None) -> Prices:
        raw = json.loads(Path(path or DEFAULT_PRICES).read_text())
        requests = {
            kind: tuple(Tier(t["up_to"], t["per_million"] / 1e6) for t in tiers)
            for kind, tiers in raw["requests"].items()
        }
        transfer = tuple(Tier(None if t["up_to"] is None else t["up_to"] * GB, t["per_gb"] / GB)
                         for t in raw["transfer_out"]["tiers"])
        return cls(raw["currency"], int(raw["free_requests_per_month"]), requests,
                   raw["transfer_out"]["free_gb_per_month"] * GB, transfer,
                   int(raw["kms"]["free_requests_per_month"]), raw["kms"]["per_10k"] / 10_000)
