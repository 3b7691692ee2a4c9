"""A2A 1.0 agent cards: build ours (server side) and validate a peer's (client side).

Both sides run the same checks on top of the strict wire parse: bounded names and
lists, absolute http(s) interface URLs without credentials or fragments, unique skill
ids and extension URIs, well-formed security schemes (exactly one kind each, https URLs
for OAuth and OpenID endpoints) and security requirements that name declared schemes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from a2a.types import a2a_pb2 as pb

from adk_actors.a2a.wire import (
    A2A_VERSION,
    JSONRPC_BINDING,
    ShapeError,
    render,
    strict_parse,
)
from adk_actors.outbound.endpoints import normal_host
from providers.errors import AdkError

MAX_NAME_CHARS = 256
MAX_DESCRIPTION_CHARS = 65_536
MAX_VERSION_CHARS = 64
MAX_URL_CHARS = 2048
MAX_INTERFACES = 16
MAX_SKILLS = 128
MAX_TAGS = 32
MAX_MODES = 32
MAX_EXTENSIONS = 32
MAX_SECURITY_SCHEMES = 32
MAX_SECURITY_REQUIREMENTS = 32
MAX_SCHEME_NAME_CHARS = 128
MAX_SCOPES = 128
MAX_SCOPE_CHARS = 256
API_KEY_LOCATIONS = frozenset({"query", "header", "cookie"})


class CardError(ValueError):
    """A card rule broken: `field` names the member, the text says why."""

    def __init__(self, field: str, why: str) -> None:
        self.field = field
        self.why = why
        super().__init__(f"{field}: {why}")


# -- build (server side) -----------------------------------------------------------------


def build_card(
    *,
    name: str,
    description: str,
    url: str,
    version: str = "1.0.0",
    skills: Sequence[Mapping[str, Any]] = (),
    streaming: bool = True,
    security_schemes: Mapping[str, Any] | None = None,
    security_requirements: Sequence[Mapping[str, Any]] | None = None,
    default_input_modes: Sequence[str] = ("text/plain", "application/json"),
    default_output_modes: Sequence[str] = ("text/plain",),
    provider: Mapping[str, str] | None = None,
    documentation_url: str | None = None,
) -> pb.AgentCard:
    """Our agent card: one JSON-RPC A2A 1.0 interface at `url`, no push notifications, no
    extended card. Skills and security members take their A2A JSON form. When `skills`
    is empty the card has one general skill. ``AdkError(("invalid_a2a_card", field), why)``."""
    data: dict[str, Any] = {
        "name": name,
        "description": description,
        "supportedInterfaces": [
            {"url": url, "protocolBinding": JSONRPC_BINDING, "protocolVersion": A2A_VERSION}
        ],
        "version": version,
        "capabilities": {
            "streaming": streaming,
            "pushNotifications": False,
            "extendedAgentCard": False,
        },
        "defaultInputModes": _str_list(default_input_modes, "defaultInputModes"),
        "defaultOutputModes": _str_list(default_output_modes, "defaultOutputModes"),
        "skills": [_mapping(skill, "skills") for skill in _sequence(skills, "skills")]
        or [{"id": "general", "name": name, "description": description, "tags": ["agent"]}],
    }
    if security_schemes is not None:
        data["securitySchemes"] = _mapping(security_schemes, "securitySchemes")
    if security_requirements is not None:
        data["securityRequirements"] = [
            _mapping(item, "securityRequirements")
            for item in _sequence(security_requirements, "securityRequirements")
        ]
    if provider is not None:
        data["provider"] = _mapping(provider, "provider")
    if documentation_url is not None:
        data["documentationUrl"] = documentation_url
    return _parsed_card(data, strict=True, reason="invalid_a2a_card")


def card_for_agent(agent_name: str, description: str, url: str, **overrides: Any) -> pb.AgentCard:
    """The card of one served agent: one skill named after it (``overrides`` go to
    `build_card`, e.g. ``version``, ``skills``, ``security_schemes``)."""
    arguments: dict[str, Any] = {
        "name": agent_name,
        "description": description,
        "url": url,
        "skills": [
            {
                "id": agent_name,
                "name": agent_name,
                "description": description,
                "tags": ["agent"],
            }
        ],
    }
    arguments.update(overrides)
    return build_card(**arguments)


def _sequence(value: Any, field: str) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise AdkError(("invalid_a2a_card", field), f"{field} is a list")
    return value


def _mapping(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise AdkError(("invalid_a2a_card", field), f"{field} items are mappings")
    return dict(value)


def _str_list(value: Any, field: str) -> list[str]:
    items = list(_sequence(value, field))
    if not all(isinstance(item, str) for item in items):
        raise AdkError(("invalid_a2a_card", field), f"{field} is a list of strings")
    return items


def _parsed_card(data: Any, *, strict: bool, reason: str) -> pb.AgentCard:
    """`data` strictly parsed as a card and checked; ``AdkError((reason, field))`` if not."""
    try:
        card = strict_parse(pb.AgentCard, data)
    except ShapeError as exc:
        raise AdkError((reason, "invalid_shape"), str(exc)) from None
    try:
        check_card(card, data, strict=strict)
    except CardError as exc:
        raise AdkError((reason, exc.field), str(exc)) from None
    return card


# -- validate (client side) --------------------------------------------------------------


def validate_card(
    data: Any, *, card_url: str, allowed_interface_origins: Collection[str] = ()
) -> tuple[pb.AgentCard, pb.AgentInterface]:
    """A peer's card (decoded JSON) and the interface to call: the first JSON-RPC interface
    of protocol major version 1 whose origin is `card_url`'s or listed in
    `allowed_interface_origins`. Reasons: ``("a2a_invalid_agent_card", field)``,
    ``a2a_no_jsonrpc_interface``, ``a2a_cross_origin_interface``."""
    data = without_v03_compat(data)
    card = _parsed_card(data, strict=False, reason="a2a_invalid_agent_card")
    candidates = [
        interface
        for interface in card.supported_interfaces
        if interface.protocol_binding == JSONRPC_BINDING
        and _major_version(interface.protocol_version) == 1
    ]
    if not candidates:
        raise AdkError("a2a_no_jsonrpc_interface", "the card lists no JSONRPC interface of A2A 1.x")
    allowed = {origin(card_url)} | {origin(item) for item in allowed_interface_origins}
    for interface in candidates:
        if origin(interface.url) in allowed:
            return card, interface
    raise AdkError(
        "a2a_cross_origin_interface",
        "the card's JSONRPC interface is on another origin than the card "
        "(list it in allowed_interface_origins to trust it)",
    )


_V03_CARD_MEMBERS = frozenset(
    {
        "url",
        "preferredTransport",
        "protocolVersion",
        "additionalInterfaces",
        "supportsAuthenticatedExtendedCard",
        "security",
    }
)
_V03_CAPABILITY_MEMBERS = frozenset({"stateTransitionHistory"})
_V03_SCHEME_MEMBERS = frozenset(
    {
        "type",
        "description",
        "in",
        "name",
        "scheme",
        "bearerFormat",
        "flows",
        "openIdConnectUrl",
        "oauth2MetadataUrl",
    }
)
_V03_SKILL_MEMBERS = frozenset({"security"})


def without_v03_compat(data: Any) -> Any:
    """A 1.0 card without the 0.3 members a dual-version server (the SDK's) merges in:
    ``url``, ``preferredTransport``... at the top, ``type``/``in``/``scheme``... beside a
    security scheme's 1.0 member, ``security`` in skills. Only a card that has
    ``supportedInterfaces`` (a 1.0 card) is touched; a 0.3-only card stays refused."""
    if not isinstance(data, dict) or not isinstance(data.get("supportedInterfaces"), list):
        return data
    card = {key: value for key, value in data.items() if key not in _V03_CARD_MEMBERS}
    capabilities = card.get("capabilities")
    if isinstance(capabilities, dict):
        card["capabilities"] = _without(capabilities, _V03_CAPABILITY_MEMBERS)
    schemes = card.get("securitySchemes")
    if isinstance(schemes, dict):
        card["securitySchemes"] = {
            name: _without(scheme, _V03_SCHEME_MEMBERS) if isinstance(scheme, dict) else scheme
            for name, scheme in schemes.items()
        }
    skills = card.get("skills")
    if isinstance(skills, list):
        card["skills"] = [
            _without(skill, _V03_SKILL_MEMBERS) if isinstance(skill, dict) else skill
            for skill in skills
        ]
    return card


def _without(members: dict[str, Any], names: frozenset[str]) -> dict[str, Any]:
    return {key: value for key, value in members.items() if key not in names}


def _major_version(version: str) -> int | None:
    head = version.strip().split(".", 1)[0]
    return int(head) if head.isdigit() and len(head) <= 4 else None


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port made explicit for http and https."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ("", "", None)
    scheme = parts.scheme.lower()
    if port is None:
        port = {"http": 80, "https": 443}.get(scheme)
    return (scheme, normal_host(parts.hostname or ""), port)


# -- the shared checks -------------------------------------------------------------------


def check_card(card: pb.AgentCard, data: Mapping[str, Any], *, strict: bool) -> None:
    """The card rules on top of the strict parse (`CardError` on the first broken one).
    `strict` (our own cards) also asks for skills with tags and for input/output modes;
    a peer's card may leave those out."""
    _text(card.name, "name", MAX_NAME_CHARS, required=True)
    _text(card.description, "description", MAX_DESCRIPTION_CHARS, required=strict)
    _text(card.version, "version", MAX_VERSION_CHARS, required=strict)
    if "supportedInterfaces" not in data or not card.supported_interfaces:
        raise CardError("supportedInterfaces", "at least one interface")
    if len(card.supported_interfaces) > MAX_INTERFACES:
        raise CardError("supportedInterfaces", f"at most {MAX_INTERFACES} interfaces")
    for interface in card.supported_interfaces:
        _absolute_url(interface.url, "supportedInterfaces.url", schemes=("http", "https"))
        _text(interface.protocol_binding, "supportedInterfaces.protocolBinding", 256, True)
        _text(interface.protocol_version, "supportedInterfaces.protocolVersion", 32, True)
    if card.HasField("provider"):
        _text(card.provider.organization, "provider.organization", MAX_NAME_CHARS, True)
        _absolute_url(card.provider.url, "provider.url", schemes=("http", "https"))
    if card.documentation_url:
        _absolute_url(card.documentation_url, "documentationUrl", schemes=("http", "https"))
    if card.icon_url and (strict or not card.icon_url.startswith("data:")):
        _absolute_url(card.icon_url, "iconUrl", schemes=("http", "https"))
    for field, modes in (
        ("defaultInputModes", card.default_input_modes),
        ("defaultOutputModes", card.default_output_modes),
    ):
        if strict and not modes:
            raise CardError(field, "at least one media type")
        _bounded_list(modes, field, MAX_MODES, MAX_NAME_CHARS)
    _check_extensions(card.capabilities)
    schemes = _check_security_schemes(card)
    _check_requirements(card.security_requirements, schemes, "securityRequirements")
    _check_skills(card, schemes, strict=strict)


def _text(value: str, field: str, limit: int, required: bool) -> None:
    if required and not value.strip():
        raise CardError(field, "is required and not blank")
    if len(value) > limit:
        raise CardError(field, f"at most {limit} chars")


def _bounded_list(items: Sequence[str], field: str, limit: int, item_limit: int) -> None:
    if len(items) > limit:
        raise CardError(field, f"at most {limit} items")
    if any(not item or len(item) > item_limit for item in items):
        raise CardError(field, f"items are 1..{item_limit} chars")


def _absolute_url(url: str, field: str, *, schemes: tuple[str, ...]) -> None:
    if not url or len(url) > MAX_URL_CHARS:
        raise CardError(field, f"a URL of 1..{MAX_URL_CHARS} chars")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a bad port raises here)
    except ValueError:
        raise CardError(field, "does not parse as a URL") from None
    if parts.scheme not in schemes or not parts.hostname:
        raise CardError(field, f"an absolute {'/'.join(schemes)} URL")
    if parts.username is not None or parts.password is not None:
        raise CardError(field, "may not carry credentials")
    if parts.fragment or "#" in url:
        raise CardError(field, "may not carry a fragment")
    if any(ch.isspace() for ch in url):
        raise CardError(field, "may not contain whitespace")


def _check_extensions(capabilities: pb.AgentCapabilities) -> None:
    extensions = capabilities.extensions
    if len(extensions) > MAX_EXTENSIONS:
        raise CardError("capabilities.extensions", f"at most {MAX_EXTENSIONS} extensions")
    seen: set[str] = set()
    for extension in extensions:
        uri = extension.uri
        if not uri or len(uri) > MAX_URL_CHARS or not _has_scheme(uri):
            raise CardError("capabilities.extensions", "each has an absolute uri")
        if uri in seen:
            raise CardError("capabilities.extensions", "extension uris are unique")
        seen.add(uri)


def _has_scheme(uri: str) -> bool:
    """Whether `uri` parses with a scheme; urlsplit raises on e.g. ``http://[::1`` (W14)."""
    try:
        return bool(urlsplit(uri).scheme)
    except ValueError:
        return False


def _check_skills(card: pb.AgentCard, schemes: Collection[str], *, strict: bool) -> None:
    if len(card.skills) > MAX_SKILLS:
        raise CardError("skills", f"at most {MAX_SKILLS} skills")
    if strict and not card.skills:
        raise CardError("skills", "at least one skill")
    seen: set[str] = set()
    for skill in card.skills:
        _text(skill.id, "skills.id", MAX_NAME_CHARS, True)
        _text(skill.name, "skills.name", MAX_NAME_CHARS, True)
        _text(skill.description, "skills.description", MAX_DESCRIPTION_CHARS, strict)
        if skill.id in seen:
            raise CardError("skills.id", "skill ids are unique")
        seen.add(skill.id)
        if strict and not skill.tags:
            raise CardError("skills.tags", "at least one tag")
        _bounded_list(skill.tags, "skills.tags", MAX_TAGS, MAX_NAME_CHARS)
        _bounded_list(skill.examples, "skills.examples", MAX_TAGS, MAX_DESCRIPTION_CHARS)
        _bounded_list(skill.input_modes, "skills.inputModes", MAX_MODES, MAX_NAME_CHARS)
        _bounded_list(skill.output_modes, "skills.outputModes", MAX_MODES, MAX_NAME_CHARS)
        _check_requirements(skill.security_requirements, schemes, "skills.securityRequirements")


def _check_security_schemes(card: pb.AgentCard) -> set[str]:
    field = "securitySchemes"
    if len(card.security_schemes) > MAX_SECURITY_SCHEMES:
        raise CardError(field, f"at most {MAX_SECURITY_SCHEMES} schemes")
    for name, scheme in card.security_schemes.items():
        if not name or len(name) > MAX_SCHEME_NAME_CHARS:
            raise CardError(field, f"scheme names are 1..{MAX_SCHEME_NAME_CHARS} chars")
        try:
            _check_scheme(scheme, f"{field}.{name}")
        except CardError as exc:  # the reason names the stable member, the text the scheme
            raise CardError(field, str(exc)) from None
    return set(card.security_schemes)


def _check_scheme(scheme: pb.SecurityScheme, field: str) -> None:
    match scheme.WhichOneof("scheme"):
        case "api_key_security_scheme":
            api_key = scheme.api_key_security_scheme
            if api_key.location not in API_KEY_LOCATIONS:
                raise CardError(field, "apiKey location is query, header or cookie")
            _text(api_key.name, field, MAX_NAME_CHARS, True)
        case "http_auth_security_scheme":
            _text(scheme.http_auth_security_scheme.scheme, field, MAX_NAME_CHARS, True)
        case "oauth2_security_scheme":
            _check_oauth2(scheme.oauth2_security_scheme, field)
        case "open_id_connect_security_scheme":
            url = scheme.open_id_connect_security_scheme.open_id_connect_url
            _absolute_url(url, f"{field}.openIdConnectUrl", schemes=("https",))
        case "mtls_security_scheme":
            pass
        case _:
            raise CardError(field, "a scheme has exactly one kind")


_FLOW_URLS: dict[str, tuple[str, ...]] = {
    "authorization_code": ("authorization_url", "token_url"),
    "client_credentials": ("token_url",),
    "device_code": ("device_authorization_url", "token_url"),
    "implicit": ("authorization_url",),
    "password": ("token_url",),
}


def _check_oauth2(oauth2: pb.OAuth2SecurityScheme, field: str) -> None:
    if oauth2.oauth2_metadata_url:
        _absolute_url(oauth2.oauth2_metadata_url, f"{field}.oauth2MetadataUrl", schemes=("https",))
    kind = oauth2.flows.WhichOneof("flow") if oauth2.HasField("flows") else None
    if kind is None:
        raise CardError(field, "oauth2 has exactly one flow")
    flow = getattr(oauth2.flows, kind)
    for url_field in _FLOW_URLS.get(kind, ()):
        _absolute_url(getattr(flow, url_field), f"{field}.{url_field}", schemes=("https",))
    if flow.refresh_url:
        _absolute_url(flow.refresh_url, f"{field}.refresh_url", schemes=("https",))
    if len(flow.scopes) > MAX_SCOPES:
        raise CardError(field, f"at most {MAX_SCOPES} scopes")
    if any(not scope or len(scope) > MAX_SCOPE_CHARS for scope in flow.scopes):
        raise CardError(field, f"scope names are 1..{MAX_SCOPE_CHARS} chars")


def _check_requirements(
    requirements: Sequence[pb.SecurityRequirement], schemes: Collection[str], field: str
) -> None:
    if len(requirements) > MAX_SECURITY_REQUIREMENTS:
        raise CardError(field, f"at most {MAX_SECURITY_REQUIREMENTS} requirements")
    for requirement in requirements:
        if not requirement.schemes:
            raise CardError(field, "a requirement names at least one scheme")
        for name, scopes in requirement.schemes.items():
            if name not in schemes:
                raise CardError(field, "names a scheme not declared in securitySchemes")
            _bounded_list(scopes.list, field, MAX_SCOPES, MAX_SCOPE_CHARS)


def required_extensions(card: pb.AgentCard) -> list[str]:
    """The URIs of the extensions the card says a client must support (at most
    `MAX_EXTENSIONS`, as checked)."""
    return [ext.uri for ext in card.capabilities.extensions[:MAX_EXTENSIONS] if ext.required]


def card_json(card: pb.AgentCard) -> dict[str, Any]:
    """The card as served at the well-known path."""
    return render(card)


__all__ = [
    "CardError",
    "build_card",
    "card_for_agent",
    "card_json",
    "check_card",
    "origin",
    "required_extensions",
    "validate_card",
    "without_v03_compat",
]
