"""The driver: nvidia-smi answers, and the driver runs the plan's toolkit."""

from packaging.version import Version

from bringup.cuda import driver_floor_for_cuda, driver_floor_for_gpu, driver_runs_cuda
from bringup.versions import parse
from facts.probe_output import parse_gpu_rows
from tests.node.remote import fail

SMI_QUERY = ("nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version "
             "--format=csv,noheader,nounits")


def _gpus(host, expected):
    result = host.run(SMI_QUERY)
    if result.rc != 0:
        fail(expected, "nvidia-smi", "exit 0 with the GPU list",
             f"exit {result.rc}: {(result.stderr or result.stdout).strip()[-300:]}")
    try:
        gpus = parse_gpu_rows(result.stdout.splitlines())
    except ValueError as error:
        fail(expected, "nvidia-smi", "one CSV row per GPU", str(error))
    if not gpus:
        fail(expected, "nvidia-smi", "at least one GPU", "no GPU listed")
    return gpus


def test_nvidia_smi_answers(host, expected):
    _gpus(host, expected)


def test_driver_runs_toolkit(host, expected):
    gpus = _gpus(host, expected)
    driver = gpus[0]["driver_version"]
    cuda = Version(expected.version)
    if not driver_runs_cuda(driver, cuda):
        fail(expected, f"driver for CUDA {cuda}", f"driver >= {driver_floor_for_cuda(cuda)}", f"driver {driver}")
    for name in sorted({gpu["name"] for gpu in gpus}):
        floor = driver_floor_for_gpu(name)
        if floor and (parse(driver) is None or parse(driver) < floor):
            fail(expected, f"driver for {name}", f"driver >= {floor}", f"driver {driver}")
