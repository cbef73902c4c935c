#!/usr/bin/env python3
"""GPT-2's byte-level BPE in plain Python: the reference the C++ tokenizer is checked against.

A small port of the algorithm in OpenAI's GPT-2 encoder.py (pre-tokenize with the GPT-2 regex
through the `regex` module, map bytes to printable characters, merge pairs by rank), written for
reading rather than speed. "<|endoftext|>" in the text is the special token unless --ordinary.

  gpt2_reference.py --tokenizer DIR FILE [--max-bytes N] [--ordinary] [--out IDS.json] [--data ROOT]

prints (or writes) the ids of FILE's bytes as a JSON list. With --max-bytes the file is cut to
its first N bytes, backed off to a UTF-8 character boundary.

tests/tokenizer/expected_ids.json is this script's output on corpus.txt; regenerate it with

  python3 tests/tokenizer/gpt2_reference.py --tokenizer ../shared/data/gpt2-tokenizer \\
      tests/tokenizer/corpus.txt --out tests/tokenizer/expected_ids.json

With --data ROOT (replaced by $QKV_DATA when that is set), relative --tokenizer and FILE paths
are taken inside the data folder. --compare DUMP runs DUMP (tests/tokenizer/bpe_dump.cpp) on the same bytes and exits 1 at the
first id that differs. Exit 77 (CTest: skipped) when the `regex` module is missing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import regex
except ImportError:
    print("gpt2_reference: skipped (the Python `regex` module is missing; Debian package python3-regex)")
    sys.exit(77)

PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


def byte_alphabet():
    """GPT-2's bytes_to_unicode: byte -> the printable character that stands for it."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
                 + list(range(0xAE, 0xFF + 1)))
    table = {}
    shifted = 256
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(shifted)
            shifted += 1
    return table


class Tokenizer:
    def __init__(self, folder):
        with open(os.path.join(folder, "encoder.json"), encoding="utf-8") as f:
            self.encoder = json.load(f)
        with open(os.path.join(folder, "vocab.bpe"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        if lines and lines[0].startswith("#"):
            lines = lines[1:]
        merges = [tuple(line.split()) for line in lines if line.strip()]
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.alphabet = byte_alphabet()
        self.pattern = regex.compile(PATTERN)
        self.cache = {}

    def merge_word(self, word):
        """The word (a string of alphabet characters) as a list of token strings."""
        if word in self.cache:
            return self.cache[word]
        parts = list(word)
        while len(parts) > 1:
            pairs = {(parts[i], parts[i + 1]) for i in range(len(parts) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            left, right = best
            merged = []
            i = 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == left and parts[i + 1] == right:
                    merged.append(left + right)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        self.cache[word] = parts
        return parts

    def encode_ordinary(self, text):
        ids = []
        for piece in self.pattern.findall(text):
            word = "".join(self.alphabet[b] for b in piece.encode("utf-8"))
            ids.extend(self.encoder[token] for token in self.merge_word(word))
        return ids

    def encode(self, text):
        ids = []
        for i, chunk in enumerate(text.split(END_OF_TEXT)):
            if i > 0:
                ids.append(self.encoder[END_OF_TEXT])
            ids.extend(self.encode_ordinary(chunk))
        return ids


def read_text(path, max_bytes):
    with open(path, "rb") as f:
        data = f.read() if max_bytes is None else f.read(max_bytes)
    for cut in range(4 if max_bytes is not None else 1):   # drop a character cut in half
        try:
            (data[:len(data) - cut]).decode("utf-8")
            return data[:len(data) - cut]
        except UnicodeDecodeError:
            pass
    return data   # not UTF-8 at all: decoding reports where


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", required=True, help="folder with encoder.json and vocab.bpe")
    ap.add_argument("file")
    ap.add_argument("--max-bytes", type=int)
    ap.add_argument("--ordinary", action="store_true", help="no special tokens")
    ap.add_argument("--out", help="write the ids here instead of printing them")
    ap.add_argument("--compare", metavar="DUMP", help="bpe_dump binary to check against")
    ap.add_argument("--data", help="data folder for relative paths ($QKV_DATA wins)")
    args = ap.parse_args()
    if args.data:
        root = os.environ.get("QKV_DATA") or args.data
        args.tokenizer = os.path.join(root, args.tokenizer)
        args.file = os.path.join(root, args.file)

    for need in (args.file, os.path.join(args.tokenizer, "encoder.json")):
        if not os.path.exists(need):
            print(f"gpt2_reference: skipped ({need} is missing)")
            sys.exit(77)
    data = read_text(args.file, args.max_bytes)
    tok = Tokenizer(args.tokenizer)
    text = data.decode("utf-8")   # bytes, not text mode: no newline translation
    ids = tok.encode_ordinary(text) if args.ordinary else tok.encode(text)

    if args.compare:
        with tempfile.NamedTemporaryFile(suffix=".txt") as f:
            f.write(data)
            f.flush()
            cmd = [args.compare, "--tokenizer", args.tokenizer, f.name] + (["--ordinary"] if args.ordinary else [])
            got = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
        for i, (a, b) in enumerate(zip(got, ids)):
            if a != b:
                lo = max(0, i - 5)
                print(f"{args.file}: token {i} differs: C++ {got[lo:i + 5]} reference {ids[lo:i + 5]}")
                print(f"  reference text around it: {tok_text(tok, ids[lo:i + 5])!r}")
                sys.exit(1)
        if len(got) != len(ids):
            print(f"{args.file}: C++ gives {len(got)} tokens, the reference {len(ids)}")
            sys.exit(1)
        print(f"{args.file}: {len(data)} bytes, {len(ids)} tokens, C++ and reference agree")
        return

    out = json.dumps(ids)
    if args.out:
        with open(args.out, "w") as f:
            f.write(out + "\n")
    else:
        print(out)


def tok_text(tok, ids):
    inverse = {v: k for k, v in tok.encoder.items()}
    back = {c: b for b, c in tok.alphabet.items()}
    return b"".join(bytes(back[c] for c in inverse[i]) if inverse[i] != END_OF_TEXT else END_OF_TEXT.encode()
                    for i in ids).decode("utf-8", "replace")


if __name__ == "__main__":
    main()
