"""Small transformers models for the newest transformers release (``hf:newest/NAME``).

A second, separate catalogue beside :mod:`mend.targets.hf` (whose rows reproduce the
GraphMend paper on transformers 4.52.4 and are tested as such). These rows are the models
that still break on the newest transformers release (issue 5): deberta, longformer, led,
big_bird, bigbird_pegasus, ctrl and reformer. They are meant to be built inside the
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
