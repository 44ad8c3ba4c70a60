"""Message schemas kio does not generate, written in kio's conventions.

kio is generated from Kafka 4.x specs, which dropped some old versions that clients still need.
"""
