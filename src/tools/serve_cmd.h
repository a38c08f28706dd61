/* tools/serve_cmd.h — txc serve (tools/serve_cmd.c): an OpenAI-compatible
 * HTTP server over one model (include/txc/serve.h). */
#ifndef TXC_TOOLS_SERVE_CMD_H
#define TXC_TOOLS_SERVE_CMD_H

/* argv[0] is "serve". Returns the exit status: 0 after SIGINT/SIGTERM, 2 on
 * bad options or a model that cannot be loaded or served. */
int txc_cmd_serve(int argc, char **argv);

#endif
