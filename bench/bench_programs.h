// The bodies of the benchmark programs that bench_multi (bench_multi.cpp) holds together; each
// program's own main calls its body, except in bench_multi's build (QKV_BENCH_MULTI).
#pragma once

int bench_kernels_main(int argc, char** argv);
int bench_gpt_main(int argc, char** argv);
int bench_decode_main(int argc, char** argv);
