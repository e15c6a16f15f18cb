"""User-facing errors: one line saying what is wrong, where, and what to do."""


class UserError(Exception):
    """A problem with the user's input or setup; the CLI prints it as one line, exit 2."""


class ParamsError(UserError):
    """params.yaml is malformed or fails validation."""


class InputError(UserError):
    """A stage input is missing or unreadable."""


class ServiceError(UserError):
    """A local service cannot be started, reached or stopped."""


class WorkerFailure(Exception):
    """Ray work that still failed after its retry budget (a worker died or raised): the CLI
    prints it as one line naming the stage, the function, the cause and the worker's log,
    exit 1. The worker's log holds the traceback."""
