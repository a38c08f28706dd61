/* tools/chat_cmd.h — `txc chat`: a conversation with a chat model, its
 * template rendered per turn and the KV cache kept between turns. */
#ifndef TXC_TOOLS_CHAT_CMD_H
#define TXC_TOOLS_CHAT_CMD_H

/* argv[0] is "chat". Returns the exit status (0, or 2 on any error). */
int txc_cmd_chat(int argc, char **argv);

#endif
