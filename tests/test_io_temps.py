"""What a writer killed mid-save leaves beside its output, and what the next writer does with it."""

import os

from heads.io import clear_stale_temps, replace_dir, temp_dir_beside


def _folder(path, text="x"):
    path.mkdir(parents=True)
    (path / "state.json").write_text(text)
    return path


def test_a_half_written_copy_goes_and_what_is_not_its_own_stays(tmp_path):
    ckpt = _folder(tmp_path / "checkpoint", "new")
    half = _folder(tmp_path / ".checkpoint.329jx3rt")
    aside = _folder(tmp_path / ".checkpoint.old")
    others = [_folder(tmp_path / ".checkpoint.v2.ab12cd34"), _folder(tmp_path / ".checkpoint_x.ab12cd34"),
              _folder(tmp_path / ".model.ab12cd34")]
    (tmp_path / ".checkpoint.qwertyui").write_text("a file, not a writer's folder")
    os.symlink(others[0], tmp_path / ".checkpoint.linkedaa")
    assert sorted(clear_stale_temps(ckpt)) == sorted([half, aside])
    assert (ckpt / "state.json").read_text() == "new"
    assert all(p.is_dir() for p in others) and (tmp_path / ".checkpoint.qwertyui").is_file()
    assert (tmp_path / ".checkpoint.linkedaa").is_symlink()


def test_a_kill_between_the_two_renames_puts_the_last_complete_copy_back(tmp_path):
    # replace_dir renames the old copy aside, then moves the new one in: killed in between, only the old is whole
    ckpt = tmp_path / "checkpoint"
    _folder(tmp_path / ".checkpoint.old", "step 10")
    _folder(tmp_path / ".checkpoint.abcd1234", "step 20, maybe half written")
    clear_stale_temps(ckpt)
    assert (ckpt / "state.json").read_text() == "step 10"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]


def test_the_next_save_replaces_the_output_and_leaves_nothing_beside_it(tmp_path):
    out = _folder(tmp_path / "model", "old")
    _folder(tmp_path / ".model.zz9zz9zz")  # a killed writer's
    tmp = temp_dir_beside(out)
    (tmp / "state.json").write_text("new")
    replace_dir(tmp, out)
    assert (out / "state.json").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
