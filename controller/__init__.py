"""Cluster metadata: the model, the controller interface, the embedded and ZooKeeper controllers."""
