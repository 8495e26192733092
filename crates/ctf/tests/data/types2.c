/* A second compilation unit repeating types of types.c, to test deduplication. */
#include <stdint.h>

typedef unsigned long ulong_t;
enum color { RED, GREEN = 5, BLUE = -3 };
struct flags {
	unsigned int a : 3;
	unsigned int b : 7;
	int c : 5;
	unsigned char d;
	uint64_t e : 40;
	uint64_t f : 24;
};
struct node;
struct flags gflags2;
ulong_t gsize2;
struct node *gnode2;
