"""Test support: run real Samsa brokers on free loopback ports (used by Samsa's own tests and by
the pytest plugin that any project can use in place of a Kafka container)."""

from broker.testing.process import SamsaProcess

__all__ = ["SamsaProcess"]
