# --8<-- [start:lesson]
import torch

import retaincheck

torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
x = torch.randn(32, 8)

with retaincheck.audit() as report:  # (1)!
    out = net(x)
    loss_a = out.pow(2).mean()
    loss_b = out.abs().mean()
    loss_a.backward(retain_graph=True)  # (2)!
    loss_b.backward()

(call,) = report.calls  # (3)!
print(call.code, "->", call.verdict)
print("kept:", call.retained_bytes, "bytes of saved tensors")
print("suggest:", call.suggestion)
# --8<-- [end:lesson]

# --8<-- [start:proof]
assert call.needed and call.reused_by == [f"{call.file}:{call.line + 1}"]
assert call.retained_bytes == 32 * 8 * 4 + 32 * 16 * 4 + 32 * 4 * 4  # (1)!
# --8<-- [end:proof]
