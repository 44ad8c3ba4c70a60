"""Compatibility and benchmark tooling run against Samsa (and, side by side, Apache Kafka)."""
