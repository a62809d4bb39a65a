"""What a device's battery buys at a measured power: hours of continuous generation and answers per charge."""

from __future__ import annotations

WH_TO_J = 3600.0


def battery_hours(battery_wh: float, power_w: float) -> float:
    """Hours of continuous generation: capacity over the measured power (the whole board's, as measured)."""
    if battery_wh <= 0 or power_w <= 0:
        raise ValueError("battery capacity and power must be positive")
    return battery_wh / power_w


def answers_per_charge(battery_wh: float, joules_per_answer: float) -> float:
    if battery_wh <= 0 or joules_per_answer <= 0:
        raise ValueError("battery capacity and energy per answer must be positive")
    return battery_wh * WH_TO_J / joules_per_answer


def battery_line(battery_wh: float | None, power_w: float | None, joules_per_answer: float | None) -> str:
    """One line for the power panel; says what is missing instead of showing a made-up figure."""
    if battery_wh is None:
        return "battery: the device profile gives no battery_wh"
    if power_w is None or power_w <= 0:
        return f"battery {battery_wh:g} Wh: hours need a power reading"
    line = f"battery {battery_wh:g} Wh: {battery_hours(battery_wh, power_w):.1f} h of generation at {power_w:.1f} W"
    if joules_per_answer is not None and joules_per_answer > 0:
        line += f", ~{answers_per_charge(battery_wh, joules_per_answer):,.0f} answers like the last per charge"
    return line
