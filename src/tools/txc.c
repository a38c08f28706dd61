#include <stdio.h>
int main(void) { puts("txc " TXC_VERSION); return 0; }
