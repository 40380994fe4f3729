"""Where `python -m tuner.report` writes, checked before anything is drawn, and
a device name of any length drawn and written cut to a sane length."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from tuner.data.results import read  # noqa: E402
from tuner.report import with_run_environment  # noqa: E402
from tuner.report.__main__ import main  # noqa: E402
from tuner.report.document import environment_table  # noqa: E402
from tuner.report.figure_kit import FigureContext  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SAXPY = ROOT / "examples" / "saxpy" / "reference" / "nvidia-h100-80gb-hbm3"
INPUTS = ("measurements.parquet", "device.json", "peaks.json")
HUGE = "N" * (1 << 20)  # a 1 MB device name


@pytest.fixture
def results(tmp_path) -> Path:
    """A copy of the saxpy example's results folder (its report's inputs only)."""
    folder = tmp_path / "results"
    folder.mkdir()
    for name in INPUTS:
        (folder / name).write_bytes((SAXPY / name).read_bytes())
    return folder


def _refused(capsys, results: Path, out: Path) -> str:
    assert main(["--results", str(results), "--out", str(out), "--processes", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1, captured.err
    return captured.err.strip()


def test_an_out_that_is_no_folder_is_refused_in_one_line_before_anything_is_drawn(results, tmp_path, capsys):
    """Before, an --out that was a file, a pipe or the results' measurements.parquet gave a
    FileExistsError traceback, and one whose report.html was a folder failed after 32 figures."""
    (tmp_path / "file").write_text("a file\n")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "html" / "report.html").mkdir(parents=True)
    (tmp_path / "md").mkdir()
    os.mkfifo(tmp_path / "md" / "report.md")
    (tmp_path / "png").mkdir()
    (tmp_path / "png" / "roofline.png").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")  # a folder cannot be made in a link's place
    measured = {name: (results / name).read_bytes() for name in INPUTS}
    before = sorted(tmp_path.rglob("*"))
    files = "(report.md, report.html, *.png, *.svg) as files to replace or not at all"
    for out, line in [
        ("file", f"--out: must be a folder (or none yet), got '{tmp_path / 'file'}', a file"),
        ("pipe", f"--out: must be a folder (or none yet), got '{tmp_path / 'pipe'}', a pipe"),
        ("results/measurements.parquet",
         f"--out: must be a folder (or none yet), got '{results / 'measurements.parquet'}', a file"),
        ("file/report", f"--out: must be a folder or one that can be made, got '{tmp_path / 'file' / 'report'}', "
                        f"under '{tmp_path / 'file'}', a file"),
        ("html", f"--out: must hold the report's files {files}, got '{tmp_path / 'html' / 'report.html'}', a folder"),
        ("md", f"--out: must hold the report's files {files}, got '{tmp_path / 'md' / 'report.md'}', a pipe"),
        ("png", f"--out: must hold the report's files {files}, got '{tmp_path / 'png' / 'roofline.png'}', a folder"),
        ("dangling", f"--out: must be a folder this user may look in, got '{tmp_path / 'dangling'}', "
                     f"a link to nothing ({tmp_path / 'nowhere'})"),
    ]:  # fmt: skip
        assert _refused(capsys, results, tmp_path / out) == f"error: {line}"
    assert sorted(tmp_path.rglob("*")) == before  # nothing drawn, nothing made
    assert {name: (results / name).read_bytes() for name in INPUTS} == measured


def test_a_device_name_is_shown_cut_to_a_sane_length(results):
    dataset = read(results / "measurements.parquet")
    device = json.loads((results / "device.json").read_text()) | {"name": HUGE}
    shown = with_run_environment(device, dataset)["name"]
    assert shown == "N" * 119 + "…"
    assert with_run_environment({"name": "NVIDIA H100 80GB HBM3"}, dataset)["name"] == "NVIDIA H100 80GB HBM3"
    context = FigureContext(ok=dataset, device={"name": HUGE}, peaks={}, published=dataset, studies=[], out_dir=results)
    assert context.gpu == shown  # every figure's title
    assert environment_table({"name": HUGE}).iloc[0].tolist() == ["GPU", shown]
    # On one line: a name with line breaks would break a Markdown table row and a title.
    assert with_run_environment({"name": "NVIDIA\nH100 \t 80GB"}, dataset)["name"] == "NVIDIA H100 80GB"


def test_a_report_of_a_one_megabyte_device_name_is_made_in_seconds(results, tmp_path, capsys):
    """Before, a 50,000-character name took 61 s to draw (a 1 MB one minutes): it is in every figure's title."""
    device = json.loads((results / "device.json").read_text())
    (results / "device.json").write_text(json.dumps(device | {"name": HUGE}))
    started = time.monotonic()
    assert main(["--results", str(results), "--out", str(tmp_path / "report"), "--processes", "2"]) == 0
    assert time.monotonic() - started < 60
    capsys.readouterr()
    shown = "N" * 119 + "…"
    for name in ("report.md", "report.html"):
        text = (tmp_path / "report" / name).read_text(encoding="utf-8")
        assert f"report — {shown}" in text and "N" * 120 not in text, name


def test_a_tmpdir_too_long_for_the_fork_servers_socket_draws_in_this_process(tmp_path):
    # A cluster's per-job scratch path can pass the 107 bytes a Unix socket's path may have;
    # the figures' fork server puts its socket there, and the report ended in a traceback.
    import subprocess
    import sys

    long_tmp = tmp_path / ("x" * 110)
    long_tmp.mkdir()
    root = Path(__file__).resolve().parents[1]
    folder = root / "examples" / "saxpy" / "reference" / "nvidia-h100-80gb-hbm3"
    proc = subprocess.run([sys.executable, "-m", "tuner.report", "--results", str(folder), "--out", str(tmp_path / "report"),
                           "--processes", "2"], cwd=root, env={**os.environ, "TMPDIR": str(long_tmp)},
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert (tmp_path / "report" / "report.md").is_file()


@pytest.mark.parametrize("report_format", ["markdown", "html"])
def test_each_format_writes_its_documents_and_each_figure_once(results, tmp_path, capsys, report_format):
    """``--format markdown``: report.md and one PNG per figure it links; ``--format html``: report.html
    alone, every figure embedded. Neither leaves SVG copies or the other document."""
    import re

    out = tmp_path / "report"
    assert main(["--results", str(results), "--out", str(out), "--processes", "1", "--format", report_format]) == 0
    document = "report.md" if report_format == "markdown" else "report.html"
    assert f"report: {out / document};" in capsys.readouterr().out
    files = sorted(p.name for p in out.iterdir())
    text = (out / document).read_text(encoding="utf-8")
    if report_format == "markdown":
        linked = set(re.findall(r"\]\(([^)]+\.png)\)", text))
        assert linked and linked <= set(files)  # placeholders of figures not drawn are PNGs it does not link
        assert [f for f in files if not f.endswith(".png")] == [document]
        assert all((out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for name in linked)
    else:
        assert files == [document]
        images = re.findall(r'<img src="([^"]*)"', text)
        assert images and all(src.startswith("data:image/png;base64,") for src in images)


def test_an_unknown_format_is_refused_before_anything_is_drawn(results, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--results", str(results), "--out", str(tmp_path / "report"), "--format", "pdf"])
    assert exit_.value.code == 2 and "invalid choice: 'pdf'" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()
