/* 32-bit test program for dyntrace (built with gcc -m32): spin(n) runs three instructions per
 * iteration (ADD, DEC, JNZ). */
#include <stdlib.h>

static void spin(long n) {
    if (n <= 0)
        return;
    __asm__ volatile("1:\n\t"
                     "add $1, %%eax\n\t"
                     "dec %0\n\t"
                     "jnz 1b\n\t"
                     : "+r"(n)
                     :
                     : "eax", "cc");
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    spin(atol(argv[1]));
    return 0;
}
