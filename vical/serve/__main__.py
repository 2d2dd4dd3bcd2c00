"""``python -m vical.serve``: run the baseline model server (see :mod:`vical.serve`)."""

from __future__ import annotations

from vical.serve.command import main

if __name__ == "__main__":
    main()
