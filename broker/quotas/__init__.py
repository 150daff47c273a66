"""Client quotas (Kafka's ClientQuotaManager family): entities and keys, Kafka's precedence
of the user/client-id quota entities, sampled rates and throttle times. Pure: no IO, no
clock of its own (callers pass milliseconds); broker/quotas/core.py."""
