"""Small transformers models for the newest transformers release (``hf:newest/NAME``).

A second, separate catalogue beside :mod:`mend.targets.hf` (whose rows reproduce the
GraphMend paper on transformers 4.52.4 and are tested as such). These rows are the models
that still break on the newest transformers release: deberta, longformer, led, big_bird,
bigbird_pegasus, ctrl and reformer (issue 5), and xlm, flaubert, llava, paligemma, qwen2_vl,
switch_transformers, vilt and encodec (issue 10: vision-language, audio, MoE). They are meant to be built inside the
separate environment that ``benchmarks/run_newest.py`` creates (``benchmarks/.venv-newest``,
newest transformers from PyPI, torch 2.13.0 CPU), though they build with 4.52.4 too.

As in :mod:`mend.targets.hf`: tiny configs, random weights from ``torch.manual_seed(0)``,
nothing downloaded (no ``from_pretrained``, no tokenizers), int64 token ids drawn from
[3, 128) with a seeded ``torch.Generator``, batch 1, keyword inputs, eval mode. Sequence
lengths are chosen so that the code paths the full-size models take at inference run
(longformer/led: padding to the attention window; big_bird/bigbird_pegasus: long enough
for block-sparse attention; reformer: a multiple of the chunk lengths). No expected
break counts are recorded here: they are what the benchmark measures, and they change
with each transformers release.

Use it as ``mend scan hf:newest/deberta`` / ``mend fix hf:newest/deberta --out DIR``.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch

from mend.targets.hf import CatalogueUnavailable, UnknownTarget

__all__ = ["NEWEST", "NewestEntry", "PREFIX", "build"]

PREFIX = "newest/"   # hf:newest/NAME
SEED = 0
VOCAB = 128


@dataclass(frozen=True)
class NewestEntry:
    name: str
    model_class: str
    description: str


def _ids(length: int, seed: int = SEED) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB, (1, length), generator=gen, dtype=torch.long)


def _deberta(tf: Any):
    cfg = tf.DebertaConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=128, max_position_embeddings=64, relative_attention=True,
                           pos_att_type=["c2p", "p2c"], max_relative_positions=-1)
    return tf.DebertaModel(cfg), {"input_ids": _ids(8)}


def _longformer(tf: Any):
    cfg = tf.LongformerConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                              intermediate_size=128, max_position_embeddings=512, attention_window=8)
    # length 20 is not a multiple of the window: the padding path runs
    return tf.LongformerModel(cfg), {"input_ids": _ids(20)}


def _led(tf: Any):
    cfg = tf.LEDConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
                       decoder_ffn_dim=128, max_encoder_position_embeddings=64,
                       max_decoder_position_embeddings=64, attention_window=8)
    return tf.LEDModel(cfg), {"input_ids": _ids(20), "decoder_input_ids": _ids(8, SEED + 1)}


def _big_bird(tf: Any):
    # block-sparse attention needs seq_len > (5 + 2 * num_random_blocks) * block_size = 36
    cfg = tf.BigBirdConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=128, max_position_embeddings=128, attention_type="block_sparse",
                           block_size=4, num_random_blocks=2)
    return tf.BigBirdModel(cfg), {"input_ids": _ids(64)}


def _bigbird_pegasus(tf: Any):
    cfg = tf.BigBirdPegasusConfig(vocab_size=VOCAB, d_model=64, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=128,
                                  decoder_ffn_dim=128, max_position_embeddings=128,
                                  attention_type="block_sparse", block_size=4, num_random_blocks=2)
    return tf.BigBirdPegasusModel(cfg), {"input_ids": _ids(64), "decoder_input_ids": _ids(8, SEED + 1)}


def _ctrl(tf: Any):
    cfg = tf.CTRLConfig(vocab_size=VOCAB, n_positions=64, n_embd=64, dff=128, n_layer=2, n_head=2)
    return tf.CTRLLMHeadModel(cfg), {"input_ids": _ids(8)}


def _reformer(tf: Any):
    cfg = tf.ReformerConfig(vocab_size=VOCAB, hidden_size=64, num_attention_heads=2, attention_head_size=32,
                            attn_layers=["local", "lsh"], feed_forward_size=128, axial_pos_embds=True,
                            axial_pos_shape=[8, 8], axial_pos_embds_dim=[32, 32], max_position_embeddings=64,
                            local_attn_chunk_length=8, lsh_attn_chunk_length=8, num_buckets=4, num_hashes=1,
                            is_decoder=True, pad_token_id=0, eos_token_id=2)
    return tf.ReformerModelWithLMHead(cfg), {"input_ids": _ids(16)}


IMAGE_TOKEN = VOCAB - 1   # 127, never drawn by _ids_with_image for text positions


def _text_ids(length: int, seed: int = SEED) -> torch.Tensor:
    """Like ``_ids`` but from [3, VOCAB - 1): the image token never occurs by chance."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, VOCAB - 1, (1, length), generator=gen, dtype=torch.long)


def _ids_with_image(n_image: int, n_text: int, seed: int = SEED, image_first: bool = False) -> torch.Tensor:
    """``n_image`` image tokens followed (``image_first``) or preceded by ``n_text`` text ids:
    one text id, the image block, then the rest (llava/qwen2_vl style), or the image block
    then the text (paligemma style)."""
    text = _text_ids(n_text, seed)
    img = torch.full((1, n_image), IMAGE_TOKEN, dtype=torch.long)
    if image_first:
        return torch.cat([img, text], dim=1)
    return torch.cat([text[:, :1], img, text[:, 1:]], dim=1)


def _pixels(*shape: int, seed: int = SEED) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen)


def _xlm(tf: Any):
    cfg = tf.XLMConfig(vocab_size=VOCAB, emb_dim=64, n_layers=2, n_heads=2, max_position_embeddings=64,
                       dropout=0.0, attention_dropout=0.0)
    return tf.XLMModel(cfg), {"input_ids": _ids(8)}


def _flaubert(tf: Any):
    cfg = tf.FlaubertConfig(vocab_size=VOCAB, emb_dim=64, n_layers=2, n_heads=2, max_position_embeddings=64,
                            dropout=0.0, attention_dropout=0.0)
    return tf.FlaubertModel(cfg), {"input_ids": _ids(8)}


def _llava(tf: Any):
    # CLIP vision tower: 16x16 image, patch 4 -> 16 patches (+ CLS, dropped by the "default"
    # feature strategy) -> 16 image tokens in input_ids
    vision = tf.CLIPVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=2, image_size=16, patch_size=4, projection_dim=64)
    text = tf.LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    cfg = tf.LlavaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                         image_seq_length=16, vision_feature_layer=-2,
                         vision_feature_select_strategy="default")
    return tf.LlavaForConditionalGeneration(cfg), {"input_ids": _ids_with_image(16, 8),
                                                   "pixel_values": _pixels(1, 3, 16, 16)}


def _paligemma(tf: Any):
    # SigLIP vision tower: 16x16 image, patch 4 -> 16 image tokens, placed first (PaliGemma's prompt layout)
    vision = tf.SiglipVisionConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=2, image_size=16, patch_size=4)
    text = tf.GemmaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=64)
    cfg = tf.PaliGemmaConfig(vision_config=vision, text_config=text, image_token_index=IMAGE_TOKEN,
                             vocab_size=VOCAB, projection_dim=64, hidden_size=64)
    return tf.PaliGemmaForConditionalGeneration(cfg), {"input_ids": _ids_with_image(16, 8, image_first=True),
                                                       "pixel_values": _pixels(1, 3, 16, 16)}


def _qwen2_vl(tf: Any):
    # one image of grid (t, h, w) = (1, 4, 4) patches of 3 x 2 (temporal) x 4 x 4 values;
    # spatial merge 2 -> 4 image tokens. mm_token_type_ids (1 on image tokens) is required
    # by transformers 5 whenever image_grid_thw is given (M-RoPE positions).
    vision = dict(depth=2, embed_dim=64, hidden_size=64, num_heads=2, mlp_ratio=2, in_channels=3,
                  patch_size=4, spatial_merge_size=2, temporal_patch_size=2)
    text = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                bos_token_id=1, eos_token_id=2,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]})
    model_cls = tf.Qwen2VLForConditionalGeneration
    takes_mm_types = "mm_token_type_ids" in inspect.signature(model_cls.forward).parameters
    if not takes_mm_types:  # transformers 4.x: M-RoPE sections in rope_scaling, no mm_token_type_ids
        text = dict(text, rope_scaling={"type": "mrope", "mrope_section": [4, 6, 6]})
        del text["rope_parameters"]
    cfg = tf.Qwen2VLConfig(vision_config=vision, text_config=text, image_token_id=IMAGE_TOKEN,
                           video_token_id=IMAGE_TOKEN - 1, vision_start_token_id=1, vision_end_token_id=2)
    input_ids = _ids_with_image(4, 8)
    input_ids[input_ids == IMAGE_TOKEN - 1] = 3   # the video token must not occur in the text either
    grid = torch.tensor([[1, 4, 4]], dtype=torch.long)
    kwargs = {"input_ids": input_ids, "pixel_values": _pixels(16, 3 * 2 * 4 * 4), "image_grid_thw": grid}
    if takes_mm_types:
        kwargs["mm_token_type_ids"] = (input_ids == IMAGE_TOKEN).to(torch.int32)
    return model_cls(cfg), kwargs


def _switch_transformers(tf: Any):
    # 2+2 layers, every second one sparse (4 experts, top-1 routing), expert capacity 8
    cfg = tf.SwitchTransformersConfig(vocab_size=VOCAB, d_model=64, d_kv=32, d_ff=128, num_layers=2,
                                      num_decoder_layers=2, num_heads=2, num_experts=4, expert_capacity=8,
                                      num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
                                      dropout_rate=0.0, router_jitter_noise=0.0,
                                      relative_attention_num_buckets=8, relative_attention_max_distance=16)
    return tf.SwitchTransformersModel(cfg), {"input_ids": _ids(8), "decoder_input_ids": _ids(8, SEED + 1)}


def _vilt(tf: Any):
    # 32x32 image, patch 8 -> 16 patches; text of 8 tokens
    cfg = tf.ViltConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=128, max_position_embeddings=16, image_size=32, patch_size=8)
    return tf.ViltModel(cfg), {"input_ids": _ids(8), "pixel_values": _pixels(1, 3, 32, 32)}


def _encodec(tf: Any):
    # hop 8 (ratios 4, 2), 2 kHz, 64-entry codebooks: 1 quantizer at the default 1.5 kbps
    cfg = tf.EncodecConfig(hidden_size=64, num_filters=8, num_residual_layers=1, upsampling_ratios=[4, 2],
                           sampling_rate=2000, target_bandwidths=[1.5, 3.0], codebook_size=64,
                           num_lstm_layers=2, kernel_size=7, last_kernel_size=7, residual_kernel_size=3)
    return tf.EncodecModel(cfg), {"input_values": _pixels(1, 1, 200)}


_ROWS: list[tuple[NewestEntry, Callable]] = [
    (NewestEntry("deberta", "DebertaModel",
                 "DeBERTa, 2 layers, hidden 64, relative attention (c2p+p2c); input_ids (1, 8)"), _deberta),
    (NewestEntry("longformer", "LongformerModel",
                 "Longformer, 2 layers, hidden 64, window 8; input_ids (1, 20) (padding path)"), _longformer),
    (NewestEntry("led", "LEDModel",
                 "LED encoder-decoder, 2+2 layers, d_model 64, window 8; input_ids (1, 20) + decoder_input_ids (1, 8)"),
     _led),
    (NewestEntry("big_bird", "BigBirdModel",
                 "BigBird, 2 layers, hidden 64, block-sparse (block 4, 2 random blocks); input_ids (1, 64)"),
     _big_bird),
    (NewestEntry("bigbird_pegasus", "BigBirdPegasusModel",
                 "BigBird-Pegasus, 2+2 layers, d_model 64, block-sparse encoder; input_ids (1, 64) + "
                 "decoder_input_ids (1, 8)"), _bigbird_pegasus),
    (NewestEntry("ctrl", "CTRLLMHeadModel", "CTRL LM, 2 layers, n_embd 64; input_ids (1, 8)"), _ctrl),
    (NewestEntry("reformer", "ReformerModelWithLMHead",
                 "Reformer LM (local + LSH attention layers), hidden 64, chunks 8; input_ids (1, 16)"), _reformer),
    (NewestEntry("xlm", "XLMModel", "XLM, 2 layers, emb_dim 64; input_ids (1, 8)"), _xlm),
    (NewestEntry("flaubert", "FlaubertModel", "FlauBERT, 2 layers, emb_dim 64; input_ids (1, 8)"), _flaubert),
    (NewestEntry("llava", "LlavaForConditionalGeneration",
                 "LLaVA: CLIP vision 2 layers (16x16 image, patch 4) + Llama 2 layers, hidden 64; "
                 "input_ids (1, 24) with 16 image tokens + pixel_values (1, 3, 16, 16)"), _llava),
    (NewestEntry("paligemma", "PaliGemmaForConditionalGeneration",
                 "PaliGemma: SigLIP vision 2 layers (16x16 image, patch 4) + Gemma 2 layers, hidden 64; "
                 "input_ids (1, 24) with 16 leading image tokens + pixel_values (1, 3, 16, 16)"), _paligemma),
    (NewestEntry("qwen2_vl", "Qwen2VLForConditionalGeneration",
                 "Qwen2-VL: vision 2 layers (grid 1x4x4, patch 4, merge 2) + text 2 layers, hidden 64; "
                 "input_ids (1, 12) with 4 image tokens + pixel_values (16, 96) + image_grid_thw + "
                 "mm_token_type_ids"), _qwen2_vl),
    (NewestEntry("switch_transformers", "SwitchTransformersModel",
                 "Switch Transformers, 2+2 layers (1 sparse each), d_model 64, 4 experts; input_ids (1, 8) + "
                 "decoder_input_ids (1, 8)"), _switch_transformers),
    (NewestEntry("vilt", "ViltModel",
                 "ViLT, 2 layers, hidden 64, 32x32 image, patch 8; input_ids (1, 8) + pixel_values (1, 3, 32, 32)"),
     _vilt),
    (NewestEntry("encodec", "EncodecModel",
                 "EnCodec, hidden 64, 8 filters, ratios (4, 2), 2-layer LSTM, 1 quantizer; input_values (1, 1, 200)"),
     _encodec),
]

NEWEST: dict[str, NewestEntry] = {e.name: e for e, _ in _ROWS}
_BUILDERS = {e.name: b for e, b in _ROWS}


def build(name: str) -> tuple[torch.nn.Module, tuple, dict]:
    """Build row ``name`` (without the ``newest/`` prefix): ``(model, (), kwargs)``, eval mode.

    Raises :class:`~mend.targets.hf.UnknownTarget` or
    :class:`~mend.targets.hf.CatalogueUnavailable` like :func:`mend.targets.hf.build`.
    """
    if name not in NEWEST:
        raise UnknownTarget(f"unknown target 'newest/{name}'; known: "
                            + ", ".join(PREFIX + n for n in NEWEST))
    entry = NEWEST[name]
    try:
        import transformers
    except ImportError as exc:
        raise CatalogueUnavailable(f"target 'newest/{name}' needs the transformers package") from exc
    if not hasattr(transformers, entry.model_class):
        raise CatalogueUnavailable(f"target 'newest/{name}': transformers {transformers.__version__} "
                                   f"has no {entry.model_class}")
    torch.manual_seed(SEED)
    try:
        model, kwargs = _BUILDERS[name](transformers)
    except (TypeError, ValueError, KeyError, AttributeError, ImportError) as exc:
        raise CatalogueUnavailable(f"target 'newest/{name}' cannot be built with transformers "
                                   f"{transformers.__version__}: {type(exc).__name__}: {exc}") from exc
    return model.eval(), (), kwargs
