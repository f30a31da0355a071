"""What the service runs, recorded before deploy changes it (files/release.sh)."""

from pyinfra.api import deploy

from tasks.operations.release import release_seeded


@deploy("SGLang release")
def release_before_change(node):
    """
    Record the live release (venv link's target, unit, env file) when none is recorded
    yet, before the first step that can change one of them: the first change has a
    release to go back to. A record there is kept (deploy's service step moves it on).

    + node: the NodePlan (``layout``)
    """
    release_seeded(name="Record the release sglang runs, before any change", layout=node.layout)
