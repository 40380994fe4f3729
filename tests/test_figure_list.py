"""The report's figures are one list (workflow/report/figures.yaml), read by
the report's code and by the workflow's rules alike; a figure listed but not
drawn, drawn but not listed, or listed twice is refused by name."""

from __future__ import annotations

import re

import pytest
import yaml

from tuner.report.figures import DRAWN, EXPECTED_FIGURES, FIGURE_SPECS, listed_specs, read_figure_list
from tuner.resources import figure_list_file, root


def test_the_report_draws_the_list_in_its_order():
    listed = read_figure_list()
    assert list(EXPECTED_FIGURES) == [entry["stem"] for entry in listed]
    assert [(s.title, s.caption) for s in FIGURE_SPECS] == [(e["title"], e["caption"]) for e in listed]


def test_the_workflow_reads_the_same_list():
    """common.smk's figure stems are the list's (read as a file, not from the report's code)."""
    rules = (root() / "workflow" / "rules" / "common.smk").read_text()
    assert "figure_list_file()" in rules
    stems = [entry["stem"] for entry in yaml.safe_load(figure_list_file().read_text())]
    assert stems == list(EXPECTED_FIGURES)


@pytest.mark.parametrize("change, named", [("drop", "not listed"), ("add", "listed but not drawn"), ("twice", "twice")])
def test_a_list_out_of_step_with_the_drawings_is_refused(change, named):
    listed = read_figure_list()
    entry = {"stem": "new_figure", "title": "New", "caption": "A figure nobody draws."}
    listed = {"drop": listed[1:], "add": [*listed, entry], "twice": [*listed, listed[0]]}[change]
    with pytest.raises(ValueError, match=r"figures\.yaml: must list each figure") as refused:
        listed_specs(listed, DRAWN)
    stem = {"drop": read_figure_list()[0]["stem"], "add": "new_figure", "twice": read_figure_list()[0]["stem"]}[change]
    assert re.search(rf"\['{stem}'\] {named}", str(refused.value)), str(refused.value)
