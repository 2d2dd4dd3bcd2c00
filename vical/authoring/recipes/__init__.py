"""Per-environment authoring modules: ``vical/authoring/recipes/<env>.py``.

Found by the one per-environment lookup (:func:`vical.envs.env_module`, through
:func:`vical.authoring.author_module`). The public API of such a module, all
optional:

- ``recipe(spec) -> (plans, pools)``: the environment's demo clip plans
  (:class:`vical.authoring.plan.ClipPlan`) and either pools
  (:class:`vical.authoring.plan.Pool`) or, per task in file order, fixed clip
  id lists;
- ``RECIPE``: the environment's parameters for its family's shared recipe, which
  is called like ``recipe``: an :class:`vical.authoring.recipes._ale.AleRecipe`
  (ALE games), :class:`vical.authoring.recipes._lookahead.GameDemos` (the ALE
  games with a look-ahead expert), :class:`vical.authoring.recipes._procgen.ProcgenRecipe`
  (Procgen) or :class:`vical.authoring.recipes._scripted.ControlRecipe` (Classic
  Control), so the module states only its data;
- ``generate_init_actions(spec) -> {variant: [actions]}``: the human-init
  generator, whose task files' ``init_source`` names it
  (``generated: vical.authoring.recipes.<env>.generate_init_actions: ...``).

Modules whose name starts with ``_`` hold what several recipes share.
"""
