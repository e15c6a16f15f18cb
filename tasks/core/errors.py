"""User-facing errors: one line saying what is wrong, where, and what to do."""


class UserError(Exception):
    """A problem with the user's input or setup; the CLI prints it as one line, exit 2."""


class ParamsError(UserError):
    """params.yaml is malformed or fails validation."""


class InputError(UserError):
    """A stage input is missing or unreadable."""


class ServiceError(UserError):
    """A local service cannot be started, reached or stopped."""
