"""Kafka's security model for the broker: listeners with TLS (ssl_context), principals
(principal: KafkaPrincipal, Kafka's DN mapping rules), SASL (sasl: the per-connection
authenticator, PLAIN from the listener's JAAS config, SCRAM in scram), ACLs (acl: the model,
acl_store: where bindings persist, authorizer: Kafka's AclAuthorizer rules) and the SCRAM
credential store (credential_store).

Nothing here imports the network layer or the handlers: they import it.
"""
