"""One run of the with-other-features page's model under Inductor (tests/test_inductor.py).

``python tests/inductor_donated.py MODE`` compiles the page's model with the default backend,
runs an ordinary step (a backward that does not keep the graph), then two backward passes
through one graph (``retain_graph=True``, then plain), and prints one JSON line: the error
message or None, and per parameter the largest difference from eager mode's gradients.

MODE: ``late`` turns ``torch._functorch.config.donated_buffer`` off after the ordinary step
(too late); ``early`` turns it off before anything is compiled (the page's fix);
``early-no-fx-cache`` does the same with ``torch._inductor.config.fx_graph_cache = False`` too;
``retain-first`` leaves the flag on and skips the ordinary step: the first backward keeps the
graph. The caches are the environment's (TORCHINDUCTOR_CACHE_DIR and friends).
"""

import copy
import json
import sys

import torch
import torch._functorch.config
import torch._inductor.config

mode = sys.argv[1]
assert mode in ("late", "early", "early-no-fx-cache", "retain-first"), mode
if mode.startswith("early"):
    torch._functorch.config.donated_buffer = False
if mode == "early-no-fx-cache":
    torch._inductor.config.fx_graph_cache = False

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
reference = copy.deepcopy(model)
compiled = torch.compile(model)
x = torch.randn(16, 4)

if mode != "retain-first":
    compiled(x).pow(2).mean().backward()
    model.zero_grad()
if mode == "late":
    torch._functorch.config.donated_buffer = False

error = None
loss = compiled(x).pow(2).mean()
try:
    loss.backward(retain_graph=True)
    loss.backward()
except RuntimeError as exc:
    error = str(exc)

eager = reference(x).pow(2).mean()
eager.backward(retain_graph=True)
eager.backward()
diffs = None
if error is None:
    diffs = [
        (p.grad - q.grad).abs().max().item()
        for p, q in zip(model.parameters(), reference.parameters(), strict=True)
    ]
print(json.dumps({"error": error, "diffs": diffs}))
