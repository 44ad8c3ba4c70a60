"""The Kafka wire protocol, pure: no asyncio, no sockets.

Frames and headers, kio-based message codecs with a versioning layer, the record batch view,
compression codecs and error codes.
"""
