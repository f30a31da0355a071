"""The service account: never one the deploy did not create."""

import shlex

from pyinfra import host
from pyinfra.api import operation

from bringup.layout import SERVICE_HOMES, NodeLayout, ProbeInputs
from bringup.plan import service_account_problem
from facts.node import ServiceAccount
from tasks.operations.sglang import as_plan


@operation()
def service_account_ours(layout: NodeLayout):
    """
    Go on only when the layout's service user is absent or an account deploy created
    (marked in its GECOS), is not the account the deploy logs in as, and its planned
    home is absent or the account's: checked when it runs (an account made between
    validate and deploy is seen), with the planner's own rule
    (``bringup.plan.service_account_problem``). Else fail the host before the account
    is touched.

    + layout: the plan's ``NodeLayout`` (``service_user``, ``service_home``)

    **Example**:

    .. code:: python

        service_account_ours(layout=node.layout)
    """
    layout = as_plan(NodeLayout, layout)
    user, home = layout.service_user, layout.service_home
    problem = service_account_problem(host.get_fact(ServiceAccount, inputs=ProbeInputs(layout)), user, home)
    if problem is None:
        host.noop(f"{user} is absent or gpu-bringup's own service account")
        return
    message = (f"{host.name}: {problem}; nothing of it was changed. Set service_user to a name no account or "
               f"{SERVICE_HOMES} directory has yet (SERVICE_USER_FOREIGN), then run deploy again")
    yield f"echo {shlex.quote(message)} >&2; exit 1"
