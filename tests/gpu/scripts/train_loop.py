"""A few Linear+Adam steps with step markers. Writes its argv and __name__ to argv[1] and
exits with the status in its last argument (when it has more than one)."""

import json
import sys

import torch

import memtui.record

out = sys.argv[1]
model = torch.nn.Linear(512, 512).cuda()
opt = torch.optim.Adam(model.parameters())
for _ in range(4):
    model(torch.randn(64, 512, device="cuda")).sum().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    memtui.record.step()
with open(out, "w") as fh:
    json.dump({"argv": sys.argv, "name": __name__}, fh)
sys.exit(int(sys.argv[-1]) if len(sys.argv) > 2 else 0)
