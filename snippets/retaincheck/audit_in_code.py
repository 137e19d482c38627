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
for lang in ["en", "zh"]:
    if lang == "zh":
        print("# --8<-- [out:zh]")
    print("code:", call.code)
    print("verdict:", call.verdict)  # (4)!
    print("retained_bytes:", call.retained_bytes)
    print("suggestion:", call.suggestion_in(lang))  # (5)!
# --8<-- [end:lesson]

# --8<-- [start:proof]
import os

assert call.needed and call.reused_by == [f"{call.file}:{call.line + 1}"]
assert call.retained_bytes == 32 * 8 * 4 + 32 * 16 * 4 + 32 * 4 * 4  # (1)!
os.environ["RETAINCHECK_LANG"] = "zh"  # (2)!
assert call.verdict == "needed" and call.suggestion == call.suggestion_in("en")
assert call.suggestion.startswith("keep it, or, if the gradients are only added")
assert call.suggestion_in("zh").startswith("留着这个参数；如果梯度只是累加")
assert call.to_dict()["suggestion"] == call.suggestion
try:
    call.suggestion_in("fr")
except ValueError as error:
    assert str(error) == "suggestion_in: unknown language 'fr' (use en or zh)"
else:
    raise AssertionError("suggestion_in('fr') returned")
# --8<-- [end:proof]
