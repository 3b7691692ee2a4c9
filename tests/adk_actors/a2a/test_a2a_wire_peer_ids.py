"""A peer's task and context ids in a message we send are opaque (another server's ids need
not follow our grammar): `wire.user_message` bounds them and asks them to be printable, while
the server side (`parse_request`) keeps our own pattern."""

from __future__ import annotations

import pytest

from adk_actors.a2a import errors, wire
from providers.errors import AdkError


@pytest.mark.parametrize(
    "peer_id", ["tasks/42", "Zm9vYmFy==", "projects/p1/tasks/7f3a+Zm9v=", "x" * 300]
)
def test_a_mapping_message_may_carry_a_peers_opaque_ids(peer_id: str) -> None:
    """Review (client) 5 / W8: a follow-up built from a mapping that names the peer's task."""
    message = wire.user_message(
        {"parts": [{"text": "yes"}], "taskId": peer_id, "contextId": peer_id}
    )
    assert message.task_id == peer_id and message.context_id == peer_id


@pytest.mark.parametrize("bad", ["line\nbreak", "x" * (wire.MAX_STRING_CHARS + 1)])
def test_peer_ids_are_still_bounded_and_printable(bad: str) -> None:
    with pytest.raises(AdkError) as caught:
        wire.user_message("yes", task_id=bad)
    assert caught.value.reason == ("invalid_a2a_message", "invalid_shape")


def test_our_server_keeps_its_own_id_grammar() -> None:
    """The same id a client may send to a peer is refused by our server (-32602)."""
    params = {
        "message": {
            "messageId": "m-1",
            "role": "ROLE_USER",
            "parts": [{"text": "yes"}],
            "taskId": "tasks/42",
        }
    }
    with pytest.raises(errors.RpcError) as caught:
        wire.parse_request("SendMessage", params)
    assert caught.value.code == errors.INVALID_PARAMS
