"""Example plugins: a principal from an OAuth token claim, and private topics per user.

    principal.builder.class=broker.security.examples.token_claims:ClaimPrincipalBuilder
    plugin.principal.claim=preferred_username        # the claim to name principals by
    authorizer.class.name=broker.security.examples.token_claims:PrivateTopicAuthorizer
    plugin.private.topic.prefix=private.             # default

`ClaimPrincipalBuilder`: an OAUTHBEARER connection whose validated token carries the claim
becomes `User:<claim value>`; every other connection keeps Skiff's default principal
(User:<SASL name>, the mapped TLS subject, User:ANONYMOUS).

`PrivateTopicAuthorizer`: a topic named `<prefix><user>.<anything>` belongs to User:<user>:
nobody else may do anything with it (not even see it in Metadata). Every other check is
the StandardAuthorizer's: ACLs from the metadata log, super.users,
allow.everyone.if.no.acl.found. (Creating topics is first checked as CREATE on the
cluster, as in Kafka: that stays with the ACLs.)
"""

from __future__ import annotations

from collections.abc import Mapping

from broker.security.authorizer import ResourceType
from broker.security.plugins import (
    Action,
    AuthenticationContext,
    AuthorizableRequestContext,
    Authorizer,
    PrincipalBuilder,
)


class ClaimPrincipalBuilder(PrincipalBuilder):
    def configure(self, configs: Mapping[str, str]) -> None:
        self.claim = configs.get("plugin.principal.claim", "preferred_username")

    def build(self, context: AuthenticationContext) -> str:
        claims = context.token_claims or {}
        value = claims.get(self.claim)
        if isinstance(value, str) and value.strip():
            return f"User:{value.strip()}"
        return context.default_principal


class PrivateTopicAuthorizer(Authorizer):
    def configure(self, configs: Mapping[str, str]) -> None:
        self.prefix = configs.get("plugin.private.topic.prefix", "private.")

    def owner(self, topic: str) -> str | None:
        if not topic.startswith(self.prefix):
            return None
        user, dot, _ = topic[len(self.prefix):].partition(".")
        return f"User:{user}" if dot and user else None

    def authorize(self, context: AuthorizableRequestContext, action: Action) -> bool:
        if action.resource_type == ResourceType.TOPIC:
            owner = self.owner(action.resource_name)
            if owner is not None:
                return context.principal == owner
        return context.acls_allow(action)
