/* `txc inspect`: the metadata and tensors of a GGUF file or a model folder
 * (gguf-dump's listing). See src/tools/inspect_cmd.c. */
#ifndef TXC_TOOLS_INSPECT_CMD_H
#define TXC_TOOLS_INSPECT_CMD_H

/* argv[0] is "inspect". Returns the process exit status: 0, or 2 on any
 * error (one line on stderr). */
int txc_cmd_inspect(int argc, char **argv);

#endif
