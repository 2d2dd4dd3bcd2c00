"""One module per environment, all 37: ``<env key>.py`` holds everything specific to
that game (its ``Adapter``: rules, endings, scoring hooks, state reader and writer; its
tables: RAM addresses, entity ids, sprites, a MiniGrid game's simulator class).

The family modules one level up hold only what their games share. The lookup is
:func:`vical.envs.game_module`, which also searches the packages named in
``$VICAL_GAME_PACKAGES``. What *makes* a game's task data (human-init generators,
demo recipes, search experts) lives in ``vical/authoring/recipes/<env>.py``, never here.
"""
