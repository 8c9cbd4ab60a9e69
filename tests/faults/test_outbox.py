"""Issue 42: a webhook that hangs never holds the forge's commit statuses back.

The daemon (a subprocess on ``test:///default``: no host is disturbed) reports to a
local fake forge and to a webhook that never answers in time. A burst of 20 commits:
the applied head's status reaches the forge while the webhook still hangs (the wait is
a hang guard of 10 s, the issue's bound), older commits' statuses still waiting are
dropped as superseded, and no state is sent twice.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

import pytest

from tests.helpers.daemon import Daemon, wait_for
from tests.helpers.faults import metric
from tests.helpers.manifests import vm_yaml
from tests.helpers.receiver import Receiver

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from tests.helpers.git import GitRepo

pytestmark = pytest.mark.timeout(180)
BURST = 20


@pytest.fixture
def receivers() -> Iterator[tuple[Receiver, Receiver]]:
    forge, hook = Receiver(), Receiver(delay_s=60.0)
    yield forge, hook
    forge.close()
    hook.close()


def test_a_hanging_webhook_and_a_burst_of_commits(
    tmp_path: Path, git_repo: GitRepo, start: Callable[..., Daemon], receivers: tuple[Receiver, Receiver]
) -> None:
    forge, hook = receivers
    (tmp_path / "token").write_text("t0ken\n")
    git_repo.write("vms/web.yaml", vm_yaml("rtest-outbox-web", strategy="Halted"))
    first = git_repo.commit("web")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"source: {{repo: {git_repo.path}}}\nconnect: test:///default\nlisten: 127.0.0.1:0\n"
        "notify:\n"
        f"  commitStatus: {{provider: gitea, baseURL: {forge.url}/api/v1, repository: o/r, "
        f"tokenFile: {tmp_path / 'token'}}}\n"
        f"  webhooks: [{{url: {hook.url}/hook}}]\n"
    )
    d = start("--config", str(config))
    d.wait_applied(first)
    wait_for("the webhook hanging", lambda: hook.requests() or d.events("event"))
    shas = []
    for i in range(BURST):
        git_repo.write("vms/web.yaml", vm_yaml("rtest-outbox-web", strategy="Halted") + f"# {i}\n")
        shas.append(git_repo.commit(f"burst {i}"))
    head = shas[-1]
    d.wait_applied(head)

    def head_success() -> bool:
        return any(g.path.endswith(head) and g.json()["state"] == "success" for g in forge.requests())

    wait_for("the head's status at the forge", head_success, timeout=10.0)
    sent = Counter((g.path, g.json()["context"], g.json()["state"]) for g in forge.requests())
    assert all(n == 1 for n in sent.values()), [k for k, n in sent.items() if n > 1]
    _, text = d.get("/metrics")
    assert metric(text, "reconciler_outbox_depth", destination="gitea 127.0.0.1") == [0.0]
    assert metric(text, "reconciler_outbox_depth")  # the webhook's queue, its own
