"""Q2 evidence: the replay is a STORE_ATTR in the compiled frame's bytecode after the graph call; guards."""
import os, sys
sys.path.insert(0, os.path.dirname(__file__))
import torch
import dse

def f(x):
    y = x + 1
    dse.defer_print("y", y)
    y.mul_(10)
    return y

torch.compile(f, backend="eager")(torch.ones(2))
