"""The report's energy section: the table says whether the trade-off is real
(knee ratio, or within the uncertainty, or none), the figure marks the front,
and the whole report carries the section with or without energy rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fixtures_report import make_dataset

from tuner.data import results
from tuner.report import build_report
from tuner.report.document import environment
from tuner.report.energy import STEM, energy_content, energy_table


def rows(problem_n: int, points: list[tuple[float, float]], err: float = 1e-4) -> list[dict]:
    out = []
    for i, (ms, joules) in enumerate(points):
        cfg = {"variant": "shuffle", "block_size": 64 << i}
        out.append({"family": "reduce", "dtype": "int32", "n": problem_n, "status": "ok", "source": "sweep:e", **cfg,
                    "config_key": results.config_key(cfg), "time_ms_median": ms, "energy_j": joules, "energy_j_err": err,
                    "power_w_energy": joules / ms * 1e3, "energy_j_per_byte": joules / (problem_n * 4)})  # fmt: skip
    return out


def dataset() -> pd.DataFrame:
    traded = rows(1 << 20, [(1.0, 0.010), (1.1, 0.006), (1.5, 0.005), (3.0, 0.0049), (1.2, 0.007)])
    frugal_is_fastest = rows(1 << 22, [(1.0, 0.004), (2.0, 0.008)])
    blurred = rows(1 << 24, [(1.0, 0.0100), (1.3, 0.0099)], err=5e-4)  # 1 % apart, 5 % uncertain
    return results.to_frame(traded + frugal_is_fastest + blurred)


def test_the_table_says_where_the_trade_off_is_real():
    table = energy_table(dataset()).set_index("problem")
    assert table.loc["reduce int32 n=1048576", "at the knee"] == "40.0% less energy for 10.0% more time (ratio 4.00)"
    assert table.loc["reduce int32 n=1048576", "on the front"] == 4
    assert table.loc["reduce int32 n=4194304", "at the knee"].startswith("none: the fastest is also the most frugal")
    assert table.loc["reduce int32 n=16777216", "at the knee"].startswith("within the uncertainty")
    assert table.loc["reduce int32 n=1048576", "fastest: mJ per launch"] == "10 ± 0.1"
    assert energy_table(results.to_frame(rows(1 << 20, [(1.0, np.nan)]))) is None


def test_the_section_draws_the_front_and_renders_in_both_documents(tmp_path):
    content = energy_content(dataset(), gpu="Test GPU", out_dir=tmp_path)
    assert content["available"] and (tmp_path / f"{STEM}.png").stat().st_size > 0 and (tmp_path / f"{STEM}.svg").exists()
    markdown = environment().get_template("energy.md.j2").render(energy=content)
    assert "## Energy beside time" in markdown and f"]({STEM}.png)" in markdown and "ratio 4.00" in markdown
    page = environment().get_template("energy.html.j2").render(energy=content)
    assert 'id="figure-energy-front"' in page and "data:image/png;base64," in page
    none = energy_content(results.to_frame(rows(1 << 20, [(1.0, np.nan)])), gpu="Test GPU", out_dir=tmp_path / "none")
    assert not none["available"] and "No energy: no verified row has energy" in environment().get_template("energy.md.j2").render(
        energy=none
    )


@pytest.mark.parametrize("processes", [1, 2])  # 2: the section is made in the figures' worker processes
def test_the_report_carries_the_energy_section(tmp_path, processes):
    data, device, peaks = make_dataset()
    # The study's rows and the energy rows: the section's place is beside the studies, whatever else was measured.
    studies = data[data["source"].str.startswith("study:")]
    data = results.to_frame(pd.concat([studies, dataset()], ignore_index=True))
    outputs = build_report(data, device=device, peaks=peaks, out_dir=tmp_path, processes=processes)
    markdown = outputs.markdown.read_text()
    assert "## Energy beside time" in markdown and "ratio 4.00" in markdown and (tmp_path / f"{STEM}.png").exists()
    assert "\n## Studies\n" in markdown[markdown.index("## Energy beside time") :]  # just before the studies
    assert '<section id="energy">' in outputs.html.read_text()


def test_an_unknown_error_makes_the_comparison_unknown():
    """A missing energy_j_err was taken as 0, calling two energies different
    on no evidence: the table says the uncertainty is unknown instead."""
    missing = rows(1 << 20, [(1.0, 0.0100), (1.3, 0.0099)], err=np.nan)
    one_missing = rows(1 << 22, [(1.0, 0.0100), (1.3, 0.0099)])
    one_missing[1]["energy_j_err"] = None
    table = energy_table(results.to_frame(missing + one_missing)).set_index("problem")
    for problem in ("reduce int32 n=1048576", "reduce int32 n=4194304"):
        assert table.loc[problem, "at the knee"] == "uncertainty unknown (no energy_j_err on a row): the most frugal saves 1.0%"


def test_few_windows_take_students_t_not_two_standard_errors():
    """Two energies 2.5 combined standard errors apart: beyond 2, yet within
    Student's t for two rows of 3 windows (df 4: 2.78), as `energy_windows`
    says or, where it is missing, as the measurement's default; 30 windows
    each make it a difference."""
    points = [(1.0, 0.0100), (1.3, 0.0100 - 2.5 * np.hypot(1e-4, 1e-4))]

    def verdict(windows):
        problem = rows(1 << 20, points, err=1e-4)
        for row in problem:
            row["energy_windows"] = windows
        return energy_table(results.to_frame(problem))["at the knee"].iloc[0]

    assert verdict(3).startswith("within the uncertainty") and verdict(None).startswith("within the uncertainty")
    assert verdict(30) == "3.5% less energy for 30.0% more time (ratio 0.12)"


def test_two_equal_energies_are_called_different_about_one_time_in_twenty():
    """Rows of 3 windows with the same true energy and power wander between
    windows (one standard error from their spread, as tuner.measure.energy
    makes it): at 2 standard errors about 12 % of the pairs read as a real
    difference; at Student's t, 5 % or fewer (Welch's degrees of freedom err
    on the safe side: about 3 %)."""
    rng = np.random.default_rng(7)
    lines = []
    for problem in range(600):
        windows = rng.normal(0.0100, 0.0002, size=(2, 3))
        energies, errors = windows.mean(axis=1), windows.std(axis=1, ddof=1) / np.sqrt(3)
        for i, (ms, joules, err) in enumerate(zip((1.0, 1.3), energies, errors)):
            cfg = {"variant": "shuffle", "block_size": 64 << i}
            lines.append({"family": "reduce", "dtype": "int32", "n": 1024 + problem, "status": "ok", "source": "sweep:e", **cfg,
                          "config_key": results.config_key(cfg), "time_ms_median": ms, "energy_j": joules, "energy_j_err": err,
                          "energy_windows": 3})  # fmt: skip
    table = energy_table(results.to_frame(lines))
    traded = table[table["on the front"] == 2]["at the knee"]
    assert len(traded) > 200
    assert (~traded.str.startswith("within the uncertainty")).mean() <= 0.07


def test_rows_without_a_finite_positive_energy_are_left_out_of_the_section(tmp_path):
    """An infinite or negative energy, a zero time: the problem's other rows
    make its front; a problem with none left has no line, as one without energy."""
    broken = rows(1 << 20, [(1.0, np.inf), (2.0, np.inf)])
    mixed = rows(1 << 22, [(1.0, 0.004), (2.0, -0.002), (1.0, 0.001), (1.5, 0.003)])
    mixed[2]["time_ms_median"] = 0.0
    table = energy_table(results.to_frame(broken + mixed)).set_index("problem")
    assert list(table.index) == ["reduce int32 n=4194304"] and table.loc["reduce int32 n=4194304", "with energy"] == 2
    assert table.loc["reduce int32 n=4194304", "at the knee"] == "25.0% less energy for 50.0% more time (ratio 0.50)"
    assert energy_table(results.to_frame(broken)) is None
    assert not energy_content(results.to_frame(broken), gpu="Test GPU", out_dir=tmp_path)["available"]
    assert energy_content(results.to_frame(broken + mixed), gpu="Test GPU", out_dir=tmp_path)["available"]


def test_students_t_is_the_exact_quantile_or_a_little_above():
    """The written-out table, between its entries and past them, against
    scipy's quantile (scipy only here: the report does without it)."""
    from tuner.report.energy import t_975

    stats = pytest.importorskip("scipy.stats")
    assert [t_975(df) for df in (1, 2, 3, 30)] == [12.706, 4.303, 3.182, 2.042]
    for df in [2, 2.3, 2.5, 3.7, 4, 7.5, 12, 29.5, 30, 31, 45, 200, 1e6]:
        exact = float(stats.t.ppf(0.975, df))
        assert exact - 5e-4 <= t_975(df) <= exact * 1.016, df
    assert t_975(0.5) == t_975(1) and 1.96 < t_975(1e9) < 1.9601
