"""The group coordinator (classic consumer groups) and `__consumer_offsets`."""
