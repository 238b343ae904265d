"""Tiny random-weight transformers 4.52.4 models NOT in mend's catalogue (helper-69 sweep).

Each build_x() returns (model, args) or (model, args, kwargs)
nothing is downloaded.
"""
import torch
import transformers as T

V = 99  # small vocab


def _ids(b=1, n=8, v=V, seed=0, lo=3):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, v, (b, n), generator=g)


def _img(c=3, h=32, w=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, c, h, w, generator=g)


def _init():
    torch.manual_seed(0)


# ---------------- seq2seq ----------------
def build_prophetnet():
    _init()
    cfg = T.ProphetNetConfig(vocab_size=V, hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
                             num_encoder_layers=2, num_decoder_layers=2, num_encoder_attention_heads=4,
                             num_decoder_attention_heads=4, ngram=2, num_buckets=8, relative_max_distance=16,
                             max_position_embeddings=64, pad_token_id=0, use_cache=False)
    m = T.ProphetNetForConditionalGeneration(cfg).eval()
    return m, (), {"input_ids": _ids(), "decoder_input_ids": _ids(seed=1)}


def build_fsmt():
    _init()
    cfg = T.FSMTConfig(langs=["en", "de"], src_vocab_size=V, tgt_vocab_size=V, d_model=32,
                       encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                       encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1,
                       use_cache=False)
    m = T.FSMTForConditionalGeneration(cfg).eval()
    return m, (), {"input_ids": _ids(), "decoder_input_ids": _ids(seed=1)}


def build_m2m_100():
    _init()
    cfg = T.M2M100Config(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                         decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                         max_position_embeddings=64, pad_token_id=1, use_cache=False)
    m = T.M2M100ForConditionalGeneration(cfg).eval()
    return m, (), {"input_ids": _ids(), "decoder_input_ids": _ids(seed=1)}


def build_nllb_moe():
    _init()
    cfg = T.NllbMoeConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                          decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_experts=4,
                          expert_capacity=8, encoder_sparse_step=2, decoder_sparse_step=2,
                          max_position_embeddings=64, pad_token_id=1, use_cache=False)
    m = T.NllbMoeForConditionalGeneration(cfg).eval()
    return m, (), {"input_ids": _ids(), "decoder_input_ids": _ids(seed=1)}


def build_mt5():
    _init()
    cfg = T.MT5Config(vocab_size=V, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, use_cache=False)
    m = T.MT5ForConditionalGeneration(cfg).eval()
    return m, (), {"input_ids": _ids(), "decoder_input_ids": _ids(seed=1)}


# ---------------- encoders ----------------
def build_xlnet():
    _init()
    cfg = T.XLNetConfig(vocab_size=V, d_model=32, n_layer=2, n_head=4, d_inner=64, mem_len=None, use_mems_eval=False)
    m = T.XLNetLMHeadModel(cfg).eval()
    return m, (_ids(),)


def build_funnel():
    _init()
    cfg = T.FunnelConfig(vocab_size=V, block_sizes=[1, 1], num_decoder_layers=1, d_model=32, n_head=4, d_head=8,
                         d_inner=64, max_position_embeddings=64)
    m = T.FunnelModel(cfg).eval()
    return m, (_ids(),)


def build_deberta_v2():
    _init()
    cfg = T.DebertaV2Config(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=64, max_position_embeddings=64, relative_attention=True,
                            position_buckets=16, pos_att_type=["p2c", "c2p"], max_relative_positions=32)
    m = T.DebertaV2Model(cfg).eval()
    return m, (_ids(),)


def build_mpnet():
    _init()
    cfg = T.MPNetConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=64, relative_attention_num_buckets=32)
    m = T.MPNetModel(cfg).eval()
    return m, (_ids(),)


# ---------------- decoders ----------------
def build_gptj():
    _init()
    cfg = T.GPTJConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=4, rotary_dim=4, n_positions=64, use_cache=False)
    m = T.GPTJForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_gpt_neox():
    _init()
    cfg = T.GPTNeoXConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=64, max_position_embeddings=64, use_cache=False)
    m = T.GPTNeoXForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_bloom():
    _init()
    cfg = T.BloomConfig(vocab_size=V, hidden_size=32, n_layer=2, n_head=4, use_cache=False)
    m = T.BloomForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_falcon():
    _init()
    cfg = T.FalconConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                         new_decoder_architecture=False, multi_query=True, alibi=False, use_cache=False)
    m = T.FalconForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_opt():
    _init()
    cfg = T.OPTConfig(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                      max_position_embeddings=64, word_embed_proj_dim=32, use_cache=False)
    m = T.OPTForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_mixtral():
    _init()
    cfg = T.MixtralConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                          max_position_embeddings=64, use_cache=False)
    m = T.MixtralForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_qwen2_moe():
    _init()
    cfg = T.Qwen2MoeConfig(vocab_size=V, hidden_size=32, intermediate_size=64, moe_intermediate_size=32,
                           shared_expert_intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, max_position_embeddings=64,
                           use_cache=False)
    m = T.Qwen2MoeForCausalLM(cfg).eval()
    return m, (_ids(),)


# ---------------- audio ----------------
def _wave(n=400, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, n, generator=g)


_CONV = dict(conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8,
             num_conv_pos_embedding_groups=4)


def build_wav2vec2():
    _init()
    cfg = T.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           vocab_size=V, **_CONV)
    m = T.Wav2Vec2ForCTC(cfg).eval()
    return m, (_wave(),)


def build_sew():
    _init()
    cfg = T.SEWConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                      squeeze_factor=2, vocab_size=V, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                      num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4)
    m = T.SEWModel(cfg).eval()
    return m, (_wave(),)


def build_speecht5():
    _init()
    cfg = T.SpeechT5Config(vocab_size=V, hidden_size=32, encoder_layers=2, decoder_layers=2,
                           encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                           decoder_ffn_dim=64, conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
                           num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4,
                           max_speech_positions=200, max_text_positions=64, use_cache=False)
    m = T.SpeechT5ForSpeechToText(cfg).eval()
    return m, (), {"input_values": _wave(), "decoder_input_ids": _ids(seed=1)}


# ---------------- vision ----------------
def build_swin():
    _init()
    cfg = T.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
                       mlp_ratio=2.0)
    m = T.SwinModel(cfg).eval()
    return m, (_img(),)


def build_detr():
    _init()
    bb = T.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                        out_features=["stage1", "stage2"])
    cfg = T.DetrConfig(use_timm_backbone=False, backbone_config=bb, use_pretrained_backbone=False, d_model=32,
                       encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                       encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=5, num_labels=3)
    m = T.DetrForObjectDetection(cfg).eval()
    return m, (), {"pixel_values": _img(h=64, w=64)}


# ---------------- multimodal ----------------
def build_blip():
    _init()
    cfg = T.BlipConfig(
        text_config=dict(vocab_size=V, hidden_size=32, encoder_hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=64,
                         projection_dim=32, use_cache=False),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8, projection_dim=32),
        projection_dim=32)
    m = T.BlipForConditionalGeneration(cfg).eval()
    return m, (), {"pixel_values": _img(), "input_ids": _ids()}


def build_clip():
    _init()
    cfg = T.CLIPConfig(
        text_config=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=64, projection_dim=32),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8, projection_dim=32),
        projection_dim=32)
    m = T.CLIPModel(cfg).eval()
    return m, (), {"input_ids": _ids(b=2), "pixel_values": _img()}


def build_git():
    _init()
    cfg = T.GitConfig(
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8),
        vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=64, use_cache=False)
    m = T.GitForCausalLM(cfg).eval()
    return m, (), {"input_ids": _ids(), "pixel_values": _img()}


# ---------------- batch 2 (chosen after batch 1 showed most models clean) ----------------
def build_wavlm():
    _init()
    cfg = T.WavLMConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                        vocab_size=V, num_buckets=16, max_bucket_distance=32, **_CONV)
    m = T.WavLMModel(cfg).eval()
    return m, (_wave(),)


def build_esm():
    _init()
    cfg = T.EsmConfig(vocab_size=33, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=64, max_position_embeddings=64, position_embedding_type="rotary",
                      pad_token_id=1, mask_token_id=32, token_dropout=True)
    m = T.EsmForMaskedLM(cfg).eval()
    return m, (_ids(v=30, lo=4),)


def build_canine():
    _init()
    cfg = T.CanineConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                         max_position_embeddings=256, downsampling_rate=2, num_hash_functions=2,
                         num_hash_buckets=64, local_transformer_stride=4)
    m = T.CanineModel(cfg).eval()
    return m, (_ids(n=16, v=200),)


def build_perceiver():
    _init()
    cfg = T.PerceiverConfig(num_latents=8, d_latents=32, d_model=32, num_blocks=1, num_self_attends_per_block=2,
                            num_self_attention_heads=4, num_cross_attention_heads=4, vocab_size=V,
                            max_position_embeddings=64)
    m = T.PerceiverForMaskedLM(cfg).eval()
    return m, (), {"inputs": _ids(n=16)}


def build_luke():
    _init()
    cfg = T.LukeConfig(vocab_size=V, entity_vocab_size=20, hidden_size=32, entity_emb_size=16, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64, max_position_embeddings=64)
    m = T.LukeModel(cfg).eval()
    return m, (), {"input_ids": _ids(), "entity_ids": torch.tensor([[3, 5]]),
                   "entity_position_ids": torch.tensor([[[1, 2, -1], [4, 5, 6]]])}


def build_gpt_bigcode():
    _init()
    cfg = T.GPTBigCodeConfig(vocab_size=V, n_embd=32, n_layer=2, n_head=4, n_positions=64, use_cache=False)
    m = T.GPTBigCodeForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_olmoe():
    _init()
    cfg = T.OlmoeConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                        max_position_embeddings=64, use_cache=False)
    m = T.OlmoeForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_mamba():
    _init()
    cfg = T.MambaConfig(vocab_size=V, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2, conv_kernel=4,
                        use_cache=False)
    m = T.MambaForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_jamba():
    _init()
    cfg = T.JambaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                        expert_layer_period=2, expert_layer_offset=1, attn_layer_period=2, attn_layer_offset=1,
                        mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, use_mamba_kernels=False,
                        max_position_embeddings=64, use_cache=False)
    m = T.JambaForCausalLM(cfg).eval()
    return m, (_ids(),)


def build_speech_to_text():
    _init()
    cfg = T.Speech2TextConfig(vocab_size=V, d_model=32, encoder_layers=2, decoder_layers=2,
                              encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                              decoder_ffn_dim=64, input_feat_per_channel=16, num_conv_layers=2,
                              conv_channels=32, max_source_positions=64, max_target_positions=64, use_cache=False)
    m = T.Speech2TextForConditionalGeneration(cfg).eval()
    g = torch.Generator().manual_seed(0)
    return m, (), {"input_features": torch.randn(1, 40, 16, generator=g), "decoder_input_ids": _ids(seed=1)}


def build_beit():
    _init()
    cfg = T.BeitConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, use_relative_position_bias=True, use_mean_pooling=True)
    m = T.BeitModel(cfg).eval()
    return m, (_img(),)


def build_deformable_detr():
    _init()
    bb = T.ResNetConfig(num_channels=3, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
                        out_features=["stage1", "stage2"])
    cfg = T.DeformableDetrConfig(use_timm_backbone=False, backbone=None, backbone_config=bb, use_pretrained_backbone=False,
                                 d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                                 decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=5,
                                 num_labels=3, num_feature_levels=2, encoder_n_points=2, decoder_n_points=2,
                                 disable_custom_kernels=True)
    m = T.DeformableDetrForObjectDetection(cfg).eval()
    return m, (), {"pixel_values": _img(h=64, w=64)}


def build_owlvit():
    _init()
    cfg = T.OwlViTConfig(
        text_config=dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=16),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8),
        projection_dim=32)
    m = T.OwlViTForObjectDetection(cfg).eval()
    return m, (), {"input_ids": _ids(b=2), "pixel_values": _img()}


def build_kosmos2():
    _init()
    cfg = T.Kosmos2Config(
        text_config=dict(vocab_size=V, embed_dim=32, layers=2, attention_heads=4, ffn_dim=64,
                         max_position_embeddings=64, use_cache=False),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                           image_size=32, patch_size=8),
        latent_query_num=4)
    m = T.Kosmos2ForConditionalGeneration(cfg).eval()
    ids = _ids(n=12)
    mask = torch.zeros_like(ids)
    mask[:, 1:5] = 1
    return m, (), {"pixel_values": _img(), "input_ids": ids, "image_embeds_position_mask": mask}



# ---------------- batch 3: padded-input variants of clean rows ----------------
def _padmask(n=8, pad=2):
    m = torch.ones(1, n, dtype=torch.long)
    m[:, :pad] = 0
    return m


def build_opt_padded():
    m, a = build_opt()
    return m, (), {"input_ids": a[0], "attention_mask": _padmask()}


def build_bloom_padded():
    m, a = build_bloom()
    return m, (), {"input_ids": a[0], "attention_mask": _padmask()}


def build_wav2vec2_padded():
    _init()
    cfg = T.Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                           vocab_size=V, feat_extract_norm="layer", do_stable_layer_norm=True, **_CONV)
    m = T.Wav2Vec2ForCTC(cfg).eval()
    am = torch.ones(1, 400, dtype=torch.long)
    am[:, 300:] = 0
    return m, (), {"input_values": _wave(), "attention_mask": am}


def build_fsmt_padded():
    m, a, kw = build_fsmt()
    kw = dict(kw)
    d = kw["decoder_input_ids"].clone()
    d[0, -2:] = 1
    kw["decoder_input_ids"] = d
    return m, (), kw

ALL = [n[6:] for n in list(globals()) if n.startswith("build_")]

if __name__ == "__main__":
    import sys
    names = sys.argv[1:] or ALL
    for n in names:
        try:
            r = globals()["build_" + n]()
            m, a = r[0], r[1]
            kw = r[2] if len(r) > 2 else {}
            with torch.no_grad():
                o = m(*a, **kw)
            print("OK", n, type(m).__name__, type(o).__name__)
        except Exception as e:
            print("FAIL", n, type(e).__name__, str(e)[:300])
