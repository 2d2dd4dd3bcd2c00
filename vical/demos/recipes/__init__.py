"""Per-environment demo recipes: ``vical/demos/recipes/<env>.py`` (see vical.demos.make)."""
