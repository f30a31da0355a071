"""shared_env_file reads the env file (its whole content: an HF_TOKEN) with pyinfra's
fact-output printing off, so -vvv never prints it; the switch is restored after."""

from pyinfra.context import ctx_host, ctx_state
from pyinfra_testing.util import FakeHost, FakeState

from tasks.operations.files import shared_env_file

TEXT = "HF_TOKEN=hf_secret123\n"


class RecordingHost(FakeHost):
    """Answers the ManagedFile fact and records whether the state printed facts meanwhile."""

    printed = []

    def get_fact(self, fact, **kwargs):
        RecordingHost.printed.append(self.state.print_fact_output)
        return {"kind": "file", "user": "root", "group": "sglang", "mode": "600", "sha1": None, "text": TEXT}


def test_the_env_file_is_read_with_fact_output_printing_off():
    state = FakeState()
    state.print_fact_output = True  # pyinfra -vvv
    host = RecordingHost(state, "gpu-node-01", facts={}, data={})
    RecordingHost.printed = []
    with ctx_state.use(state), ctx_host.use(host):
        commands = list(shared_env_file._inner(path="/etc/sglang/sglang.env", managed={"CUDA_HOME": "/c"},
                                               header="# m", user="root", group="sglang", mode="0640"))
    assert RecordingHost.printed == [False] and state.print_fact_output is True
    assert [str(command) for command in commands if "hf_secret123" in str(command)] == []
