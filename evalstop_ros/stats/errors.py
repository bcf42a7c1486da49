"""The one exception type of the statistics core."""


class StatsInputError(ValueError):
    """Bad input to a statistics function: the message names the argument and the bad value."""
