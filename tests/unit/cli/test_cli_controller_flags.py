"""`queuectl controller` flags: where it listens and who it is come from configuration."""

from __future__ import annotations

import pytest

from queuectl.api import names
from queuectl.cli.controller import Config, config_from_args
from queuectl.cli.main import build_parser


def parse(monkeypatch: pytest.MonkeyPatch, *args: str, **env: str) -> Config:
    for key in ("POD_NAMESPACE", "QUEUECTL_CONTROLLER_USER"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    parser, _ = build_parser()  # defaults read the environment when the parser is built
    return config_from_args(parser.parse_args(["controller", *args]))


@pytest.mark.parametrize(
    ("args", "env", "namespace", "identity"),
    [
        ((), {}, names.SYSTEM_NAMESPACE, names.CONTROLLER_USERNAME),
        (
            (),
            {"POD_NAMESPACE": "batch-system"},
            "batch-system",
            "system:serviceaccount:batch-system:queuectl-controller",
        ),
        (
            ("--namespace", "ml"),
            {"POD_NAMESPACE": "batch-system"},
            "ml",
            "system:serviceaccount:ml:queuectl-controller",
        ),
        (
            ("--controller-user", "system:serviceaccount:ml:queuer"),
            {"POD_NAMESPACE": "ml"},
            "ml",
            "system:serviceaccount:ml:queuer",
        ),
        (
            (),
            {"QUEUECTL_CONTROLLER_USER": "alice-as-controller"},
            "queuectl-system",
            "alice-as-controller",
        ),
        (
            ("--kubeconfig", "/dev/null"),
            {"POD_NAMESPACE": "ci-runner"},
            names.SYSTEM_NAMESPACE,
            names.CONTROLLER_USERNAME,
        ),
    ],
)
def test_the_namespace_and_identity_follow_flags_then_environment(
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    env: dict[str, str],
    namespace: str,
    identity: str,
) -> None:
    config = parse(monkeypatch, *args, **env)
    assert config.namespace == namespace
    assert config.identity() == identity


@pytest.mark.parametrize(
    ("args", "health", "metrics"),
    [
        ((), "127.0.0.1", "127.0.0.1"),
        (("--bind-host", "0.0.0.0"), "0.0.0.0", "0.0.0.0"),
        (("--bind-host", "0.0.0.0", "--metrics-host", "10.1.2.3"), "0.0.0.0", "10.1.2.3"),
        (("--health-host", "10.1.2.3", "--metrics-host", "::1"), "10.1.2.3", "::1"),
    ],
)
def test_health_and_metrics_listen_where_told_and_on_loopback_by_default(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], health: str, metrics: str
) -> None:
    config = parse(monkeypatch, *args)
    assert (config.health_host, config.metrics_host) == (health, metrics)


@pytest.mark.parametrize(
    ("args", "patience"), [((), 5.0), (("--preemption-patience-seconds", "0"), 0.0)]
)
def test_preemption_patience_defaults_to_the_cores_and_zero_turns_it_off(
    monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], patience: float
) -> None:
    assert parse(monkeypatch, *args).options.preemption_patience_s == patience


@pytest.mark.parametrize("bad", ["-1", "soon", "inf", "nan"])
def test_a_bad_preemption_patience_is_refused_with_what_to_give(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], bad: str
) -> None:
    with pytest.raises(SystemExit):
        parse(monkeypatch, "--preemption-patience-seconds", bad)
    assert f"{bad}: a number of seconds, 0 or more" in capsys.readouterr().err


def test_pods_ready_timeouts_and_fair_sharing_preemption_reach_the_controller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    default = parse(monkeypatch).options
    assert default.fair_preemption == ()
    assert (default.pods_ready.timeout_s, default.pods_ready.recovery_s) == (600, 300)
    got = parse(
        monkeypatch,
        "--fair-sharing-preemption",
        "LessThanOrEqualToFinalShare",
        "--pods-ready-timeout-seconds",
        "0",
        "--pods-ready-requeue-limit",
        "2",
    ).options
    assert got.fair_preemption == ("LessThanOrEqualToFinalShare",)
    assert (got.pods_ready.timeout_s, got.pods_ready.requeue_limit) == (0, 2)


def test_block_admission_is_off_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse(monkeypatch).options.pods_ready.block_admission is False
    got = parse(monkeypatch, "--pods-ready-block-admission").options
    assert got.pods_ready.block_admission is True


def test_fair_sharing_preemption_rules_in_the_wrong_order_are_refused_saying_which(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse(
            monkeypatch,
            "--fair-sharing-preemption",
            "LessThanInitialShare,LessThanOrEqualToFinalShare",
        )
    assert "or both in that order" in capsys.readouterr().err
