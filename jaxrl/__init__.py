"""jaxrl: the shared engine (buffer, loop, networks, evaluation, checkpoint, logging)."""

class ConfigError(ValueError):
    """A user-facing configuration error: its message is one line naming the bad value and what is allowed."""
