"""The answer a node-suite script prints: one JSON object on a line of its own after a marker
(``@@cuda``, ``@@comm``), read by the node suite and by gpu-proof alike."""

import json


def marked_answer(stdout, marker):
    """The JSON object after ``marker`` on the one line that starts with it, or None: also when
    more than one line does (a ``sitecustomize`` or a ``.pth`` of the venv printing one, at
    start or at exit, must not stand in for the script's own answer) or it is not an object.

    >>> marked_answer('noise\\n@@x {"count": 1}\\n', "@@x ")
    {'count': 1}
    >>> marked_answer('@@x {"count": 1}\\n@@x {"error": "no driver"}\\n', "@@x "), marked_answer('@@x [1]', "@@x ")
    (None, None)
    """
    found = [line for line in (stdout or "").splitlines() if line.startswith(marker)]
    if len(found) != 1:
        return None
    try:
        answer = json.loads(found[0][len(marker):])
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
