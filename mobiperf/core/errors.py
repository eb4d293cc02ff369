"""The errors mobiperf reports to its user.

Every failure the user can act on is a MobiperfError with a message that says what went wrong and what to do;
the CLI prints it without a traceback and exits non-zero. Anything else is a bug and keeps its traceback.
"""


class MobiperfError(Exception):
    """A failure with a message meant for the user."""

    exit_code = 1


class UsageError(MobiperfError):
    """Bad input: a malformed option, an unknown name, a run directory that is not one."""

    exit_code = 2


class TargetError(MobiperfError):
    """The target cannot do what was asked (no root, no tracefs, a command that timed out)."""


class StackError(MobiperfError):
    """The emulated storage stack could not be set up."""


class ParseError(MobiperfError):
    """A raw trace could not be read; names the file and the line or byte offset."""

    def __init__(self, path, where, message):
        super().__init__(f"{path}:{where}: {message}")
        self.path = path
        self.where = where


class NotApplicable(MobiperfError):
    """An analyzer that does not apply to this run (a SQLite analysis of a run that wrote no database): the
    pipeline records the reason, keeps any earlier result of the same table, and goes on."""


class MissingTableError(MobiperfError):
    """An analyzer needs a table the run does not have; says which events or collector would produce it."""
