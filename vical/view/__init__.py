"""``vical view``: browse run folders and bundles in the browser, or export them as HTML.

- :mod:`vical.view.web`: the local HTTP server both ``vical view`` and
  ``vical play`` use (standard library, 127.0.0.1 only).
"""
