"""The report page as a reader sees it: rendered by a real browser (headless Chromium from
Debian's `chromium` package; `.ci/run` installs it), its paper cards above the tables and
their verdict badges drawn in colour, every embedded figure decoded by the browser."""

import shutil
import subprocess

import numpy as np
import pytest
from PIL import Image

from tasks.core.stage import StageContext
from tasks.report import build
from tasks.report.params import ReportParams
from tests.unit.test_report import claims_file

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
SUPPORTED = (0x1A, 0x7F, 0x37)  # the badge colours of index.html.j2
CONTRADICTED = (0xCF, 0x22, 0x2E)

pytestmark = pytest.mark.skipif(
    BROWSER is None, reason="no chromium on PATH (apt-get install chromium; .ci/run does)"
)


def chromium(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def has_colour(pixels: np.ndarray, colour: tuple[int, int, int]) -> bool:
    return bool((np.abs(pixels[..., :3].astype(int) - colour).sum(axis=-1) < 12).any())


def test_the_report_page_renders_its_cards_badges_and_figures(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "CLAIMS", {"one.evaluate": "a", "two.evaluate": "b"})
    inputs = {
        "one.evaluate": claims_file(tmp_path, "one", ["supported", "inconclusive"]),
        "two.evaluate": claims_file(tmp_path, "two", ["contradicted"]),
    }
    page = tmp_path / "index.html"
    page.write_text(build.run(ReportParams(), inputs, StageContext.at(tmp_path))["html"])

    dom = chromium("--dump-dom", page.as_uri()).stdout
    assert dom.index('id="card-one"') < dom.index('id="card-two"') < dom.index("Every claim")
    probe = page.with_name("probe.html")  # the same page, counting the images it decoded
    probe.write_text(
        page.read_text().replace(
            "</body>",
            "<script>onload = () => { document.body.dataset.decoded = "
            "[...document.images].filter(i => i.naturalWidth > 0).length; };</script></body>",
        )
    )
    decoded = chromium("--virtual-time-budget=5000", "--dump-dom", probe.as_uri()).stdout
    assert 'data-decoded="2"' in decoded  # one forest plot per paper, both decoded

    shot = tmp_path / "top.png"
    chromium("--window-size=1280,1400", f"--screenshot={shot}", page.as_uri())
    pixels = np.asarray(Image.open(shot).convert("RGB"))
    assert pixels.shape[:2] == (1400, 1280)
    assert has_colour(pixels, SUPPORTED) and has_colour(pixels, CONTRADICTED)  # both cards
    assert pixels.std() > 20  # text and plots, not a blank or error page
