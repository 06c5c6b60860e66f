#include <stdio.h>
#include "tw_syscall.h"
#include "tw_sysnr.h"
int main(void){ tw_require_mechanism(); char b[]="hi\n"; char *p=tw_alloc(4); p[0]='h';p[1]='i';p[2]='\n'; printf("%ld\n", tw_syscall3(TW_NR_write,1,(long)p,3)); printf("%ld\n", tw_syscall3(TW_NR_invalid,0,0,0)); (void)b; return 0;}
