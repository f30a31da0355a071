"""Custom pyinfra operations: each reads state with facts, yields commands only for
what differs and calls host.noop otherwise."""
