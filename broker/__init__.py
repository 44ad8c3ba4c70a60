"""Samsa's broker: the server, request handlers, storage, replication and group coordination."""
