/* `txc tokenize`: encode text to ids (with their token strings) or decode
 * ids to text with a model folder's tokenizer.json. See src/tools/tokenize_cmd.c. */
#ifndef TXC_TOOLS_TOKENIZE_CMD_H
#define TXC_TOOLS_TOKENIZE_CMD_H

/* argv[0] is "tokenize". Returns the process exit status: 0, or 2 on any
 * error (one line on stderr). */
int txc_cmd_tokenize(int argc, char **argv);

#endif
