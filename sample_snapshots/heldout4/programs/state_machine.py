"""A training loop as an explicit state machine: handlers for LOAD, FORWARD, BACKWARD, UPDATE,
EVAL and CHECKPOINT return the next state, a dispatcher runs them and tells transition
listeners. One leak, two look-alikes, two reference cycles and one look-alike whose frees are
all `pop`/`del` and library code."""

from __future__ import annotations

import contextlib
import enum
import gc
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "heldout", "programs"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _harness import Harness, main  # noqa: E402

CUDA = torch.device("cuda")
VOCAB = 4096


class S(enum.Enum):
    LOAD = "load"
    FORWARD = "forward"
    BACKWARD = "backward"
    UPDATE = "update"
    EVAL = "eval"
    CHECKPOINT = "checkpoint"
    DONE = "done"


class SkipBatch(Exception):
    pass


class Machine:
    """Runs handlers state by state; a training step is everything from one LOAD to the next."""

    def __init__(self, h: Harness, steps: int, eval_every: int = 0, ckpt_every: int = 0) -> None:
        self.h, self.steps, self.eval_every, self.ckpt_every = h, steps, eval_every, ckpt_every
        self.handlers: dict[S, object] = {}
        self.listeners: list = []
        self.step_i = 0
        self.ctx: dict = {}

    def on(self, state: S):
        def register(fn):
            self.handlers[state] = fn
            return fn
        return register

    def default_next(self, state: S) -> S:
        if state in (S.LOAD, S.FORWARD, S.BACKWARD):
            return {S.LOAD: S.FORWARD, S.FORWARD: S.BACKWARD, S.BACKWARD: S.UPDATE}[state]
        if state is S.UPDATE and self.eval_every and self.step_i % self.eval_every == 0:
            return S.EVAL
        if state in (S.UPDATE, S.EVAL) and self.ckpt_every and self.step_i % self.ckpt_every == 0:
            return S.CHECKPOINT
        return S.LOAD

    def run(self) -> None:
        state, step_cm = S.LOAD, contextlib.ExitStack()
        while state is not S.DONE:
            if state is S.LOAD:
                step_cm.close()
                if self.step_i == self.steps:
                    break
                self.ctx = {"step": self.step_i}
                step_cm.enter_context(self.h.step())
            try:
                nxt = self.handlers.get(state, lambda c: None)(self.ctx) or self.default_next(state)
            except SkipBatch as err:
                self.ctx["error"] = err                    # kept for the step report
                self.step_i += 1
                nxt = S.LOAD
            if state is S.UPDATE:
                self.step_i += 1
                nxt = self.default_next(state)
            for fn in self.listeners:
                fn(self, state, nxt)
            state = nxt
        step_cm.close()


def lm_batch(batch=8, seq=128):
    ids = torch.randint(0, VOCAB, (batch, seq), device=CUDA)
    return {"input_ids": ids, "labels": ids}


def standard_handlers(m: Machine, model, opt, autocast=None):
    """A language-model step; programs replace the handlers they need to."""
    @m.on(S.LOAD)
    def load(ctx):
        ctx["batch"] = lm_batch()

    @m.on(S.FORWARD)
    def forward(ctx):
        with autocast or contextlib.nullcontext():
            out = model(**ctx["batch"])
        ctx["loss"], ctx["logits"] = out.loss, out.logits

    @m.on(S.BACKWARD)
    def backward(ctx):
        ctx["loss"].backward()

    @m.on(S.UPDATE)
    def update(ctx):
        opt.step()
        opt.zero_grad(set_to_none=True)
        ctx["loss"] = ctx["loss"].item()


# ----------------------------------------------------------------------------- a leak


def qwen2_fsm_transition_journal(name):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    h = Harness(name)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=128, intermediate_size=256,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=256)).to(CUDA)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    m = Machine(h, steps=24)
    standard_handlers(m, model, opt, torch.autocast("cuda", dtype=torch.bfloat16))
    journal = []

    def keep_journal(machine, state, nxt):
        journal.append((state.value, nxt.value, dict(machine.ctx)))   # for replaying a bad step later

    def late_profiling(machine, state, nxt):
        if nxt is S.LOAD and machine.step_i == 14:
            h.record(stacks="python", context="all")

    m.listeners += [keep_journal, late_profiling]
    m.run()
    h.finish(leak=True, leak_what="journal.append((state, next, dict(ctx))): a shallow copy of the step "
             "context at every transition keeps each step's bf16 logits (8 x 128 x 4096, 8 MiB) and batch",
             workload="""A tiny Qwen2ForCausalLM (2 layers, hidden 128, GQA 4/2 heads) under bf16
             autocast, AdamW, 24 steps of 8 x 128 tokens run by a state machine (LOAD, FORWARD,
             BACKWARD, UPDATE); a transition listener journals a shallow copy of the context dict
             at every transition, so every step's logits stay on the GPU. History is turned on
             only before step 15: the trace holds the last 10 steps.""", journal_entries=len(journal))


# ----------------------------------------------------------------------------- look-alikes


def whisper_fsm_eval_every5_released(name):
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    h = Harness(name)
    cfg = WhisperConfig(vocab_size=1024, num_mel_bins=80, d_model=128, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=256,
                        decoder_ffn_dim=256, max_source_positions=200, max_target_positions=64,
                        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    model = WhisperForConditionalGeneration(cfg).to(CUDA)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    val = [(torch.randn(16, 80, 400, device=CUDA), torch.randint(3, 1024, (16, 48), device=CUDA)) for _ in range(4)]
    m = Machine(h, steps=20, eval_every=5)
    standard_handlers(m, model, opt)
    accuracy = []

    @m.on(S.LOAD)
    def load(ctx):
        ctx["batch"] = {"input_features": torch.randn(16, 80, 400, device=CUDA),
                        "labels": torch.randint(3, 1024, (16, 48), device=CUDA)}

    m.on(S.FORWARD)(lambda ctx: ctx.update(loss=model(**ctx.pop("batch")).loss))

    @m.on(S.EVAL)
    def evaluate(ctx):
        model.eval()
        ctx["eval_logits"] = []
        with torch.no_grad():
            for feats, labels in val:
                ctx["eval_logits"].append(model(input_features=feats, labels=labels).logits)
        hits = sum(int((lg.argmax(-1) == lb).sum()) for lg, (_, lb) in zip(ctx["eval_logits"], val))
        accuracy.append(hits / (4 * 16 * 48))
        del ctx["eval_logits"]
        model.train()

    h.record(stacks="python", context="all")
    m.run()
    h.finish(leak=False, workload="""A tiny WhisperForConditionalGeneration (2+2 layers, d_model
             128, 80 mel bins x 400 frames), AdamW, 20 steps of 16 clips run by a state machine;
             every 5th step goes through an EVAL state that runs 4 held-out batches under
             no_grad, keeps their logits in the context until it has scored them and then deletes
             them: memory rises during each eval and is back at the step's level after it.""",
             eval_accuracy=accuracy)


def regnet_fsm_first_step_snapshot(name):
    import timm

    h = Harness(name)
    model = timm.create_model("regnetx_002", pretrained=False, num_classes=100).to(CUDA)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
    m = Machine(h, steps=10)

    standard_handlers(m, model, opt)
    m.on(S.LOAD)(lambda ctx: ctx.update(x=torch.randn(64, 3, 128, 128, device=CUDA),
                                        y=torch.randint(0, 100, (64,), device=CUDA)))
    m.on(S.FORWARD)(lambda ctx: ctx.update(loss=F.cross_entropy(model(ctx.pop("x")), ctx.pop("y"))))

    def snapshot_first_step(machine, state, nxt):
        if state is S.UPDATE and machine.step_i == 1:
            h.dump()                                       # look at the first step only
            h.stop_recording()

    m.listeners.append(snapshot_first_step)
    h.record(stacks="python", context="all")
    m.run()
    h.finish(leak=False, workload="""timm regnetx_002 (random init, 100 classes), SGD with Nesterov
             momentum, 10 steps of 64 images at 128 px run by a state machine. History is on for
             the first step only and the snapshot is taken right after its UPDATE: the trace holds
             one step in which the momentum buffers (one per parameter) appear and stay, which is
             growth that stops there; nine more steps run after the dump.""")


# ----------------------------------------------------------------------------- cycles


def mistral_fsm_skipped_batch_traceback(name):
    from transformers import MistralConfig, MistralForCausalLM

    h = Harness(name)
    model = MistralForCausalLM(MistralConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=384,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             max_position_embeddings=512, sliding_window=128)).to(CUDA)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    m = Machine(h, steps=16, ckpt_every=4)
    standard_handlers(m, model, opt)
    saved = {}

    @m.on(S.LOAD)
    def load(ctx):
        ctx["batch"] = lm_batch(8, 256)
        ctx["suspect"] = ctx["step"] % 3 == 1                # a data-quality flag from the loader

    @m.on(S.FORWARD)
    def forward(ctx):
        out = model(**ctx["batch"])
        if ctx["suspect"] and out.loss.detach() > 0:         # the guard: skip flagged batches
            raise SkipBatch(f"step {ctx['step']}: flagged batch")
        ctx["loss"] = out.loss

    @m.on(S.CHECKPOINT)
    def checkpoint(ctx):
        saved["weights"] = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
        gc.collect()

    h.record(stacks="python", context="all")
    m.run()
    h.finish(leak=False, workload="""A tiny MistralForCausalLM (2 layers, hidden 128), AdamW, 16
             steps of 8 x 256 tokens run by a state machine; FORWARD raises SkipBatch on batches
             the loader flagged (every 3rd) and the dispatcher stores the exception in that step's
             context dict, which the traceback's handler frame refers back to (ctx -> error ->
             traceback -> frame -> ctx): the skipped step's outputs and whole autograd graph
             survive as cyclic garbage until CHECKPOINT (every 4th step) copies the weights to
             the CPU and calls gc.collect().""")


class StepRun:
    def __init__(self, step: int) -> None:
        self.step, self.phases = step, []


class Phase:
    def __init__(self, run: StepRun, state: S, **data) -> None:
        self.run, self.state, self.data = run, state, data   # child -> parent
        run.phases.append(self)                               # parent -> child


def efficientnet_fsm_phase_parent_links(name):
    import timm

    h = Harness(name)
    model = timm.create_model("efficientnet_b0", pretrained=False, num_classes=100).to(CUDA)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    m = Machine(h, steps=16)
    standard_handlers(m, model, opt)
    table_sizes = []

    @m.on(S.LOAD)
    def load(ctx):
        ctx["run"] = StepRun(ctx["step"])
        x = torch.randn(32, 3, 128, 128, device=CUDA)
        Phase(ctx["run"], S.LOAD, x=x, y=torch.randint(0, 100, (32,), device=CUDA))

    @m.on(S.FORWARD)
    def forward(ctx):
        data = ctx["run"].phases[-1].data
        with torch.autocast("cuda", dtype=torch.bfloat16):
            feats = model.forward_features(data["x"])
            logits = model.forward_head(feats)
        Phase(ctx["run"], S.FORWARD, feats=feats.detach(), probs=logits.detach().float().softmax(-1))
        ctx["loss"] = F.cross_entropy(logits.float(), data["y"])

    def report(machine, state, nxt):
        if state is S.UPDATE:
            run = machine.ctx.pop("run")
            probs = run.phases[1].data["probs"].tolist()
            del run                                        # the run and its phases are now garbage
            rows = [{"sample": i, "cls": c, "p": [p]} for i, ps in enumerate(probs) for c, p in enumerate(ps)]
            table_sizes.append(len(rows))

    m.listeners.append(report)
    h.record(stacks="python", context=None)
    m.run()
    h.finish(leak=False, workload="""timm efficientnet_b0 (random init, 100 classes) under bf16
             autocast, AdamW, 16 steps of 32 images at 128 px run by a state machine; each step
             builds a StepRun whose Phase children point back at it (parent <-> child) and hold
             the input batch (6 MiB) and the features; after UPDATE a listener drops the run and
             builds a 3200-row prediction table, so Python's automatic collector frees each
             run's tensors. Recorded with context=None (no stacks).""", table_rows=table_sizes[-1])


# ----------------------------------------------------------------------------- no cycle


def neox_fsm_ckpt_pop_everything(name):
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    h = Harness(name)
    model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=512,
                                             num_hidden_layers=3, num_attention_heads=4,
                                             max_position_embeddings=512)).to(CUDA)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    m = Machine(h, steps=10)
    losses = []

    @m.on(S.LOAD)
    def load(ctx):
        ctx["batch"] = lm_batch(16, 256)

    @m.on(S.FORWARD)
    def forward(ctx):
        batch = ctx.pop("batch")
        out = model(**batch)
        ctx["loss"] = out.loss
        del out, batch

    @m.on(S.BACKWARD)
    def backward(ctx):
        loss = ctx.pop("loss")
        loss.backward()
        ctx["loss_value"] = loss.item()
        del loss

    @m.on(S.UPDATE)
    def update(ctx):
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(ctx.pop("loss_value"))

    h.record(stacks="all", context="alloc")
    m.run()
    h.finish(leak=False, workload="""A tiny GPTNeoXForCausalLM (3 layers, hidden 128) with
             gradient checkpointing, AdamW, 10 steps of 16 x 256 tokens run by a state machine
             whose handlers pop what they consume from the context and del their locals: every
             free is a refcount drop in the handlers or inside the library (checkpointed layers
             recomputed in backward), no cycles. Python and C++ stacks, context='alloc'.""",
             last_loss=losses[-1])


PROGRAMS = {f.__name__: f for f in (qwen2_fsm_transition_journal, whisper_fsm_eval_every5_released,
                                     regnet_fsm_first_step_snapshot, mistral_fsm_skipped_batch_traceback,
                                     efficientnet_fsm_phase_parent_links, neox_fsm_ckpt_pop_everything)}

if __name__ == "__main__":
    sys.exit(main(PROGRAMS))
