"""The shipped executor: a deterministic scripted agent. No model provider anywhere.

A script is a list of actions, optionally repeating its last one forever (to run into a
limit). The script is chosen by a directive in the run's instruction, ``[script:NAME]``
or ``[script:NAME:ARG]``, else by the agent spec's ``"script"`` key, else ``succeed``.
Built-in scripts:

=====================  =============================================================
``succeed``            one model call, then the answer
``fail``               one model call, then a scripted failure
``run_long[:SECONDS]`` one model call, work for SECONDS (default 3600), then answer
``steps[:N]``          N model calls of cost 0 then answer (``steps`` alone: forever)
``tools[:N]``          N ``memory.recall`` calls then answer (alone: forever)
``spend[:N]``          N model calls of cost 1 then answer (alone: forever)
``research[:N]``       N rounds (default 1) of a model call of cost 1 and a
                       ``memory.recall`` call, then answer: research that can meet
                       each final-synthesis reserve
``undeclared_tool``    calls ``web.search`` (needs a declared tool and its scope), then
                       answers
``bulk_output[:BYTES]``  calls ``bulk.output`` producing BYTES bytes, then answers
=====================  =============================================================
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from scheduling.ports.runtime import (
    Action,
    ExecutionContext,
    Fail,
    Finish,
    ModelCall,
    ToolCall,
    Wait,
)

_DIRECTIVE = re.compile(r"\[script:([a-z_]+)(?::([0-9]+))?\]")
ANSWER = "Done: the scripted agent finished its work."


@dataclass(frozen=True)
class Script:
    """Actions in order; with ``repeat_last`` the last action repeats forever."""

    actions: tuple[Action, ...]
    repeat_last: bool = False

    def at(self, cursor: int) -> Action:
        if cursor < len(self.actions):
            return self.actions[cursor]
        if self.repeat_last and self.actions:
            return self.actions[-1]
        return Finish(ANSWER)


RECALL = ToolCall("memory.recall", {"topic": "notes"})


def _rounds(round_: tuple[Action, ...], arg: int | None) -> Script:
    """``arg`` (default 1) repetitions of ``round_``, then the answer."""
    return Script((*(round_ * (1 if arg is None else arg)), Finish(ANSWER)))


def _bounded_or_forever(step: Action, arg: int | None) -> Script:
    if arg is None:
        return Script((step,), repeat_last=True)
    return Script((*([step] * arg), Finish(ANSWER)))


def _builtin(name: str, arg: int | None) -> Script | None:
    makers: dict[str, Callable[[], Script]] = {
        "succeed": lambda: Script((ModelCall(), Finish(ANSWER))),
        "fail": lambda: Script((ModelCall(), Fail("ScriptedFailure"))),
        "run_long": lambda: Script(
            (ModelCall(), Wait(float(arg if arg is not None else 3600)), Finish(ANSWER))
        ),
        "steps": lambda: _bounded_or_forever(ModelCall(Decimal(0)), arg),
        "tools": lambda: _bounded_or_forever(RECALL, arg),
        "spend": lambda: _bounded_or_forever(ModelCall(Decimal(1)), arg),
        "research": lambda: _rounds((ModelCall(Decimal(1)), RECALL), arg),
        "undeclared_tool": lambda: Script(
            (ModelCall(), ToolCall("web.search", {"query": "news"}), Finish(ANSWER))
        ),
        "bulk_output": lambda: Script(
            (ToolCall("bulk.output", {"size": arg if arg is not None else 4096}), Finish(ANSWER))
        ),
    }
    maker = makers.get(name)
    return None if maker is None else maker()


def select_script(
    instruction: str, agent_spec: Mapping[str, object], extra: Mapping[str, Script]
) -> Script:
    """The script for a run (see the module docstring); unknown names fail the run."""
    match = _DIRECTIVE.search(instruction)
    if match is not None:
        name, arg = match[1], (int(match[2]) if match[2] else None)
    else:
        configured = agent_spec.get("script")
        name, arg = (configured if isinstance(configured, str) else "succeed"), None
    if name in extra:
        return extra[name]
    return _builtin(name, arg) or Script((Fail("UnknownScript"),))


class ScriptedAgent:
    """``Executor`` implementation; ``scripts`` adds named scripts beside the built-ins."""

    def __init__(self, scripts: Mapping[str, Script] | None = None) -> None:
        self._scripts = dict(scripts or {})

    async def next_action(self, context: ExecutionContext) -> Action:
        script = select_script(context.instruction, context.agent_spec, self._scripts)
        return script.at(context.cursor)
