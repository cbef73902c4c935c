#!/usr/bin/env python3
"""Parity of qkvlab's Hugging Face GPT-2 and Llama exports and imports with transformers itself.

1. hf_export_dump writes a GPT of every exportable variant with random weights and exports it;
   transformers' GPT2LMHeadModel.from_pretrained loads each export and its logits must equal
   qkvlab's to 1e-5. The same for the Llama block with LlamaForCausalLM, whose greedy tokens
   from generate() must also be qkvlab's.
2. transformers makes and saves a GPT-2 of another shape (exact GELU, an MLP width of its own,
   sharded into several safetensors files); qkvlab imports it and its logits must equal
   transformers' to 1e-5.

Needs torch and transformers (the peers' environment, bench/peers/setup.sh). When the interpreter
running this script lacks them, it runs itself again under the peers' interpreter when one exists
(peers_env.py); otherwise exit 77 (CTest: skipped).

  check_hf_export.py --dump PATH_TO_hf_export_dump --workdir DIR
"""
import argparse
import os
import subprocess
import sys

TOL = 1e-5

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers_env import rerun_in_peers_env  # noqa: E402

try:
    import torch
    import transformers
    from safetensors.torch import load_file, save_file
except ImportError:
    rerun_in_peers_env("torch and transformers")


def logits_of(folder, ids, model_class):
    model = model_class.from_pretrained(folder).eval()
    with torch.no_grad():
        return model(ids).logits


def check_exports(dump, work):
    out = os.path.join(work, "export")
    os.makedirs(out, exist_ok=True)
    subprocess.run([dump, "export", out], check=True)
    failed = 0
    for listing, prefix, model_class in (("variants.txt", "", transformers.GPT2LMHeadModel),
                                         ("llama_variants.txt", "llama-", transformers.LlamaForCausalLM)):
        for variant in open(os.path.join(out, listing)).read().split():
            ref = load_file(os.path.join(out, prefix + variant, "logits.safetensors"))
            got = logits_of(os.path.join(out, prefix + variant, "hf"), ref["ids"], model_class)
            diff = (got - ref["logits"]).abs().max().item()
            # Greedy tokens: each position's argmax, as generate() would pick them.
            same_tokens = bool((got.argmax(-1) == ref["logits"].argmax(-1)).all())
            ok = diff < TOL and same_tokens
            failed += not ok
            print(f"export {prefix + variant:16s} max |transformers - qkvlab| {diff:.2e}, greedy tokens "
                  f"{'equal' if same_tokens else 'differ'} {'ok' if ok else 'FAILED'}")
    return failed


def check_import(dump, work):
    src = os.path.join(work, "transformers-gpt2")
    config = transformers.GPT2Config(vocab_size=211, n_positions=24, n_embd=48, n_layer=3, n_head=6, n_inner=80,
                                     activation_function="gelu")
    torch.manual_seed(3)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(src, safe_serialization=True, max_shard_size="100KB")
    assert os.path.exists(os.path.join(src, "model.safetensors.index.json")), "expected a sharded save"
    ids = torch.randint(0, 211, (2, 16), generator=torch.Generator().manual_seed(4))
    save_file({"ids": ids}, os.path.join(src, "ids.safetensors"))
    out = os.path.join(work, "import")
    subprocess.run([dump, "import", src, out], check=True)
    got = load_file(os.path.join(out, "logits.safetensors"))["logits"]
    with torch.no_grad():
        diff = (model(ids).logits - got).abs().max().item()
    ok = diff < TOL
    print(f"import of a sharded transformers save: max |qkvlab - transformers| {diff:.2e} {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    failed = check_exports(a.dump, a.workdir) + check_import(a.dump, a.workdir)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
