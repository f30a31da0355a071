"""The node_exporter textfile is written whole (control/metrics.py write_host_metrics):
a temp file beside it renamed over it, so node_exporter never reads half of one, and a
link at its name is replaced, never written through (review: whole writes)."""

import os
import stat

from control.metrics import host_metrics, textfile_name, write_host_metrics


def test_the_textfile_replaces_a_link_and_the_old_file_whole(tmp_path):
    directory, elsewhere = tmp_path / "textfile", tmp_path / "elsewhere.prom"
    directory.mkdir()
    elsewhere.write_text("kept\n")
    target = directory / textfile_name("n1")
    target.symlink_to(elsewhere)
    text = host_metrics("n1", "validate", "ready", when=1.0)
    assert write_host_metrics(directory, "n1", text) == target
    assert elsewhere.read_text() == "kept\n", "written through the link"
    assert stat.S_ISREG(target.lstat().st_mode) and target.read_text() == text
    reader = open(target)  # node_exporter in the middle of a read keeps the old file
    inode = os.fstat(reader.fileno()).st_ino
    write_host_metrics(directory, "n1", host_metrics("n1", "validate", "blocked", when=2.0))
    assert reader.read() == text and os.stat(target).st_ino != inode, "rewritten in place"
    reader.close()
    assert sorted(path.name for path in directory.iterdir()) == [target.name], "a temp file left"
