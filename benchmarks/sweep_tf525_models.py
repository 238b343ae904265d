"""Factories for helper-77's sweep of transformers 5.25 models outside the catalogue
(`benchmarks/results/sweep_tf525.md`): `build_NAME()` returns `(model, args, kwargs)` with tiny
configs and random weights, in eval mode. Run in the newest-transformers venv
(`benchmarks/run_newest.py --env-only`), e.g. `mend scan sweep_tf525_models:build_gemma3` from
`benchmarks/`."""
import torch
import transformers as tf

V = 128
def ids(n, seed=0, lo=3, hi=V):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, (1, n), generator=g, dtype=torch.long)
def pix(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)
def _m(cls, cfg):
    torch.manual_seed(0)
    return cls(cfg).eval()
LL = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
          num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)

# ---------------- MoE ----------------
def build_mixtral():
    cfg = tf.MixtralConfig(**LL, num_local_experts=4, num_experts_per_tok=2)
    return _m(tf.MixtralForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_qwen2_moe():
    cfg = tf.Qwen2MoeConfig(**LL, moe_intermediate_size=32, shared_expert_intermediate_size=64, num_experts=4, num_experts_per_tok=2)
    return _m(tf.Qwen2MoeForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_qwen3_moe():
    cfg = tf.Qwen3MoeConfig(**LL, moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2, head_dim=32)
    return _m(tf.Qwen3MoeForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_olmoe():
    cfg = tf.OlmoeConfig(**LL, num_experts=4, num_experts_per_tok=2)
    return _m(tf.OlmoeForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_granitemoe():
    cfg = tf.GraniteMoeConfig(**LL, num_local_experts=4, num_experts_per_tok=2)
    return _m(tf.GraniteMoeForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_jamba():
    cfg = tf.JambaConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, num_experts=4, num_experts_per_tok=2,
                         attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
                         mamba_d_state=8, mamba_d_conv=4, mamba_expand=2, use_mamba_kernels=False)
    return _m(tf.JambaForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_dbrx():
    cfg = tf.DbrxConfig(d_model=64, n_heads=2, n_layers=2, max_seq_len=64, vocab_size=V,
                        attn_config={"kv_n_heads": 2}, ffn_config={"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 2})
    return _m(tf.DbrxForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_deepseek_v3():
    cfg = tf.DeepseekV3Config(vocab_size=V, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
                              num_hidden_layers=2, first_k_dense_replace=1, num_attention_heads=2, num_key_value_heads=2,
                              n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, n_shared_experts=1,
                              kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16,
                              max_position_embeddings=64)
    return _m(tf.DeepseekV3ForCausalLM, cfg), (), {"input_ids": ids(8)}
def build_nllb_moe():
    cfg = tf.NllbMoeConfig(vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_experts=4,
                           expert_capacity=8, encoder_sparse_step=2, decoder_sparse_step=2, max_position_embeddings=64)
    return _m(tf.NllbMoeModel, cfg), (), {"input_ids": ids(8), "decoder_input_ids": ids(8, 1)}
def build_jetmoe():
    cfg = tf.JetMoeConfig(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_key_value_heads=2, kv_channels=16,
                          intermediate_size=64, num_local_experts=4, num_experts_per_tok=2, max_position_embeddings=64)
    return _m(tf.JetMoeForCausalLM, cfg), (), {"input_ids": ids(8)}

# ---------------- audio ----------------
def build_whisper():
    cfg = tf.WhisperConfig(vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
                           max_source_positions=16, max_target_positions=32, decoder_start_token_id=1,
                           pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return _m(tf.WhisperModel, cfg), (), {"input_features": pix(1, 16, 32), "decoder_input_ids": ids(6)}
def build_wav2vec2_bert():
    cfg = tf.Wav2Vec2BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                feature_projection_input_dim=32, conv_depthwise_kernel_size=3, output_hidden_size=64)
    return _m(tf.Wav2Vec2BertModel, cfg), (), {"input_features": pix(1, 20, 32)}
def build_hubert():
    cfg = tf.HubertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                          conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                          num_conv_pos_embedding_groups=2)
    return _m(tf.HubertModel, cfg), (), {"input_values": pix(1, 400)}
def build_speecht5():
    cfg = tf.SpeechT5Config(vocab_size=V, hidden_size=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                            decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_text_positions=64,
                            max_speech_positions=64, num_mel_bins=16, speech_decoder_prenet_units=32,
                            speech_decoder_postnet_units=32, speech_decoder_postnet_layers=2, speaker_embedding_dim=16)
    return _m(tf.SpeechT5ForTextToSpeech, cfg), (), {"input_ids": ids(8), "decoder_input_values": pix(1, 4, 16),
                                                     "speaker_embeddings": pix(1, 16)}
def build_clap():
    text = dict(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    audio = dict(spec_size=64, patch_size=4, num_mel_bins=16, window_size=4, depths=[1, 1], num_attention_heads=[2, 2],
                 patch_embeds_hidden_size=16, hidden_size=32, projection_dim=32, enable_fusion=False, patch_stride=(4, 4))
    cfg = tf.ClapConfig(text_config=text, audio_config=audio, projection_dim=32)
    return _m(tf.ClapModel, cfg), (), {"input_ids": ids(8), "input_features": pix(1, 1, 64, 16)}
def build_musicgen():
    text = tf.T5Config(vocab_size=V, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2)
    audio = tf.EncodecConfig(codebook_size=32, hidden_size=16, num_filters=4, upsampling_ratios=[2, 2], codebook_dim=16)
    dec = tf.MusicgenDecoderConfig(vocab_size=32, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64, num_codebooks=2, max_position_embeddings=64)
    cfg = tf.MusicgenConfig(text_encoder=text, audio_encoder=audio, decoder=dec)
    return _m(tf.MusicgenForConditionalGeneration, cfg), (), {"input_ids": ids(6), "decoder_input_ids": ids(8, 1, 0, 32).reshape(2, 4)}
def build_mimi():
    cfg = tf.MimiConfig(hidden_size=32, num_filters=8, num_residual_layers=1, upsampling_ratios=[4, 2], codebook_size=32,
                        codebook_dim=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2, head_dim=16,
                        intermediate_size=64, num_quantizers=4, num_semantic_quantizers=1, sliding_window=16)
    return _m(tf.MimiModel, cfg), (), {"input_values": pix(1, 1, 480)}
def build_dac():
    cfg = tf.DacConfig(encoder_hidden_size=8, downsampling_ratios=[2, 2], decoder_hidden_size=16, n_codebooks=2,
                       codebook_size=32, codebook_dim=4, hidden_size=16, upsampling_ratios=[2, 2])
    return _m(tf.DacModel, cfg), (), {"input_values": pix(1, 1, 64)}
def build_seamless_m4t():
    cfg = tf.SeamlessM4TConfig(vocab_size=V, hidden_size=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                               decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, speech_encoder_layers=1,
                               speech_encoder_attention_heads=2, speech_encoder_intermediate_size=64, feature_projection_input_dim=32,
                               max_position_embeddings=64, t2u_encoder_layers=1, t2u_decoder_layers=1)
    return _m(tf.SeamlessM4TForTextToText, cfg), (), {"input_ids": ids(8), "decoder_input_ids": ids(6, 1)}

# ---------------- others ----------------
def build_funnel():
    cfg = tf.FunnelConfig(vocab_size=V, block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64, num_decoder_layers=1)
    return _m(tf.FunnelModel, cfg), (), {"input_ids": ids(8)}
def build_fsmt():
    cfg = tf.FSMTConfig(langs=["en", "de"], src_vocab_size=V, tgt_vocab_size=V, d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    return _m(tf.FSMTModel, cfg), (), {"input_ids": ids(8), "decoder_input_ids": ids(6, 1)}
def build_mobilebert():
    cfg = tf.MobileBertConfig(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                              embedding_size=32, intra_bottleneck_size=32, max_position_embeddings=64)
    return _m(tf.MobileBertModel, cfg), (), {"input_ids": ids(8)}
def build_perceiver():
    cfg = tf.PerceiverConfig(vocab_size=V, d_model=32, d_latents=32, num_latents=8, num_blocks=1, num_self_attends_per_block=1,
                             num_self_attention_heads=2, num_cross_attention_heads=2, max_position_embeddings=64)
    return _m(tf.PerceiverForMaskedLM, cfg), (), {"inputs": ids(8)}
def build_sam():
    vis = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=64, patch_size=16, output_channels=16,
               window_size=2, global_attn_indexes=[1], mlp_dim=64)
    pe = dict(hidden_size=16, image_size=64, patch_size=16, mask_input_channels=4, num_point_embeddings=4)
    md = dict(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, mlp_dim=32, iou_head_hidden_dim=16)
    cfg = tf.SamConfig(vision_config=vis, prompt_encoder_config=pe, mask_decoder_config=md)
    return _m(tf.SamModel, cfg), (), {"pixel_values": pix(1, 3, 64, 64), "input_points": torch.tensor([[[[10.0, 20.0]]]])}
def build_detr():
    cfg = tf.DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False,
                        backbone_config=tf.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], out_features=["stage2"]),
                        d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                        encoder_ffn_dim=32, decoder_ffn_dim=32, num_queries=5)
    return _m(tf.DetrModel, cfg), (), {"pixel_values": pix(1, 3, 32, 32)}
def build_dinov2():
    cfg = tf.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8)
    return _m(tf.Dinov2Model, cfg), (), {"pixel_values": pix(1, 3, 32, 32)}
def build_mask2former():
    cfg = tf.Mask2FormerConfig(backbone_config=tf.SwinConfig(embed_dim=16, depths=[1, 1, 1, 1], num_heads=[1, 1, 1, 1], image_size=64,
                               window_size=2, out_features=["stage1", "stage2", "stage3", "stage4"]),
                               hidden_dim=32, feature_size=32, mask_feature_size=32, encoder_layers=1, decoder_layers=2,
                               num_queries=4, encoder_feedforward_dim=32, dim_feedforward=32, num_attention_heads=2, num_labels=3,
                               use_pretrained_backbone=False)
    return _m(tf.Mask2FormerModel, cfg), (), {"pixel_values": pix(1, 3, 64, 64)}

# ---------------- vision-language ----------------
IMG = 100
def vl_ids(n_img, n_txt, first=False, tok=IMG):
    t = ids(n_txt).clone()
    t[t == tok] = 3
    im = torch.full((1, n_img), tok, dtype=torch.long)
    return torch.cat([im, t] if first else [t[:, :n_txt // 2], im, t[:, n_txt // 2:]], 1)
CLIPV = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4, projection_dim=32)
def build_llava_next():
    cfg = tf.LlavaNextConfig(vision_config=tf.CLIPVisionConfig(**CLIPV), text_config=tf.LlamaConfig(**LL), image_token_index=IMG,
                             image_grid_pinpoints=[[16, 16]], vision_feature_layer=-1)
    # base 16 feats + 16 for grid patch, newline... compute via eager: use processor formula
    m = _m(tf.LlavaNextForConditionalGeneration, cfg)
    n = 16 + 16 + 4  # base + unpadded (4x4 + 4 newlines)
    return m, (), {"input_ids": vl_ids(n, 8), "pixel_values": pix(1, 2, 3, 16, 16), "image_sizes": torch.tensor([[16, 16]])}
def build_blip_2():
    cfg = tf.Blip2Config(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                         qformer_config=dict(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, encoder_hidden_size=32),
                         text_config=tf.OPTConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64, word_embed_proj_dim=32),
                         num_query_tokens=4, image_token_index=IMG)
    return _m(tf.Blip2ForConditionalGeneration, cfg), (), {"input_ids": vl_ids(4, 8, True), "pixel_values": pix(1, 3, 16, 16)}
def build_instructblip():
    cfg = tf.InstructBlipConfig(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                         qformer_config=dict(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, encoder_hidden_size=32),
                         text_config=tf.OPTConfig(vocab_size=V, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, ffn_dim=64, word_embed_proj_dim=32),
                         num_query_tokens=4, image_token_index=IMG)
    return _m(tf.InstructBlipForConditionalGeneration, cfg), (), {"input_ids": vl_ids(4, 8, True), "pixel_values": pix(1, 3, 16, 16),
                                                                  "qformer_input_ids": ids(6, 2)}
def build_idefics2():
    cfg = tf.Idefics2Config(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                            perceiver_config=dict(hidden_size=64, resampler_n_latents=4, resampler_depth=1, resampler_n_heads=2, resampler_head_dim=16, num_key_value_heads=2),
                            text_config=dict(model_type="mistral", **LL), image_token_id=IMG)
    return _m(tf.Idefics2ForConditionalGeneration, cfg), (), {"input_ids": vl_ids(4, 8), "pixel_values": pix(1, 1, 3, 16, 16)}
def build_idefics3():
    cfg = tf.Idefics3Config(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                            text_config=dict(model_type="llama", **LL), image_token_id=IMG, scale_factor=2)
    return _m(tf.Idefics3ForConditionalGeneration, cfg), (), {"input_ids": vl_ids(4, 8), "pixel_values": pix(1, 1, 3, 16, 16)}
def build_smolvlm():
    cfg = tf.SmolVLMConfig(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                            text_config=dict(model_type="llama", **LL), image_token_id=IMG, scale_factor=2)
    return _m(tf.SmolVLMForConditionalGeneration, cfg), (), {"input_ids": vl_ids(4, 8), "pixel_values": pix(1, 1, 3, 16, 16)}
def build_gemma3():
    cfg = tf.Gemma3Config(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                          text_config=dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                                           num_key_value_heads=1, head_dim=32, max_position_embeddings=64, sliding_window=8),
                          mm_tokens_per_image=4, image_token_index=IMG)
    return _m(tf.Gemma3ForConditionalGeneration, cfg), (), {"input_ids": vl_ids(4, 8), "pixel_values": pix(1, 3, 16, 16)}
def build_chameleon():
    cfg = tf.ChameleonConfig(**LL, vq_config=dict(embed_dim=8, num_embeddings=16, base_channels=8, channel_multiplier=[1, 2], num_res_blocks=1, resolution=16, latent_channels=8, attn_resolutions=[]))
    return _m(tf.ChameleonModel, cfg), (), {"input_ids": ids(8)}
def build_fuyu():
    cfg = tf.FuyuConfig(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
                        patch_size=4, num_channels=3, max_position_embeddings=64, text_config=dict(model_type="persimmon", vocab_size=V, hidden_size=64,
                        intermediate_size=128, num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=64), image_token_id=IMG)
    t = vl_ids(4, 8)
    return _m(tf.FuyuForCausalLM, cfg), (), {"input_ids": t, "image_patches": pix(1, 4, 48),
                                               "image_patches_indices": torch.where(t == IMG, torch.cumsum(t == IMG, 1) - 1, -1)}
def build_kosmos2():
    cfg = tf.Kosmos2Config(vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                           text_config=dict(vocab_size=V, embed_dim=32, layers=1, attention_heads=2, ffn_dim=64, max_position_embeddings=64),
                           latent_query_num=4)
    t = ids(12)
    m = torch.zeros_like(t, dtype=torch.bool)
    m[:, 1:5] = True
    return _m(tf.Kosmos2Model, cfg), (), {"input_ids": t, "pixel_values": pix(1, 3, 16, 16), "image_embeds_position_mask": m}
def build_qwen2_5_vl():
    vision = dict(depth=1, hidden_size=32, out_hidden_size=64, num_heads=2, intermediate_size=64, in_channels=3, patch_size=4,
                  spatial_merge_size=2, temporal_patch_size=2, window_size=16, fullatt_block_indexes=[0])
    text = dict(**LL, bos_token_id=1, eos_token_id=2, rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 6, 6]})
    cfg = tf.Qwen2_5_VLConfig(vision_config=vision, text_config=text, image_token_id=IMG, video_token_id=IMG - 1,
                              vision_start_token_id=1, vision_end_token_id=2)
    t = vl_ids(4, 8)
    t[t == IMG - 1] = 3
    return _m(tf.Qwen2_5_VLForConditionalGeneration, cfg), (), {"input_ids": t, "pixel_values": pix(16, 3 * 2 * 4 * 4),
                                                                 "image_grid_thw": torch.tensor([[1, 4, 4]]), "mm_token_type_ids": (t == IMG).int()}
def build_mistral3():
    vis = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4, head_dim=16)
    cfg = tf.Mistral3Config(vision_config=tf.PixtralVisionConfig(**vis), text_config=tf.MistralConfig(**LL), image_token_index=IMG,
                            spatial_merge_size=2, vision_feature_layer=-1)
    return _m(tf.Mistral3ForConditionalGeneration, cfg), (), {"input_ids": vl_ids(4, 8), "pixel_values": pix(1, 3, 16, 16),
                                                              "image_sizes": torch.tensor([[16, 16]])}
def build_llava_onevision():
    cfg = tf.LlavaOnevisionConfig(vision_config=tf.SiglipVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16, patch_size=4),
                                  text_config=tf.Qwen2Config(**LL), image_token_index=IMG, image_grid_pinpoints=[[16, 16]], vision_feature_layer=-1)
    n = 16 + 16 + 4
    return _m(tf.LlavaOnevisionForConditionalGeneration, cfg), (), {"input_ids": vl_ids(n, 8), "pixel_values": pix(1, 2, 3, 16, 16), "image_sizes": torch.tensor([[16, 16]])}
