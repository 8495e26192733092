BEGIN
{
    trace(execname); trace(pid); printf("%d %s %x %p %c %5.2s %-8d %llu %Y\n", arg0, execname, arg1, curthread, 'c', probefunc, tid, timestamp, walltimestamp);
    printf("%*d %.*s\n", 5, arg0, 3, execname);
    stack(); ustack(); ustack(5, 200); jstack();
    tracemem(arg0, 64); tracemem(arg0, 64, arg1);
    @c[func(arg0), mod(arg0), usym(arg1), umod(arg1), uaddr(arg1)] = count();
    @k[stack(5), ustack(3)] = count();
    print((int *)arg0);
    setopt("quiet"); setopt("bufsize", "4m");
    x = strjoin(basename("/a/b"), dirname("/c/d"));
    y = substr(x, 1, 2) == "b" ? index(x, "b") : rindex(x, "a", 3);
    z = strtok(x, "/") == "x" ? lltostr(y) : toupper(tolower(x));
    exit(0);
}
