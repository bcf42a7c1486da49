"""evalstop: sequential policy-comparison evaluations with anytime-valid stopping.

The :mod:`evalstop_ros.stats` subpackage is the pure statistics core (numpy/scipy, no ROS
imports); :mod:`evalstop_ros.cli` is the ``evalstop`` command line.
"""

__version__ = "0.1.0"
