"""The probe's imex section (files/probe.d/imex.sh), the real script run here against a
scratch root (the probe's PROBE_FS_ROOT input, as tests/unit/test_probe_driver.py runs the
driver layer) with stand-in tools on the base PATH. The parser and schema are the product's.

What a GB200 compute tray has (NVIDIA IMEX user's guide, "Getting Started with IMEX" and
"IMEX Channels", https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/): the
nvidia-imex unit, /etc/nvidia-imex/nodes_config.cfg (an IP address a line),
nvidia-caps-imex-channels in /proc/devices and /dev/nvidia-caps-imex-channels/channel0.
"""

from tests.unit.test_probe_driver import replay, run_probe_section, standin, write


def run_imex_probe(tmp_path):
    return run_probe_section(tmp_path, "imex", {"id": "ubuntu", "version_id": "24.04", "arch": "aarch64"})


def test_a_node_without_imex(tmp_path):
    """No systemd, no dpkg, no config, no channel device: facts, not failures."""
    _, imex = run_imex_probe(tmp_path)
    assert imex == {"unit": None, "packages": [], "nodes_config": {"present": False, "readable": False, "peers": 0},
                    "channels_registered": False, "channels": []}


def test_a_gb200_tray_with_imex_running(tmp_path):
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    replay(bin_dir, "systemctl", "Id=nvidia-imex.service\nLoadState=loaded\nActiveState=active\n"
                                 "UnitFileState=enabled\n")
    replay(bin_dir, "dpkg-query", "hi |nvidia-imex|580.95.05-1\n")
    # The addresses are counted, never reported; comments and blank lines are no peers.
    write(root / "etc" / "nvidia-imex" / "nodes_config.cfg",
          "# the rack's trays\n10.0.0.1\n10.0.0.2\n\n  10.0.0.3  # third\n10.0.0.4")
    write(root / "proc" / "devices", "Character devices:\n195 nvidia\n234 nvidia-caps-imex-channels\n")
    for name in ("channel1", "channel0"):
        write(root / "dev" / "nvidia-caps-imex-channels" / name, "")
    out, imex = run_imex_probe(tmp_path)
    assert imex == {
        "unit": {"load_state": "loaded", "active_state": "active", "unit_file_state": "enabled"},
        "packages": [{"name": "nvidia-imex", "version": "580.95.05-1", "held": True}],
        "nodes_config": {"present": True, "readable": True, "peers": 4},
        "channels_registered": True, "channels": ["channel0", "channel1"]}
    assert "10.0.0" not in out


def test_imex_installed_but_stopped_and_no_channel(tmp_path):
    """The state CUDA_ERROR_NOT_PERMITTED comes from: the device registered, no channel made."""
    root, bin_dir = tmp_path / "root", tmp_path / "bin"
    (root / "run" / "systemd" / "system").mkdir(parents=True)
    replay(bin_dir, "systemctl", "Id=nvidia-imex.service\nLoadState=loaded\nActiveState=inactive\n"
                                 "UnitFileState=disabled\n")
    standin(bin_dir, "dpkg-query", "echo 'ii |nvidia-imex-570|570.172.08-1'\n")
    write(root / "etc" / "nvidia-imex" / "nodes_config.cfg", "# no peers yet\n")
    write(root / "proc" / "devices", "234 nvidia-caps-imex-channels\n")
    (root / "dev" / "nvidia-caps-imex-channels").mkdir(parents=True)
    _, imex = run_imex_probe(tmp_path)
    assert imex["unit"]["active_state"] == "inactive"
    assert imex["packages"] == [{"name": "nvidia-imex-570", "version": "570.172.08-1", "held": False}]
    assert imex["nodes_config"] == {"present": True, "readable": True, "peers": 0}
    assert imex["channels_registered"] and imex["channels"] == []


def test_the_nodes_config_is_the_one_config_cfg_names(tmp_path):
    """The daemon reads IMEX_NODE_CONFIG_FILE of /etc/nvidia-imex/config.cfg (a cluster's
    shared directory, e.g.); the probe counts that file's peers, not the default's."""
    root = tmp_path / "root"
    write(root / "etc" / "nvidia-imex" / "config.cfg",
          "SERVER_PORT=50000\nIMEX_NODE_CONFIG_FILE=/shared/imex/nodes.cfg\nIMEX_NODE_CONFIG_FILE=relative.cfg\n")
    write(root / "etc" / "nvidia-imex" / "nodes_config.cfg", "")
    write(root / "shared" / "imex" / "nodes.cfg", "10.0.0.1\n10.0.0.2\n")
    _, imex = run_imex_probe(tmp_path)
    assert imex["nodes_config"] == {"present": True, "readable": True, "peers": 2}
