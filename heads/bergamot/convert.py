"""A Bergamot model folder (Marian binary, SentencePiece vocabulary as ``tokenizer.json``) as a transformers folder.

The binary's own ``special:model.yml`` says the architecture; anything but the student layout this module
implements (transformer encoder, SSRU decoder, post-norm, tied embeddings, ReLU) is refused by name, never
loaded approximately. The weights are dequantised to float32 (``W = q / multiplier``: the int8 values are the
model, float32 adds no error of its own) and mapped onto :class:`BergamotForConditionalGeneration` with every
tensor accounted for.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from heads.bergamot.binary import BinaryModelError, read
from heads.bergamot.model import BergamotConfig, BergamotForConditionalGeneration
from heads.yamlio import load_yaml

EOS, UNK = "</s>", "<unk>"
# What the model.yml must say for this port to be the model: key -> accepted values
EXPECTED = {
    "type": ("transformer",),
    "transformer-decoder-autoreg": ("rnn",),
    "dec-cell": ("ssru",),
    "transformer-postprocess": ("dan",),
    "transformer-preprocess": ("", None),
    "transformer-postprocess-emb": ("d",),
    "transformer-ffn-activation": ("relu",),
    "transformer-ffn-depth": (2,),
    "tied-embeddings-all": (True,),
    "right-left": (False, None),
}


def model_file(folder: Path) -> Path:
    """The one ``model.*.bin`` of a Bergamot model folder."""
    found = sorted(folder.glob("model.*.bin"))
    if len(found) != 1:
        raise BinaryModelError(f"{folder}: expected one model.*.bin, found {[f.name for f in found]}")
    return found[0]


def config_from(model_yml: str, source: str) -> BergamotConfig:
    """The config of the model a ``model.yml`` describes; other architectures are refused by name."""
    spec = load_yaml(model_yml, source, BinaryModelError) or {}
    wrong = {k: spec.get(k) for k, ok in EXPECTED.items() if spec.get(k) not in ok}
    if wrong:
        raise BinaryModelError(f"{source}: not a Bergamot student this port implements ({wrong}; expected "
                               f"{ {k: EXPECTED[k] for k in wrong} })")
    vocabs = spec.get("dim-vocabs") or []
    if len(set(vocabs)) != 1:
        raise BinaryModelError(f"{source}: source and target vocabularies differ ({vocabs}); tied embeddings need one")
    ffn = spec.get("transformer-dim-ffn")
    return BergamotConfig(vocab_size=int(vocabs[0]), d_model=int(spec["dim-emb"]),
                          encoder_layers=int(spec["enc-depth"]), decoder_layers=int(spec["dec-depth"]),
                          encoder_attention_heads=int(spec["transformer-heads"]),
                          decoder_attention_heads=int(spec["transformer-heads"]),
                          encoder_ffn_dim=int(ffn), decoder_ffn_dim=int(spec.get("transformer-decoder-dim-ffn") or ffn))


def _linear(prefix: str, w: str, b: str | None) -> dict[str, str]:
    return {f"{prefix}.weight": w, **({f"{prefix}.bias": b} if b else {})}


def name_map(config: BergamotConfig) -> dict[str, str]:
    """``{state-dict key: binary tensor name}``; a matrix is transposed from Marian's [in, out] on the way."""
    out = {"model.shared.weight": "Wemb", "logits_bias": "decoder_ff_logit_out_b"}
    for i in range(config.encoder_layers):
        m, p = f"model.encoder.layers.{i}", f"encoder_l{i + 1}"
        out |= _attention(f"{m}.self_attn", f"{m}.self_attn_layer_norm", f"{p}_self")
        out |= _ffn(m, p)
    for i in range(config.decoder_layers):
        m, p = f"model.decoder.layers.{i}", f"decoder_l{i + 1}"
        out |= {f"{m}.rnn.W.weight": f"{p}_rnn_W", f"{m}.rnn.forget.weight": f"{p}_rnn_Wf",
                f"{m}.rnn.forget.bias": f"{p}_rnn_bf", f"{m}.rnn_layer_norm.weight": f"{p}_rnn_ffn_ln_scale",
                f"{m}.rnn_layer_norm.bias": f"{p}_rnn_ffn_ln_bias"}
        out |= _attention(f"{m}.encoder_attn", f"{m}.encoder_attn_layer_norm", f"{p}_context")
        out |= _ffn(m, p)
    return out


def _attention(module: str, norm: str, p: str) -> dict[str, str]:
    out = {}
    for proj, letter in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "o")):
        out |= _linear(f"{module}.{proj}", f"{p}_W{letter}", f"{p}_b{letter}")
    return out | {f"{norm}.weight": f"{p}_Wo_ln_scale", f"{norm}.bias": f"{p}_Wo_ln_bias"}


def _ffn(module: str, p: str) -> dict[str, str]:
    return (_linear(f"{module}.ffn.fc1", f"{p}_ffn_W1", f"{p}_ffn_b1")
            | _linear(f"{module}.ffn.fc2", f"{p}_ffn_W2", f"{p}_ffn_b2")
            | {f"{module}.final_layer_norm.weight": f"{p}_ffn_ffn_ln_scale",
               f"{module}.final_layer_norm.bias": f"{p}_ffn_ffn_ln_bias"})


def load_binary(path: str | os.PathLike) -> BergamotForConditionalGeneration:
    """The model in a Marian binary file, in float32, every tensor placed and none left over."""
    path = Path(path)
    tensors, model_yml = read(path)
    config = config_from(model_yml, str(path))
    model = BergamotForConditionalGeneration(config)
    own = model.state_dict()
    names = name_map(config)
    missing = sorted({n for n in names.values() if n not in tensors})
    unused = sorted(set(tensors) - set(names.values()))
    if missing or unused:
        layers = f"{config.encoder_layers}+{config.decoder_layers}-layer"
        raise BinaryModelError(f"{path}: tensors do not match the {layers} "
                               f"model its model.yml describes: missing {missing[:5]}, unused {unused[:5]}")
    with torch.no_grad():
        for key, name in names.items():
            value = tensors[name]
            # Marian multiplies x W with W [in, out]; nn.Linear keeps [out, in]. Vectors are [1, n].
            if name != "Wemb":  # the embedding is [vocab, d] as nn.Embedding keeps it
                value = value.reshape(-1) if value.shape[0] == 1 else value.T
            if value.shape != own[key].shape:
                raise BinaryModelError(f"{path}: {name} has shape {tuple(tensors[name].shape)}, the model needs "
                                       f"{tuple(own[key].shape)} for {key}")
            own[key].copy_(value)
    return model.eval()


def tokenizer(folder: Path):
    """The model's SentencePiece vocabulary as a fast tokenizer (``tokenizer.json`` beside the model)."""
    from transformers import PreTrainedTokenizerFast

    file = folder / "tokenizer.json"
    if not file.is_file():
        raise BinaryModelError(f"{folder}: no tokenizer.json beside the model (its SentencePiece vocabulary as a "
                               "tokenizers file)")
    return PreTrainedTokenizerFast(tokenizer_file=str(file), eos_token=EOS, unk_token=UNK, pad_token=EOS)


def convert(folder: str | os.PathLike, out: str | os.PathLike) -> None:
    """Write the Bergamot model of ``folder`` as a transformers folder (safetensors, config, tokenizer) in ``out``."""
    folder, out = Path(folder), Path(out)
    model = load_binary(model_file(folder))
    tok = tokenizer(folder)
    if tok.convert_tokens_to_ids(EOS) != model.config.eos_token_id or len(tok) != model.config.vocab_size:
        raise BinaryModelError(f"{folder}: the tokenizer ({len(tok)} tokens, {EOS} = {tok.convert_tokens_to_ids(EOS)})"
                               f" does not fit the model ({model.config.vocab_size} tokens, eos "
                               f"{model.config.eos_token_id})")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
