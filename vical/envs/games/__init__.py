"""Game-specific ALE rules: one module per game, each defining ``Adapter(ALEAdapter)``."""
