"""The trainer's error type (its own module so that every part of training can raise it)."""


class TrainError(RuntimeError):
    """The trainer cannot run with this setup or cannot go on (the message says what to
    change)."""
