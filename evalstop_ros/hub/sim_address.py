"""The address of a simulated policy server, ``sim://success=P`` (hub stations and ``sim_robot``).

Its own module so that ``sim_robot`` reads it without loading the station's HTTP client and journal.
"""

from __future__ import annotations

__all__ = ["SIM_ADDRESS", "sim_address_rate"]

#: Address prefix of a simulated policy server, ``sim://success=P``.
SIM_ADDRESS = "sim://success="


def sim_address_rate(address: str) -> float | None:
    """The success probability ``P`` of a simulated policy server ``sim://success=P`` (``None``:
    not such an address, or ``P`` not in [0, 1]). Used by :func:`evalstop_ros.station.sim.sim_runner` and ``sim_robot``.

    >>> sim_address_rate("sim://success=0.85"), sim_address_rate("policy_a"), sim_address_rate("sim://success=2")
    (0.85, None, None)
    """
    if not address.startswith(SIM_ADDRESS):
        return None
    try:
        rate = float(address.removeprefix(SIM_ADDRESS))
    except ValueError:
        return None
    return rate if 0.0 <= rate <= 1.0 else None
