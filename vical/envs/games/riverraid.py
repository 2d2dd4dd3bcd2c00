"""River Raid: fly up the river, shoot what floats or flies, and keep the tank topped up.

Table 7 rules: RAM initialization of the stage and fuel state, preloaded
(human-init) starts, and life-loss termination. Parameterized variants write
their ``params`` into RAM right after reset, before the initial skipped frames:

* ``section`` (RAM byte 61): the river section (bridge) counter. From the
  second section on, helicopters and ships start to weave across the river,
  so higher sections give harder openings on the same river.
* ``fuel`` (RAM byte 55): the fuel tank, 255 full. Low values are drawn on the
  gauge and force a detour over a fuel depot before the tank runs dry.

Scoring is the default capped ratio of points since the start state. Pass: the
calibrated points threshold with the jet still flying when the episode ends. Table 7
lists "life-loss termination" and Table 28 reports no early success among River
Raid's 71% early deaths, so points scored before a crash count for the score but a
crash fails the task.
"""

from __future__ import annotations

from typing import Any

from vical.envs.ale import ALEAdapter

SECTION = 61
FUEL = 55


class Adapter(ALEAdapter):
    """RAM-set section and fuel; default capped-ratio scoring; a pass needs the jet kept."""

    pass_needs_life = True

    def prepare(self) -> None:
        params = self.task.variant.params
        if "section" in params:
            section = int(params["section"])
            if not 1 <= section <= 99:
                raise ValueError(f"{self.task.id}: section must be in 1..99, got {section}")
            self.ale.setRAM(SECTION, section)
        if "fuel" in params:
            fuel = int(params["fuel"])
            if not 1 <= fuel <= 255:
                raise ValueError(f"{self.task.id}: fuel must be in 1..255, got {fuel}")
            self.ale.setRAM(FUEL, fuel)

    def progress(self) -> dict[str, Any]:
        ram = self.ram()
        return {
            "reward": self.total,
            "fuel": int(ram[FUEL]),
            "section": int(ram[SECTION]),
            "died": self.died,
        }
