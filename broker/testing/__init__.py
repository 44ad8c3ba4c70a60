"""Test support: run real Samsa brokers on free loopback ports (used by Samsa's own tests and by
the pytest plugin that any project can use in place of a Kafka container). `SamsaProcess` runs a
`samsa serve` process; `broker.testing.inprocess.SamsaInProcess` a broker inside this process (not
imported here, so that loading the plugin stays cheap)."""

from broker.testing.process import SamsaProcess

__all__ = ["SamsaProcess"]
