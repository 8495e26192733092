typedef unsigned long long u64_t;
typedef struct foo { int a; char name[16]; struct foo *next; long arr[4]; } foo_t;
union u { int i; char c[8]; };
enum dir { IN, OUT = 4 };
int arr[10];
u64_t big;
string names[int, string];
self foo_t *cur;
this int l;
inline string NAME = "me";
struct info { int doubled; string label; };
translator struct info < long x > { doubled = x * 2; label = x > 5 ? "big" : "small"; };
BEGIN
{
    big = (u64_t)arg0 << 3;
    self->cur = (foo_t *)arg1;
    trace(self->cur->a);
    trace(stringof(self->cur->name));
    trace(self->cur->next->arr[2]);
    trace(sizeof (foo_t) + sizeof (union u) + offsetof(foo_t, next));
    trace(OUT);
    trace(NAME);
    names[1, "a"] = "b";
    trace((long)&((foo_t *)0)->next);
    trace(*(int *)arg0);
    trace(((int *)arg0)[3]);
    this->l = arr[2] + 1;
    arr[3] = this->l;
    trace(xlate<struct info>(arg0).doubled);
    trace(xlate<struct info *>(arg0)->label);
    if (big > 10) {
        trace(1);
        if (this->l) { trace(2); } else trace(3);
    } else {
        printf("%d %s\n", this->l, NAME);
    }
}
