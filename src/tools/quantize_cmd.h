/* `txc quantize DIR OUT.gguf --type T`: a Hugging Face folder to a GGUF file
 * with quantized weights (llama.cpp's convert_hf_to_gguf.py + llama-quantize).
 * See src/tools/quantize_cmd.c. */
#ifndef TXC_TOOLS_QUANTIZE_CMD_H
#define TXC_TOOLS_QUANTIZE_CMD_H

/* argv[0] is "quantize". Returns the process exit status: 0, or 2 on any
 * error (one line on stderr). */
int txc_cmd_quantize(int argc, char **argv);

#endif
