"""The report's energy section: the table says whether the trade-off is real
(knee ratio, or within the uncertainty, or none), the figure marks the front,
and the whole report carries the section with or without energy rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
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


def test_the_report_carries_the_energy_section(tmp_path):
    data, device, peaks = make_dataset()
    # The study's rows and the energy rows: the section's place is beside the studies, whatever else was measured.
    studies = data[data["source"].str.startswith("study:")]
    data = results.to_frame(pd.concat([studies, dataset()], ignore_index=True))
    outputs = build_report(data, device=device, peaks=peaks, out_dir=tmp_path)
    markdown = outputs.markdown.read_text()
    assert "## Energy beside time" in markdown and "ratio 4.00" in markdown and (tmp_path / f"{STEM}.png").exists()
    assert "\n## Studies\n" in markdown[markdown.index("## Energy beside time") :]  # just before the studies
    assert '<section id="energy">' in outputs.html.read_text()
