"""The report in two steps (``tuner/report/draft.py``): the figures drawn from
the dataset alone (``--draft``, beside the profile in the pipeline), then the
counters section and the documents (``--from-draft``). The same bytes as the
report drawn at once; a draft that does not fit is drawn again, said in one line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tuner.data import counters, results
from tuner.data.readback import read_json
from tuner.report import build_report, draw_report, finish_report
from tuner.report.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
H200 = ROOT / "results" / "reference" / "nvidia-h200"
OFFSET_SWEEPS = ("offset_read_write", "offset_unroll_blocks")


@pytest.fixture
def offset_folder(tmp_path) -> Path:
    """A results folder of the shipped H200's offset rows and their profiles: a report with a counters section, quick to draw."""
    folder = tmp_path / "gpu"
    (folder / "profiles").mkdir(parents=True)
    for name in ("device.json", "peaks.json"):
        shutil.copy(H200 / name, folder / name)
    for sweep in OFFSET_SWEEPS:
        shutil.copy(H200 / "profiles" / f"{sweep}.parquet", folder / "profiles" / f"{sweep}.parquet")
    rows = results.read(H200 / "measurements.parquet")
    results.write_atomic(rows[rows.family == "offset"], folder / "measurements.parquet")
    return folder


def inputs_of(folder: Path):
    return (results.read(folder / "measurements.parquet"), read_json(folder / "device.json"),
            read_json(folder / "peaks.json", numbers=("_gbs",)))  # fmt: skip


def files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def test_drawn_then_finished_is_the_report_drawn_at_once(offset_folder, tmp_path):
    dataset, device, peaks = inputs_of(offset_folder)
    profiles = counters.read_profiles(offset_folder)
    assert not profiles[0].empty  # the counters section is there to be added
    # At once with workers: the counters section (the roofline) drawn in one, against drawn in this process below.
    at_once = build_report(dataset, device=device, peaks=peaks, out_dir=tmp_path / "at-once", profiles=profiles, processes=2)
    draft = draw_report(dataset, device=device, peaks=peaks, out_dir=tmp_path / "in-two", processes=2)
    assert not (tmp_path / "in-two" / "report.md").exists() and not (tmp_path / "in-two" / "roofline.png").exists()
    assert (tmp_path / "in-two" / "offset_read_write.png").exists()  # the figures are drawn in the first step
    in_two = finish_report(draft, dataset, profiles=profiles)
    assert "## Why it is fast: hardware counters" in in_two.markdown.read_text()
    assert files(tmp_path / "in-two") == files(at_once.out_dir)
    assert [r.stem for r in in_two.results] == [r.stem for r in at_once.results]


def test_a_draft_only_draws_a_format_whose_figures_are_files(offset_folder, tmp_path, capsys):
    dataset, device, peaks = inputs_of(offset_folder)
    with pytest.raises(ValueError, match="report format of a draft: must be one of all, markdown"):
        draw_report(dataset, device=device, peaks=peaks, out_dir=tmp_path / "out", report_format="html")
    with pytest.raises(SystemExit) as stopped:
        main(["--results", str(offset_folder), "--draft", str(tmp_path / "draft"), "--format", "html"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--draft: must be drawn in a format whose figures are files (all, markdown), got --format html" in err
    assert not (tmp_path / "draft").exists()


def test_the_command_finishes_its_draft_and_draws_again_what_no_longer_fits(offset_folder, tmp_path, capsys):
    draft = offset_folder / "store" / "report-draft.pickle"
    assert main(["--results", str(offset_folder), "--out", str(tmp_path / "at-once"), "--processes", "1"]) == 0
    capsys.readouterr()
    assert main(["--results", str(offset_folder), "--draft", str(draft), "--processes", "2"]) == 0
    drawn = capsys.readouterr().out
    assert f"report draft: {draft};" in drawn and "report draft steps: " in drawn
    assert not (offset_folder / "report" / "report.md").exists()

    assert main(["--results", str(offset_folder), "--from-draft", str(draft)]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""  # the draft was used: nothing drawn again
    steps = printed.out.splitlines()[-1]
    assert steps.startswith("report steps: ") and "counters" in steps and "wait for drawings" not in steps
    assert files(offset_folder / "report") == files(tmp_path / "at-once")

    # An input changed since: the whole report is drawn, the reason in one line, the same bytes.
    shutil.rmtree(offset_folder / "report")
    (offset_folder / "peaks.json").touch()
    assert main(["--results", str(offset_folder), "--from-draft", str(draft), "--processes", "1"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == f"report: the report's inputs changed since {draft} was drawn: drawing the whole report"
    assert files(offset_folder / "report") == files(tmp_path / "at-once")


def test_a_draft_that_does_not_fit_says_why(offset_folder, tmp_path, monkeypatch):
    """Each way a draft stops fitting the report asked for (the command then draws the whole report, as above)."""
    from tuner.report import draft as drafts

    dataset, device, peaks = inputs_of(offset_folder)
    out, path = tmp_path / "out", tmp_path / "draft.pickle"
    inputs = [offset_folder / "measurements.parquet", offset_folder / "device.json", offset_folder / "peaks.json"]
    drafted = draw_report(dataset, device=device, peaks=peaks, out_dir=out)
    drafts.write_draft(drafted, path, inputs=drafts.inputs_key(inputs), report_format="all")
    kept = path.read_bytes()

    def why(**asked) -> str:
        found, reason = drafts.read_draft(path, **({"inputs": inputs, "report_format": "all", "out_dir": out} | asked))
        assert (found is None) == bool(reason)
        return reason

    assert why() == ""
    assert why(out_dir=tmp_path / "elsewhere") == f"{path} was drawn into {out}, not {tmp_path / 'elsewhere'}"
    assert why(report_format="markdown") == f"{path} was drawn for --format all, not markdown"
    assert why(inputs=inputs[:2]) == f"the report's inputs changed since {path} was drawn"
    assert why(inputs=[*inputs[:2], tmp_path / "gone.json"]) == f"the report's inputs changed since {path} was drawn"
    monkeypatch.setattr(drafts, "report_code_digest", lambda: "another")
    assert why() == f"the report code changed since {path} was drawn"
    monkeypatch.undo()
    (out / "family_offset.png").rename(tmp_path / "moved.png")  # a figure no rule makes, deleted by hand
    assert why() == f"{path} was drawn with {out / 'family_offset.png'}, which is gone"
    (tmp_path / "moved.png").rename(out / "family_offset.png")
    assert why() == ""
    header = kept[: kept.index(b"\n") + 1]
    path.write_bytes(header + b"\x80\x05not a pickle")  # the line fits, the draft after it is damaged
    assert why() == f"{path} cannot be read (UnpicklingError)"
    path.write_bytes(header)
    assert why() == f"{path} cannot be read (EOFError)"
    for other in (b"\x80\x05not json\n", b"", b'{"version": 0}\n', b"[1]\n"):
        path.write_bytes(other + kept[len(header) :])
        assert why() == f"{path} is not a report draft of this version", other
    path.unlink()
    assert why() == f"no draft at {path}"


def test_the_code_digest_follows_the_report_code(tmp_path, monkeypatch):
    """An edit of any report module, template or the figure list changes it: a draft of the old code is not used."""
    from tuner import resources
    from tuner.report import draft as drafts

    package = tmp_path / "tuner"
    shutil.copytree(ROOT / "tuner" / "report", package / "report", ignore=shutil.ignore_patterns("__pycache__"))
    figure_list = tmp_path / "figures.yaml"
    shutil.copy(resources.figure_list_file(), figure_list)
    monkeypatch.setattr(resources, "package_dir", lambda: package)
    monkeypatch.setattr(resources, "figure_list_file", lambda: figure_list)
    before = drafts.report_code_digest()
    assert drafts.report_code_digest() == before
    for edited in (package / "report" / "roofline.py", next((package / "report" / "templates").glob("*.j2")), figure_list):
        original = edited.read_bytes()
        edited.write_bytes(original + b"\n")
        assert drafts.report_code_digest() != before, edited.name
        edited.write_bytes(original)
    assert drafts.report_code_digest() == before
