"""The HTML report of `queuectl simulate --compare` opens in headless Chromium (Debian's
`chromium` package, installed when missing as the other host programs are), draws every plot,
and logs nothing to the console: no network, no script error."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from queuectl.cli.main import main
from queuectl.testenv.debian import ensure_tools

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "config" / "samples"


def test_the_report_renders_its_plots_without_console_errors(tmp_path: Path) -> None:
    browser = (
        shutil.which("chromium-browser")
        or ensure_tools({"chromium": "chromium"}, "the simulate report's browser check")["chromium"]
    )
    other = tmp_path / "vision-plus-16"
    other.mkdir()
    for f in SAMPLES.glob("*.yaml"):
        text = f.read_text()
        if f.name == "21-cluster-queues.yaml":
            text = text.replace(
                "nominalQuota: 16, borrowingLimit: 8}", "nominalQuota: 32, borrowingLimit: 8}"
            )
        (other / f.name).write_text(text)
    report = tmp_path / "report.html"
    code = main(
        [
            "simulate",
            "-q",
            "--compare",
            str(SAMPLES),
            str(other),
            "--nodes",
            "8x8:H100,4x8:A100",
            "--generate",
            "--jobs",
            "150",
            "--days",
            "0.5",
            "--html",
            str(report),
        ]
    )
    assert code == 0
    html = report.read_text()
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html
    plots = html.count('<svg class="plot"')
    assert plots == 4  # allocation, waits, and queue depth for each of the two runs
    assert 'class="diff"' in html  # the differences are highlighted
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--user-data-dir=" + str(tmp_path / "profile"),
            "--dump-dom",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    body = re.search(r'<body data-plots="(\d+)"', result.stdout)
    assert body is not None, result.stdout[:2000]
    assert int(body[1]) == plots, "some plot did not draw"
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []
