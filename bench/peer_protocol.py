"""What the benchmarks' peer twins share (torch_step.py, torch_decode.py, peers/jax_step.py,
peers/jax_decode.py): their common arguments, the JSON lines they print, and the --serve loop that
bench/torch_session.cpp talks to. Standard library only, so a twin can report that its framework
is missing."""
import json
import sys
import time


def fail(message, code=1):
    """One JSON error line (the benchmark prints it as the peer's note), then exit."""
    print(json.dumps({"error": message}), flush=True)
    sys.exit(code)


def step_arguments(ap):
    """The model and shape arguments of the training-step twins."""
    ap.add_argument("model", choices=["encoder", "vit", "gpt"])
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--slots", default="q,k,v", help="the projection serving Q, K and V (a row of nn/sharing.h)")
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--patch", type=int, default=7)
    ap.add_argument("--image", type=int, default=28)
    ap.add_argument("--channels", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=64)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--length", type=int, default=64)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=10)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda[:N] (the GPU twins: bench_gpt --device cuda:0)")
    ap.add_argument("--serve", action="store_true", help="take step requests on stdin (bench/torch_session.cpp)")


def decode_arguments(ap):
    """The model and decoding arguments of the decode twins."""
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--slots", default="q,k,v", help="the projection serving Q, K and V (a row of nn/sharing.h)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=2, help="untimed decode steps after the prefill")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda[:N] (bench_decode --device cuda:0)")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="the weights' and the cache's dtype (bf16: bench_decode --precision bf16 --cache-dtype bf16)")
    ap.add_argument("--serve", action="store_true", help="take step requests on stdin (bench/torch_session.cpp)")


def times_ms(run, n, *args):
    """Wall time of each of n calls of run(*args), in milliseconds."""
    times = []
    for _ in range(n):
        t = time.perf_counter()
        run(*args)
        times.append(1000 * (time.perf_counter() - t))
    return times


def serve(about, answer):
    """--serve: {"ready": true, ...about} once, then for each request line read from stdin (its
    words: a step count and, for the step twins, a precision) {"times_ms": answer(words)}; an
    answer that is a dict is the reply itself (its "times_ms" and more: a GPU twin's
    "peak_bytes")."""
    print(json.dumps(dict(ready=True, **about)), flush=True)
    for line in sys.stdin:
        reply = answer(line.split())
        print(json.dumps(reply if isinstance(reply, dict) else {"times_ms": reply}), flush=True)


def report_decode(decode, a, about):
    """Times decode() (one token per call): with --serve, N calls per request, at most
    --new-tokens in all (the cache's room); without, --new-tokens calls and one line with their
    median."""
    served = [0]

    def timed(n):
        served[0] += n
        if served[0] > a.new_tokens:
            fail(f"more than --new-tokens {a.new_tokens} steps asked")
        return times_ms(decode, n)

    if a.serve:
        serve(about, lambda words: timed(int(words[0])))
        return
    times = sorted(timed(a.new_tokens))
    ms = times[len(times) // 2]
    print(json.dumps(dict(ms_per_step=ms, tokens_per_s=1000 * a.batch / ms, **about)))


def run_main(main):
    """Runs main(); an exception becomes one JSON error line and exit status 1."""
    try:
        main()
    except Exception as e:
        first = (str(e).strip().splitlines() or [""])[0][:200]
        print(json.dumps({"error": f"{type(e).__name__}: {first}"}), flush=True)
        sys.exit(1)
