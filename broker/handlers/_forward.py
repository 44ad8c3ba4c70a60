"""Controller-bound admin requests on a broker that is not the active controller.

Kafka 4.x brokers forward them to the controller (ForwardingManager, KIP-590) instead of answering
NOT_CONTROLLER; so does Samsa: this broker authorizes the client first, then sends the request
unchanged over the inter-broker listener to the broker Metadata names as controller
(`BrokerServices.controller_channel`), and the controller's answer is the client's. A request that
was itself forwarded (its client id is FORWARDING_CLIENT_ID) is not forwarded again: a controller
that moved meanwhile answers NOT_CONTROLLER, which the client's admin retries.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from broker.context import RequestContext
from broker.services import FORWARDING_CLIENT_ID
from protocol.errors import KafkaError

log = logging.getLogger("samsa.admin")

Response = TypeVar("Response")


async def forward_to_controller(
    ctx: RequestContext, request: object, response_type: type[Response], timeout_s: float
) -> Response | None:
    """The active controller's answer to `request`, or None when it cannot be had (no other
    controller known, the request was forwarded already, the controller unreachable)."""
    channel = ctx.services.controller_channel
    controller_id = ctx.services.controller.image.controller_id
    if channel is None or ctx.client_id == FORWARDING_CLIENT_ID or controller_id in (-1, ctx.services.broker_id):
        return None
    client = channel.get(controller_id)
    if client is None:
        return None
    try:
        async with channel.lock(controller_id):
            answer = await client.request(request, timeout_s=timeout_s)
    except (OSError, TimeoutError, KafkaError) as e:
        log.warning("forwarding to the controller failed api=%s controller=%d client_id=%s correlation_id=%d "
                    "error=%r", type(request).__name__, controller_id, ctx.client_id, ctx.correlation_id, e)  # fmt: skip
        return None
    return answer if isinstance(answer, response_type) else None
