"""Settings for every test under tests/.

Hypothesis runs without its per-example deadline (200 ms by default): speed is measured by the
benchmarks, not by tests, and on a loaded machine a first example that imports a codec took 420 ms
and failed a property that holds."""

from hypothesis import settings

settings.register_profile("samsa", deadline=None)
settings.load_profile("samsa")
