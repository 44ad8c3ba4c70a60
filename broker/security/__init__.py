"""Security: TLS, SASL, principals, the inter-broker client's side (see docs/architecture.md, Security)."""
