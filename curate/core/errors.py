"""One exception type for problems the user can fix; the CLI prints it as one line."""


class CurateError(Exception):
    """A user-facing error: bad input, missing model, bad template. Never shown as a traceback."""
