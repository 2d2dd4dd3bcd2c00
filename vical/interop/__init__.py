"""V-ICAL inside other evaluation frameworks.

:mod:`vical.interop.inspect_agent`  the protocol (:class:`~vical.agent.protocol.ProtocolAgent`)
                                    with Inspect AI's model API as its transport
:mod:`vical.interop.inspect_tasks`  the Inspect tasks, solver, scorer and metrics; the module
                                    the ``inspect_ai`` entry point names
:mod:`vical.interop.inspect_import` an Inspect log turned into a vical run folder
                                    (``vical import-inspect``)

Everything here needs the ``inspect`` extra (``pip install 'vical[inspect]'``), imported
at call time where a module must load without it.
"""
