"""No file the deploy writes (nor its directory) is writable by everyone."""

import posixpath

import pytest

from tests.node.expected import DEPLOYED_FILE_LABELS
from tests.node.remote import fail, stat


@pytest.mark.parametrize("label", DEPLOYED_FILE_LABELS)
def test_deployed_file_not_world_writable(host, expected, label):
    path = expected.deployed_files()[label]
    info, parent = stat(host, path), stat(host, posixpath.dirname(path))
    if info is None:
        fail(expected, f"deployed file {label}", f"{path} present, not world-writable", "missing")
    writable = [str(s) for s in (info, parent) if s is not None and s.mode & 0o002]
    if writable:
        fail(expected, f"deployed file {label}", f"{path} and its directory not world-writable",
             f"world-writable: {', '.join(writable)}")
