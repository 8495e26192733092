/* Test program for dyntrace's tests: each mode runs a loop whose instruction count is known exactly
 * (spin: three instructions per iteration: ADD, DEC, JNZ). */
#define _GNU_SOURCE
#include <pthread.h>
#include <spawn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void spin(long n) {
    if (n <= 0)
        return;
    __asm__ volatile("1:\n\t"
                     "add $1, %%rax\n\t"
                     "dec %0\n\t"
                     "jnz 1b\n\t"
                     : "+r"(n)
                     :
                     : "rax", "cc");
}

/* About ten straight-line instructions per iteration, like a typical compiled loop body. */
static long mix(long n) {
    long a = 1, b = 2, c = 3, d = 4;
    for (long i = 0; i < n; i++) {
        __asm__ volatile("add %1, %0\n\t"
                         "xor %2, %1\n\t"
                         "lea 7(%0,%1), %2\n\t"
                         "imul $3, %3, %3\n\t"
                         "sub %0, %3\n\t"
                         "rol $5, %1\n\t"
                         "and $0xffff, %2\n\t"
                         "or %3, %0\n\t"
                         : "+r"(a), "+r"(b), "+r"(c), "+r"(d));
    }
    return a + b + c + d;
}

/* Compiled integer code of many kinds (8/16/32/64-bit operands, shifts, rotates, multiplies,
 * conditional moves and sets, sign and zero extensions) in one register-only loop. */
static unsigned long alu(long n) {
    unsigned long h = 1469598103934665603UL;
    unsigned int x = 7;
    long s = 0;
    unsigned short w = 3;
    signed char c = 1;
    for (long i = 0; i < n; i++) {
        h ^= (unsigned long)i;
        h *= 1099511628211UL;
        x = x * 1103515245u + 12345u;
        s += ((x >> 16) & 1) ? (long)(signed char)x : -(long)(unsigned short)x;
        h = (h << 7) | (h >> 57);
        s = s < 0 ? -s : s;
        w = (unsigned short)(w * 5 + (x > 0x80000000u));
        c = (signed char)(c ^ (signed char)(h >> 3)) + (s & 1);
        s += (long)w - (long)c + (long)((h >> 11) % 2 == 0);
        __asm__ volatile("" : "+r"(h), "+r"(x), "+r"(s), "+r"(w), "+q"(c));
    }
    return h + x + (unsigned long)s + w + (unsigned long)c;
}

static long n_for_handler;
static void on_usr1(int sig) {
    (void)sig;
    spin(n_for_handler);
}

static void *thread_main(void *arg) {
    spin((long)arg);
    return NULL;
}

/* n system calls, each followed by a call to a three-iteration spin. */
static __attribute__((noinline)) void spin3(void) { spin(3); }
static void *thread_sys(void *arg) {
    for (long i = 0; i < (long)arg; i++) {
        (void)getppid();
        spin3();
    }
    return NULL;
}

static int spinners_done;

/* thread_main, then counts itself done. */
static void *thread_spin_flag(void *arg) {
    spin((long)arg);
    __atomic_add_fetch(&spinners_done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    const char *mode = argv[1];
    long n = atol(argv[2]);
    if (!strcmp(mode, "spin")) {
        spin(n);
    } else if (!strcmp(mode, "mix")) {
        volatile long r = mix(n);
        (void)r;
    } else if (!strcmp(mode, "alu")) {
        volatile unsigned long r = alu(n);
        (void)r;
    } else if (!strcmp(mode, "threads")) {
        pthread_t a, b;
        pthread_create(&a, NULL, thread_main, (void *)n);
        pthread_create(&b, NULL, thread_main, (void *)n);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else if (!strcmp(mode, "tsys")) {
        pthread_t a, b;
        pthread_create(&a, NULL, thread_sys, (void *)n);
        pthread_create(&b, NULL, thread_sys, (void *)n);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else if (!strcmp(mode, "tspawn")) {
        /* Threads spin while the main thread vforks (posix_spawn) a program and waits for it. */
        pthread_t a, b;
        pthread_create(&a, NULL, thread_main, (void *)n);
        pthread_create(&b, NULL, thread_main, (void *)n);
        for (int i = 0; i < 3; i++) {
            char *args[] = {"true", NULL};
            pid_t c;
            if (posix_spawnp(&c, "true", NULL, NULL, args, NULL) == 0)
                waitpid(c, NULL, 0);
        }
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else if (!strcmp(mode, "tsignal")) {
        /* Threads spin while the main thread (SIGURG blocked) sends the process SIGURG, whose default
         * action is to ignore it: the kernel hands it to a spinning thread, stopped anywhere in its
         * loop, the loop's branch included. */
        pthread_t a, b;
        pthread_create(&a, NULL, thread_spin_flag, (void *)n);
        pthread_create(&b, NULL, thread_spin_flag, (void *)n);
        sigset_t urg;
        sigemptyset(&urg);
        sigaddset(&urg, SIGURG);
        pthread_sigmask(SIG_BLOCK, &urg, NULL);
        while (__atomic_load_n(&spinners_done, __ATOMIC_SEQ_CST) < 2) {
            kill(getpid(), SIGURG);
            usleep(200);
        }
        pthread_join(a, NULL);
        pthread_join(b, NULL);
    } else if (!strcmp(mode, "fork")) {
        pid_t c = fork();
        if (c == 0) {
            spin(n);
            _exit(7);
        }
        int st = 0;
        waitpid(c, &st, 0);
        if (argc > 3) {
            FILE *f = fopen(argv[3], "w");
            if (f) {
                fprintf(f, "%d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
                fclose(f);
            }
        }
    } else if (!strcmp(mode, "exec")) {
        char *args[] = {argv[0], "spin", argv[2], NULL};
        execv(argv[0], args);
        return 3;
    } else if (!strcmp(mode, "signal")) {
        n_for_handler = n;
        signal(SIGUSR1, on_usr1);
        raise(SIGUSR1);
        spin(n);
    } else if (!strcmp(mode, "rep")) {
        char *buf = malloc(n + 1);
        if (!buf)
            return 4;
        long cnt = n;
        __asm__ volatile("rep stosb" : "+D"(buf), "+c"(cnt) : "a"(0) : "memory");
    } else if (!strcmp(mode, "wait")) {
        /* Spin a little, then wait for argv[3] to exist. */
        spin(n);
        while (access(argv[3], F_OK) != 0)
            usleep(2000);
        spin(n);
    } else if (!strcmp(mode, "regions")) {
        /* library code */
        volatile size_t len = strlen(argv[0]);
        (void)len;
        /* vdso code */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        /* anonymous memory: a RET */
        unsigned char *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (code == MAP_FAILED)
            return 5;
        code[0] = 0xc3;
        ((void (*)(void))code)();
        /* the stack (built with -z execstack): a RET */
        volatile unsigned char onstack[16];
        onstack[0] = 0xc3;
        ((void (*)(void))(unsigned char *)onstack)();
        /* the heap */
        unsigned char *heap = malloc(64);
        if (heap) {
            long pg = sysconf(_SC_PAGESIZE);
            unsigned long base = (unsigned long)heap & ~(unsigned long)(pg - 1);
            if (mprotect((void *)base, pg, PROT_READ | PROT_WRITE | PROT_EXEC) == 0) {
                heap[0] = 0xc3;
                ((void (*)(void))heap)();
            }
        }
        spin(n);
    } else {
        return 2;
    }
    return 0;
}
