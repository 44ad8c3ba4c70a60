"""Spark jobs on the stock Kafka connector and their differential tests (compat/spark/pipeline.py)."""
