"""The cluster state most webhook scenarios start from."""

from __future__ import annotations

import pytest
from webhook_cases import NS

from queuectl.api import names
from queuectl.webhooks.lookup import InMemoryLookup


@pytest.fixture
def lookup() -> InMemoryLookup:
    """team-a has LocalQueues `gpu` (-> cq-a) and `default` (-> cq-default); team-b has none."""
    return InMemoryLookup(
        local_queues={(NS, "gpu"): "cq-a", (NS, names.DEFAULT_LOCAL_QUEUE): "cq-default"},
        cluster_queues={
            "cq-a": {"matchLabels": {"team": "a"}},
            "cq-all": {},
            "cq-none": None,
        },
        namespaces={
            NS: {"kubernetes.io/metadata.name": NS, "team": "a"},
            "team-b": {"kubernetes.io/metadata.name": "team-b", "team": "b"},
        },
        cohort_parents={"org": None, "research": "org", "team-x": "research"},
    )
