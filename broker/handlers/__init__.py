"""One module per Kafka API key: `api_NN_name.py`, each registering its handler with `registry`."""
