/* Types for the DWARF conversion test: structs, unions, enums, typedefs, bit-fields, arrays,
 * function pointers, anonymous members, self reference, and a second unit's duplicates. */
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

union value {
	int i;
	double d;
	char bytes[12];
	struct flags fl;
};

struct node {
	struct node *next;
	const char *name;
	volatile int count;
	union {
		long l;
		void *p;
	};
	struct {
		short x, y;
	} pos;
	int matrix[3][4];
	enum color col;
	void (*callback)(struct node *, int, ...);
	ulong_t size;
	char tail[];
};

typedef struct node node_t;

struct node gnode;
union value gvalue;
struct flags gflags;
node_t *gptr;

int use_node(node_t *n) { return n->count; }
