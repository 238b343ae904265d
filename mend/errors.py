"""Errors that reach the user as one clear message and exit code 2."""


class MendError(Exception):
    """A user-facing failure: bad target, bad input, unwritable file.

    The CLI prints ``str(err)`` (no traceback unless ``--debug``) and exits 2.
    """


class TargetError(MendError):
    """The target could not be loaded, built or run on its example inputs."""


class InputsRejected(TargetError):
    """The model raised on its own example inputs in eager mode (``cause``: the exception,
    shortened). In a verification worker whose overlay holds rewritten source, it is the
    rewrite that made the model raise (the original was checked before planning)."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


def target_failure(spec: str, exc: Exception) -> str:
    """The batch report's message for target ``spec`` that raised ``exc``: a MendError's own
    text, else an internal error naming the exception (a crash in one target must not lose
    the batch's other results)."""
    if isinstance(exc, MendError):
        return str(exc)
    return f"{spec}: internal error: {type(exc).__name__}: {exc}"
