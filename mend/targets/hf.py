"""Built-in catalogue of small Hugging Face transformers models.

Each row builds a transformers model from a tiny config with random weights
(nothing is downloaded: no ``from_pretrained``, no tokenizers) together with
one fixed input, chosen so that TorchDynamo hits the same graph breaks as the
full-size model in the GraphMend paper (arXiv 2509.16248).  The configs and
inputs come from ``shared/notes/paper-rows.md``; the expected counts were
measured with torch 2.13.0 (CPU) and transformers 4.52.4.

Unless a row says otherwise, inputs are batch 1, length 8, int64 token ids
drawn from [3, 128) with a ``torch.Generator`` seeded with 0, passed as
keyword arguments; no attention mask is passed and ``use_cache`` keeps its
default.  Break counts depend on the code path the inputs take, so these
settings matter.  Typical use::

    model, args, kwargs = build("t5")
    with torch.no_grad():
        ex = torch._dynamo.explain(model)(*args, **kwargs)
    ex.graph_break_count  # == CATALOGUE["t5"].expected_breaks == 3
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

__all__ = [
    "CATALOGUE",
    "CatalogueEntry",
    "CatalogueUnavailable",
    "UnknownTarget",
    "build",
]

SEED = 0
BATCH = 1
SEQ_LEN = 8
VOCAB = 128


class UnknownTarget(ValueError):
    """Raised by :func:`build` for a name that is not in :data:`CATALOGUE`."""


class CatalogueUnavailable(RuntimeError):
    """Raised when a row cannot be built with the installed transformers."""


@dataclass(frozen=True)
class CatalogueEntry:
    """One catalogue row.

    ``paper_breaks`` is the GraphMend paper's published break count for the
    model (None where the paper has no comparable row); ``expected_breaks``
    is ``graph_break_count`` from ``torch._dynamo.explain`` with torch 2.13.0
    and transformers 4.52.4.
    """

    name: str
    model_class: str
    description: str
    paper_breaks: int | None
    expected_breaks: int


# --------------------------------------------------------------------------
# Inputs

def _token_ids(length: int = SEQ_LEN, low: int = 3, seed: int = SEED) -> torch.Tensor:
    """int64 ids of shape (BATCH, length) from [low, VOCAB).

    low=3 keeps clear of the pad/bos/eos ids (0..2) so no special-token path
    is taken by accident.
    """
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, VOCAB, (BATCH, length), generator=gen, dtype=torch.long)


def _seq2seq_inputs() -> dict[str, torch.Tensor]:
    # Different seeds so encoder and decoder see different sequences.
    return {"input_ids": _token_ids(seed=SEED), "decoder_input_ids": _token_ids(seed=SEED + 1)}


# --------------------------------------------------------------------------
# Row builders.  Each takes the transformers module and returns
# (model, kwargs); build() seeds, puts the model in eval mode and wraps errors.

Builder = Callable[[Any], "tuple[torch.nn.Module, dict[str, Any]]"]


def _bart_style_config(cfg_cls: Any, **extra: Any) -> Any:
    """The shared encoder-decoder config of bart, blenderbot and marian."""
    return cfg_cls(
        vocab_size=VOCAB,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=64,
        **extra,
    )


def _t5(tf: Any):
    cfg = tf.T5Config(vocab_size=VOCAB, d_model=64, d_ff=128, num_layers=2, num_heads=2, d_kv=32)
    return tf.T5ForConditionalGeneration(cfg), _seq2seq_inputs()


def _biogpt(tf: Any):
    cfg = tf.BioGptConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    return tf.BioGptForCausalLM(cfg), {"input_ids": _token_ids()}


def _blenderbot(tf: Any):
    cfg = _bart_style_config(tf.BlenderbotConfig)
    return tf.BlenderbotForConditionalGeneration(cfg), _seq2seq_inputs()


def _marian(tf: Any):
    cfg = _bart_style_config(tf.MarianConfig, decoder_start_token_id=2, pad_token_id=1)
    return tf.MarianMTModel(cfg), _seq2seq_inputs()


def _pegasus(tf: Any):
    cfg = tf.PegasusConfig(
        vocab_size=VOCAB,
        d_model=64,
        decoder_layers=2,
        decoder_attention_heads=2,
        decoder_ffn_dim=128,
        max_position_embeddings=64,
    )
    return tf.PegasusForCausalLM(cfg), {"input_ids": _token_ids()}


def _phi3(tf: Any):
    head_dim = 64 // 2
    # longrope wants one factor per rotary frequency: head_dim // 2 of them.
    # original_max_position_embeddings (16) > seq len (8), so the short
    # factors apply, but the choice is a data-dependent branch, which breaks.
    n = head_dim // 2
    cfg = tf.Phi3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        pad_token_id=0,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        original_max_position_embeddings=16,
        rope_scaling={"type": "longrope", "short_factor": [1.0] * n, "long_factor": [2.0] * n},
    )
    return tf.Phi3ForCausalLM(cfg), {"input_ids": _token_ids()}


def _whisper(tf: Any):
    cfg = tf.WhisperConfig(
        vocab_size=VOCAB,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        num_mel_bins=80,
        max_source_positions=64,
        max_target_positions=64,
        decoder_start_token_id=2,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    # The encoder's two convolutions (the second with stride 2) turn 128
    # frames into max_source_positions = 64 positions, as Whisper requires.
    gen = torch.Generator().manual_seed(SEED)
    features = torch.randn(BATCH, 80, 2 * 64, generator=gen)
    return tf.WhisperForConditionalGeneration(cfg), {
        "input_features": features,
        "decoder_input_ids": _token_ids(),
    }


def _bart(tf: Any):
    cfg = _bart_style_config(tf.BartConfig)
    return tf.BartForConditionalGeneration(cfg), _seq2seq_inputs()


def _bart_fp16(tf: Any):
    # In fp16 the encoder's overflow guard (isinf/isnan on the hidden states)
    # is no longer folded away by its dtype test, adding breaks.
    model, kwargs = _bart(tf)
    return model.half(), kwargs


def _layoutlmv3(tf: Any):
    cfg = tf.LayoutLMv3Config(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        max_2d_position_embeddings=1024,
        coordinate_size=8,
        shape_size=16,
        input_size=32,
        patch_size=16,
        visual_embed=False,
    )
    return tf.LayoutLMv3Model(cfg), {
        "input_ids": _token_ids(low=0),
        "bbox": torch.zeros(BATCH, SEQ_LEN, 4, dtype=torch.long),
    }


def _longformer(tf: Any):
    cfg = tf.LongformerConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=512,
        attention_window=8,
    )
    # Length 20 is not a multiple of the window, so the padding path (and its
    # logger call) runs.
    return tf.LongformerModel(cfg), {"input_ids": _token_ids(length=20)}


def _grounding_dino(tf: Any):
    # A tiny Swin backbone built in-process: no timm, no downloaded weights.
    backbone = tf.SwinConfig(
        image_size=32,
        patch_size=4,
        embed_dim=16,
        depths=[1, 1],
        num_heads=[1, 1],
        window_size=2,
        out_features=["stage1", "stage2"],
    )
    text = dict(
        model_type="bert",
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
    )
    cfg = tf.GroundingDinoConfig(
        backbone_config=backbone,
        use_timm_backbone=False,
        use_pretrained_backbone=False,
        text_config=text,
        d_model=64,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        num_queries=4,
        num_feature_levels=2,
    )
    gen = torch.Generator().manual_seed(SEED)
    pixels = torch.randn(BATCH, 3, 32, 32, generator=gen)
    return tf.GroundingDinoModel(cfg), {"pixel_values": pixels, "input_ids": _token_ids(low=0)}


# --------------------------------------------------------------------------
# The catalogue

_ROWS: list[tuple[CatalogueEntry, Builder]] = [
    (CatalogueEntry("t5", "T5ForConditionalGeneration",
                    "T5 encoder-decoder, 2+2 layers, d_model 64; input_ids + decoder_input_ids (1, 8)",
                    3, 3), _t5),
    (CatalogueEntry("biogpt", "BioGptForCausalLM",
                    "BioGPT causal LM, 2 layers, hidden 64; input_ids (1, 8)",
                    2, 2), _biogpt),
    (CatalogueEntry("blenderbot", "BlenderbotForConditionalGeneration",
                    "Blenderbot encoder-decoder, 2+2 layers, d_model 64; input_ids + decoder_input_ids (1, 8)",
                    3, 3), _blenderbot),
    (CatalogueEntry("marian", "MarianMTModel",
                    "Marian MT in fp32, 2+2 layers, d_model 64 (the paper's 6 breaks are an fp16 count)",
                    None, 3), _marian),
    (CatalogueEntry("pegasus", "PegasusForCausalLM",
                    "Pegasus decoder-only causal LM, 2 layers, d_model 64; input_ids (1, 8)",
                    2, 2), _pegasus),
    (CatalogueEntry("phi3", "Phi3ForCausalLM",
                    "Phi-3 causal LM with longrope scaling, 2 layers, hidden 64 (paper row: phi-4-mini)",
                    5, 5), _phi3),
    (CatalogueEntry("whisper", "WhisperForConditionalGeneration",
                    "Whisper, 2+2 layers, d_model 64; input_features (1, 80, 128) + decoder_input_ids (1, 8)",
                    3, 3), _whisper),
    (CatalogueEntry("bart", "BartForConditionalGeneration",
                    "BART in fp32, 2+2 layers, d_model 64 (the paper's count is for fp16: see bart@fp16)",
                    None, 3), _bart),
    (CatalogueEntry("bart@fp16", "BartForConditionalGeneration",
                    "BART as the bart row, cast to fp16 with .half(); int64 inputs unchanged",
                    7, 6), _bart_fp16),
    (CatalogueEntry("layoutlmv3", "LayoutLMv3Model",
                    "LayoutLMv3 text-only (visual_embed False), 2 layers, hidden 64; input_ids + zero bbox",
                    2, 2), _layoutlmv3),
    (CatalogueEntry("longformer", "LongformerModel",
                    "Longformer, 2 layers, hidden 64, window 8; input_ids (1, 20) to take the padding path",
                    5, 5), _longformer),
    (CatalogueEntry("grounding-dino", "GroundingDinoModel",
                    "Grounding DINO with tiny Swin backbone and BERT text encoder; pixel_values (1, 3, 32, 32) + input_ids",
                    17, 16), _grounding_dino),
]

CATALOGUE: dict[str, CatalogueEntry] = {entry.name: entry for entry, _ in _ROWS}
"""Every row by name; see :class:`CatalogueEntry`."""

_BUILDERS: dict[str, Builder] = {entry.name: builder for entry, builder in _ROWS}


def build(name: str) -> tuple[torch.nn.Module, tuple, dict]:
    """Build catalogue row ``name``; return ``(model, args, kwargs)``.

    The model is in eval mode with weights from ``torch.manual_seed(0)``, so
    two builds give bitwise-identical outputs.  ``args`` is always ``()``; the
    inputs are in ``kwargs``: int64 token ids of shape (1, 8) unless the row
    says otherwise (longformer (1, 20); whisper adds float32 input_features
    (1, 80, 128); layoutlmv3 adds an int64 bbox (1, 8, 4); grounding-dino adds
    float32 pixel_values (1, 3, 32, 32)).  Call it as
    ``model(*args, **kwargs)``, under ``torch.no_grad()`` for the published
    counts.  Configs follow ``shared/notes/paper-rows.md`` (paper: arXiv
    2509.16248).

    Raises :class:`UnknownTarget` for a name not in :data:`CATALOGUE`, and
    :class:`CatalogueUnavailable` when transformers is not installed or the
    installed version cannot build the row.
    """
    if name not in CATALOGUE:
        raise UnknownTarget(f"unknown target {name!r}; known targets: {', '.join(CATALOGUE)} (and newest/NAME for "
                            "the newest-transformers rows: mend scan --list-targets)")
    entry = CATALOGUE[name]

    # Imported here so that mend works without transformers installed.
    try:
        import transformers
    except ImportError as exc:
        raise CatalogueUnavailable(
            f"target {name!r} needs the transformers package, which is not installed"
        ) from exc
    if not hasattr(transformers, entry.model_class):
        raise CatalogueUnavailable(
            f"target {name!r}: transformers {transformers.__version__} has no {entry.model_class}"
        )

    torch.manual_seed(SEED)
    try:
        model, kwargs = _BUILDERS[name](transformers)
    except (TypeError, ValueError, KeyError, AttributeError, ImportError) as exc:
        # Typically a config field renamed or removed in a newer release.
        raise CatalogueUnavailable(
            f"target {name!r} cannot be built with transformers {transformers.__version__}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return model.eval(), (), kwargs
