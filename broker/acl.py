"""Authorized-operation bitfields for Metadata, DescribeCluster and DescribeGroups.

Samsa has no authorizer, so, like Kafka without one, every operation on a resource is reported as
allowed when a client asks (Kafka's AclOperation codes).
"""

AUTHORIZED_OPERATIONS_OMITTED = -2147483648
"""The value when the client did not ask for authorized operations."""

# READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11
TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))
# CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
# IDEMPOTENT_WRITE 12
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))
# READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11: what Kafka 4.x reports for
# a group (groups have configs there), for DescribeGroups v3+.
GROUP_OPERATIONS = sum(1 << op for op in (3, 6, 8, 10, 11))
