/* `txc bench`: the torchax article's table (cache kind x eager/compiled) for
 * one model on this machine. See src/tools/bench_cmd.c. */
#ifndef TXC_TOOLS_BENCH_CMD_H
#define TXC_TOOLS_BENCH_CMD_H

/* argv[0] is "bench". Returns the process exit status: 0, or 2 on any
 * error (one line on stderr). */
int txc_cmd_bench(int argc, char **argv);

#endif
