"""The probe's infiniband section (files/probe.d/infiniband.sh), the real script run here on a
scratch sysfs (the probe's PROBE_FS_ROOT input, as tests/unit/test_probe_pci.py gives it; the
product's ProbeInputs never sets it), parsed and schema-checked by the product.

The scratch files hold what the kernel writes in them: the files are the stable ABI's
(torvalds/linux Documentation/ABI/stable/sysfs-class-infiniband: ports/<port-num>/state,
phys_state, rate, link_layer), their text drivers/infiniband/core/sysfs.c's (state_show
"%d: %s" with DOWN/INIT/ARMED/ACTIVE/ACTIVE_DEFER, phys_state_show "5: LinkUp" / "3: Disabled",
rate_show "%d%s Gb/sec (%dX%s)" with HDR rate 500 and NDR 1000 deci-Gb/s per lane,
link_layer_show "InfiniBand" / "Ethernet"). The names are those of a ConnectX-7 node with an
IPoIB interface (mlx5_0, ibp24s0) and a RoCE NIC (mlx5_1, ens1f0np0): mlx5's naming, not a
recording of one machine.
"""

import os

from tests.unit.test_probe_driver import run_probe_section, write


def ib_port(root, device, port, state, phys_state, rate, link_layer):
    """One port of an RDMA device in the scratch sysfs, each file as the kernel writes it."""
    directory = root / "sys" / "class" / "infiniband" / device / "ports" / str(port)
    for name, value in (("state", state), ("phys_state", phys_state), ("rate", rate), ("link_layer", link_layer)):
        if value is not None:
            write(directory / name, value + "\n")


def net_device(root, device, pci, name):
    """The device's ``device`` link to its PCI function and a net device under that function's net/."""
    function = root / "sys" / "devices" / "pci0000:00" / pci
    (function / "net" / name).mkdir(parents=True, exist_ok=True)
    link = root / "sys" / "class" / "infiniband" / device / "device"
    if not link.is_symlink():
        link.symlink_to(os.path.relpath(function, link.parent))


def run_ib_probe(tmp_path):
    return run_probe_section(tmp_path, "infiniband", {"id": "ubuntu", "version_id": "24.04", "arch": "x86_64"})


def test_a_node_without_rdma_has_no_device_and_no_peermem(tmp_path):
    """No /sys/class/infiniband at all: an empty list, not an error."""
    raw, fact = run_ib_probe(tmp_path)
    assert fact == {"devices": [], "nvidia_peermem": False}
    assert "@@ infiniband rc=0\n@@ nvidia-peermem rc=0\n|loaded=no" in raw


def test_an_ib_hca_and_a_roce_nic_with_gpudirect(tmp_path):
    root = tmp_path / "root"
    ib_port(root, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")
    net_device(root, "mlx5_0", "0000:18:00.0", "ibp24s0")
    ib_port(root, "mlx5_1", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "Ethernet")
    net_device(root, "mlx5_1", "0000:29:00.0", "ens1f0np0")
    (root / "sys" / "module" / "nvidia_peermem").mkdir(parents=True)
    raw, fact = run_ib_probe(tmp_path)
    assert fact == {"nvidia_peermem": True, "devices": [
        {"name": "mlx5_0", "net_devices": ["ibp24s0"], "ports": [
            {"port": "1", "state": "ACTIVE", "phys_state": "LinkUp", "rate": "400 Gb/sec (4X NDR)",
             "link_layer": "InfiniBand"}]},
        {"name": "mlx5_1", "net_devices": ["ens1f0np0"], "ports": [
            {"port": "1", "state": "ACTIVE", "phys_state": "LinkUp", "rate": "200 Gb/sec (4X HDR)",
             "link_layer": "Ethernet"}]}]}, raw


def test_ports_down_in_port_order_and_a_file_that_cannot_be_read(tmp_path):
    """A two-port HCA (ports 1 and 10 sort as numbers), one port down and disabled, one whose rate
    the driver did not give (the file absent): null, not a failure; a device without a net device."""
    root = tmp_path / "root"
    ib_port(root, "mlx5_2", 10, "1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)", "InfiniBand")
    ib_port(root, "mlx5_2", 2, "2: INIT", "5: LinkUp", None, "InfiniBand")
    ib_port(root, "mlx5_2", 1, "4: ACTIVE", "7: Phy Test", "2.5 Gb/sec (1X SDR)", "InfiniBand")
    _, fact = run_ib_probe(tmp_path)
    [device] = fact["devices"]
    assert device["net_devices"] == []
    assert [(port["port"], port["state"], port["phys_state"], port["rate"]) for port in device["ports"]] == [
        ("1", "ACTIVE", "Phy Test", "2.5 Gb/sec (1X SDR)"), ("2", "INIT", "LinkUp", None),
        ("10", "DOWN", "Disabled", "10 Gb/sec (4X SDR)")]


def test_the_device_count_is_bounded(tmp_path):
    root = tmp_path / "root"
    for number in range(70):
        ib_port(root, f"mlx5_{number:02d}", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")
    _, fact = run_ib_probe(tmp_path)
    assert len(fact["devices"]) == 64


def test_the_whole_probe_carries_the_section(tmp_path):
    from tests.unit.test_probe_pci import run_pci_probe

    root = tmp_path / "root"
    ib_port(root, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")
    raw, _ = run_pci_probe(root, sections="")
    assert raw.count("@@ infiniband rc=0\n|device|mlx5_0||\n") == 1 and raw.count("@@ nvidia-peermem rc=0\n") == 1
