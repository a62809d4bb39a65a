"""Turn figures from a synthetic sample sequence whose answers are worked out by hand."""

import pytest

from workbench.core.telemetry.derived import turn_figures
from workbench.core.telemetry.sample import TelemetrySample, Temperature, Throttle


def _sample(t, *, power=None, energy=None, energy_source="", temperature=None, throttle=None):
    return TelemetrySample(
        timestamp=t,
        mem_total_bytes=1,
        mem_available_bytes=1,
        swap_total_bytes=0,
        swap_used_bytes=0,
        cpu_percent=(0.0,),
        total_power_w=power,
        total_power_source="VDD_IN (test)" if power is not None else "",
        energy_j=energy,
        energy_source=energy_source,
        temperatures=(Temperature("cpu", temperature, "test"),) if temperature is not None else (),
        throttle=throttle,
    )


def test_constant_power_integrated():
    # 5 W from t=0 to t=10 at 2 Hz; a turn from 2.25 s to 7.75 s with 55 tokens:
    # 5 W x 5.5 s = 27.5 J, 0.5 J per token.
    samples = [_sample(i / 2, power=5.0) for i in range(21)]
    figures = turn_figures(samples, 2.25, 7.75, 55)
    assert figures.energy_j == pytest.approx(27.5)
    assert figures.mean_power_w == pytest.approx(5.0)
    assert figures.joules_per_token == pytest.approx(0.5)
    assert figures.energy_source == "integrated: VDD_IN (test)"


def test_ramp_power_integrated_exactly():
    # P(t) = t watts, sampled every 0.5 s; linear between samples is exact for a ramp, so the
    # energy from a to b is (b^2 - a^2) / 2.
    samples = [_sample(i / 2, power=i / 2) for i in range(21)]
    a, b = 1.3, 8.9
    figures = turn_figures(samples, a, b, 100)
    assert figures.energy_j == pytest.approx((b * b - a * a) / 2)
    assert figures.joules_per_token == pytest.approx((b * b - a * a) / 200)
    assert figures.mean_power_w == pytest.approx((a + b) / 2)


def test_counter_is_preferred_over_integrated_power():
    # The counter says 3 W (3 J per second); the power readings say 100 W and must be ignored.
    samples = [_sample(i, power=100.0, energy=3.0 * i, energy_source="counter: intel-rapl:0") for i in range(11)]
    figures = turn_figures(samples, 2.5, 6.5, 40)
    assert figures.energy_j == pytest.approx(12.0)
    assert figures.joules_per_token == pytest.approx(0.3)
    assert figures.energy_source == "counter: intel-rapl:0"


def test_no_power_source_gives_none_not_zero():
    samples = [_sample(i, temperature=50.0 + i) for i in range(5)]
    figures = turn_figures(samples, 1.0, 3.0, 10)
    assert (figures.energy_j, figures.mean_power_w, figures.joules_per_token) == (None, None, None)
    assert figures.throttled is None


def test_samples_must_cover_the_turn():
    samples = [_sample(i, power=5.0) for i in range(3)]
    assert turn_figures(samples, 1.0, 2.5, 10).energy_j is None  # no sample after the end yet


def test_zero_tokens_gives_no_per_token_figure():
    samples = [_sample(i, power=5.0) for i in range(5)]
    figures = turn_figures(samples, 1.0, 3.0, 0)
    assert figures.energy_j == pytest.approx(10.0)
    assert figures.joules_per_token is None


def test_temperature_rise_and_throttling():
    hot = Throttle(True, "Pi: soft temperature limit now", "get_throttled")
    calm = Throttle(False, "", "get_throttled")
    samples = [
        _sample(0.0, temperature=60.0, throttle=calm),
        _sample(1.0, temperature=61.5, throttle=calm),  # turn starts at 1.2: this is "before"
        _sample(2.0, temperature=66.0, throttle=hot),
        _sample(3.0, temperature=70.5, throttle=hot),  # first sample after the end at 2.9
        _sample(4.0, temperature=80.0, throttle=calm),
    ]
    figures = turn_figures(samples, 1.2, 2.9, 10)
    assert figures.temperature_rise_c == pytest.approx(70.5 - 61.5)
    assert figures.temperature_sensor == "cpu"
    assert figures.throttled is True
    assert figures.throttle_cause == "Pi: soft temperature limit now"
    quiet = turn_figures(samples[:2] + [_sample(2.0, temperature=62.0, throttle=calm)], 0.5, 1.5, 5)
    assert (quiet.throttled, quiet.throttle_cause) == (False, "")
