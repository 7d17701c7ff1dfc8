"""Session fixtures: the base and every overlay, rendered once."""

from __future__ import annotations

import pytest
from deploy_manifests import BASE, CERT_MANAGER, Obj, render


@pytest.fixture(scope="session")
def base() -> list[Obj]:
    return render(BASE)


@pytest.fixture(scope="session")
def cert_manager() -> list[Obj]:
    return render(CERT_MANAGER)


@pytest.fixture(scope="session", params=["base", "cert-manager"])
def rendered(request: pytest.FixtureRequest) -> list[Obj]:
    """Each deployable variant in turn: what holds for the base must hold for every overlay."""
    return render(BASE if request.param == "base" else CERT_MANAGER)
