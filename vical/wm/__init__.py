"""World-model track: cases cut from the simulators, models, scoring against the truth.

- :mod:`vical.wm.cases` builds the cases (context, intervention, true frames,
  specification) and reads them back;
- :mod:`vical.wm.sim` names a context state as data and re-derives its truth;
- :mod:`vical.wm.state` and :mod:`vical.wm.readback` turn simulator state and
  frames into the same named facts;
- :mod:`vical.wm.models` is the model interface, the controls and the HTTP client;
- :mod:`vical.wm.score` scores predictions against the truth;
- :mod:`vical.wm.couple` couples a world model to an agent run: imagined rollouts
  of the candidate actions before every move, logged and checked on verify.
"""
