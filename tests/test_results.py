"""Parquet results: the schema, atomic writes, reading a folder."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from tuner.data import results
from tuner.measure.peaks import peak_buffer_bytes, theoretical_gbs

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference" / "nvidia-h200"


def row(**overrides):
    base = {
        "family": "reduce",
        "variant": "shuffle",
        "dtype": "int32",
        "n": 1024,
        "block_size": 256,
        "config_key": results.config_key({"block_size": 256}),
        "status": "ok",
        "bandwidth_gbs": 100.0,
    }
    return base | overrides


def test_frame_has_exactly_the_schema():
    frame = results.to_frame([row(), row(family="copy", variant="read", block_size=None)])
    assert list(frame.columns) == list(results.COLUMNS)
    assert str(frame["block_size"].dtype) == "Int64"
    assert frame.loc[1, "block_size"] is pd.NA


def test_unknown_column_is_refused():
    with pytest.raises(ValueError, match="outside the schema: \\['colour'\\]"):
        results.to_frame([row(colour="red")])


def test_atomic_write_and_folder_read(tmp_path):
    results.write_atomic(results.to_frame([row()]), tmp_path / "a" / "one.parquet")
    results.write_atomic(results.to_frame([row(n=2048)]), tmp_path / "a" / "two.parquet")
    assert sorted(os.listdir(tmp_path / "a")) == ["one.parquet", "two.parquet"]  # no temporary files left
    frame = pd.read_parquet(tmp_path / "a")
    assert sorted(frame["n"]) == [1024, 2048]
    assert len(results.read(tmp_path / "a")) == 2


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    def explode(self, path, **kwargs):
        open(path, "w").write("partial")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_parquet", explode)
    with pytest.raises(OSError):
        results.write_atomic(results.to_frame([row()]), tmp_path / "x.parquet")
    assert os.listdir(tmp_path) == []


def test_config_key_is_order_independent():
    assert results.config_key({"a": 1, "b": "x"}) == results.config_key({"b": "x", "a": 1})


def test_peak_arithmetic():
    # H200: 3201 MHz HBM3e, double data rate, 6144-bit bus -> 4917 GB/s.
    assert theoretical_gbs(3201.0, 6144) == pytest.approx(4916.7, rel=1e-4)
    assert peak_buffer_bytes(60 << 20) == 1 << 30
    assert peak_buffer_bytes(256 << 20) == 8 * (256 << 20)


def test_every_value_of_every_family_parameter_comes_back_from_parquet_as_written(tmp_path):
    """A parameter's column holds its values with their type (8 stays the
    integer 8, not "8" or 8.0), so rows of a family read back as configurations."""
    from tuner.families import REGISTRY

    written = [row(family=family.name, **{param.name: value}) for family in REGISTRY for param in family.params
               for value in param.values]  # fmt: skip
    results.write_atomic(results.to_frame(written), tmp_path / "all.parquet")
    back = results.read(tmp_path / "all.parquet").to_dict("records")
    for before, after in zip(written, back):
        for name, value in before.items():
            got = results.plain_value(after[name])
            assert got == value and type(got) is type(value), (before["family"], name, value, got)


def test_timestamp_is_a_utc_timestamp_and_error_is_null_on_ok_rows(tmp_path):
    import pyarrow.parquet as pq

    frame = results.to_frame(
        [
            row(timestamp="2026-11-22T01:16:04+00:00", verify_error=0.0),
            row(timestamp="2026-11-22T02:16:04+01:00", status="wrong_result", error="element 7: 3 != 4", bandwidth_gbs=None),
        ]
    )
    path = results.write_atomic(frame, tmp_path / "rows.parquet")
    field = pq.read_schema(path).field("timestamp")
    assert str(field.type) == "timestamp[us, tz=UTC]"
    back = results.read(path)
    assert list(back["timestamp"]) == [pd.Timestamp("2026-11-22T01:16:04Z")] * 2  # the +01:00 one converted to UTC
    assert back.loc[0, "error"] is pd.NA and back.loc[0, "verify_error"] == 0.0
    assert back.loc[1, "error"] == "element 7: 3 != 4" and pd.isna(back.loc[1, "verify_error"])


def test_files_of_the_old_schema_still_read(tmp_path):
    """Older files hold the timestamp as text and, on ok rows, the relative
    verification error as text in ``error``."""
    old = pd.DataFrame(
        [
            row(timestamp="2026-11-22T01:16:04+00:00", error="2.76e-08"),
            row(timestamp="2026-11-22T01:16:05+00:00", status="launch_error", error="illegal address", bandwidth_gbs=None),
        ]
    )
    old.to_parquet(tmp_path / "part-0.parquet")
    back = results.read(tmp_path / "part-0.parquet")
    assert str(back["timestamp"].dtype) == results.TIMESTAMP
    assert back.loc[1, "timestamp"] == pd.Timestamp("2026-11-22T01:16:05Z")
    assert back.loc[0, "error"] is pd.NA and back.loc[0, "verify_error"] == pytest.approx(2.76e-08)
    assert back.loc[1, "error"] == "illegal address"


def test_the_best_line_says_when_no_copy_peak_was_measured():
    """A study run on its own (no peaks stage) has no copy peak: the line says so, not nan."""
    best_line = results.best_line
    row = {"status": "ok", "bandwidth_gbs": 2677.4, "dtype": "int32", "n": 16, "config_key": "{}"}
    without = best_line(pd.DataFrame([row | {"fraction_of_copy_peak": None}]), "study r")
    assert "(no copy peak measured)" in without and "nan" not in without
    assert "(0.912 of copy peak)" in best_line(pd.DataFrame([row | {"fraction_of_copy_peak": 0.9123}]), "study r")


@pytest.mark.parametrize(
    "column, value, message",
    [("status", "OK", "status is 'OK' in row 4, but must be one of ['ok', 'infeasible', 'compile_error', 'launch_error', "
                      "'wrong_result']"),
     ("bandwidth_gbs", float("inf"), "bandwidth_gbs is inf in row 4 (status ok), but a rate is finite and never negative"),
     ("bandwidth_gbs", -1.0, "bandwidth_gbs is -1.0 in row 4 (status ok), but a rate is finite and never negative"),
     ("config_key", "not json {", "config_key is 'not json {' in row 4 (status ok), but must be a JSON object of the parameters"),
     ("config_key", "[1, 2]", "config_key is '[1, 2]' in row 4 (status ok), but must be a JSON object of the parameters"),
     ("grid", "a,b,c", "grid is 'a,b,c' in row 4 (status ok), but must be three whole numbers, x,y,z")],
    ids=["unknown-status", "infinite-rate", "negative-rate", "key-not-json", "key-not-object", "grid-not-numbers"],
)  # fmt: skip
def test_a_row_every_reader_would_trip_on_is_damage_named_at_read(tmp_path, column, value, message):
    """Found once as the file is read, in one line naming it: an unknown status was silently no row,
    an infinite rate made a slow row the exported winner, a bad key a header without parameters."""
    from tuner.errors import DamagedFile

    rows = results.read(REFERENCE / "measurements.parquet").head(10).copy()
    rows[column] = rows[column].astype(object)
    rows.loc[3, column] = value
    path = tmp_path / "measurements.parquet"
    rows.to_parquet(path)
    with pytest.raises(DamagedFile) as damaged:
        results.read(path)
    assert message in str(damaged.value) and str(path) in str(damaged.value) and "\n" not in str(damaged.value)


@pytest.mark.parametrize("umask", [0o022, 0o027, 0o077])
def test_written_files_have_the_mode_the_umask_gives_not_mkstemps_0600(tmp_path, umask):
    # Colleagues, a CI user and `nvcc -I results/<gpu>` read these files; mkstemp made them 0600.
    from tuner.data import compare, counters

    old = os.umask(umask)
    try:
        written = [
            results.write_atomic(pd.DataFrame([row()]), tmp_path / "rows.parquet"),
            results.write_text_atomic("x", tmp_path / "best_configs.h"),
            results.write_json_atomic({"a": 1}, tmp_path / "best.json"),
            counters.write_profile([], tmp_path / "profile.parquet", note="none"),
        ]
        staged = compare._stage(tmp_path / "table.parquet", lambda p: p.write_bytes(b"x"))
    finally:
        os.umask(old)
    for path in [*written, staged]:
        assert (path.stat().st_mode & 0o777) == 0o666 & ~umask, path


def test_written_files_take_a_folders_default_acl_as_a_plain_file_made_there_would(tmp_path):
    """A folder with a default ACL (a shared results folder) overrides the umask for new files: the results
    written there get the mode a plain file gets, not 0666 less the umask."""
    import struct

    folder = tmp_path / "shared"
    folder.mkdir()

    def entry(tag: int, perm: int) -> bytes:  # one ACL entry of the kernel's xattr form (no named user or group)
        return struct.pack("<HHI", tag, perm, 0xFFFFFFFF)

    try:  # user::rwx, group::rwx, other::r-x
        os.setxattr(folder, "system.posix_acl_default", struct.pack("<I", 2) + entry(1, 7) + entry(4, 7) + entry(0x20, 5))
    except (OSError, AttributeError) as error:
        pytest.skip(f"no POSIX ACLs on this file system: {error}")
    old = os.umask(0o077)
    try:
        (folder / "plain.txt").touch()
        written = results.write_json_atomic({"a": 1}, folder / "best.json")
    finally:
        os.umask(old)
    plain = (folder / "plain.txt").stat().st_mode & 0o777
    assert plain == 0o664 and (written.stat().st_mode & 0o777) == plain


def test_a_temporary_file_is_not_left_behind_when_its_write_fails(tmp_path):
    def failing(fd: int, tmp: str) -> None:
        os.close(fd)
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        results.write_via_temporary(tmp_path / "best.json", failing)
    assert list(tmp_path.iterdir()) == []


def test_a_results_file_that_cannot_be_opened_is_not_called_damaged(tmp_path, monkeypatch):
    path = results.write_atomic(pd.DataFrame([row()]), tmp_path / "measurements.parquet")
    real_open = open

    def refusing(file, *args, **kwargs):
        if str(file) == str(path):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    real_read = pd.read_parquet

    def read_as_pyarrow_would(source, *args, **kwargs):  # pyarrow opens a path itself, and is refused too
        if str(source) == str(path):
            raise PermissionError(13, "Permission denied", str(source))
        return real_read(source, *args, **kwargs)

    monkeypatch.setattr("builtins.open", refusing)
    monkeypatch.setattr(pd, "read_parquet", read_as_pyarrow_would)
    with pytest.raises(ValueError, match=r"measurements.parquet: cannot be opened \(.*Permission denied") as caught:
        results.read(path)
    assert "remove it" not in str(caught.value) and not isinstance(caught.value, results.DamagedFile)


def test_a_folder_this_user_cannot_write_in_is_named_not_the_temporary_file(tmp_path, monkeypatch):
    real_open = os.open

    def refused(file, flags, mode=0o777, **kwargs):
        if flags & os.O_CREAT and ".best.json." in str(file):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, flags, mode, **kwargs)

    monkeypatch.setattr(results.os, "open", refused)
    with pytest.raises(PermissionError) as caught:
        results.write_json_atomic({"a": 1}, tmp_path / "best.json")
    error = caught.value
    assert error.filename == str(tmp_path) and "best.json cannot be written in this folder" in error.strerror
    assert ".tmp" not in str(error)
