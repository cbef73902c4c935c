#!/usr/bin/env python3
"""Rebuilds the fuzz seed corpora (fuzz/corpus/<target>/) and dictionaries (fuzz/dicts/).

Every seed is cut from a real file: the datasets in the data folder (MNIST, CIFAR-10, the
TinyImageNet sample, tiny-shakespeare, GPT-2's tokenizer), the shipped experiments/*.yaml, and
files the qkvlab binary writes (a token shard and dataset.json from `qkvlab data prepare`, a
checkpoint, config.yaml and result.json from tiny synthetic and language-model runs). Seeds are a
few KB at most. The corpus folders are replaced; fuzz/regressions/ is never touched.

usage: scripts/fuzz-seeds.py [--data DIR] [--qkvlab BIN]
  --data    the data folder (default $QKV_DATA, else ../shared/data beside the checkout)
  --qkvlab  the qkvlab binary (default: the first of build/{release,cpu,ci,debug}/qkvlab)
"""
import argparse
import gzip
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
DICTS = ROOT / "fuzz" / "dicts"


def put(target, name, data):
    folder = CORPUS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def gz(data):
    return gzip.compress(data, mtime=0)


def idx_seeds(data):
    images = gzip.open(data / "mnist" / "t10k-images-idx3-ubyte.gz").read(16 + 3 * 784)
    labels = gzip.open(data / "mnist" / "t10k-labels-idx1-ubyte.gz").read(8 + 16)
    magic, _, rows, cols = struct.unpack(">IIII", images[:16])
    three = struct.pack(">IIII", magic, 3, rows, cols) + images[16:]
    sixteen = labels[:4] + struct.pack(">I", 16) + labels[8:]
    # The first byte says which file the rest is (0: images, 1: labels); see fuzz/idx.cpp.
    put("idx", "images-3.idx", b"\0" + three)
    put("idx", "images-3.idx.gz", b"\0" + gz(three))
    put("idx", "images-header-says-10000-holds-2", b"\0" + images[: 16 + 2 * 784])
    put("idx", "labels-16.idx", b"\1" + sixteen)
    put("idx", "labels-16.idx.gz", b"\1" + gz(sixteen))


def cifar_seeds(data):
    records = (data / "cifar-10-batches-bin" / "test_batch.bin").open("rb").read(2 * 3073)
    put("cifar", "cifar10-1-record.bin", records[:3073])
    put("cifar", "cifar10-2-records.bin", records)
    # CIFAR-100 records carry a coarse label byte before the fine one: the real record behind a
    # coarse label.
    put("cifar", "cifar100-1-record.bin", bytes([records[0] % 20]) + records[:3073])


def tinyimagenet_seeds(data):
    root = data / "tiny-imagenet-200-sample"
    wnids = (root / "wnids.txt").read_bytes()
    lines = (root / "val" / "val_annotations.txt").read_bytes().splitlines(keepends=True)
    # wnids.txt, NUL, val_annotations.txt (fuzz/tinyimagenet.cpp).
    put("tinyimagenet", "val-8-lines", wnids + b"\0" + b"".join(lines[:8]))
    put("tinyimagenet", "val-1-line", wnids + b"\0" + lines[0])
    put("tinyimagenet", "wnids-only", wnids + b"\0")


def safetensors_subset(path, keep):
    """The file with only the tensors `keep` (and its metadata), offsets renumbered."""
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    body = raw[8 + n :]
    out_header, out_body = {}, b""
    if "__metadata__" in header:
        out_header["__metadata__"] = header["__metadata__"]
    for name in keep:
        entry = dict(header[name])
        begin, end = entry["data_offsets"]
        entry["data_offsets"] = [len(out_body), len(out_body) + end - begin]
        out_body += body[begin:end]
        out_header[name] = entry
    text = json.dumps(out_header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(text)) + text + out_body


def safetensors_seeds(checkpoint):
    names = [k for k in json.loads(checkpoint.read_bytes()[8 : 8 + struct.unpack("<Q", checkpoint.read_bytes()[:8])[0]])
             if k != "__metadata__"]
    put("safetensors", "biases.safetensors", safetensors_subset(checkpoint, [n for n in names if n.endswith(".bias")][:6]))
    put("safetensors", "one-weight.safetensors", safetensors_subset(checkpoint, ["input.weight"]))
    put("safetensors", "metadata-only.safetensors", safetensors_subset(checkpoint, []))


def tokenizer_seeds(data):
    folder = data / "gpt2-tokenizer"
    encoder = json.loads((folder / "encoder.json").read_text(encoding="utf-8"))
    merges = (folder / "vocab.bpe").read_text(encoding="utf-8").splitlines()
    by_id = sorted(encoder.items(), key=lambda kv: kv[1])
    for k in (8, 64):
        # Ids 0..255 are the bytes and 256.. the merges' results in rank order, so the first k
        # merges and the tokens 0..255+k make a complete tokenizer; the end-of-text token follows.
        table = dict(by_id[: 256 + k])
        table["<|endoftext|>"] = 256 + k
        text = json.dumps(table, ensure_ascii=False).encode()
        bpe = "\n".join(merges[: 1 + k]).encode() + b"\n"
        put("tokenizer", f"gpt2-first-{k}-merges", text + b"\0" + bpe)


def llama_seeds(shard):
    """A Llama checkpoint folder cut from tests/fixtures/hf_llama_tiny (transformers 5's
    rope_parameters, llama3 scaling, GQA, head_dim, biases, untied head) made one layer of width
    8, sharded; and its tokenizer.json (Llama 3's Split regex, special tokens) with 64 merges."""
    fixture = ROOT / "tests" / "fixtures" / "hf_llama_tiny"
    fast = json.loads((fixture / "tokenizer.json").read_text(encoding="utf-8"))
    fast["model"]["merges"] = fast["model"]["merges"][:64]
    put("hf_tokenizer", "llama3-split-64-merges", json.dumps(fast, ensure_ascii=False))
    config = json.loads((fixture / "config.json").read_text())
    config.update(num_hidden_layers=1, hidden_size=8, num_attention_heads=2, num_key_value_heads=1, head_dim=6,
                  intermediate_size=12, vocab_size=16, max_position_embeddings=8, bos_token_id=0, eos_token_id=1)
    d, q, kv, f = 8, 12, 6, 12
    shapes = {"model.embed_tokens.weight": [16, d], "model.norm.weight": [d], "lm_head.weight": [16, d],
              "model.layers.0.input_layernorm.weight": [d], "model.layers.0.post_attention_layernorm.weight": [d]}
    for name, (rows, cols) in {"self_attn.q_proj": (q, d), "self_attn.k_proj": (kv, d), "self_attn.v_proj": (kv, d),
                               "self_attn.o_proj": (d, q), "mlp.gate_proj": (f, d), "mlp.up_proj": (f, d),
                               "mlp.down_proj": (d, f)}.items():
        shapes.update({f"model.layers.0.{name}.weight": [rows, cols], f"model.layers.0.{name}.bias": [rows]})
    header, body, rng = {}, b"", random.Random(1)
    for name, shape in shapes.items():
        n = shape[0] * (shape[1] if len(shape) > 1 else 1)
        data = struct.pack(f"<{n}f", *(rng.gauss(0.0, 0.02) for _ in range(n)))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    text = json.dumps(header, separators=(",", ":")).encode()
    index = {"metadata": {"total_size": len(body)}, "weight_map": {k: shard for k in header}}
    put("hf_gpt2", "llama-one-layer-d8-gqa-sharded", json.dumps(config, indent=2).encode() + b"\0" +
        json.dumps(index, indent=2).encode() + b"\0" + struct.pack("<Q", len(text)) + text + body)


def hf_seeds():
    """Hugging Face's GPT-2 files, cut from the fixture transformers wrote (tests/fixtures/hf_gpt2_tiny):
    its tokenizer (tokenizer.json, and vocab.json + merges.txt) with the first 64 merges, and a
    checkpoint folder of its config made one layer of width 8 (16 tokens, 8 positions), sharded,
    the tensors (small random values) in the fixture's names and dtype."""
    fixture = ROOT / "tests" / "fixtures" / "hf_gpt2_tiny"
    fast = json.loads((fixture / "tokenizer.json").read_text(encoding="utf-8"))
    fast["model"]["merges"] = fast["model"]["merges"][:64]
    put("hf_tokenizer", "tokenizer-json-64-merges", json.dumps(fast, ensure_ascii=False))
    merges = (fixture / "merges.txt").read_text(encoding="utf-8").split("\n")
    put("hf_tokenizer", "vocab-merges-64", (fixture / "vocab.json").read_bytes() + b"\0" + "\n".join(merges[:65]).encode() + b"\n")

    config = json.loads((fixture / "config.json").read_text())
    config.update(n_layer=1, n_embd=8, n_head=2, vocab_size=16, n_positions=8, n_ctx=8, bos_token_id=15, eos_token_id=15)
    d, shapes = 8, {"wte.weight": [16, 8], "wpe.weight": [8, 8]}
    for norm in ("h.0.ln_1", "h.0.ln_2", "ln_f"):
        shapes.update({f"{norm}.weight": [d], f"{norm}.bias": [d]})
    for name, (rows, cols) in {"attn.c_attn": (d, 3 * d), "attn.c_proj": (d, d), "mlp.c_fc": (d, 4 * d),
                               "mlp.c_proj": (4 * d, d)}.items():
        shapes.update({f"h.0.{name}.weight": [rows, cols], f"h.0.{name}.bias": [cols]})
    header, body, rng = {}, b"", random.Random(0)
    for name, shape in shapes.items():
        n = shape[0] * (shape[1] if len(shape) > 1 else 1)
        data = struct.pack(f"<{n}f", *(rng.gauss(0.0, 0.02) for _ in range(n)))
        header["transformer." + name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(body), len(body) + len(data)]}
        body += data
    text = json.dumps(header, separators=(",", ":")).encode()
    shard = "model-00001-of-00001.safetensors"
    index = {"metadata": {"total_size": len(body)}, "weight_map": {k: shard for k in header}}
    put("hf_gpt2", "one-layer-d8-sharded", json.dumps(config, indent=2).encode() + b"\0" +
        json.dumps(index, indent=2).encode() + b"\0" + struct.pack("<Q", len(text)) + text + body)
    llama_seeds(shard)
    structure = dict(fast, model=dict(fast["model"], vocab={}))  # the keys, not the 1000 tokens
    json_dict(DICTS / "hf_tokenizer.dict", json_keys(structure), ["BPE", "ByteLevel", "<|endoftext|>", "#version: 0.2\n", "\u0120"])
    json_dict(DICTS / "hf_gpt2.dict", list(json_keys(config)) + ["weight_map", "dtype", "shape", "data_offsets"],
              ["F32", "BF16", "F16", "gelu_new", "transformer.", "lm_head.weight", "h.0.attn.c_attn.weight", shard,
               "llama", "rope_parameters", "rope_scaling", "rope_type", "llama3", "linear", "num_key_value_heads",
               "head_dim", "model.layers.0.self_attn.q_proj.weight", "model.embed_tokens.weight"])


def experiment_seeds(run_config):
    for path in sorted((ROOT / "experiments").rglob("*.yaml")):
        put("experiment_yaml", f"{path.parent.name}-{path.name}", path.read_bytes())
    # The file, NUL, a scale, then NUL-separated overrides (fuzz/experiment_yaml.cpp).
    reverse = (ROOT / "experiments" / "synthetic" / "reverse.yaml").read_bytes()
    put("experiment_yaml", "reverse-smoke", reverse + b"\0smoke")
    put("experiment_yaml", "reverse-overrides",
        reverse + b"\0\0model.d_model=128\0sweep.seeds=[0,1]\0sweep.variants=[qk, GQA-2]")
    lm = (ROOT / "experiments" / "lm" / "shakespeare.yaml").read_bytes()
    put("experiment_yaml", "shakespeare-smoke-overrides", lm + b"\0smoke\0train.steps=3\0lm.tokens=data")
    put("experiment_yaml", "run-config.yaml", run_config.read_bytes())


def mc_task_seeds():
    # One byte picking the layout (fuzz/mc_tasks.cpp: 0 ARC-Challenge, 1 ARC-Easy, 2 HellaSwag,
    # 3 PIQA, 4 WinoGrande), then a JSONL line of it.
    lines = {
        "arc_challenge-hf": (0, {"question": "Which is a gas?", "choices": {"text": ["ice", "steam"], "label": ["A", "B"]},
                                 "answerKey": "B"}),
        "arc_easy-ai2": (1, {"question": {"stem": "Q?", "choices": [{"text": "a", "label": "1"},
                                                                  {"text": "b", "label": "2"}]}, "answerKey": "1"}),
        "hellaswag": (2, {"activity_label": "Baking", "ctx_a": "A man mixes flour.", "ctx_b": "he then",
                          "endings": ["bakes [header] it.", "eats it"], "label": 1}),
        "piqa": (3, {"goal": "Open a jar", "sol1": "twist", "sol2": "eat", "label": 0}),
        "winogrande": (4, {"sentence": "The cup did not fit in the box because _ was too big.", "option1": "the cup",
                           "option2": "the box", "answer": "1"}),
    }
    for name, (layout, line) in lines.items():
        put("mc_tasks", name, bytes([layout]) + json.dumps(line).encode() + b"\n")


def dict_entry(value):
    """One libFuzzer dictionary line: the UTF-8 bytes quoted, escaping only as \\, \" and \\xAB."""
    out = ""
    for b in value.encode():
        c = chr(b)
        out += "\\" + c if c in '"\\' else c if 32 <= b < 127 else f"\\x{b:02x}"
    return f'"{out}"'


def write_dict(path, entries):
    DICTS.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(dict_entry(e) + "\n" for e in dict.fromkeys(entries)))


def json_dict(path, keys, extra=()):
    syntax = ["{", "}", "[", "]", ":", ",", "true", "false", "null", "-1", "1e309", "0.5", '"', "\\u0000"]
    write_dict(path, syntax + [f'"{k}"' for k in sorted(set(keys))] + list(extra))


def json_keys(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from json_keys(v)
    elif isinstance(value, list):
        for v in value:
            yield from json_keys(v)


def run(args, **kw):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL, **kw)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_data = os.environ.get("QKV_DATA") or str(ROOT.parent / "shared" / "data")
    parser.add_argument("--data", default=default_data)
    parser.add_argument("--qkvlab")
    args = parser.parse_args()
    data = Path(args.data)
    qkvlab = args.qkvlab or next((str(p) for p in (ROOT / "build" / b / "qkvlab" for b in ("release", "cpu", "ci", "debug"))
                                  if p.exists()), None)
    if not qkvlab:
        sys.exit("fuzz-seeds: no qkvlab binary: build one (cmake --build --preset release) or pass --qkvlab")
    if not (data / "MANIFEST.md").exists():
        sys.exit(f"fuzz-seeds: {data} is not the data folder (no MANIFEST.md): pass --data or set QKV_DATA")

    for target in ("idx", "cifar", "tinyimagenet", "safetensors", "token_shard", "dataset_json", "tokenizer",
                   "hf_tokenizer", "hf_gpt2", "experiment_yaml", "result_json", "mc_tasks"):
        shutil.rmtree(CORPUS / target, ignore_errors=True)
    mc_task_seeds()
    idx_seeds(data)
    cifar_seeds(data)
    tinyimagenet_seeds(data)
    tokenizer_seeds(data)
    hf_seeds()

    with tempfile.TemporaryDirectory(prefix="qkv-fuzz-seeds-") as tmp:
        tmp = Path(tmp)
        # A prepared dataset: 3000 bytes of tiny-shakespeare in shards of 300 tokens.
        (tmp / "text.txt").write_bytes((data / "tinyshakespeare" / "input.txt").open("rb").read(3000))
        run([qkvlab, "data", "prepare", str(tmp / "text.txt"), "--out", str(tmp / "tokens"),
             "--tokenizer", str(data / "gpt2-tokenizer"), "--val-fraction", "0.2", "--shard-tokens", "300",
             "--threads", "1"])
        info = json.loads((tmp / "tokens" / "dataset.json").read_text())
        put("dataset_json", "dataset.json", (tmp / "tokens" / "dataset.json").read_bytes())
        for shard in ("train_000000.bin", "train_000002.bin", "val_000000.bin"):
            put("token_shard", shard, (tmp / "tokens" / shard).read_bytes())

        # A tiny synthetic run (checkpoint, config.yaml, result.json) and a tiny language model.
        run([qkvlab, "run", str(ROOT / "experiments" / "synthetic" / "reverse.yaml"), "sweep.variants=[QKV]",
             "sweep.seeds=[0]", "task.train_size=256", "task.val_size=64", "task.test_size=64", "train.epochs=1",
             "model.d_model=16", "model.layers=1", "model.heads=2", "train.threads=1", "--out", str(tmp / "runs")])
        run([qkvlab, "run", str(ROOT / "experiments" / "lm" / "shakespeare.yaml"), "sweep.variants=[Q-K=V]",
             f"lm.tokens={tmp / 'tokens'}", "lm.text=[]", "train.steps=2", "schedule.warmup_steps=1",
             "train.eval_every=1", "train.eval_batches=1", "train.eval_batch_size=2", "train.batch_size=2",
             "model.context=8", "model.d_model=16", "model.layers=1", "model.heads=2", "model.vocab=50257",
             "train.peak_tflops=1", "train.threads=1", "--out", str(tmp / "runs")])
        synthetic = tmp / "runs" / "reverse" / "QKV" / "seed0"
        lm = tmp / "runs" / "shakespeare" / "Q-K=V" / "seed0"
        safetensors_seeds(synthetic / "checkpoint.safetensors")
        experiment_seeds(synthetic / "config.yaml")
        results = [json.loads((d / "result.json").read_text()) for d in (synthetic, lm)]
        put("result_json", "synthetic-result.json", (synthetic / "result.json").read_bytes())
        put("result_json", "lm-result.json", (lm / "result.json").read_bytes())

        json_dict(DICTS / "result_json.dict", json_keys(results), ["synthetic", "vision", "anomaly", "lm", "QKV"])
        json_dict(DICTS / "dataset_json.dict", json_keys(info), ["train_000000.bin", ".."])
        json_dict(DICTS / "safetensors.dict", ["dtype", "shape", "data_offsets", "__metadata__"],
                  ["F32", "F16", "BF16", "F64", "I64", "I32", "I16", "I8", "U8", "BOOL"])
        json_dict(DICTS / "tokenizer.dict", ["<|endoftext|>"], ["#version: 0.2\n", "\u0120", "\u0120t", "\\u0100", "\r\n"])
        keys = set()
        for family in ("synthetic", "vision", "anomaly", "lm"):
            out = subprocess.run([qkvlab, "keys", family], check=True, capture_output=True, text=True).stdout
            keys.update(line.split()[0] for line in out.splitlines() if line.startswith("  "))
        yaml = [": ", "\n  ", "- ", "[]", "{}", "&a ", "*a", "<<: ", "!!str ", "---", "~", "\0", "=", ".nan", "1e400",
                "-0"]
        yaml += sorted(keys) + [k.split(".")[-1] for k in sorted(keys)]
        yaml += ["QKV", "Q=K-V", "(Q=K=V)+", "GQA-4", "MQA", "smoke", "paper", "scales", "sweep.grid", "suite"]
        write_dict(DICTS / "experiment_yaml.dict", yaml)

    total = sum(f.stat().st_size for f in CORPUS.rglob("*") if f.is_file())
    count = sum(1 for f in CORPUS.rglob("*") if f.is_file())
    print(f"fuzz-seeds: {count} seeds, {total} bytes in {CORPUS.relative_to(ROOT)}; dictionaries in "
          f"{DICTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
