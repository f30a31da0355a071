"""tests/fixtures/facts/compare.py without root or the sandbox's cache: the node's mounts it
takes from sandbox/files/node-init.sh stop before systemd, and both sides get the same
plain-value inputs that rebuild the probe's environment."""

from bringup.layout import NodeLayout, ProbeInputs
from tests.fixtures.facts import compare


def test_node_mounts_are_node_init_up_to_systemd():
    mounts = compare.node_mounts()
    assert "mount -t overlay" in mounts and "mount_node_fs" in mounts and "sys/bus/pci/devices" in mounts
    assert "pivot_root" not in mounts and "exec /lib/systemd/systemd" not in mounts


def test_inputs_spec_rebuilds_the_same_probe_environment():
    for settings in (None, {}, compare.HANDBUILT):
        spec = compare.inputs_spec(settings)
        rebuilt = ProbeInputs(NodeLayout(**spec["layout"]), tuple(spec["env_keys"]), spec["model"],
                              tuple(map(tuple, spec["model_env"])), spec["venv_python"])
        expected = ProbeInputs.defaults() if settings is None else compare.probe_inputs(compare.Config.from_data(settings))
        assert rebuilt.environment() == expected.environment()


def test_a_ref_that_is_no_commit_is_one_line_and_exit_2(capsys):
    assert compare.main(["no-such-ref-anywhere"]) == 2
    assert capsys.readouterr().err == "no-such-ref-anywhere: not a commit of this repository: name one, e.g. a6e402b^\n"
