"""Image models from timm configs (no weights), trained and evaluated in several styles."""

from __future__ import annotations

import sys

import timm
import torch
import torch.nn.functional as F
from _harness import Harness, main


def images(batch, size=128, classes=10):
    return torch.randn(batch, 3, size, size, device="cuda"), torch.randint(0, classes, (batch,), device="cuda")


def resnet_sgd_clean(name):
    h = Harness(name)
    h.record(stacks="python")
    model = timm.create_model("resnet18", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    for _ in range(5):
        with h.step():
            x, y = images(32)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""timm resnet18 (10 classes), SGD with Nesterov momentum, 5
        steps of 32 images at 128 px. Momentum buffers appear in step 1.""")


def resnet_hook_leak(name):
    h = Harness(name)
    h.record(stacks="python")
    model = timm.create_model("resnet18", pretrained=False, num_classes=10).cuda()
    captured = []
    model.layer3.register_forward_hook(lambda mod, inp, out: captured.append(out))   # "for debugging"
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    for _ in range(8):
        with h.step():
            x, y = images(32)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=True, leak_what="a forward hook on layer3 appends its output tensor to a list "
             "that is never cleared", workload="""timm resnet18, SGD with momentum, 8 steps of 32
             images at 128 px, with a debugging forward hook on layer3 that keeps every output
             (32 x 256 x 8 x 8 floats per step) in a list.""")


def _effnet_amp(name, stacks):
    h = Harness(name)
    h.record(stacks=stacks, max_entries=120_000)
    model = timm.create_model("efficientnet_b0", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cuda", init_scale=1024.0)
    for _ in range(4):
        with h.step():
            x, y = images(24, 160)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload=f"""timm efficientnet_b0 under autocast(float16) with GradScaler,
        AdamW, 4 steps of 24 images at 160 px. Autocast's float16 copies of the weights and the
        activations are freed by reference counting when the step's tensors go out of scope; no
        reference cycles. Recorded with stacks='{stacks}'.""")


def effnet_amp_autocast_py(name):
    _effnet_amp(name, "python")


def effnet_amp_autocast_all(name):
    _effnet_amp(name, "all")


def convnext_grad_ckpt(name):
    h = Harness(name)
    h.record(stacks="all", max_entries=60_000)
    model = timm.create_model("convnext_atto", pretrained=False, num_classes=10).cuda()
    model.set_grad_checkpointing(True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        with h.step():
            x, y = images(32)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""timm convnext_atto with timm's gradient checkpointing on,
        AdamW, 3 steps of 32 images at 128 px: stages are recomputed during backward. Python and
        C++ stacks.""")


def vit_one_step_traced(name):
    h = Harness(name)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in range(5):
        if step == 4:
            h.record(stacks="python")
        with h.step():
            x, y = images(32, 224)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""timm vit_tiny_patch16_224, AdamW, 5 steps of 32 images at
        224 px; history is turned on only before the fifth step, so the trace holds exactly one
        training step and the parameters and optimizer state were allocated before it.""")


def vit_inference_bf16_nostacks(name):
    h = Harness(name)
    h.record(context=None)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=10).cuda().eval()
    preds = []
    for batch in (64, 128, 96, 128, 32):
        with h.step("inference"):
            with torch.inference_mode(), torch.autocast("cuda", dtype=torch.bfloat16):
                preds.append(model(torch.randn(batch, 3, 224, 224, device="cuda")).argmax(-1).cpu())
    h.finish(leak=False, workload="""timm vit_tiny_patch16_224 inference only (no training, no
        optimizer) under inference_mode and autocast(bfloat16), 5 batches of 32 to 128 images;
        predictions go to the CPU. Recorded with context=None: a full trace without any stacks.""")


def mobilenet_growing_batch(name):
    h = Harness(name)
    h.record(stacks="python")
    model = timm.create_model("mobilenetv3_small_100", pretrained=False, num_classes=10).cuda()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    for batch in (16, 32, 64, 128, 192):
        with h.step():
            x, y = images(batch)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    h.finish(leak=False, workload="""timm mobilenetv3_small_100, RMSprop, batch growing 16 to 192
        (128 px): every step's peak is higher than the last, yet what survives a step (parameters,
        RMSprop state) stays the same size.""")


PROGRAMS = {f.__name__: f for f in (resnet_sgd_clean, resnet_hook_leak, effnet_amp_autocast_py,
                                     effnet_amp_autocast_all, convnext_grad_ckpt, vit_one_step_traced,
                                     vit_inference_bf16_nostacks, mobilenet_growing_batch)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
