"""Share groups (KIP-932): the broker's side of queues for Kafka."""
