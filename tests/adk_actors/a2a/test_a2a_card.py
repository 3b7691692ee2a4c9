"""A2A 1.0 agent cards: building ours and validating a peer's (adk_actors.a2a.card)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from adk_actors.a2a import card as cards
from adk_actors.a2a import wire
from providers.errors import AdkError

BASE = "https://agent.example"
CARD_URL = BASE + wire.CARD_PATH
BEARER = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}}


def skill(skill_id: str = "echo", **extra: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "id": skill_id,
        "name": "Echo",
        "description": "Echo input",
        "tags": ["fixture"],
    }
    value.update(extra)
    return value


def built(**overrides: Any) -> pb.AgentCard:
    arguments: dict[str, Any] = {
        "name": "Fixture",
        "description": "Fixture agent",
        "url": BASE + wire.RPC_PATH,
    }
    arguments.update(overrides)
    return cards.build_card(**arguments)


def card_json(**overrides: Any) -> dict[str, Any]:
    return cards.card_json(built(**overrides))


def build_refused(**overrides: Any) -> AdkError:
    with pytest.raises(AdkError) as caught:
        built(**overrides)
    assert caught.value.reason[0] == "invalid_a2a_card"
    return caught.value


def validate_refused(data: Any, **kwargs: Any) -> AdkError:
    with pytest.raises(AdkError) as caught:
        cards.validate_card(data, card_url=kwargs.pop("card_url", CARD_URL), **kwargs)
    return caught.value


# -- build -------------------------------------------------------------------------------


def test_built_card_has_one_v1_jsonrpc_interface_and_no_legacy_members() -> None:
    """Follows adk_a2a_v1_codec_test: agent_card_uses_v1_supported_interfaces."""
    data = card_json(skills=[skill()])
    assert data["supportedInterfaces"] == [
        {"url": BASE + "/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]
    assert data["capabilities"] == {
        "streaming": True,
        "pushNotifications": False,
        "extendedAgentCard": False,
    }
    assert data["version"] == "1.0.0"
    assert data["defaultInputModes"] == ["text/plain", "application/json"]
    assert data["defaultOutputModes"] == ["text/plain"]
    for legacy in ("preferredTransport", "protocolVersion", "url", "additionalInterfaces"):
        assert legacy not in data


def test_card_for_agent_has_one_skill_named_after_the_agent() -> None:
    card = cards.card_for_agent("helper", "Helps", "http://127.0.0.1:8000", version="2.1.0")
    assert [(s.id, s.name, list(s.tags)) for s in card.skills] == [("helper", "helper", ["agent"])]
    assert card.version == "2.1.0"
    assert not cards.card_for_agent(
        "h", "d", "http://127.0.0.1:1", streaming=False
    ).capabilities.streaming


def test_a_card_without_skills_gets_a_general_one() -> None:
    card = built()
    assert [s.id for s in card.skills] == ["general"]


def test_optional_members_are_carried() -> None:
    data = card_json(
        provider={"organization": "Example", "url": "https://example.com"},
        documentation_url="https://docs.example.com/agent",
        security_schemes=BEARER,
        security_requirements=[{"schemes": {"bearer": {"list": ["a2a.invoke"]}}}],
    )
    assert data["provider"] == {"organization": "Example", "url": "https://example.com"}
    assert data["documentationUrl"] == "https://docs.example.com/agent"
    assert data["securitySchemes"] == BEARER
    assert data["securityRequirements"] == [{"schemes": {"bearer": {"list": ["a2a.invoke"]}}}]


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"url": "/a2a/v1"}, "supportedInterfaces.url"),
        ({"url": "ftp://agent.example/a2a"}, "supportedInterfaces.url"),
        ({"url": "https://user:pw@agent.example/a2a"}, "supportedInterfaces.url"),
        ({"url": "https://agent.example/a2a#frag"}, "supportedInterfaces.url"),
        ({"url": "https://agent.example:99999/a2a"}, "supportedInterfaces.url"),
        ({"url": "https://agent.example/" + "a" * 2048}, "supportedInterfaces.url"),
        ({"name": "  "}, "name"),
        ({"name": "n" * 257}, "name"),
        ({"version": ""}, "version"),
        ({"default_input_modes": ()}, "defaultInputModes"),
        ({"default_output_modes": ("",)}, "defaultOutputModes"),
        ({"skills": [skill("a"), skill("a")]}, "skills.id"),
        ({"skills": [skill(tags=[])]}, "skills.tags"),
        ({"skills": [skill(id="")]}, "skills.id"),
        ({"skills": [skill(f"s{i}") for i in range(129)]}, "skills"),
        ({"skills": [skill(kind="skill")]}, "invalid_shape"),
        ({"skills": "echo"}, "skills"),
        ({"skills": ["echo"]}, "skills"),
        ({"provider": {"organization": "o", "url": "not a url"}}, "provider.url"),
        ({"documentation_url": "javascript:alert(1)"}, "documentationUrl"),
    ],
)
def test_build_card_refusals_name_the_field(overrides: dict[str, Any], field: str) -> None:
    error = build_refused(**overrides)
    assert error.reason == ("invalid_a2a_card", field)


def test_security_requirements_must_name_declared_schemes() -> None:
    """Follows adk_a2a_v1_codec_test: agent_card_security_references_must_resolve."""
    error = build_refused(
        security_schemes=BEARER,
        security_requirements=[{"schemes": {"missing": {"list": []}}}],
    )
    assert error.reason == ("invalid_a2a_card", "securityRequirements")
    error = build_refused(security_requirements=[{"schemes": {"bearer": {}}}])
    assert error.reason == ("invalid_a2a_card", "securityRequirements")
    error = build_refused(security_schemes=BEARER, security_requirements=[{"schemes": {}}])
    assert error.reason == ("invalid_a2a_card", "securityRequirements")
    error = build_refused(
        security_schemes=BEARER,
        skills=[skill(securityRequirements=[{"schemes": {"other": {}}}])],
    )
    assert error.reason == ("invalid_a2a_card", "skills.securityRequirements")


def test_security_scheme_is_a_strict_union() -> None:
    """Follows adk_a2a_v1_codec_test: agent_card_security_scheme_is_a_strict_union."""
    ambiguous = {
        "ambiguous": {
            "httpAuthSecurityScheme": {"scheme": "Bearer"},
            "mtlsSecurityScheme": {},
        }
    }
    assert build_refused(security_schemes=ambiguous).reason == ("invalid_a2a_card", "invalid_shape")
    assert build_refused(security_schemes={"none": {}}).reason == (
        "invalid_a2a_card",
        "invalid_shape",
    )
    no_flow: dict[str, Any] = {"oauth": {"oauth2SecurityScheme": {"flows": {}}}}
    assert build_refused(security_schemes=no_flow).reason == ("invalid_a2a_card", "invalid_shape")


@pytest.mark.parametrize(
    "scheme",
    [
        {"apiKeySecurityScheme": {"location": "body", "name": "X-Key"}},
        {"apiKeySecurityScheme": {"location": "header", "name": ""}},
        {"httpAuthSecurityScheme": {"scheme": ""}},
        {"openIdConnectSecurityScheme": {"openIdConnectUrl": "http://idp.example/.well-known"}},
        {
            "oauth2SecurityScheme": {
                "flows": {"clientCredentials": {"tokenUrl": "http://t.example"}}
            }
        },
        {
            "oauth2SecurityScheme": {
                "flows": {"authorizationCode": {"tokenUrl": "https://t.example"}}
            }
        },
        {
            "oauth2SecurityScheme": {
                "flows": {"password": {"tokenUrl": "https://t.example", "scopes": {"": "empty"}}}
            }
        },
        {
            "oauth2SecurityScheme": {
                "oauth2MetadataUrl": "http://meta.example",
                "flows": {"password": {"tokenUrl": "https://t.example"}},
            }
        },
    ],
)
def test_malformed_security_schemes(scheme: dict[str, Any]) -> None:
    error = build_refused(security_schemes={"s": scheme})
    assert error.reason == ("invalid_a2a_card", "securitySchemes")
    assert "securitySchemes.s" in str(error)


def test_well_formed_security_schemes_are_accepted() -> None:
    schemes = {
        "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Key"}},
        "oidc": {
            "openIdConnectSecurityScheme": {
                "openIdConnectUrl": "https://idp.example/.well-known/openid-configuration"
            }
        },
        "oauth": {
            "oauth2SecurityScheme": {
                "flows": {
                    "authorizationCode": {
                        "authorizationUrl": "https://idp.example/authorize",
                        "tokenUrl": "https://idp.example/token",
                        "scopes": {"a2a.invoke": "call the agent"},
                        "pkceRequired": True,
                    }
                }
            }
        },
        "mtls": {"mtlsSecurityScheme": {"description": "client certificates"}},
    }
    requirements = [
        {"schemes": {"oauth": {"list": ["a2a.invoke"]}, "mtls": {}}},
        {"schemes": {"key": {}}},
    ]
    card = built(security_schemes=schemes, security_requirements=requirements)
    assert set(card.security_schemes) == set(schemes)
    assert cards.validate_card(cards.card_json(card), card_url=CARD_URL)[0] == card


def test_security_members_are_bounded() -> None:
    many: dict[str, Any] = {
        f"s{i}": {"mtlsSecurityScheme": {}} for i in range(cards.MAX_SECURITY_SCHEMES + 1)
    }
    assert build_refused(security_schemes=many).reason == ("invalid_a2a_card", "securitySchemes")
    long_name: dict[str, Any] = {"s" * 129: {"mtlsSecurityScheme": {}}}
    assert build_refused(security_schemes=long_name).reason == (
        "invalid_a2a_card",
        "securitySchemes",
    )
    requirements: list[dict[str, Any]] = [{"schemes": {"bearer": {}}}] * (
        cards.MAX_SECURITY_REQUIREMENTS + 1
    )
    error = build_refused(security_schemes=BEARER, security_requirements=requirements)
    assert error.reason == ("invalid_a2a_card", "securityRequirements")


# -- validate (client side) ---------------------------------------------------------------


def test_validate_round_trips_our_card_and_picks_its_interface() -> None:
    card = built(skills=[skill()], security_schemes=BEARER)
    parsed, interface = cards.validate_card(cards.card_json(card), card_url=CARD_URL)
    assert parsed == card
    assert interface.url == BASE + "/a2a/v1" and interface.protocol_version == "1.0"


def test_security_and_required_extensions_are_accepted() -> None:
    """Follows adk_a2a_v1_codec_test: agent_card_security_and_required_extensions."""
    data = card_json(
        skills=[skill()],
        security_schemes=BEARER,
        security_requirements=[{"schemes": {"bearer": {"list": ["a2a.invoke"]}}}],
    )
    extension = "https://example.test/a2a/extensions/audit/v1"
    data["capabilities"]["extensions"] = [
        {"uri": extension, "required": True, "params": {"mode": "strict"}}
    ]
    data["capabilities"]["extensions"].append({"uri": "https://example.test/optional"})
    card, _ = cards.validate_card(data, card_url=CARD_URL)
    assert cards.required_extensions(card) == [extension]
    assert cards.required_extensions(built()) == []


def test_extensions_are_bounded_and_unique() -> None:
    """Follows adk_a2a_v1_codec_test: agent_card_extensions_are_bounded_and_unique."""
    data = card_json()
    uri = "https://example.test/a2a/extensions/duplicate/v1"
    data["capabilities"]["extensions"] = [{"uri": uri}, {"uri": uri}]
    assert validate_refused(data).reason == ("a2a_invalid_agent_card", "capabilities.extensions")
    data["capabilities"]["extensions"] = [{"uri": f"{uri}/{i}"} for i in range(33)]
    assert validate_refused(data).reason == ("a2a_invalid_agent_card", "capabilities.extensions")
    data["capabilities"]["extensions"] = [{"uri": "no-scheme"}]
    assert validate_refused(data).reason == ("a2a_invalid_agent_card", "capabilities.extensions")


@pytest.mark.parametrize("uri", ["http://[::1", "urn://[x", "http://a]b/", "http://[zz]/"])
def test_an_extension_uri_that_does_not_parse_is_a_typed_refusal(uri: str) -> None:
    """Review W14 (repro_wire_10): urlsplit raises ValueError on ``http://[::1``; a peer's
    card with such an extension uri was a bare ValueError out of `connect`, now the card
    error naming the member."""
    data = card_json()
    data["capabilities"]["extensions"] = [{"uri": uri}]
    assert validate_refused(data).reason == ("a2a_invalid_agent_card", "capabilities.extensions")


def test_legacy_card_is_refused() -> None:
    """Follows adk_a2a_v1_codec_test: legacy_agent_card_is_rejected."""
    legacy = {
        "name": "old",
        "description": "old",
        "version": "0.3",
        "url": "https://old.example",
        "preferredTransport": "JSONRPC",
        "capabilities": {},
        "defaultInputModes": ["text"],
        "defaultOutputModes": ["text"],
        "skills": [skill()],
    }
    assert validate_refused(legacy).reason == ("a2a_invalid_agent_card", "invalid_shape")


def test_a_dual_version_sdk_card_is_read_by_its_1_0_members() -> None:
    """The official SDK serves 0.3 members beside the 1.0 ones when it also speaks 0.3."""
    data = card_json(
        url=BASE + "/a2a/v1",
        skills=[skill(securityRequirements=[{"schemes": {"bearer": {}}}])],
        security_schemes=BEARER,
        security_requirements=[{"schemes": {"bearer": {"list": ["s1"]}}}],
    )
    data["supportedInterfaces"].append(
        {"url": BASE + "/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
    )
    ours = json_format.ParseDict(data, pb.AgentCard())
    served = agent_card_to_dict(ours)
    assert served["preferredTransport"] == "JSONRPC" and served["securitySchemes"]["bearer"]["type"]
    original = copy.deepcopy(served)
    card, interface = cards.validate_card(served, card_url=CARD_URL)
    assert card == ours and interface.protocol_version == "1.0"
    assert served == original  # the caller's value is not changed


def test_a_0_3_member_beside_a_card_without_interfaces_is_still_refused() -> None:
    data = card_json()
    data["preferredTransport"] = "JSONRPC"
    assert cards.validate_card(data, card_url=CARD_URL)
    del data["supportedInterfaces"]
    assert validate_refused(data).reason == ("a2a_invalid_agent_card", "invalid_shape")


@pytest.mark.parametrize(
    "interfaces",
    [
        [],
        [{"url": BASE + "/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
        [{"url": BASE + "/", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}],
        [{"url": BASE + "/", "protocolBinding": "JSONRPC", "protocolVersion": "2.0"}],
        [{"url": BASE + "/", "protocolBinding": "jsonrpc", "protocolVersion": "1.0"}],
    ],
)
def test_no_jsonrpc_1_x_interface(interfaces: list[dict[str, str]]) -> None:
    data = card_json()
    data["supportedInterfaces"] = interfaces
    reason = validate_refused(data).reason
    expected = (
        ("a2a_invalid_agent_card", "supportedInterfaces")
        if not interfaces
        else "a2a_no_jsonrpc_interface"
    )
    assert reason == expected


def test_a_1_x_minor_version_is_accepted() -> None:
    data = card_json()
    data["supportedInterfaces"][0]["protocolVersion"] = "1.1"
    assert cards.validate_card(data, card_url=CARD_URL)[1].protocol_version == "1.1"


def test_cross_origin_interface_needs_the_exact_origin_listed() -> None:
    """Follows adk_a2a_v1_client_security_test: cross_origin_discovery_requires_exact_origin_allowlist."""
    data = card_json(url="https://rpc.example/a2a/v1")
    assert validate_refused(data).reason == "a2a_cross_origin_interface"
    wrong = validate_refused(data, allowed_interface_origins=["https://rpc.example:8443"])
    assert wrong.reason == "a2a_cross_origin_interface"
    assert validate_refused(data, allowed_interface_origins=["http://rpc.example"]).reason == (
        "a2a_cross_origin_interface"
    )
    _, interface = cards.validate_card(
        data, card_url=CARD_URL, allowed_interface_origins=["https://RPC.example:443"]
    )
    assert interface.url == "https://rpc.example/a2a/v1"


def test_same_origin_is_scheme_host_and_port() -> None:
    data = card_json(url="http://127.0.0.1:8123/a2a/v1")
    assert cards.validate_card(data, card_url="http://127.0.0.1:8123/.well-known/agent-card.json")
    assert (
        validate_refused(data, card_url="http://127.0.0.1:8124/").reason
        == "a2a_cross_origin_interface"
    )
    assert (
        validate_refused(data, card_url="http://localhost:8123/").reason
        == "a2a_cross_origin_interface"
    )
    assert (
        validate_refused(data, card_url="https://127.0.0.1:8123/").reason
        == "a2a_cross_origin_interface"
    )
    assert cards.origin("HTTPS://Agent.Example/x") == ("https", "agent.example", 443)
    assert cards.origin("http://[::1]:99999/") == ("", "", None)


def test_the_first_allowed_interface_is_chosen() -> None:
    data = card_json()
    data["supportedInterfaces"] = [
        {
            "url": "https://elsewhere.example/rpc",
            "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0",
        },
        {"url": BASE + "/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    ]
    assert cards.validate_card(data, card_url=CARD_URL)[1].url == BASE + "/a2a/v1"


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.pop("name"), ("a2a_invalid_agent_card", "name")),
        (lambda d: d.update(name="x" * 257), ("a2a_invalid_agent_card", "name")),
        (lambda d: d.update(name="x" * 5000), ("a2a_invalid_agent_card", "invalid_shape")),
        (lambda d: d.update(extra=True), ("a2a_invalid_agent_card", "invalid_shape")),
        (
            lambda d: d.update(capabilities={"streaming": "yes"}),
            ("a2a_invalid_agent_card", "invalid_shape"),
        ),
        (
            lambda d: d["supportedInterfaces"][0].update(url="a2a/v1"),
            ("a2a_invalid_agent_card", "supportedInterfaces.url"),
        ),
        (
            lambda d: d["skills"].append(dict(d["skills"][0])),
            ("a2a_invalid_agent_card", "skills.id"),
        ),
        (
            lambda d: d.update(securityRequirements=[{"schemes": {"nope": {}}}]),
            ("a2a_invalid_agent_card", "securityRequirements"),
        ),
        (
            lambda d: d.update(supportedInterfaces=d["supportedInterfaces"] * 17),
            ("a2a_invalid_agent_card", "supportedInterfaces"),
        ),
    ],
)
def test_validate_refusals(mutate: Any, reason: Any) -> None:
    data = card_json()
    mutate(data)
    assert validate_refused(data).reason == reason


@pytest.mark.parametrize("data", [None, [], "card", 5, {"name": None}])
def test_validate_refuses_what_is_not_a_card(data: Any) -> None:
    assert validate_refused(data).reason == ("a2a_invalid_agent_card", "invalid_shape")


def test_a_peer_card_may_leave_out_optional_members() -> None:
    """A minimal peer card (no version, modes or tags) is usable; ours always has them."""
    minimal = {
        "name": "peer",
        "supportedInterfaces": [
            {"url": BASE + "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "skills": [{"id": "s", "name": "s"}],
    }
    card, interface = cards.validate_card(minimal, card_url=CARD_URL)
    assert card.name == "peer" and interface.url == BASE + "/rpc"


def test_a_peer_cards_icon_may_be_a_data_url_ours_may_not() -> None:
    data = card_json()
    data["iconUrl"] = "data:image/png;base64," + "A" * 8000
    assert cards.validate_card(data, card_url=CARD_URL)[0].icon_url.startswith("data:")
    data["iconUrl"] = "ftp://icons.example/i.png"
    assert validate_refused(data).reason == ("a2a_invalid_agent_card", "iconUrl")


def test_an_idna_host_is_one_origin_in_either_form() -> None:
    """Review (client) nit 6: a card found at ``bücher.example`` whose interface names the
    same host in its IDNA form (or with a trailing dot) is on the card's origin."""
    data = card_json(url="https://xn--bcher-kva.example/a2a/v1")
    _, interface = cards.validate_card(
        data, card_url="https://bücher.example/.well-known/agent-card.json"
    )
    assert interface.url == "https://xn--bcher-kva.example/a2a/v1"
    assert cards.origin("https://Bücher.example./x") == cards.origin(
        "https://xn--bcher-kva.example"
    )
    assert (
        validate_refused(data, card_url="https://buecher.example/").reason
        == "a2a_cross_origin_interface"
    )
