"""An off-catalogue check of constant-buffer (2026-12-04): transformers 5.25's MimiModel, tiny
config, random weights, in benchmarks/.venv-newest. Measured with

    cd docs/research && PYTHONPATH=/work/main:. ../../benchmarks/.venv-newest/bin/python -m mend.cli \
        fix mimi_target:build --unsafe-fixes --json

23 -> 1 graphs; the rewrite is unsafe: MimiModel's streaming path keeps a buffer in a list
(``per_layer_padding``) that the write screen does not follow."""
import torch


def build():
    import transformers as tf
    torch.manual_seed(0)
    cfg = tf.MimiConfig(sampling_rate=2000, hidden_size=32, num_filters=8, upsampling_ratios=[4, 2], codebook_size=32,
                        codebook_dim=16, num_quantizers=2, vector_quantization_hidden_dimension=16, upsample_groups=32,
                        num_hidden_layers=1, intermediate_size=32, num_attention_heads=2, num_key_value_heads=2,
                        max_position_embeddings=64, sliding_window=16, frame_rate=125.0)
    model = tf.MimiModel(cfg).eval()
    g = torch.Generator().manual_seed(0)
    return model, (), {"input_values": torch.randn(1, 1, 200, generator=g)}
