"""Control side: what runs on the operator's machine around pyinfra (plans, reports, files)."""
