"""evalstop: sequential policy-comparison evaluations with anytime-valid stopping."""

__version__ = "0.1.0"
