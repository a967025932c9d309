"""Errors rcusim reports to users.

Every error a user can cause carries the name of the field at fault and the fix, so the CLI
and the app can print one clear line instead of a traceback.
"""

from __future__ import annotations


class RcusimError(Exception):
    """Base of all errors meant for the user (printed as one line, exit code 2)."""


class ConfigError(RcusimError):
    """A configuration value (scenario, knob, profile field) is invalid.

    ``field`` is the dotted path of the value (``machine.cpus``); ``problem`` says what is
    wrong; ``fix`` says what to do.
    """

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field = field
        self.problem = problem
        self.fix = fix
        msg = f"{field}: {problem}" if field else problem
        if fix:
            msg += f" ({fix})"
        super().__init__(msg)

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str, str]]:
        # rebuilt from its three parts when it crosses from a worker process (pickle would
        # otherwise call __init__ with the message alone)
        return (type(self), (self.field, self.problem, self.fix))


class ScenarioError(RcusimError):
    """A valid configuration that cannot be simulated to the end (deadlock, no progress,
    stop condition never met)."""
