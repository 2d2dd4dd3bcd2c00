"""``vical play``: a person plays tasks in the browser under the protocol a model gets.

- :mod:`vical.play.human`: the human agent and the bridge between the episode
  thread and the page;
- :mod:`vical.play.session`: one participant's session over a task list (run
  folder, resume, order of play, what the page shows);
- :mod:`vical.play.record`: recording a demonstration clip or a start sequence
  (``vical play --record``) with the player's name and consent line as provenance;
- :mod:`vical.play.server`: the routes of the local web app;
- ``static/``: the page, its script and its style sheet.

Episodes are written by the episode runner itself, so a session's folder is a
``vical eval`` run folder whose agent is ``human``: ``vical report`` shows it as a
Human row, and ``vical submit``/``vical verify`` bundle and replay it like any run.
"""
