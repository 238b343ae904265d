

def test_compiled_tolerance_follows_the_least_precise_dtype_the_model_computes_in():
    import torch

    from verifier.differential import _tolerance, least_precise_float

    assert _tolerance(torch.float32) == (1e-4, 1e-5)
    assert _tolerance(torch.float32, torch.float16) == (1e-2, 1e-2)
    assert _tolerance(torch.float32, torch.float32) == (1e-4, 1e-5)
    half = torch.nn.Linear(2, 2).half()
    assert least_precise_float(half, (torch.randn(2, 2),)) == torch.float16
    assert least_precise_float(torch.nn.Linear(2, 2), (torch.randn(2, 2), torch.zeros(2, dtype=torch.int64))) \
        == torch.float32
    assert least_precise_float(torch.nn.Linear(2, 2), (torch.randn(2, 2, dtype=torch.bfloat16),)) == torch.bfloat16
    assert least_precise_float(torch.nn.Identity(), (torch.zeros(2, dtype=torch.int64),)) is None
