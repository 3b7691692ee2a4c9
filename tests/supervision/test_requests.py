"""`send_request`: asynchronous calls whose answer arrives as one `Response` message
(OTP's gen_server:send_request/2 and receive_response/2, as in gen_server_SUITE's
send_request cases)."""

from __future__ import annotations

import pytest

import supervision as sv
from supervision import GenServer, NoReply, Reply, Response


class _Deferred(GenServer):
    """Answers "now" at once; holds "later" until "release"."""

    def init(self, args):
        return []

    def handle_call(self, request, from_, held):
        if request == "now":
            return Reply("answered", held)
        if request == "later":
            held.append(from_)
            return NoReply(held)
        if request == "release":
            for waiting in held:
                sv.reply(waiting, "released")
            return Reply(len(held), [])
        if request == "crash":
            raise RuntimeError("boom")
        return Reply(None, held)


def _response(request_id, timeout=5.0):
    return sv.receive(
        timeout, match=lambda m: isinstance(m, Response) and m.request_id == request_id
    )


def test_the_answer_arrives_as_one_message():
    server = _Deferred.start_link()
    request_id = sv.send_request(server, "now")
    assert _response(request_id) == Response(request_id, True, "answered")
    with pytest.raises(TimeoutError):
        _response(request_id, timeout=0.05)  # exactly one
    sv.stop(server)


def test_a_deferred_reply_arrives_later_and_the_caller_is_free_meanwhile():
    server = _Deferred.start_link()
    first = sv.send_request(server, "later")
    second = sv.send_request(server, "later")
    with pytest.raises(TimeoutError):
        _response(first, timeout=0.05)
    assert sv.call(server, "release") == 2
    assert _response(first).value == "released"
    assert _response(second).value == "released"
    sv.stop(server)


def test_a_server_that_dies_first_answers_with_its_reason():
    server = _Deferred.start()
    waiting = sv.send_request(server, "later")
    crashing = sv.send_request(server, "crash")
    answer = _response(waiting)
    assert not answer.ok and isinstance(answer.value, sv.Crash)
    assert _response(crashing).ok is False


def test_no_server_is_noproc_at_once():
    server = _Deferred.start()
    sv.stop(server)
    request_id = sv.send_request(server, "now")
    assert _response(request_id) == Response(request_id, False, "noproc")
    named = sv.send_request("no-such-name", "now")
    assert _response(named) == Response(named, False, "noproc")


def test_a_cancelled_request_gets_no_answer_and_leaves_no_monitor():
    server = _Deferred.start_link()
    request_id = sv.send_request(server, "later")
    assert server._process.counts()[1] == 1
    assert sv.cancel_request(request_id) is True
    assert sv.cancel_request(request_id) is False
    sv.call(server, "release")
    with pytest.raises(TimeoutError):
        _response(request_id, timeout=0.1)
    assert server._process.counts()[1] == 0  # no monitor of ours is left on the server
    sv.stop(server)
