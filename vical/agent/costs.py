"""Cost accounting from a user-editable price table (``vical/agent/prices.yaml``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PRICES = Path(__file__).with_name("prices.yaml")


def load_prices(path: Path | str | None = None) -> dict[str, dict[str, float]]:
    """The price table: ``path``, else ``$VICAL_PRICES``, else the packaged default."""
    p = Path(path or os.environ.get("VICAL_PRICES") or DEFAULT_PRICES)
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"price table {p}: cannot be read ({e})") from None
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise ValueError(f"price table {p}: 'models' must map model names to prices")
    out = {}
    for name, row in models.items():
        if not isinstance(row, dict) or "input" not in row or "output" not in row:
            raise ValueError(
                f"price table {p}: model {name!r} needs 'input' and 'output' "
                "(USD per million tokens)"
            )
        out[str(name)] = {k: float(v) for k, v in row.items()}
    return out


def episode_cost(usage: dict[str, int], price: dict[str, float] | None) -> float | None:
    """USD for one episode's token usage, or None when the model has no price."""
    if price is None:
        return None
    cached = int(usage.get("cached_input_tokens", 0))
    fresh = max(0, int(usage.get("input_tokens", 0)) - cached)
    cost = fresh * price["input"] + int(usage.get("output_tokens", 0)) * price["output"]
    cost += cached * price.get("cached_input", price["input"])
    return round(cost / 1e6, 6)


def price_for(
    settings: dict[str, Any], prices: dict[str, dict[str, float]]
) -> dict[str, float] | None:
    model = settings.get("model")
    return prices.get(str(model)) if model is not None else None
