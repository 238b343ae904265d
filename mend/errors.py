"""Errors that reach the user as one clear message and exit code 2."""


class MendError(Exception):
    """A user-facing failure: bad target, bad input, unwritable file.

    The CLI prints ``str(err)`` (no traceback unless ``--debug``) and exits 2.
    """


class TargetError(MendError):
    """The target could not be loaded, built or run on its example inputs."""
