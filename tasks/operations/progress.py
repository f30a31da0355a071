"""Long commands whose output reaches the operator line by line, at any verbosity."""

from pyinfra.api import StringCommand


class StreamedCommand(StringCommand):
    """A shell command printed as it runs (host-prefixed, on stderr, so ``--json``
    output stays clean), like pyinfra's own with ``-v``: a five-minute pre-warm or
    venv build says what it is doing instead of nothing."""

    def execute(self, state, host, connector_arguments):
        connector_arguments.update(self.connector_arguments)
        return host.run_shell_command(self, print_output=True, print_input=state.print_input, **connector_arguments)
