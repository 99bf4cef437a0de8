"""The message maps WorkerClient.send takes, as the front end and a worker handing messages over build them."""

from __future__ import annotations

from ferrymq.rpc.codec import HANDOVER_FIELDS, SENT_MESSAGE_FIELDS
from ferrymq.rpc.messages import Origin, sent_message
from ferrymq.storage.engine import Outgoing
from ferrymq.storage.handover import handover_message


def test_a_message_from_a_client_has_every_field_of_the_send_request() -> None:
    # when the front end builds a FIFO message
    message = sent_message("id-1", "hello", {}, "md5", None, {"SenderId": "AIDA"}, delay=0, group="g",
                           dedup_id="d")
    # then it has the codec's fields, in order, and no history
    assert tuple(message) == SENT_MESSAGE_FIELDS + HANDOVER_FIELDS
    assert (message["group"], message["dedup_id"], message["origin"]) == ("g", "d", None)


def test_a_handed_over_message_keeps_its_history() -> None:
    # given a dead letter leaving its queue
    leaving = Outgoing(
        seq=12, id="id-2", body="late", attrs={"a": {"DataType": "String", "StringValue": "b"}}, md5_body="m1",
        md5_attrs="m2", system={"DeadLetterQueueSourceArn": "arn"}, sent_ts=1_000, receive_count=5,
        first_receive_ts=1_500, group="g", dedup_id="d",
    )
    # when it is handed over
    message = handover_message(leaving)
    # then it is the same message, with its send time and receive history as its origin, and no delay
    assert message == sent_message(
        "id-2", "late", leaving.attrs, "m1", "m2", leaving.system, group="g", dedup_id="d",
        origin=Origin(sent_ts=1_000, receive_count=5, first_receive_ts=1_500),
    )
    assert message["origin"] == {"sent_ts": 1_000, "receive_count": 5, "first_receive_ts": 1_500}
    assert message["delay"] == 0
