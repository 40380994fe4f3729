"""Bad input: one line naming the key, the rule and the value, before any work;
the settings a stage gets are exactly the ones that were checked."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from tuner import cli
from tuner.settings import ConfigError, DeviceFacts, Settings, load, parse

H100 = DeviceFacts(count=1, names=("NVIDIA H100 80GB HBM3",), memory_bytes=(80 << 30,), compute_capabilities=("9.0",))


def base_config(tmp_path: Path) -> dict:
    """A small config of its own: one sweep, one study."""
    return {
        "results_dir": str(tmp_path / "results"),
        "gpu": "test-gpu",
        "sweeps": {
            "ladder": {
                "family": "reduce",
                "dtypes": ["int32"],
                "sizes": [1 << 20],
                "params": {"variant": ["shuffle"], "block_size": [256], "unroll": [1, 2]},
            }
        },
        "studies": {
            "search": {
                "family": "reduce",
                "dtype": "int32",
                "n": 1 << 20,
                "budget_trials": 4,
                "storage": str(tmp_path / "study.log"),
                "params": {
                    "variant": ["shuffle"],
                    "block_size": [128, 256],
                    "unroll": [1, 2, 4],
                    "vector_width": [1],
                    "offset": [0],
                    "grid_blocks_per_sm": [1],
                    "cache_hint": ["none"],
                    "min_blocks": [0],
                    "finish": ["host"],
                },  # fmt: skip
            }
        },
    }


def changed(config: dict, path: tuple, value) -> dict:
    config = copy.deepcopy(config)
    node = config
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return config


class _Delete:
    """Marks a setting to remove; its repr names the case (test ids must not vary between runs)."""

    def __repr__(self) -> str:
        return "<missing>"


DELETE = _Delete()

BAD = [
    (
        ("sweeps", "ladder", "sizes"),
        [1 << 40],
        r"^sweeps\.ladder\.sizes\[0\]: must be an integer from 1 to \d+ \(reduce int32 needs about 24 bytes per element; 192 GiB assumed without a device\), got 1099511627776$",
    ),
    (
        ("sweeps", "ladder", "sizes"),
        [1 << 20, 1 << 64],
        r"^sweeps\.ladder\.sizes\[1\]: must be an integer from 1 to \d+ .*got 18446744073709551616$",
    ),
    (("studies", "search", "n"), 1 << 40, r"^studies\.search\.n: must be an integer from 1 to \d+ .*got 1099511627776$"),
    (("studies", "search", "family"), DELETE, r"^studies\.search\.family: is required, got nothing$"),
    (("studies", "search", "n"), DELETE, r"^studies\.search\.n: is required, got nothing$"),
    (("arch",), "sm_1", r"^arch: must be auto or an nvcc architecture such as sm_90, got 'sm_1'$"),
    (
        ("sweeps", "ladder", "params", "vector_width"),
        [4.0],
        r"^sweeps\.ladder\.params\.vector_width\[0\]: must be one of \[1, 2, 4\], got 4\.0$",
    ),
    (
        ("sweeps", "ladder", "params", "block_size"),
        [True],
        r"^sweeps\.ladder\.params\.block_size\[0\]: must be a multiple of 32 from 32 to 1024, got True$",
    ),
    (
        ("sweeps", "ladder", "params", "block_size"),
        [128, 100],
        r"^sweeps\.ladder\.params\.block_size\[1\]: must be a multiple of 32 from 32 to 1024, got 100$",
    ),
    (
        ("sweeps", "ladder", "params", "unroll"),
        [3],
        r"^sweeps\.ladder\.params\.unroll\[0\]: must be one of \[1, 2, 4, 8, 16\], got 3$",
    ),
    (
        ("sweeps", "ladder", "params", "offset"),
        [0, 200],
        r"^sweeps\.ladder\.params\.offset\[1\]: must be an integer from 0 to 128, got 200$",
    ),
    (
        ("sweeps", "ladder", "params", "block_size"),
        [256, 256],
        r"^sweeps\.ladder\.params\.block_size: must not repeat a value, got \[256, 256\]$",
    ),
    (
        ("sweeps", "ladder", "params", "blocksize"),
        [256],
        r"^sweeps\.ladder\.params: parameter must be one of \[.*'block_size'.*\] for family reduce, got 'blocksize'$",
    ),
    (("sweeps", "ladder", "family"), "reduction", r"^sweeps\.ladder\.family: must be one of \[.*'reduce'.*\], got 'reduction'$"),
    (
        ("sweeps", "ladder", "dtypes"),
        ["int64"],
        r"^sweeps\.ladder\.dtypes\[0\]: must be one of \['int32', 'float32'\] for family reduce, got 'int64'$",
    ),
    (("sweeps", "ladder", "sizes"), [], r"^sweeps\.ladder\.sizes: must hold at least 1 value\(s\), got \[\]$"),
    (("sweeps", "ladder", "sizes"), ["big"], r"^sweeps\.ladder\.sizes\[0\]: must be an integer, got 'big'$"),
    (
        ("sweeps", "ladder", "params"),
        {"variant": ["unrolled"], "unroll": [1]},
        r"^sweeps\.ladder\.params: the grid must hold at least one feasible configuration, got none "
        r"\(the first, \{'variant': 'unrolled', .*\}: unroll must be at least 2 for variant unrolled, got 1\)$",
    ),
    (
        ("studies", "search", "params"),
        {"variant": ["neighbored"], "unroll": [8]},
        r"^studies\.search\.params: the space must hold at least one feasible configuration for reduce-int32-n1048576, got none "
        r"\(the first, \{'variant': 'neighbored', .*\}: .*unroll must be 1 for neighbored \(use variant unrolled\), got 8\)$",
    ),
    (("studies", "search", "sampler"), "annealing", r"^studies\.search\.sampler: must be one of \['tpe', .*\], got 'annealing'$"),
    (
        ("studies", "search", "budget_fraction"),
        0.5,
        r"^studies\.search: must give budget_trials or budget_fraction, not both, got both$",
    ),
    (("studies", "search", "budget_trials"), 0, r"^studies\.search\.budget_trials: must be >= 1, got 0$"),
    (
        ("studies", "search", "compare_with_sweep"),
        "nope",
        r"^studies\.search\.compare_with_sweep: must name a sweep of this config \['ladder'\], got 'nope'$",
    ),
    (
        ("studies", "search", "enqueue"),
        [{"block_size": 1024}],
        r"^studies\.search\.enqueue\[0\]\.block_size: must be one of the searched values \[128, 256\], got 1024$",
    ),
    (
        ("studies", "search", "enqueue"),
        [{"blocks": 1}],
        r"^studies\.search\.enqueue\[0\]: keys must be parameters of reduce .*got \['blocks'\]$",
    ),
    (("studies", "search", "storage"), "", r"^studies\.search\.storage: must not be empty, got ''$"),
    (("timing",), {"max_time_s": -1}, r"^timing\.max_time_s: must be a number > 0, got -1$"),
    (("timing",), {"min_samples": 10, "max_samples": 5}, r"^timing\.max_samples: must be >= min_samples \(10\), got 5$"),
    (("sweeps", "ladder", "timing"), {"min_samples": 1}, r"^sweeps\.ladder\.timing\.min_samples: must be an integer >= 2, got 1$"),
    (("timing",), {"max_time": 1}, r"^timing: keys must be among \[.*'max_time_s'.*\], got \['max_time'\]$"),
    (("colour",), "blue", r"^\(top level\): keys must be among \[.*'sweeps'.*\], got \['colour'\]$"),
    (("gpu",), "..", r"^gpu: must be auto or a folder name of at most 64 lower-case letters, digits, '_' and '-', got '\.\.'$"),
    (("gpu",), "a/b", r"^gpu: must be auto or a folder name .*got 'a/b'$"),
    (
        ("sweeps", "../escape"),
        {"family": "reduce", "dtypes": ["int32"], "sizes": [64]},
        r"^sweeps: must be a name of at most 64 letters, digits, .*got '\.\./escape'$",
    ),
    (
        ("studies", "$(touch pwned)"),
        {"family": "reduce", "dtype": "int32", "n": 64},
        r"^studies: must be a name of .*got '\$\(touch pwned\)'$",
    ),
    (("seed",), -1, r"^seed: must be an integer from 0 to 2\^32-1 \(4294967295\), got -1$"),
    (("study_gpus",), [0, 0], r"^study_gpus: must not repeat a value, got \[0, 0\]$"),
    (("device_index",), 1.0, r"^device_index: must be an integer, got 1\.0$"),
    (("results_dir",), "", r"^results_dir: must not be empty, got ''$"),
    (("studies", "search", "compile_ahead"), "no", r"^studies\.search\.compile_ahead: must be true or false, got 'no'$"),
]


def test_a_study_without_a_sampler_gets_the_default_strategy(tmp_path):
    from tuner.search.samplers.registry import DEFAULT_STRATEGY

    assert "sampler" not in base_config(tmp_path)["studies"]["search"]
    assert parse(base_config(tmp_path)).study("search").sampler == DEFAULT_STRATEGY


@pytest.mark.parametrize("path, value, message", BAD, ids=[f"{'.'.join(p)}={v!r}"[:60] for p, v, _ in BAD])
def test_bad_values_are_named_in_one_line(tmp_path, path, value, message):
    config = changed(base_config(tmp_path), path, value)
    with pytest.raises(ConfigError) as caught:
        parse(config)
    text = str(caught.value)
    assert "\n" not in text
    assert __import__("re").match(message, text), text


@pytest.mark.parametrize(
    "config_change, device, archs, message",
    [
        (
            {"device_index": 99},
            H100,
            None,
            r"^device_index: must be the index of one of this machine's 1 CUDA devices \(0 to 0\), got 99$",
        ),
        (
            {"study_gpus": [0, 3]},
            H100,
            None,
            r"^study_gpus\[1\]: must be the index of one of this machine's 1 CUDA devices, got 3$",
        ),
        (
            {"arch": "sm_100"},
            H100,
            None,
            r"^arch: must be auto or build code that runs on the device \(compute capability 9\.0: sm_90 to sm_90\), got 'sm_100'$",
        ),
        (
            {"arch": "sm_75"},
            None,
            ("sm_80", "sm_90"),
            r"^arch: must be auto or an architecture this nvcc builds \(sm_80, sm_90\), got 'sm_75'$",
        ),
    ],
)
def test_device_and_arch_are_checked_against_the_machine(tmp_path, config_change, device, archs, message):
    config = {**base_config(tmp_path), **config_change}
    with pytest.raises(ConfigError, match=message):
        parse(config, device=device, nvcc_archs=archs)


def test_sizes_are_judged_against_the_device_memory(tmp_path):
    config = changed(base_config(tmp_path), ("sweeps", "ladder", "sizes"), [4 << 30])  # 4 Gi int32 x 6 buffers = 96 GiB
    parse(config)  # fits the 192 GiB assumed without a device
    with pytest.raises(
        ConfigError, match=r"sizes\[0\]: must be an integer from 1 to \d+ \(.*80 GiB of device memory\), got 4294967296"
    ):
        parse(config, device=H100)


def test_a_storage_problem_is_a_config_error(tmp_path):
    def refuse(spec, workers):
        return f"must be a journal file or a database URL, got {spec!r}"

    with pytest.raises(ConfigError, match=r"^studies\.search\.storage: must be a journal file"):
        parse(base_config(tmp_path), storage_check=refuse)


def test_a_results_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    config = {**base_config(tmp_path), "results_dir": str(tmp_path / "file" / "results")}
    with pytest.raises(ConfigError, match=r"^results_dir: must be a folder .*where '.*file' is a file$"):
        parse(config)


def test_a_results_dir_under_the_home_folder_is_read_as_a_shell_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    settings = parse({**base_config(tmp_path), "results_dir": "~/runs/"})
    assert settings.run.results_dir == str(tmp_path / "home" / "runs")  # not a folder named ~ in the working one


def test_a_journal_storage_under_the_home_folder_is_read_as_a_shell_reads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = base_config(tmp_path)
    config["studies"]["search"]["storage"] = "~/studies/search.log"
    assert parse(config).studies["search"].storage == str(tmp_path / "home" / "studies" / "search.log")


def test_a_config_of_studies_alone_needs_no_sweeps(tmp_path):
    """A search of one's own kernel without an exhaustive sweep beside it."""
    config = base_config(tmp_path)
    del config["sweeps"]
    settings = parse(config)
    assert settings.sweeps == {} and list(settings.studies) == ["search"]


def test_yaml_errors_carry_file_line_and_column(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("results_dir: results\nsweeps:\n  a: [1, 2\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+:\d+: must be valid YAML, got a syntax error: "):
        load(path)


def test_describe_checks_a_config_before_the_gpu_and_names_a_syntax_error_line(tmp_path, capsys):
    """The README's check of a config Snakemake would read first (whose own
    message names no line): one line, the file's line and column, exit 2."""
    path = tmp_path / "mine.yaml"
    path.write_text("sweeps:\n  a: [\n")
    assert cli.main(["describe", "--config", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"config error: {path}:3:1: must be valid YAML, got a syntax error: ") and "\n" not in err


def test_duplicate_keys_are_refused_with_both_lines(tmp_path):
    config = base_config(tmp_path)
    text = yaml.safe_dump(config, sort_keys=False)
    sweep = yaml.safe_dump({"ladder": config["sweeps"]["ladder"]}, sort_keys=False)
    # The same sweep name twice under sweeps:
    text = text.replace("sweeps:\n", "sweeps:\n" + "".join("  " + line + "\n" for line in sweep.splitlines()), 1)
    path = tmp_path / "twice.yaml"
    path.write_text(text)
    with pytest.raises(
        ConfigError, match=r"twice\.yaml:\d+:3: keys must be unique within a mapping, got 'ladder' again \(first at line \d+\)"
    ):
        load(path)


def test_a_study_may_search_any_value_its_parameter_rule_accepts(tmp_path):
    """One acceptance rule per parameter: block 96 is a multiple of 32, so a study may search it."""
    config = changed(base_config(tmp_path), ("studies", "search", "params", "block_size"), [96, 128])
    study = parse(config).studies["search"]
    assert study.domains()["block_size"] == [96, 128]
    from tuner.families import REGISTRY
    from tuner.search.study.run import distributions

    assert distributions(REGISTRY["reduce"], study.domains())["block_size"].choices == (96, 128)


@pytest.mark.parametrize(
    "storage, workers, message",
    [
        ("postgresql//nowhere", 1, r"^studies\.search\.storage: storage must be an Optuna URL .*got 'postgresql//nowhere'$"),
        (
            "nosuchdb://u@h/db",
            1,
            r"^studies\.search\.storage: storage URL nosuchdb://u@h/db names the database 'nosuchdb', which SQLAlchemy does not know",
        ),
        ("mysql://u@h/db", 1, r"^studies\.search\.storage: storage URL mysql://u@h/db needs the database driver"),
        (
            "sqlite://",
            2,
            r"^studies\.search\.storage: storage URL sqlite:// is an in-memory SQLite database, which 2 worker processes cannot share$",
        ),
        (
            "{tmp}/file.txt/study.log",
            1,
            r"^studies\.search\.storage: folder of journal file .* cannot be created: .*file\.txt' is a file$",
        ),
    ],
)
def test_storage_urls_and_journal_paths_are_checked_up_front(tmp_path, storage, workers, message):
    from tuner.search.study.storage_spec import storage_problem

    (tmp_path / "file.txt").write_text("x")
    config = changed(base_config(tmp_path), ("studies", "search", "storage"), storage.format(tmp=tmp_path))
    if workers > 1:
        config["study_gpus"] = list(range(workers))
    with pytest.raises(ConfigError, match=message):
        parse(config, storage_check=storage_problem)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(
    "storage, shown",
    [("stu\ndy.log", "'stu\\ndy.log' with '\\n'"), ("study.log\r", "'study.log\\r' with '\\r'"),
     ("a\x00b.log", "'a\\x00b.log' with '\\x00'"), ("sqlite:///study\x7f.db", "'sqlite:///study\\x7f.db' with '\\x7f'"),
     ("postgresql://me:s3cret@db\t/tuning", "'postgresql://me:***@db\\t/tuning' with '\\t'")],
    ids=["newline", "carriage return", "NUL", "DEL", "a URL with a password"],
)  # fmt: skip
def test_a_storage_with_control_characters_is_refused_in_one_line(tmp_path, capsys, storage, shown):
    from tuner.search.study.storage_spec import storage_problem

    config = changed(base_config(tmp_path), ("studies", "search", "storage"), storage)
    message = f"studies.search.storage: must be a journal path or URL without control characters, got {shown}"
    with pytest.raises(ConfigError) as caught:
        parse(config, storage_check=storage_problem)
    assert str(caught.value) == message
    config_file = tmp_path / "bad.yaml"
    config_file.write_text(yaml.safe_dump(config))
    assert cli.main(["tune", "search", "--config", str(config_file)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"config error: {message}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_the_budget_fraction_counts_the_feasible_space(tmp_path):
    config = changed(base_config(tmp_path), ("studies", "search", "budget_trials"), DELETE)
    config["studies"]["search"]["budget_fraction"] = 0.5
    study = parse(config).studies["search"]
    assert study.space_size == 6  # shuffle x block 128/256 x unroll 1/2/4, one value of every other parameter
    assert study.budget_trials == 3


def test_a_study_compiles_ahead_unless_told_not_to_with_the_runs_compile_jobs(tmp_path):
    assert parse(base_config(tmp_path)).studies["search"].compile_ahead is True
    off = parse(changed(base_config(tmp_path), ("studies", "search", "compile_ahead"), False))
    assert Settings.from_stage_json(off.stage_json("study", "search")).studies["search"].compile_ahead is False
    jobs = parse(changed(base_config(tmp_path), ("compile_jobs",), 3))
    assert Settings.from_stage_json(jobs.stage_json("study", "search")).run.compile_jobs == 3


def test_a_changed_problem_is_a_new_study_name(tmp_path):
    config = base_config(tmp_path)
    name = parse(config).studies["search"].storage_name("test-gpu")
    assert name.startswith("test-gpu/search/int32-n1048576-")
    for path, value in ((("studies", "search", "dtype"), "float32"), (("studies", "search", "n"), 1 << 21),
                        (("studies", "search", "params", "unroll"), [1, 2])):  # fmt: skip
        assert parse(changed(config, path, value)).studies["search"].storage_name("test-gpu") != name
    assert parse(copy.deepcopy(config)).studies["search"].storage_name("test-gpu") == name


def test_stage_settings_round_trip_and_carry_only_their_section(tmp_path):
    settings = parse(base_config(tmp_path))
    sweep_json = settings.stage_json("sweep", "ladder")
    again = Settings.from_stage_json(sweep_json)
    assert again.sweeps["ladder"] == settings.sweeps["ladder"]
    assert list(again.studies) == []
    assert "study_gpus" not in json.loads(sweep_json)["run"]  # a study's GPUs do not rerun sweeps
    study_json = settings.stage_json("study", "search")
    assert Settings.from_stage_json(study_json).studies["search"] == settings.studies["search"]
    # The section a sweep gets changes only when that sweep (or what all share) changes.
    other = changed(base_config(tmp_path), ("studies", "search", "budget_trials"), 5)
    assert parse(other).stage_json("sweep", "ladder") == sweep_json
    assert parse(other).stage_json("study", "search") != study_json


def test_unknown_stage_names_list_the_known_ones(tmp_path):
    settings = parse(base_config(tmp_path))
    with pytest.raises(ConfigError, match=r"^sweep name: must be one of \['ladder'\], got 'ladderr'$"):
        settings.sweep("ladderr")


# ---- through the command line: exit 2, one line, nothing written ---------------

CLI_CASES = [BAD[0], BAD[3], BAD[6], BAD[18], BAD[31]]


@pytest.mark.parametrize("path, value, message", CLI_CASES)
def test_the_command_line_stops_before_any_work(tmp_path, capsys, path, value, message):
    config = changed(base_config(tmp_path), path, value)
    config_file = tmp_path / "bad.yaml"
    config_file.write_text(yaml.safe_dump(config))
    for argv in (["sweep", "ladder", "--config", str(config_file)], ["tune", "search", "--config", str(config_file)],
                 ["compile", "--config", str(config_file)], ["peaks", "--config", str(config_file)]):  # fmt: skip
        assert cli.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("config error: "), err
        assert __import__("re").match(message, err[0].removeprefix("config error: ")), err
    assert not (tmp_path / "results").exists()


def test_cli_names_known_sweeps_and_missing_inputs(tmp_path, capsys):
    config_file = tmp_path / "good.yaml"
    config_file.write_text(yaml.safe_dump(base_config(tmp_path)))
    assert cli.main(["sweep", "nope", "--config", str(config_file)]) == 2
    assert capsys.readouterr().err.strip() == "config error: sweep name: must be one of ['ladder'], got 'nope'"
    assert cli.main(["sweep", "ladder", "--config", str(config_file)]) == 2
    assert "device.json the describe stage wrote" in capsys.readouterr().err
    assert cli.main(["collect", str(tmp_path / "missing.parquet"), "--out", str(tmp_path / "m.parquet")]) == 2
    assert "inputs: must be existing Parquet files" in capsys.readouterr().err
    assert not (tmp_path / "m.parquet").exists()


def test_every_subcommand_and_option_has_help():
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in subparsers.choices.items():
        assert sub.description, name
        for action in sub._actions:
            if action.dest != "help":
                assert action.help, f"{name} {action.dest}"


def test_a_results_dir_nvccs_shell_would_read_is_refused(tmp_path):
    """The cubin cache lies under results_dir, and its path goes on nvcc's command line."""
    config = base_config(tmp_path)
    config["results_dir"] = str(tmp_path / "r$(touch marker)")
    with pytest.raises(ConfigError, match=r"^results_dir: must hold none of \$ ` \" \\ or control characters \(nvcc passes "
                                          r"it through a shell\), got '.*r\$\(touch marker\)'$"):  # fmt: skip
        parse(config)
